"""Grouped and depthwise conv2d on the VTA model (``group_conv2d_packed.vta``).

* bit-exact against the numpy reference (padded and unpadded, tiles inside one packed
  group and across several, merged groups, padded packed groups, both thread kinds);
* the fast timing path agrees with the instruction-by-instruction simulation;
* a tile loads the input blocks of its own group only;
* the MobileNet-G records of TopHub's ``vta_v0.10.log`` (lines 69-77, 1x16 bitstream =
  preset ``pynq``, batch 1; each record's own schedule, warm L2 as TopHub's repeated
  single-layer runs): the errors are pinned to within 2 points.  Nothing was fitted on
  them.
"""
from __future__ import annotations

import numpy as np
import pytest

from dcoc.errors import WorkloadError
from dcoc.targets.vta import HWConfig, TimingParams, simulate
from dcoc.targets.vta.grouped import block_diagonal, conv_groups
from dcoc.targets.vta.isa import MEM_INP, OP_LOAD
from dcoc.targets.vta.layer import compile_schedule
from dcoc.targets.vta.reference import apply_epilogue, reference_conv2d
from dcoc.targets.vta.workloads import Conv2DWorkload, Epilogue, conv2d_space
from scripts.calibrate_vta import GROUPED_ROWS

PYNQ = HWConfig.preset("pynq")


def _knobs(th, tw, tci, tco, ocn, hn):
    return dict(tile_h=th, tile_w=tw, tile_ci=tci, tile_co=tco, oc_nthread=ocn, h_nthread=hn)


def test_workload_groups():
    wl = Conv2DWorkload(1, 14, 14, 64, 128, 3, 1, 1, groups=4)
    assert wl.weight_shape == (128, 16, 3, 3)
    assert wl.macs == 128 * 14 * 14 * 16 * 9
    assert wl.name == "conv2d_14x14_64x128_k3s1_g4"
    assert Conv2DWorkload(1, 14, 14, 64, 64, 3, 1, 1).name == "conv2d_14x14_64x64_k3s1"
    with pytest.raises(WorkloadError, match="must divide"):
        Conv2DWorkload(1, 14, 14, 64, 96, 3, 1, 1, groups=5)
    with pytest.raises(WorkloadError, match="positive"):
        Conv2DWorkload(1, 14, 14, 64, 64, 3, 1, 1, groups=0)


def test_group_blocks_and_space():
    # MobileNet-G: 16 channels per group = one block
    gb = conv_groups(Conv2DWorkload(1, 7, 7, 1024, 1024, 3, 1, 1, groups=64), 16, 16)
    assert (gb.packed, gb.merge, gb.ci_blocks, gb.co_blocks) == (64, 1, 1, 1)
    # depthwise: 16 groups merged into one block-diagonal packed group; 40 -> 3 packed
    gb = conv_groups(Conv2DWorkload(1, 8, 8, 40, 40, 3, 1, 1, groups=40), 16, 16)
    assert (gb.packed, gb.merge, gb.ci_blocks, gb.co_blocks) == (3, 16, 1, 1)
    gb = conv_groups(Conv2DWorkload(1, 7, 7, 64, 128, 1, 1, 0, groups=2), 16, 16)
    assert (gb.packed, gb.merge, gb.ci_blocks, gb.co_blocks) == (2, 1, 2, 4)
    sp = conv2d_space(Conv2DWorkload(1, 7, 7, 64, 128, 1, 1, 0, groups=2), PYNQ)
    assert sp["tile_ci"] == [1, 2] and sp["tile_co"] == [1, 2, 4, 8]
    sp = conv2d_space(Conv2DWorkload(1, 7, 7, 96, 96, 1, 1, 0, groups=3), PYNQ)
    assert sp["tile_co"] == [1, 2, 6]  # 3 does not divide a group's 2 blocks nor cover whole ones


def test_block_diagonal():
    wl = Conv2DWorkload(1, 4, 4, 4, 4, 1, 1, 0, groups=4)
    gb = conv_groups(wl, 2, 2)
    w = np.arange(1, 5, dtype=np.int8).reshape(4, 1, 1, 1)
    bd = block_diagonal(w, wl, gb, 2, 2)[:, :, 0, 0]
    assert bd.tolist() == [[1, 0], [0, 2], [3, 0], [0, 4]]


