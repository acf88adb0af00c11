"""Co-design pieces without the frontend: the Session (measures, resumes, records) and every
driver (decides through ask/tell), on the systolic target's simulator."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from systolic_helpers import BOARD, SYS, Counting, small_config, systolic_layers

from dcoc import codesign as cd
from dcoc.errors import DcocError
from dcoc.search import Records, Space
from dcoc.targets.systolic import SystolicConfig


def _session(budget=60, tuner="t", records=None, resume=True, m=None):
    return cd.Session(systolic_layers(), m or Counting(), budget, tuner, 0, records, resume, target=SYS)


def _ran(tuner="surrogate", budget=30, **codesign):
    """(session, problem) of a finished co-design run of a DCOC-family tuner."""
    s = _session(budget=budget, tuner=tuner)
    d = cd.make_driver(s, BOARD, tuner, 0, config=small_config(tuner, **codesign))
    s.run(d)
    return s, d.problem


def _set(p, **codesign):
    """Give a finished problem's opening policy other co-design settings (configs are frozen)."""
    p.opening.ccfg = replace(p.opening.ccfg, **codesign)


# ------------------------------------------------------------------ session
def test_session_counts_new_jobs_only_and_respects_the_budget():
    s = _session(budget=4)
    hw = SYS.default_hw(BOARD)
    jobs = cd.default_jobs(s, hw)
    assert len(jobs) == 3
    res = s.measure(jobs)
    assert s.trials == 3 and all(r.valid for r in res)
    assert s.latency(hw.name) == pytest.approx(sum(l.count * r.cost for l, r in zip(s.layers, res)))
    assert s.best_hw == hw.name and s.best_latency == s.latency(hw.name)
    again = s.measure(jobs)                     # repeats cost nothing
    assert s.trials == 3 and [r.cost for r in again] == [r.cost for r in res]
    other = SystolicConfig(8, 32, 15, 15, 15, BOARD.freq_mhz, BOARD.bus_bytes)
    res2 = s.measure(cd.default_jobs(s, other))  # only one trial left: the rest is dropped
    assert len(res2) == 1 and s.trials == 4 and s.remaining == 0
    assert s.latency(other.name) is None and set(s.complete_hws()) == {hw.name}


def test_session_records_and_resume_replay_without_measuring(tmp_path):
    path = str(tmp_path / "r.jsonl")
    m1 = Counting()
    s1 = _session(budget=40, records=Records(path), m=m1)
    s1.run(cd.DCOCCoDesign(s1, BOARD, 0, config=small_config()))
    assert m1.calls == 40 and len(Records(path)) == 40
    m2 = Counting()
    s2 = _session(budget=40, records=Records(path), m=m2)
    s2.run(cd.DCOCCoDesign(s2, BOARD, 0, config=small_config()))
    assert m2.calls == 0 and s2.replayed == 40 and len(Records(path)) == 40
    assert s2.best_latency == s1.best_latency and s2.history == s1.history
    m3 = Counting()   # another seed's records are not reused
    s3 = cd.Session(systolic_layers(), m3, 10, "t", 1, Records(path), True, target=SYS)
    s3.measure(cd.default_jobs(s3, SYS.default_hw(BOARD)))
    assert m3.calls == 3


# ------------------------------------------------------------------ drivers
def _asks_only(driver, session, rounds=3):
    """Drive by hand: ask must not measure (the session's trial count is unchanged)."""
    for _ in range(rounds):
        before = session.trials
        jobs = driver.ask()
        assert session.trials == before, "ask() measured"
        if not jobs:
            break
        res = session.measure(jobs)
        driver.tell(jobs[: len(res)], res)


