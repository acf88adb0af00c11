"""Per-layer bit-exact checks of ``dcoc run`` and tune-vs-run latency agreement.

* Every offloaded call's simulator output is compared with the integer reference on the
  same inputs: a one-LSB error is pinned to the layer that makes it, even when global
  average pooling hides it from the model's outputs, or when it enters through a
  residual branch.
* The latency ``dcoc tune`` reports is the one ``dcoc run`` measures (same layers, same
  epilogues, same schedules -- none re-tiled).
"""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import dcoc


def _inject(monkeypatch, layer: str, index: int = 0):
    """Make the simulator's output of the first call of ``layer`` off by one LSB at one
    element (flat ``index``)."""
    from dcoc.runtime import offload

    orig = offload.VTAKernel._sim
    done = set()

    def wrong(self, *arrays):
        out = orig(self, *arrays)
        if self.name == layer and self.site not in done and not done:
            done.add(self.site)
            out = out.copy()
            flat = out.reshape(-1)
            flat[index] = flat[index] + 1 if flat[index] < 127 else flat[index] - 1
        return out

    monkeypatch.setattr(offload.VTAKernel, "_sim", wrong)


def _run(model, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dcoc.run(model, hardware="pynq", compare_float=False, **kw)


def test_clean_run_every_layer_agrees(tiny_model):
    r = _run(tiny_model)
    assert r.bit_exact and r.first_mismatch is None
    assert r.layers and all(ly["bit_exact"] and ly["mismatches"] == 0 for ly in r.layers)
    d = r.to_json()
    assert d["first_mismatch"] is None and all("bit_exact" in ly for ly in d["layers"])


def test_lsb_error_hidden_by_pooling_is_named(tiny_model, monkeypatch):
    """The 1x1 conv feeding GlobalAveragePool: one LSB in one pixel averages away, so the
    model outputs still agree -- the per-layer check still fails the run and names it."""
    layer = "conv2d_8x8_32x48_k1s1"
    _inject(monkeypatch, layer, index=5)
    r = _run(tiny_model)
    assert r.mismatches == 0  # the final outputs agree: an output-only check would pass
    assert not r.bit_exact
    assert r.first_mismatch["layer"] == layer and r.first_mismatch["mismatches"] == 1
    bad = [ly["layer"] for ly in r.layers if not ly["bit_exact"]]
    assert bad == [layer]  # downstream layers get the wrong input but compute it right
    assert f"layer {layer}" in r.summary() and "NO" in r.summary()
    assert json.loads(json.dumps(r.to_json(), default=str))["first_mismatch"]["layer"] == layer


def test_lsb_error_in_residual_branch_is_named(tiny_model, monkeypatch):
    """The 1x1 downsample conv is the residual operand of the next conv's epilogue: the
    error is pinned to it, not to the conv whose residual add consumes it."""
    layer = "conv2d_16x16_16x32_k1s2"
    _inject(monkeypatch, layer, index=0)
    r = _run(tiny_model)
    assert not r.bit_exact
    assert r.first_mismatch["layer"] == layer
    assert [ly["layer"] for ly in r.layers if not ly["bit_exact"]] == [layer]
    res_layer = next(ly for ly in r.layers if "residual" in ly["epilogue"])
    assert res_layer["bit_exact"]


def test_tune_and_run_latency_agree_on_residual_model(tmp_path):
    """A small ResNet whose 3x3 convs occur with and without a residual add: each is
    tuned with its own epilogue, run adapts nothing, and the latencies agree (1%)."""
    import onnx

    from scripts.bench_tune_vs_run import mini_resnet

    path = str(tmp_path / "mini_resnet.onnx")
    onnx.save(mini_resnet(image=16), path)
    res = dcoc.tune(path, board="pynq", trials=14, seed=0, work_dir=str(tmp_path / "wd"),
                    n_workers=0)
    names = set(res.schedules)
    assert {"conv2d_16x16_32x32_k3s1", "conv2d_16x16_32x32_k3s1_res"} <= names
    r = _run(path, schedules=res)
    assert r.adapted == [] and not any(ly["adapted"] for ly in r.layers)
    assert r.bit_exact
    assert r.latency_ms == pytest.approx(res.latency_ms, rel=0.01)
    # the run's table has the tuned layers, each with the tuned schedule
    per = {g["layer"]: g for g in r.per_layer}
    assert set(per) == names
    for name, knobs in res.schedules.items():
        assert per[name]["knobs"] == knobs and not per[name]["default"]
    tuned = {ly["layer"]: ly["ms"] for ly in res.layers}
    for name, g in per.items():
        assert g["ms"] == pytest.approx(tuned[name], rel=1e-9)


def test_simulate_reports_the_run_table(tmp_path, capsys):
    """``dcoc simulate`` prints the per-layer table ``dcoc run`` prints (same columns, a
    roofline figure per layer)."""
    from dcoc.targets.vta import HWConfig
    from dcoc.targets.vta.report import simulate_model
    from dcoc.tasks import Task, TaskList

    wl = dict(batch=1, in_channels=32, out_channels=32, height=16, width=16, kernel_h=3,
              kernel_w=3, stride_h=1, stride_w=1, pad_top=1, pad_left=1, pad_bottom=1,
              pad_right=1, dilation_h=1, dilation_w=1, groups=1, out_height=16, out_width=16)
    t = Task("conv2d_16x16_32x32_k3s1", "conv2d", wl, weight=3, device="vta",
             epilogues=[{"bias": True, "residual": False, "count": 1},
                        {"bias": True, "residual": True, "count": 2}])
    rep = simulate_model(TaskList([t]), HWConfig.preset("pynq"))
    names = [ly.name for ly in rep.layers]
    assert names == ["conv2d_16x16_32x32_k3s1", "conv2d_16x16_32x32_k3s1_res"]
    assert [ly.weight for ly in rep.layers] == [1, 2]
    text = rep.table()
    for col in ("count", "cycles", "total ms", "roofline", "epilogue", "schedule"):
        assert col in text
    assert "util" not in text
    assert all(0 < ly.roofline <= 1 for ly in rep.layers)
    # the residual variant moves the int32 residual tile: a larger memory bound
    assert rep.layers[1].cycles > rep.layers[0].cycles
    assert np.isclose(rep.total_seconds, sum(ly.weight * ly.seconds for ly in rep.layers))
