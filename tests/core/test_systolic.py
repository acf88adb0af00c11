"""The systolic target's model: the tile-stream simulator, weight double buffering, window
reuse, the derated clock and the roofline (docs/systolic.md)."""
from __future__ import annotations

import random

import pytest

import dcoc.targets as targets
from dcoc.targets.systolic import BOARDS, LUT_PER_PE_WDB, SystolicConfig, roofline, simulate
from dcoc.targets.systolic.simulator import _Sim, _Tiling

T = targets.get("systolic")
#: ResNet-18's offloaded layers (the 7x7 stem stays on the CPU) and their counts
RESNET18 = [("C2", 4), ("C3", 1), ("C4", 1), ("C5", 3), ("C6", 1), ("C7", 1), ("C8", 3), ("C9", 1),
            ("C10", 1), ("C11", 3), ("dense:1,512,1000", 1)]


class _Replay(_Sim):
    """The same event model, every tile replayed (no extrapolation of runs)."""

    def _walk(self, lv):
        for i in range(self.trips[lv]):
            self.idx[lv] = i
            if lv == 3:
                self._tile()
            else:
                for d in range(lv + 1, 4):
                    self.idx[d] = 0
                self._walk(lv + 1)
        self.idx[lv] = self.trips[lv] - 1


def _valid(layer, hw):
    sp = T.sw_space(layer, hw)
    return [k for k in sp if sp.is_valid(k)]


HWS = [SystolicConfig(16, 16, 15, 15, 15, 150.0, 8, 1), SystolicConfig(8, 32, 16, 14, 17, 150.0, 8, 0),
       SystolicConfig(32, 16, 14, 16, 14, 250.0, 16, 1)]


def test_extrapolated_runs_equal_the_tile_by_tile_replay():
    """Runs of identical tiles are extrapolated once every event time shifts uniformly: the
    cycles and every counter (bytes, transfers, busy cycles, stalls, tiles) equal a replay
    of every tile, on convs (window and im2col), a ragged conv and a dense layer."""
    rng = random.Random(0)
    n = 0
    for spec in ("C2", "C4", "C9", "conv:20,20,3,16,3,1,1", "dense:1,512,1000"):
        layer = T.layer(spec)
        for hw in HWS:
            pts = _valid(layer, hw)
            for k in rng.sample(pts, min(8, len(pts))):
                t = _Tiling(layer.workload, hw, k)
                if len(t.m_par) * len(t.c_par) * len(t.n_par) * len(t.k_par) > 5000:
                    continue
                assert _Sim(t).run() == _Replay(t).run(), (spec, hw.name, k)
                n += 1
    assert n >= 60


@pytest.mark.parametrize("board", list(BOARDS))
def test_no_schedule_beats_the_roofline(board):
    """The roofline check: every ResNet-18 layer, on the board's default array and a large
    one, with sampled schedules: simulated time >= max(compute bound, memory bound) and >=
    the padded compute bound co-design learns against."""
    rng = random.Random(1)
    bd = T.board(board)
    hws = [T.default_hw(bd), T.make_hw({"rows": 32, "cols": 16, "log_ifmap": 16, "log_wgt": 16,
                                        "log_ofmap": 16, "weight_double_buffer": 1}, bd),
           T.make_hw({"rows": 8, "cols": 32, "log_ifmap": 14, "log_wgt": 15, "log_ofmap": 17,
                      "weight_double_buffer": 0}, bd)]
    for spec, _ in RESNET18:
        layer = T.layer(spec)
        for hw in hws:
            r = roofline(layer.workload, hw)
            assert r["bound"] == max(r["compute"], r["memory"]) and T.roofline_seconds(layer, hw) == r["bound"]
            pts = _valid(layer, hw)
            for k in rng.sample(pts, min(12, len(pts))):
                secs, info = simulate(layer.workload, hw, k)
                assert secs >= r["bound"] and info["roofline"] <= 1.0
                assert secs >= T.bound_seconds(layer, hw) >= T.ideal_seconds(layer, hw)
                assert info["dram_bytes"] >= r["bytes"]


@pytest.mark.parametrize("board,hw,floor", [("arty-a7", "ws8x64_i14w16o17_wdb", 0.88),
                                            ("kv260", "ws32x32_i16w17o17_wdb", 0.88)])