CASES = [
    (Conv2DWorkload(1, 14, 14, 32, 32, 3, 1, 1, groups=2), PYNQ),
    (Conv2DWorkload(1, 8, 8, 48, 48, 3, 2, 1, groups=48), PYNQ),
    (Conv2DWorkload(1, 8, 8, 40, 40, 3, 1, 1, groups=40), PYNQ),
    (Conv2DWorkload(1, 7, 7, 64, 128, 1, 1, 0, groups=2), PYNQ),
    (Conv2DWorkload(2, 6, 6, 32, 64, 3, 1, 1, groups=8), HWConfig.parse("1x8x16_i8w8a32_15_14_17_16")),
    (Conv2DWorkload(1, 6, 6, 24, 24, 3, 1, 1, groups=24), HWConfig.preset("pynq_4x8")),
]


@pytest.mark.parametrize("wl,hw", CASES, ids=[f"{w.name}@{h.name}" for w, h in CASES])
def test_bit_exact_and_fast_path(wl, hw):
    rng = np.random.default_rng(wl.groups)
    x = rng.integers(-128, 128, wl.data_shape).astype(np.int8)
    w = rng.integers(-128, 128, wl.weight_shape).astype(np.int8)
    b = rng.integers(-4000, 4000, wl.out_channels).astype(np.int32)
    ep = Epilogue(bias=True, round=True, shift=6, clip=(-100, 110))
    ref = apply_epilogue(reference_conv2d(wl, x, w), ep, bias=b)
    sp = conv2d_space(wl, hw)
    ran = 0
    for tco in sp["tile_co"]:
        for tci in sp["tile_ci"]:
            for ocn, hn in ((1, 1), (2, 1), (1, 2), (2, 2)):
                k = _knobs(sp["tile_h"][1], sp["tile_w"][-1], tci, tco, ocn, hn)
                r = simulate(wl, hw, k, data=x, weight=w, bias=b, epilogue=ep)
                if not r.valid:
                    continue
                ran += 1
                np.testing.assert_array_equal(r.output, ref, err_msg=str(k))
                assert simulate(wl, hw, k, epilogue=ep).cycles == r.cycles, k
    assert ran >= 8


def test_reference_mode_matches_fast():
    wl = Conv2DWorkload(1, 14, 14, 64, 64, 3, 2, 1, groups=64)
    k = _knobs(7, 7, 1, 2, 2, 1)
    assert simulate(wl, PYNQ, k, mode="reference").cycles == simulate(wl, PYNQ, k).cycles


def test_loads_own_group_only():
    wl = Conv2DWorkload(1, 7, 7, 64, 64, 3, 1, 1, groups=4)  # one block per group
    prog = compile_schedule(wl, PYNQ, _knobs(7, 7, 1, 1, 1, 1))
    inp = prog.dram.elem("inp", 0)
    blocks = [(i.dram_base - inp) // (7 * 7) for i in prog.insns
              if i.opcode == OP_LOAD and i.memory_type == MEM_INP and i.x_size]
    assert blocks == [0, 1, 2, 3]  # output block c reads input block c, once


# TopHub vta_v0.10.log lines 69-77 (scripts/calibrate_vta.py GROUPED_ROWS): the modelled
# error of each record, pinned (not fitted: the constants come from the conv2d fit rows)
PINNED = {69: -5.3, 70: -4.1, 71: -5.0, 72: 1.3, 73: -8.0, 74: -8.0, 75: -17.2, 76: -22.1, 77: -31.8}


@pytest.mark.parametrize("line,shape,kn,measured", GROUPED_ROWS, ids=[f"line{r[0]}" for r in GROUPED_ROWS])
def test_mobilenet_g_records(line, shape, kn, measured):
    pinned = PINNED[line]
    h, c, s, g = shape
    wl = Conv2DWorkload(1, h, h, c, c, 3, s, 1, groups=g)
    r = simulate(wl, PYNQ, _knobs(*kn), timing=TimingParams(l2_start="warm"))
    assert r.valid, r.reason
    err = 100.0 * (r.seconds * 1e3 - measured) / measured
    assert abs(err - pinned) <= 2.0, f"line {line}: error {err:+.1f}% (pinned {pinned:+.1f}%)"