@pytest.mark.parametrize("tuner", ["surrogate", "dcoc", "dcoc-frozen", "surrogate:select=confidence"])
def test_dcoc_codesign_decides_and_spends_the_budget(tuner):
    s = _session(budget=60, tuner=tuner)
    d = cd.make_driver(s, BOARD, tuner, 0, config=small_config(tuner))
    assert isinstance(d, cd.DCOCCoDesign)
    _asks_only(d, s)
    s.run(d)
    assert s.trials == 60 and math.isfinite(s.best_latency)
    assert len(s.hw) >= 2, "co-design explored only the default hardware"
    inc = s.hw[s.best_hw]
    assert not SYS.violations(inc, BOARD)
    # the name decides the algorithm in co-design as per task
    assert (d.agents is not None) == tuner.startswith("dcoc")
    if tuner == "dcoc-frozen":
        assert d.agents.updates == 0
    elif tuner == "dcoc":
        assert d.agents.updates > 0
    assert d.cfg.select == ("confidence" if tuner != "surrogate" else "topk")


def test_codesign_config_must_run_the_tuners_algorithm():
    with pytest.raises(DcocError, match="tuner 'surrogate' runs proposer='surrogate'"):
        cd.make_driver(_session(), BOARD, "surrogate", 0, config=small_config("dcoc"))


@pytest.mark.parametrize("tuner", ["random", "xgb", "ga"])
def test_joint_baselines_propose_hardware_and_schedules_together(tuner):
    s = _session(budget=80, tuner=tuner)
    d = cd.make_driver(s, BOARD, tuner, 0)
    assert isinstance(d, cd.JointCoDesign)
    _asks_only(d, s)
    s.run(d)
    assert s.trials == 80 and math.isfinite(s.best_latency)
    # about one hardware config per (layers + 1) trials, far more than a nested search
    assert len(s.complete_hws()) >= 80 // (2 * (len(s.layers) + 1))
    nested = _session(budget=80, tuner=tuner)
    nested.run(cd.make_driver(nested, BOARD, tuner, 0, baseline="nested"))
    assert len(s.complete_hws()) > len(nested.complete_hws())
    # every joint tuner was told model latencies (>= the best, never a single layer's time)
    for t in d.tuners:
        assert all(c >= s.best_latency * (1 - 1e-9) for _, c, _ in t.history if math.isfinite(c))


def test_sweep_opens_every_core_shape_first():
    s = _session(budget=200, tuner="sweep")
    d = cd.make_driver(s, BOARD, "sweep", 0)
    assert isinstance(d, cd.SweepCoDesign)
    s.run(d)
    shapes = {(h.rows, h.cols) for h in SYS.feasible_hw(BOARD)}
    opened = {(s.hw[n].rows, s.hw[n].cols) for n in s.complete_hws()}
    assert opened == shapes
    assert s.trials == 200


def test_unknown_baseline_mode_is_an_error():
    with pytest.raises(DcocError, match="baseline"):
        cd.make_driver(_session(), BOARD, "xgb", 0, baseline="outer")


# ------------------------------------------------------------------ software only
def _tiny_hw():
    # 64 columns but a 1 KiB accumulator SRAM: no schedule of an M >= 8 layer fits
    return SystolicConfig(8, 64, 14, 14, 10, BOARD.freq_mhz, BOARD.bus_bytes)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("tuner", ["random", "ga", "dcoc", "sweep"])
def test_software_only_ends_when_a_layer_has_no_valid_schedule(tuner):
    """Regression: a layer with no valid schedule kept an infinite priority and the
    software-only loop spun forever once its tuner was exhausted."""
    s = _session(budget=100, tuner=tuner)
    hw = _tiny_hw()
    s.measure(cd.default_jobs(s, hw))
    d = cd.make_driver(s, BOARD, tuner, 0, hardware=hw)
    s.run(d)
    missing = [s.layers[i].name for i in d.missing()]
    assert "conv_a" in missing and "conv_b" in missing
    assert "fc" not in missing


def test_software_only_spends_the_budget_on_the_worst_layers():
    s = _session(budget=50, tuner="random")
    hw = SYS.default_hw(BOARD)
    s.measure(cd.default_jobs(s, hw))
    d = cd.make_driver(s, BOARD, "random", 0, hardware=hw)
    s.run(d)
    assert s.trials == 50 and set(s.complete_hws()) == {hw.name}
    assert all(sp >= min(d.warmup, 8) for sp in d.spent)


