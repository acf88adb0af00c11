"""Workloads, knob spaces, Task conversion and the default schedule heuristic."""
import pytest

from dcoc.targets.vta import (
    Conv2DWorkload,
    DenseWorkload,
    HWConfig,
    WorkloadError,
    conv2d_space,
    default_knobs,
    dense_space,
    simulate,
    space_size,
    workload_from_task,
)
from dcoc.tasks import Task

PYNQ = HWConfig.preset("pynq")

#: vta-reference §4.2: ResNet-18 conv tasks and their AutoTVM space sizes
RESNET = [
    ("C2", 56, 64, 64, 3, 1, 2304), ("C3", 56, 64, 128, 3, 2, 1728), ("C4", 56, 64, 128, 1, 2, 1728),
    ("C5", 28, 128, 128, 3, 1, 2304), ("C6", 28, 128, 256, 3, 2, 1280), ("C7", 28, 128, 256, 1, 2, 1280),
    ("C8", 14, 256, 256, 3, 1, 1600), ("C9", 14, 256, 512, 3, 2, 480), ("C10", 14, 256, 512, 1, 2, 480),
    ("C11", 7, 512, 512, 3, 1, 576),
]


def _wl(h, ci, co, k, s):
    return Conv2DWorkload(1, h, h, ci, co, k, s, k // 2)


@pytest.mark.parametrize("name, h, ci, co, k, s, size", RESNET, ids=[r[0] for r in RESNET])
def test_resnet_space_sizes(name, h, ci, co, k, s, size):
    wl = _wl(h, ci, co, k, s)
    sp = conv2d_space(wl, PYNQ)
    assert list(sp) == ["tile_h", "tile_w", "tile_ci", "tile_co", "oc_nthread", "h_nthread"]
    assert space_size(sp) == size
    assert all(v == sorted(v) for v in sp.values())


@pytest.mark.parametrize("hw", [PYNQ, HWConfig.preset("pynq_4x8"), HWConfig(block_out=32),
                                HWConfig.preset("ultra96")], ids=lambda h: h.bitstream)
def test_default_knobs_valid_and_reasonable(hw):
    for name, h, ci, co, k, s, _ in RESNET:
        wl = _wl(h, ci, co, k, s)
        kn = default_knobs(wl, hw)
        r = simulate(wl, hw, kn)
        assert r.valid, (name, r.reason)
        assert r.utilization > 0.12 / max(1, hw.batch)  # DMA-bound 1x1 layers: ~0.15
    wl = DenseWorkload(1, 512, 1000)
    assert simulate(wl, hw, default_knobs(wl, hw)).valid


def test_default_knobs_close_to_tophub_on_c2():
    wl = _wl(56, 64, 64, 3, 1)
    tophub = simulate(wl, PYNQ, dict(tile_h=8, tile_w=56, tile_ci=1, tile_co=2, oc_nthread=2,
                                     h_nthread=1))
    assert simulate(wl, PYNQ, default_knobs(wl, PYNQ)).cycles <= 1.1 * tophub.cycles


def test_workload_normalization():
    wl = Conv2DWorkload(1, 56, 56, 64, 64, kernel=3, stride=2, padding=(1, 2))
    assert wl.kernel == (3, 3) and wl.stride == (2, 2) and wl.padding == (1, 2, 1, 2)
    assert (wl.out_height, wl.out_width) == (28, 29)
    wl = Conv2DWorkload(1, 7, 7, 3, 8, 3, 1, (0, 1, 2, 0))
    assert (wl.pad_top, wl.pad_left, wl.pad_bottom, wl.pad_right) == (0, 1, 2, 0)
    assert wl.output_shape == (1, 8, 7, 6)
    assert wl.macs == 8 * 7 * 6 * 3 * 9 and wl.flops == 2 * wl.macs
    assert Conv2DWorkload(1, 56, 56, 64, 64, (3, 3), (1, 1), (1, 1)).name == "conv2d_56x56_64x64_k3s1"


def test_dense_space_and_padding():
    wl = DenseWorkload(5, 70, 1000)
    sp = dense_space(wl, HWConfig.preset("pynq_4x8"))
    assert sp["tile_b"] == [1, 2] and sp["tile_ci"] == [1, 3, 9] and sp["oc_nthread"] == [1, 2]
    assert sp["tile_co"] == [1, 5, 25, 125]


def _conv_task(**kw):
    wl = dict(batch=1, in_channels=64, out_channels=64, height=56, width=56, kernel_h=3,
              kernel_w=3, stride_h=1, stride_w=1, pad_top=1, pad_left=1, pad_bottom=1,
              pad_right=1, dilation_h=1, dilation_w=1, groups=1, out_height=56, out_width=56)
    wl.update(kw)
    return Task(name="c", kind="conv2d", workload=wl, weight=2, macs=0, device="vta")


def test_from_task():
    wl = Conv2DWorkload.from_task(_conv_task(pad_bottom=2, pad_right=0))
    assert wl.padding == (1, 1, 2, 0)
    assert workload_from_task(_conv_task()) == (Conv2DWorkload(1, 56, 56, 64, 64, 3, 1, 1), 1)
    d = Task("d", "dense", dict(batch=1, m=1, n=1000, k=512), device="vta")
    assert DenseWorkload.from_task(d) == DenseWorkload(1, 512, 1000)
    bm = Task("b", "batch_matmul", dict(batch=12, m=128, n=64, k=64), device="vta")
    assert workload_from_task(bm) == (DenseWorkload(128, 64, 64), 12)
    assert Conv2DWorkload.from_task(_conv_task(groups=2)).groups == 2
    dw = Task("dw", "depthwise_conv2d", _conv_task(groups=64).workload, device="vta")
    assert workload_from_task(dw)[0].weight_shape == (64, 1, 3, 3)
    with pytest.raises(WorkloadError, match="must divide"):
        Conv2DWorkload.from_task(_conv_task(groups=3))
    with pytest.raises(WorkloadError, match="lacks"):
        Conv2DWorkload.from_task(Task("x", "conv2d", {"batch": 1}))
    with pytest.raises(WorkloadError, match="not conv2d"):
        Conv2DWorkload.from_task(d)
    with pytest.raises(WorkloadError, match="cannot run on VTA"):
        workload_from_task(Task("p", "other", {}))
    with pytest.raises(WorkloadError, match="batch=1"):
        DenseWorkload.from_task(Task("d", "dense", dict(batch=2, m=1, n=4, k=4)))
    with pytest.raises(WorkloadError, match="lacks"):
        DenseWorkload.from_task(Task("d", "dense", dict(batch=1, m=1)))
