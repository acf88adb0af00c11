"""Unit tests of the numpy parts of ``dcoc run``: scales and the integer reference."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dcoc.runtime import intref
from dcoc.runtime.quantize import LayerSpec, exponent, quantize_layers


@pytest.mark.parametrize("m, e", [(127.0, 0), (1.0, 6), (0.99, 7), (200.0, -1), (0.0, 0)])
def test_exponent(m, e):
    assert exponent(m) == e
    if m > 0:
        assert m * 2.0 ** e <= 127 < m * 2.0 ** (e + 1)


def test_conv_reference_matches_torch():
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (1, 5, 9, 7)).astype(np.int8)
    w = rng.integers(-127, 128, (6, 5, 3, 2)).astype(np.int8)
    got = intref.conv2d_int(x, w, (2, 1), (1, 0, 2, 1), (1, 2))
    xp = torch.nn.functional.pad(torch.tensor(x, dtype=torch.float64), (0, 1, 1, 2))
    want = torch.nn.functional.conv2d(xp, torch.tensor(w, dtype=torch.float64), stride=(2, 1),
                                      dilation=(1, 2)).numpy()
    np.testing.assert_array_equal(got, want.astype(np.int64))


def test_epilogue_rounds_shifts_clips_and_wraps():
    acc = np.array([[7, 8, -9, 2 ** 31 - 1, 1000]], np.int64)
    out = intref.epilogue_int(acc, bias=[0, 0, 0, 1, 0], residual=None, channel_axis=1,
                              round_=True, shift=4, clip=(-128, 60))
    # (7+8)>>4=0, (8+8)>>4=1, (-9+8)>>4=-1, int32 wrap of 2**31 -> -2**31 -> clip -128
    assert out.tolist() == [[0, 1, -1, -128, 60]]


def test_shift_kept_within_alu_range():
    w = np.full((4, 4, 1, 1), 1e-4, np.float32)  # tiny weights -> huge e_w
    sp = LayerSpec(index=0, name="c", kind="conv2d", workload={}, weight=w,
                   scale=np.ones(4), shift=np.zeros(4), data="a", output="b")
    (q,), exps = quantize_layers([sp], {"a": 1.0, "b": 100.0})
    assert 0 <= q.shift <= 15
    assert q.e_x + q.e_w - q.e_y == q.shift
    assert np.max(np.abs(q.qweight)) <= 127
    assert exps["b"] == q.e_y and not math.isnan(q.e_w)


def _c2_spec(rng, residual=True):
    from tvm_plugin.relax_quantize import conv_workload_dict

    wl = conv_workload_dict((1, 64, 56, 56), (64, 64, 3, 3), (1, 64, 56, 56), (1, 1),
                            (1, 1, 1, 1), (1, 1))
    return wl, dict(kind="conv2d", workload=wl, data_shape=(1, 64, 56, 56),
                    out_shape=(1, 64, 56, 56),
                    weight=rng.integers(-20, 20, (64, 64, 3, 3)).astype(np.int8),
                    bias=rng.integers(-500, 500, 64).astype(np.int32), residual=residual,
                    round=True, shift=9, clip=(0, 127), strides=(1, 1), padding=(1, 1, 1, 1),
                    dilation=(1, 1))


def _sim_equals_ref(k, rng):
    x = rng.integers(-128, 128, (1, 64, 56, 56)).astype(np.int8)
    r = (rng.integers(-128, 128, (1, 64, 56, 56)).astype(np.int32) << 6)
    k.owner.backend = "sim"
    a = k(x, r)
    k.owner.backend = "ref"
    b = k(x, r)
    np.testing.assert_array_equal(a, b)
    assert k.cycles > 0 and k.compared == 1 and k.mismatches == 0


def test_residual_layer_default_schedule_fits_its_epilogue():
    """ResNet-18 C2 with a residual add is its own layer (``_res``); its default schedule
    is chosen for that epilogue (the residual tile counted in ACC), so nothing is re-tiled."""
    from dcoc.runtime.offload import Offload
    from dcoc.targets.vta import HWConfig, default_knobs
    from dcoc.tasks import Task

    rng = np.random.default_rng(0)
    wl, spec = _c2_spec(rng)
    tasks = [Task(name="conv2d_56x56_64x64_k3s1", kind="conv2d", workload=wl, device="vta",
                  weight=2, epilogues=[{"bias": True, "residual": False, "count": 1},
                                       {"bias": True, "residual": True, "count": 1}])]
    hw = HWConfig.preset("pynq")
    off = Offload(hw, {}, tasks)
    k = off.kernel(spec)
    assert not isinstance(k, str), k
    assert k.name == "conv2d_56x56_64x64_k3s1_res" and k.default and not k.adapted
    assert k.knobs == default_knobs(k.workload, hw, epilogue=k.epilogue)
    # the bias-only default does not fit with the residual tile
    assert k.knobs != default_knobs(k.workload, hw)
    _sim_equals_ref(k, rng)


def test_foreign_schedule_is_adapted_loudly():
    """A schedule not tuned for the layer's epilogue (here: a bias-only schedule given for a
    call site with a residual the tuner never saw) is re-tiled, with a warning."""
    from dcoc.runtime.offload import Offload
    from dcoc.targets.vta import HWConfig, default_knobs
    from dcoc.tasks import Task

    rng = np.random.default_rng(0)
    wl, spec = _c2_spec(rng)
    tasks = [Task(name="conv2d_56x56_64x64_k3s1", kind="conv2d", workload=wl, device="vta")]
    hw = HWConfig.preset("pynq")
    k0 = Offload(hw, {}, tasks).kernel(_c2_spec(rng, residual=False)[1])
    off = Offload(hw, {"conv2d_56x56_64x64_k3s1": dict(k0.knobs)}, tasks)
    with pytest.warns(UserWarning, match="re-tiled"):
        k = off.kernel(spec)
    assert not isinstance(k, str), k
    assert k.adapted and not k.default and "does not fit" in k.note
    assert "not one the tuner timed" in k.note
    assert k0.knobs == default_knobs(k0.workload, hw, epilogue=k0.epilogue)
    _sim_equals_ref(k, rng)
