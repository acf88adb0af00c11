"""The L2/DDR memory model (dcoc.targets.vta.memsys): reuse distances per access, warm vs cold
start, and the calibration script."""
import math

import pytest

from dcoc.errors import ConfigError
from dcoc.targets.vta import Conv2DWorkload, DenseWorkload, HWConfig, TimingParams, simulate
from dcoc.targets.vta.compiler import make_plan
from dcoc.targets.vta.memsys import cold_start, dma_timing, hit_probability, miss_fractions, reuse_profile
from dcoc.targets.vta.workloads import DEFAULT_EPILOGUE, Epilogue

PYNQ = HWConfig.preset("pynq")
WARM = TimingParams(l2_start="warm")
C8 = Conv2DWorkload(1, 14, 14, 256, 256, 3, 1, 1)
C11 = Conv2DWorkload(1, 7, 7, 512, 512, 3, 1, 1)
L2 = 512 * 1024


def test_hit_probability_short_distance_hits_long_distance_misses():
    assert hit_probability(64 * 1024, L2) > 0.999            # 1/8 of the cache
    assert hit_probability(L2 // 2, L2) > 0.9
    assert hit_probability(4 * L2, L2) < 0.01               # 4x the cache
    assert hit_probability(math.inf, L2) == 0.0
    # monotone in the distance, and the 8-way cache is not a sharp threshold at its size
    ps = [hit_probability(d * 1024, L2) for d in (128, 256, 384, 512, 640, 768, 1024)]
    assert ps == sorted(ps, reverse=True)
    assert 0.2 < hit_probability(L2, L2) < 0.8


def _wgt_classes(wl, knobs):
    return {c[2]: c for c in reuse_profile(make_plan(wl, PYNQ, knobs))["wgt"]}


def test_short_distance_weight_rereads_hit():
    """tile_w < W: a weight block is re-read by the next column tile, one tile iteration
    later -- a short distance that hits even though the weights (590 KB) exceed the L2."""
    k = dict(tile_h=7, tile_w=7, tile_ci=1, tile_co=2, oc_nthread=2, h_nthread=1)
    cls = _wgt_classes(C8, k)
    frac, dist, _ = cls["wo"]
    assert frac == pytest.approx(0.5)  # (n_w - 1) / n_w of the weight reads (n_w = 2)
    assert dist < 256 * 1024 and hit_probability(dist, L2) > 0.99
    frac_h, dist_h, _ = cls["ho"]                   # the next row of tiles: all weights in between
    assert dist_h > 590 * 1024 and hit_probability(dist_h, L2) < 0.5
    # the miss fraction counts only the long-distance (and first) reads
    m = miss_fractions(make_plan(C8, PYNQ, k), WARM)["wgt"]
    assert 0.3 < m < 0.8


def test_full_width_tiles_miss_more_than_split_columns():
    full = dict(tile_h=7, tile_w=14, tile_ci=1, tile_co=2, oc_nthread=2, h_nthread=1)
    split = dict(full, tile_w=7)
    mf = miss_fractions(make_plan(C8, PYNQ, full), WARM)["wgt"]
    ms = miss_fractions(make_plan(C8, PYNQ, split), WARM)["wgt"]
    assert ms < mf


def test_h_thread_rereads_weights_in_the_same_step():
    k = dict(tile_h=7, tile_w=7, tile_ci=1, tile_co=4, oc_nthread=1, h_nthread=2)
    cls = _wgt_classes(C11, k)
    assert "h" not in cls  # one row tile only: the second h-thread has no tile -> no reuse
    k2 = dict(tile_h=7, tile_w=14, tile_ci=1, tile_co=2, oc_nthread=1, h_nthread=2)
    cls = _wgt_classes(C8, k2)
    frac, dist, _ = cls["h"]
    assert frac == pytest.approx(0.5) and hit_probability(dist, L2) > 0.999


def test_small_layer_is_l2_resident_when_warm():
    small = Conv2DWorkload(1, 28, 28, 64, 64, 3, 1, 1)   # 137 KB in all: a quarter of the L2
    k = dict(tile_h=7, tile_w=28, tile_ci=1, tile_co=2, oc_nthread=2, h_nthread=1)
    fr = miss_fractions(make_plan(small, PYNQ, k), WARM)
    assert max(fr.values()) < 0.01
    assert dma_timing(make_plan(small, PYNQ, k), WARM).missing == ()
    # near the L2's size the 8-way cache already misses part of the first reads
    c6 = Conv2DWorkload(1, 28, 28, 128, 256, 3, 2, 1)    # 445 KB
    k6 = dict(tile_h=14, tile_w=14, tile_ci=1, tile_co=4, oc_nthread=2, h_nthread=1)
    assert 0.05 < miss_fractions(make_plan(c6, PYNQ, k6), WARM)["wgt"] < 0.6


def test_deep_layer_streams_weights_from_ddr():
    k = dict(tile_h=7, tile_w=7, tile_ci=1, tile_co=16, oc_nthread=2, h_nthread=1)
    d = dma_timing(make_plan(C11, PYNQ, k), WARM)
    assert "wgt" in d.missing
    hit = simulate(C11, PYNQ, k, timing=WARM.with_(coherent_cache_kib=0))
    r = simulate(C11, PYNQ, k, timing=WARM)
    assert r.cycles > hit.cycles * 1.1
    assert r.counters == hit.counters  # same traffic, slower source


def test_cold_start_misses_first_reads_warm_does_not():
    c4 = Conv2DWorkload(1, 56, 56, 64, 128, 1, 2, 0)
    k = dict(tile_h=7, tile_w=28, tile_ci=1, tile_co=4, oc_nthread=1, h_nthread=2)
    p = make_plan(c4, PYNQ, k)
    warm, cold = miss_fractions(p, WARM), miss_fractions(p, cold_start(WARM))
    assert warm["wgt"] < 0.05            # 8 KB of weights, 200 KB input: resident when warm
    assert cold["wgt"] > 0.1             # first read of each weight block comes from DDR
    assert cold["inp"] == pytest.approx(warm["inp"], abs=0.01)  # activations: just written
    assert simulate(c4, PYNQ, k).cycles > simulate(c4, PYNQ, k, timing=WARM).cycles
    assert TimingParams().l2_start == "cold"  # whole-model paths start cold by default


def test_bias_and_residual_follow_the_same_rule():
    ep = Epilogue(bias=True, residual=True)
    k = dict(tile_h=7, tile_w=7, tile_ci=1, tile_co=4, oc_nthread=2, h_nthread=1)
    p = make_plan(C11, PYNQ, k, ep)
    prof = reuse_profile(p)
    assert {"bias", "res"} <= set(prof)
    assert prof["res"] == [(1.0, None, "first")]   # each residual element is read once
    cold = miss_fractions(p, TimingParams())
    warm = miss_fractions(p, WARM)
    assert cold["bias"] > warm["bias"]
    d = dma_timing(p, TimingParams())
    assert d.fraction(3) > 0  # MEM_ACC loads are charged their expected misses


def test_fast_path_equals_reference_with_partial_misses():
    for knobs in (dict(tile_h=7, tile_w=7, tile_ci=1, tile_co=8, oc_nthread=2, h_nthread=1),
                  dict(tile_h=7, tile_w=7, tile_ci=2, tile_co=1, oc_nthread=1, h_nthread=1)):
        f = simulate(C11, PYNQ, knobs)
        r = simulate(C11, PYNQ, knobs, mode="reference")
        assert (f.cycles, f.counters, f.instructions) == (r.cycles, r.counters, r.instructions)
    wl = DenseWorkload(4, 256, 96)
    knobs = dict(tile_b=1, tile_ci=4, tile_co=2, oc_nthread=2)
    tp = TimingParams(coherent_cache_kib=1)
    f, r = simulate(wl, PYNQ, knobs, timing=tp), simulate(wl, PYNQ, knobs, timing=tp, mode="reference")
    assert f.valid and f.cycles == r.cycles
    assert f.cycles > simulate(wl, PYNQ, knobs).cycles


def test_no_cache_on_ultrascale_bus_width():
    hw = HWConfig.preset("ultra96")
    knobs = dict(tile_h=7, tile_w=7, tile_ci=1, tile_co=8, oc_nthread=2, h_nthread=1)
    assert miss_fractions(make_plan(C11, hw, knobs, DEFAULT_EPILOGUE), TimingParams()) == {}
    a = simulate(C11, hw, knobs)
    b = simulate(C11, hw, knobs, timing=TimingParams(coherent_cache_kib=0))
    assert a.cycles == b.cycles


def test_bad_l2_start_is_a_config_error():
    with pytest.raises(ConfigError):
        TimingParams(l2_start="lukewarm")


def test_calibration_pins_the_fit_and_the_campaigns():
    """Every campaign's fit rows reproduce the errors dcoc.targets.vta.calibration quotes
    (what summaries print as a latency's basis), the split is the declared one, and every
    constant has a recorded source."""
    from dcoc.targets.vta.calibration import CAMPAIGNS
    from scripts import calibrate_vta as cv

    rows = cv.run()
    assert len(rows) == len(cv.ROWS) == 75
    assert {r["network"] for r in rows if r["split"] == "evaluation"} == {"AlexNet", "VGG-16"}
    fit = [r for r in rows if r["split"] == "fit"]
    for c in CAMPAIGNS:
        rs = [r for r in fit if r["campaign"] == c.name]
        errs = [abs(r["error_pct"]) for r in rs]
        assert len(rs) == c.fit_rows
        assert abs(sum(errs) / len(errs) - c.fit_mean_pct) < 0.1, c.name
        assert abs(max(errs) - c.fit_max_pct) < 0.1, c.name
        assert c.eval_rows == sum(r["campaign"] == c.name and r["split"] == "evaluation" for r in rows)
    ranks = cv.rank_correlations(fit)
    assert min(ranks.values()) >= 0.9
    assert set(TimingParams().as_dict()) <= set(cv.SOURCES)
    # the evaluation rows (looked at once, after every choice was made): pinned
    ev = cv.groups(rows)["evaluation"]
    assert ev["n"] == 11 and abs(ev["mean"] - 2.8) < 0.1 and abs(ev["max"] - 7.5) < 0.1
    assert all(ok for _, _, ok in cv.targets_met(rows).values())


def test_campaign_setup_is_the_write_response_wait():
    """The August 1x16 setup: the one record both 1x16 campaigns measured (7x7 512->512,
    same schedule) differs by the stored vectors' write-response waits."""
    from dcoc.targets.vta import HWConfig, simulate
    from dcoc.targets.vta.calibration import campaign_timing

    knobs = dict(tile_h=7, tile_w=7, tile_ci=1, tile_co=16, oc_nthread=2, h_nthread=1)
    hw = HWConfig.preset("pynq")
    july = simulate(C11, hw, knobs, timing=campaign_timing("1x16 July")).ms
    aug = simulate(C11, hw, knobs, timing=campaign_timing("1x16 August")).ms
    assert abs(july - 7.348) / 7.348 < 0.02 and abs(aug - 8.352) / 8.352 < 0.03
    # the wait is per stored vector: 7*7*512/16 vectors x 800 ns, partly hidden behind loads
    assert 0.5 < aug - july <= 7 * 7 * 32 * 0.8e-3


def test_sensitivity_reports_flips(monkeypatch):
    """The sensitivity tables re-rank designs at each constant's ends and say when the
    winner changes (a deliberately huge range must flip the C10 schedule choice)."""
    from scripts import calibrate_vta as cv

    monkeypatch.setattr(cv, "SENS_CONFIGS", ["1x16x16_i8w8a32_15_15_18_17", "4x8x8_i8w8a32_15_16_16_18"])
    monkeypatch.setattr(cv, "SENS_LAYERS", ("C10",))
    monkeypatch.setattr(cv, "SOURCES", {"dram_latency_ns": ("test", (100.0, 5000.0))})
    hw_rows = cv.sensitivity()
    assert [r["constant"] for r in hw_rows] == ["(nominal)", "dram_latency_ns", "dram_latency_ns"]
    assert all(set(r["latencies"]) == set(cv.SENS_CONFIGS) for r in hw_rows)
    assert "flips" in cv.format_sensitivity(hw_rows)
    sched = cv.schedule_sensitivity(top=4)
    assert sched[0]["layer"] == "C10" and sched[0]["flips"]
    assert "changes:" in cv.format_schedule_sensitivity(sched)
