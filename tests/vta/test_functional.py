"""Bit-exact functional results vs a plain numpy reference (hypothesis, 3 configs, threads)."""
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dcoc.targets.vta import Conv2DWorkload, DenseWorkload, Epilogue, HWConfig, conv2d_space, dense_space, simulate
from dcoc.targets.vta.reference import apply_epilogue, reference_conv2d, reference_dense

CONFIGS = {"1x16x16": HWConfig.preset("pynq"), "4x8x8": HWConfig.preset("pynq_4x8"),
           "1x16x32": HWConfig(block_out=32)}
SETTINGS = dict(max_examples=30, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

epilogues = st.one_of(
    st.just(Epilogue()),
    st.just(None),
    st.builds(Epilogue, bias=st.booleans(), residual=st.booleans(), round=st.just(False),
              shift=st.integers(-3, 12), clip=st.sampled_from([(0, 127), (-128, 127), (-5, 9)])),
    st.builds(Epilogue, bias=st.just(True), round=st.just(True), shift=st.integers(1, 10),
              clip=st.just((0, 127))),
)


@st.composite
def conv_cases(draw):
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    pads = tuple(draw(st.integers(0, 2)) for _ in range(4))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    h = draw(st.integers(max(1, kh - pads[0] - pads[2]), 9))
    w = draw(st.integers(max(1, kw - pads[1] - pads[3]), 9))
    wl = Conv2DWorkload(batch=draw(st.integers(1, 2)), height=h, width=w,
                        in_channels=draw(st.integers(1, 40)), out_channels=draw(st.integers(1, 40)),
                        kernel=(kh, kw), stride=(sh, sw), padding=pads)
    return wl


def _pick(draw, space, nthreads):
    k = {n: draw(st.sampled_from(v)) for n, v in space.items() if not n.endswith("nthread")}
    k.update(nthreads)
    return k


def _data(rng, wl, ep):
    x = rng.integers(-128, 128, wl.data_shape).astype(np.int8)
    w = rng.integers(-128, 128, wl.weight_shape).astype(np.int8)
    co = wl.output_shape[1]
    b = rng.integers(-(1 << 20), 1 << 20, co).astype(np.int32) if ep is not None and ep.bias else None
    r = rng.integers(-(1 << 20), 1 << 20, wl.output_shape).astype(np.int32) \
        if ep is not None and ep.residual else None
    return x, w, b, r


@pytest.mark.parametrize("cfg", list(CONFIGS))
@pytest.mark.parametrize("threads", [dict(oc_nthread=1, h_nthread=1), dict(oc_nthread=2, h_nthread=1),
                                     dict(oc_nthread=1, h_nthread=2), dict(oc_nthread=2, h_nthread=2)],
                         ids=["vt1", "oc2", "h2", "oc2h2"])
@settings(**SETTINGS)
@given(data=st.data())
def test_conv2d_bit_exact(cfg, threads, data):
    hw = CONFIGS[cfg]
    wl = data.draw(conv_cases())
    knobs = _pick(data.draw, conv2d_space(wl, hw), threads)
    ep = data.draw(epilogues)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    x, w, b, res = _data(rng, wl, ep)
    r = simulate(wl, hw, knobs, data=x, weight=w, bias=b, residual=res, epilogue=ep)
    assume(r.valid)
    ref = apply_epilogue(reference_conv2d(wl, x, w), ep, b, res)
    assert r.output.dtype == (np.int32 if ep is None else np.int8)
    assert r.output.shape == wl.output_shape
    np.testing.assert_array_equal(r.output, ref)
    assert r.cycles > 0 and np.isfinite(r.seconds)


@pytest.mark.parametrize("cfg", list(CONFIGS))
@pytest.mark.parametrize("oc_nthread", [1, 2])
@settings(**SETTINGS)
@given(data=st.data())
def test_dense_bit_exact(cfg, oc_nthread, data):
    hw = CONFIGS[cfg]
    wl = DenseWorkload(data.draw(st.integers(1, 9)), data.draw(st.integers(1, 70)),
                       data.draw(st.integers(1, 70)))
    knobs = _pick(data.draw, dense_space(wl, hw), dict(oc_nthread=oc_nthread))
    ep = data.draw(epilogues)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    x, w, b, res = _data(rng, wl, ep)
    r = simulate(wl, hw, knobs, data=x, weight=w, bias=b, residual=res, epilogue=ep)
    assume(r.valid)
    ref = apply_epilogue(reference_dense(wl, x, w), ep, b, res)
    np.testing.assert_array_equal(r.output, ref)


def test_resnet_c2_tophub_schedule_bit_exact():
    """The calibration schedule itself, full size, computes the right numbers."""
    hw = HWConfig.preset("pynq")
    wl = Conv2DWorkload(1, 56, 56, 64, 64, 3, 1, 1)
    knobs = dict(tile_h=8, tile_w=56, tile_ci=1, tile_co=2, oc_nthread=2, h_nthread=1)
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, wl.data_shape).astype(np.int8)
    w = rng.integers(-128, 128, wl.weight_shape).astype(np.int8)
    r = simulate(wl, hw, knobs, data=x, weight=w)
    np.testing.assert_array_equal(r.output, apply_epilogue(reference_conv2d(wl, x, w), Epilogue()))
    assert r.cycles == simulate(wl, hw, knobs).cycles  # functional run = timing run


def test_batch_padding_on_batch4_config():
    """A batch-1 (and batch-5) workload on BATCH=4 hardware pads the batch up."""
    hw = HWConfig.preset("pynq_4x8")
    rng = np.random.default_rng(1)
    for n in (1, 5):
        wl = Conv2DWorkload(n, 6, 6, 8, 16, 3, 1, 1)
        knobs = dict(tile_h=3, tile_w=6, tile_ci=1, tile_co=1, oc_nthread=2, h_nthread=1)
        x = rng.integers(-128, 128, wl.data_shape).astype(np.int8)
        w = rng.integers(-128, 128, wl.weight_shape).astype(np.int8)
        r = simulate(wl, hw, knobs, data=x, weight=w, epilogue=None)
        np.testing.assert_array_equal(r.output, reference_conv2d(wl, x, w))
    # the padded batch rows are computed: gemm count is for ceil(N/4) batch blocks
    r1 = simulate(Conv2DWorkload(1, 6, 6, 8, 16, 3, 1, 1), hw, knobs)
    r4 = simulate(Conv2DWorkload(4, 6, 6, 8, 16, 3, 1, 1), hw, knobs)
    assert r1.counters["gemm_counter"] == r4.counters["gemm_counter"]
    assert r1.cycles == r4.cycles


def test_int32_wraparound_and_shift_left():
    """Accumulators wrap in int32; a negative shift shifts left (wrapping) before clipping."""
    hw = HWConfig.preset("pynq")
    wl = Conv2DWorkload(1, 4, 4, 64, 16, 3, 1, 1)
    x = np.full(wl.data_shape, -128, np.int8)
    w = np.full(wl.weight_shape, -128, np.int8)
    knobs = dict(tile_h=2, tile_w=4, tile_ci=2, tile_co=1, oc_nthread=1, h_nthread=2)
    b = np.full(16, 2**31 - 1, np.int32)
    for ep in (Epilogue(bias=True, shift=-3, clip=(-128, 127)), None):
        r = simulate(wl, hw, knobs, data=x, weight=w, bias=b if ep else None, epilogue=ep)
        np.testing.assert_array_equal(r.output, apply_epilogue(reference_conv2d(wl, x, w), ep, b))