def test_resnet18_reaches_most_of_its_roofline(board, hw, floor):
    """ResNet-18's layers with their default schedules on a fast array of each board reach
    most of the model's roofline (VTA on pynq: 83 %), and an exhaustive search of two
    layers gets within a few per cent of theirs."""
    hw = T.parse_hw(hw, board)
    spent = bound = 0.0
    for spec, count in RESNET18:
        layer = T.layer(spec)
        secs, _ = simulate(layer.workload, hw, T.default_schedule(layer, hw))
        spent += count * secs
        bound += count * roofline(layer.workload, hw)["bound"]
    assert bound / spent >= floor
    for spec in ("C5", "C11"):
        layer = T.layer(spec)
        best = min(simulate(layer.workload, hw, k)[0] for k in _valid(layer, hw))
        assert roofline(layer.workload, hw)["bound"] / best >= 0.9


def test_weight_double_buffering_hides_weight_loads_at_a_lut_cost():
    """Deep layers (few output pixels per fold) pay the weight shift-in and fill/drain of
    every fold without shadow weight registers; with them each fold costs max(M, rows)."""
    plain = SystolicConfig(16, 16, 16, 16, 16, 150.0, 64, 0)   # a wide bus: compute-bound
    wdb = SystolicConfig(16, 16, 16, 16, 16, 150.0, 64, 1)
    layer = T.layer("gemm:49,4608,512")                      # C11's GEMM: 49 rows per fold
    k = {"tile_m": 64, "tile_k": 8, "tile_n": 2, "order": 0, "double_buffer": 1}
    a, ia = simulate(layer.workload, plain, k)
    b, ib = simulate(layer.workload, wdb, k)
    assert b < 0.6 * a
    folds = 4608 // 16 * (512 // 16)
    assert ib["busy_cycles"] == folds * 49 and ia["busy_cycles"] == folds * (16 + 49 + 16 + 16 - 2)
    assert wdb.resources(240)["lut"] - plain.resources(240)["lut"] == 256 * LUT_PER_PE_WDB
    assert T.board("arty-a7").default_hw().weight_double_buffer == 1


def test_window_reuse_loads_each_patch_once_and_falls_back_to_im2col():
    """A 3x3 conv loads input patches (rows + halo) instead of the 9x larger im2col matrix;
    a 1x1 stride-2 conv streams its strided im2col rows (fewer bytes than a patch of whole
    rows), and so does a schedule whose patch would not fit the input SRAM."""
    hw = SystolicConfig(16, 16, 16, 16, 16, 150.0, 8, 1)
    layer = T.layer("C2")                                    # 56x56x64 -> 64, 3x3
    k = {"tile_m": 256, "tile_k": 8, "tile_n": 4, "order": 1, "double_buffer": 1}
    s_win, i_win = simulate(layer.workload, hw, k)
    assert i_win["input_mode"] == "window"
    # one N tile, channel slices of 14 (8 x 16 rows // 9 taps): the patches of 4 output rows
    # (6 input rows, 5 at the image's top and bottom) over every channel, once
    assert i_win["input_bytes"] == 64 * 56 * (12 * 6 + 2 * 5)
    assert i_win["input_bytes"] < 1.5 * 56 * 56 * 64 and 3136 * 576 > 6 * i_win["input_bytes"]   # im2col: 6x more
    c4 = T.layer("C4").workload                              # 56x56x64 -> 28x28x128, 1x1 stride 2
    k4 = {"tile_m": 64, "tile_k": 4, "tile_n": 4, "order": 1, "double_buffer": 1}
    s1, i1 = simulate(c4, hw, k4)
    assert i1["input_mode"] == "im2col" and i1["input_bytes"] == 28 * 28 * 64
    t = _Tiling(c4, SystolicConfig(16, 16, 13, 16, 16, 150.0, 8, 1), k4)   # 8 KB: im2col tile only
    assert t.stream_fits and not t.reuse_fits and not t.use_reuse and t.fit_reason() is None


def test_the_clock_derates_with_array_size_and_lut_use():
    bd = BOARDS["kv260"]
    clocks = [bd.clock_mhz(SystolicConfig(r, c, 15, 15, 15, 1.0, 16, 1)) for r, c in
              ((8, 8), (16, 16), (16, 32), (32, 32), (32, 64))]
    assert clocks[0] == clocks[1] == bd.freq_mhz                # the 16x16 array closes at the board clock
    assert clocks[1] > clocks[2] > clocks[3] > clocks[4]
    arty = BOARDS["arty-a7"]                                    # 240 DSPs: LUT multipliers, congestion
    big = SystolicConfig(32, 16, 15, 15, 15, 1.0, 8, 1)
    assert big.resources(arty.dsp)["lut"] / arty.lut > 0.70
    assert arty.clock_mhz(big) < arty.freq_mhz / 1.05
    for board in BOARDS:
        for hw in T.feasible_hw(board)[:50]:
            assert hw.freq_mhz == T.board(board).clock_mhz(hw) and not T.violations(hw, board)
