"""``dcoc run`` / ``dcoc.run``: the whole quantized model on the VTA simulator.

The default tests use a small residual CNN (tests/run/conftest.py); the zoo models at
small input sizes are marked slow.
"""
from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import pytest

import dcoc
from dcoc.runtime.inputs import InputError
from dcoc.runtime.quantize import CalibrationWarning

CLI = [sys.executable, "-m", "dcoc.cli"]


@pytest.fixture(scope="module")
def tiny_result(tiny_model, tiny_inputs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        return dcoc.run(tiny_model, hardware="pynq", inputs=tiny_inputs)


def test_tiny_bit_exact_and_close_to_float(tiny_result):
    r = tiny_result
    assert r.bit_exact and r.mismatches == 0
    assert r.samples == 3
    assert r.outputs[0].shape == (3, 1, 10) and r.outputs[0].dtype == np.float32
    np.testing.assert_array_equal(r.outputs[0], r.reference_outputs[0])
    # int8 with power-of-two scales stays close to the float model (ORT)
    assert r.cosine > 0.99, r.cosine
    assert r.top1_agreement is not None and r.top1_agreement >= 2 / 3
    # every conv but the stem + the Gemm run on the accelerator, with real simulated time
    kinds = [ly["kind"] for ly in r.layers]
    assert kinds.count("conv2d") == 4 and kinds.count("dense") == 1
    assert all(ly["cycles"] > 0 for ly in r.layers)
    assert r.latency_ms == pytest.approx(sum(ly["ms"] for ly in r.layers))
    eps = {ly["layer"]: ly["epilogue"] for ly in r.layers}
    assert "residual" in eps["conv2d_8x8_32x32_k3s1"]          # the residual add is absorbed
    assert eps["conv2d_8x8_32x48_k1s1"].endswith("clip[0,96]")  # Clip(0, 6) at scale 2**4
    cpu = {c["layer"]: c["reason"] for c in r.cpu_layers}
    assert "fp32" in cpu["conv2d_16x16_3x16_k3s1"]


def test_simulator_error_is_detected(tiny_model, monkeypatch):
    """The comparison is not vacuous: one wrong value from the simulator is caught."""
    from dcoc.runtime import offload

    orig = offload.VTAKernel._sim

    def wrong(self, *arrays):
        out = orig(self, *arrays).copy()
        if self.kind == "dense":
            out.reshape(-1)[0] ^= 1
        return out

    monkeypatch.setattr(offload.VTAKernel, "_sim", wrong)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = dcoc.run(tiny_model, hardware="pynq", compare_float=False)
    assert not r.bit_exact and r.mismatches >= 1


@pytest.mark.parametrize("hw", ["pynq_4x8", pytest.param("1x8x32_i8w8a32_15_15_17_17",
                                                          marks=pytest.mark.slow)])
def test_other_hardware_bit_exact(tiny_model, hw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = dcoc.run(tiny_model, hardware=hw, compare_float=False)
    assert r.bit_exact, r.mismatches
    from dcoc.targets.vta import HWConfig

    assert r.hardware == HWConfig.parse(hw, board="pynq").name


def test_invalid_schedule_falls_back_to_cpu(tiny_model):
    bad = {"conv2d_8x8_32x32_k3s1": {"tile_h": 3, "tile_w": 8, "tile_ci": 1, "tile_co": 1,
                                     "oc_nthread": 1, "h_nthread": 1}}
    good = {"conv2d_16x16_16x32_k3s2": {"tile_h": 4, "tile_w": 8, "tile_ci": 1, "tile_co": 1,
                                        "oc_nthread": 2, "h_nthread": 1}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = dcoc.run(tiny_model, hardware="pynq", schedules={**bad, **good},
                     compare_float=False)
    assert r.bit_exact
    names = [ly["layer"] for ly in r.layers]
    assert "conv2d_8x8_32x32_k3s1" not in names and len(names) == 4
    tuned = next(ly for ly in r.layers if ly["layer"] == "conv2d_16x16_16x32_k3s2")
    assert tuned["knobs"] == good["conv2d_16x16_16x32_k3s2"] and not tuned["default"]
    fb = [c for c in r.cpu_layers if c["layer"] == "conv2d_8x8_32x32_k3s1"]
    assert fb and "fell back" in fb[0]["reason"] and "tuned schedule invalid" in fb[0]["reason"]


def test_tune_result_run_matches_dcoc_run(tiny_model):
    from dcoc.results.result import TuneResult
    from dcoc.targets.vta import HWConfig

    hw = HWConfig.preset("pynq")
    res = TuneResult(target="vta", tuner="dcoc", seed=0, latency_ms=1.0,
                     baseline_latency_ms=1.0, trials=1, hardware=hw, schedules={},
                     model=tiny_model, board="pynq")
    x = np.random.default_rng(5).standard_normal((1, 3, 16, 16)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outs = res.run({"x": x})
        ref = dcoc.run(tiny_model, hardware=hw, inputs={"x": x}, compare_float=False)
    assert len(outs) == 1 and outs[0].shape == (1, 10)
    np.testing.assert_array_equal(outs[0], ref.outputs[0])


def test_user_calibration_no_warning(tiny_model, tiny_inputs):
    with warnings.catch_warnings():
        warnings.simplefilter("error", CalibrationWarning)
        r = dcoc.run(tiny_model, hardware="pynq", inputs=tiny_inputs, calibration=tiny_inputs,
                     compare_float=False)
    assert r.bit_exact


@pytest.mark.parametrize("inputs, msg", [
    ({"input": np.zeros((1, 3, 16, 16), np.float32)}, "unknown input name(s) 'input'"),
    ({"x": np.zeros((1, 3, 8, 8), np.float32)}, "has shape 1x3x8x8, the model expects 1x3x16x16"),
    ({"x": np.zeros((1, 3, 16, 16), np.float64)}, "has dtype float64, the model expects float32"),
])
def test_bad_inputs_one_line_errors(tiny_model, inputs, msg):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(InputError) as ei:
            dcoc.run(tiny_model, hardware="pynq", inputs=inputs, compare_float=False)
    assert msg in str(ei.value) and "\n" not in str(ei.value)


def test_cli_json_and_bad_inputs(tiny_model, tiny_inputs, tmp_path):
    p = subprocess.run(CLI + ["run", tiny_model, "--inputs", tiny_inputs, "--json", "-", "-q"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    for k in ("bit_exact", "cosine", "top1_agreement", "latency_ms", "layers", "cpu_layers"):
        assert k in d
    assert d["bit_exact"] is True and d["latency_ms"] > 0 and len(d["layers"]) == 5
    assert "no calibration inputs" in p.stderr  # the warning
    bad = tmp_path / "bad.npz"
    np.savez(bad, x=np.zeros((1, 3, 16, 16), np.int32))
    p = subprocess.run(CLI + ["run", tiny_model, "--inputs", str(bad), "-q"],
                       capture_output=True, text=True, timeout=600)
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("dcoc: error")]
    assert p.returncode == 2 and len(lines) == 1 and "dtype int32" in lines[0], p.stderr
    p = subprocess.run(CLI + ["run", tiny_model, "--inputs", str(tmp_path / "nope.npz"), "-q"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 2 and "does not exist" in p.stderr


# ------------------------------------------------------------------ zoo / light models
@pytest.mark.slow
@pytest.mark.parametrize("model, shape", [
    ("resnet18", {"input": (1, 3, 32, 32)}),
    ("mobilenetv2", {"input": (1, 3, 32, 32)}),
    ("light_squeezenet", {"data_0": (1, 3, 64, 64)}),
])
def test_zoo_bit_exact(model, shape):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = dcoc.run(model, hardware="pynq", input_shapes=shape)
    assert r.bit_exact, r.mismatches
    assert len(r.layers) > 0 and r.latency_ms > 0
    assert r.cosine is not None and r.cosine > 0.9, r.cosine
    print(f"{model}: cosine {r.cosine:.4f} top1 {r.top1_agreement} latency {r.latency_ms:.3f} ms")


@pytest.mark.slow
def test_transformer_bit_exact():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = dcoc.run("transformer", hardware="pynq")
    assert r.bit_exact
    kinds = {ly["kind"] for ly in r.layers}
    assert kinds == {"dense", "batch_matmul"}
    assert r.cosine > 0.9