def test_the_incumbent_sweep_adds_every_unmeasured_schedule_of_the_incumbent():
    """Each round's candidates hold every valid, unmeasured schedule of every layer on the
    incumbent config (beside the search's points); none when the layers' spaces together
    exceed ``exhaustive_limit``."""
    s, p = _ran()
    inc = s.hw[s.best_hw]
    empty = (np.empty((0, p.enc.dims.shape[1]), dtype=np.int64), np.empty(0, dtype=np.int64))
    p.starts(4)
    cands = p.candidates(*empty, 8)
    want = {(li, Space.key(k)) for li in range(len(s.layers)) for k in p.enc.space(li, inc)
            if p.enc.space(li, inc).is_valid(k) and not s.is_measured(inc, li, k)}
    assert cands and {(li, Space.key(k)) for li, hw, k in cands} == want
    assert all(hw.name == inc.name for _, hw, _ in cands)
    p.opening.exhaustive_limit = 10
    p._inc_items = ("", [])
    assert p.candidates(*empty, 8) == []


def test_search_starts_draw_layers_by_their_share_of_the_incumbents_latency():
    s, p = _ran()
    inc = s.hw[s.best_hw]
    lat = [l.count * s.best[(inc.name, i)][0] for i, l in enumerate(s.layers)]
    w = p.models.layer_weights(inc)
    assert w.sum() == pytest.approx(1.0) and w == pytest.approx([x / sum(lat) for x in lat])


def test_explore_shapes_opens_the_unmeasured_core_shape_with_the_lowest_bound():
    """``explore_shapes``: a hardware exploration round with no confident opening opens a
    never-measured core shape, lowest model compute bound first and only within the factor
    of the best shape's bound, at a config of that shape; off (0) or with every such shape
    measured, nothing is forced."""
    s, p = _ran()
    o = p.opening
    complete = set(s.complete_hws())
    bounds = o.shapes.bounds()
    assert len(bounds) > 1 and o.shapes_opened
    _set(p, explore_shapes=0.0, explore_shapes_first=1.0)
    assert o.choose_new_hw([], complete, math.inf, explore=True) is None   # off
    _set(p, explore_shapes=100.0)
    out = o.choose_new_hw([], complete, math.inf, explore=True)
    assert out is not None
    hw, plan = out
    shape = p.enc.shape(hw)
    unmeasured = {sh: b for sh, (b, _) in bounds.items() if sh != shape and sh not in o.shapes_opened}
    assert shape in o.shapes_opened                     # now it is
    assert all(bounds[shape][0] <= b for b in unmeasured.values())
    assert {li for li, _, _ in plan} == set(range(len(s.layers))) and all(h.name == hw.name for _, h, _ in plan)
    assert o.choose_new_hw([], complete, math.inf, explore=False) is None  # only on exploration rounds
    # a factor that admits only shapes no slower-bound than the one just opened: all measured
    floor = min(b for b, _ in bounds.values())
    _set(p, explore_shapes=bounds[shape][0] / floor * (1 + 1e-9))
    assert o.shapes.new_shape(complete, math.inf) is None
    assert o.shapes.new_shape(complete, 0.0) is None                  # no bound beats a 0 s incumbent


def test_explore_shapes_first_opens_the_dominant_layers_then_finishes_only_if_still_ahead():
    """``explore_shapes_first`` < 1: the forced opening of a new core shape measures first its
    layers with the largest predicted share of the model time (until they make up that share);
    the next round opens the rest only if measured + predicted still beats the incumbent."""
    s, p = _ran()
    o, m = p.opening, p.models
    complete = set(s.complete_hws())
    _set(p, explore_shapes=100.0, explore_shapes_first=0.5)
    hw, part = o.choose_new_hw([], complete, math.inf, explore=True)
    _, _, full, times = o.opening_plan(hw, [])
    share = {li: s.layers[li].count * float(m.predict_time(li, h, [k])[0][0]) for li, h, k in full}
    assert times == pytest.approx([float(m.predict_time(li, h, [k])[0][0]) for li, h, k in full])
    first = {li for li, _, _ in part}
    assert 0 < len(part) < len(full) and o.shapes.staged is hw
    assert min(share[li] for li in first) >= max(share[li] for li in share if li not in first)
    total = sum(share.values())
    assert sum(share[li] for li in first) >= 0.5 * total
    assert sum(share[li] for li in first) - min(share[li] for li in first) < 0.5 * total
    s.budget += len(full)
    s.measure(part)
    p.refit()
    out = o.shapes.finish([], set(s.complete_hws()), math.inf)   # still ahead of any incumbent
    assert out[0] is hw and {li for li, _, _ in out[1]} == set(range(len(s.layers))) - first
    assert o.shapes.staged is None
    o.shapes.staged = hw                                          # behind: dropped
    assert o.shapes.finish([], set(s.complete_hws()), 0.0) is None and o.shapes.staged is None
    _set(p, explore_shapes_first=1.0)                             # every layer at once
    assert o.shapes.stage(hw, full, times) == full and o.shapes.staged is None


def test_stall_rounds_opens_the_buffer_variant_that_dominates_the_incumbent(monkeypatch):
    """``stall_rounds``: a stalled exploration round opens the unopened config of the
    incumbent's timing class with every buffer >= the incumbent's (the most schedules fit),
    measuring every layer's incumbent schedule there (so it ties or beats the incumbent) and
    its best predicted one.  (Fit knobs declared for the systolic target for the test.)"""
    s, p = _ran()
    o = p.opening
    assert o.stall.opening(set(s.complete_hws())) is None  # no fit knobs: no timing class
    monkeypatch.setattr(SYS, "fit_knobs", ("log_ifmap", "log_wgt", "log_ofmap"))
    complete = set(s.complete_hws())
    inc = s.hw[s.best_hw]
    _set(p, stall_rounds=0)
    o.stall.rounds_since_better = 100
    assert not o.stall.stalled()                                     # 0: off
    _set(p, stall_rounds=3)
    o.stall.rounds_since_better = 2
    assert not o.stall.stalled()
    o.stall.rounds_since_better = 3
    assert o.stall.stalled()
    out = o.stall.opening(complete)
    mine = SYS.fit_values(inc)
    shape = p.enc.shape(inc)
    variants = [h for h in o.shapes.bounds()[shape][1]
                if h.name not in complete and SYS.timing_key(h) == SYS.timing_key(inc)
                and SYS.fit_values(h) != mine
                and all(a >= b for a, b in zip(SYS.fit_values(h), mine))]
    assert variants
    _, hw, plan = out
    assert hw in variants and all(h is hw for _, h, _ in plan)
    fits = {v.name: sum(len(p.enc.valid_schedules(li, v)) for li in range(len(s.layers))) for v in variants}
    assert fits[hw.name] == max(fits.values())
    for li in range(len(s.layers)):                            # the incumbent's schedules, all of them
        assert (li, hw, s.best[(inc.name, li)][1]) in plan
    assert len(plan) <= 2 * len(s.layers)


def test_the_selection_sees_each_layers_normalized_throughput():
    """A candidate on the incumbent is scored as its layer's best measured time over the
    predicted one (the units the rule has per task): 1.0 ties the incumbent."""
    s, p = _ran()
    inc = s.hw[s.best_hw]
    p.starts(4)
    cands = [(li, inc, k) for li in range(len(s.layers)) for k in p.enc.valid_schedules(li, inc)
             if not s.is_measured(inc, li, k)]
    assert cands
    mu, sd = p.predict(cands)
    m, dev = p.models.predict_many(cands)
    for i, (li, _, _) in enumerate(cands):
        best = s.best[(inc.name, li)][0]
        assert mu[i] == pytest.approx(best / m[i])
        assert sd[i] == pytest.approx(best * dev[i] / m[i] ** 2)
