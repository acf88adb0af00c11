"""Co-design pieces without the frontend: the Session (measures, resumes, records) and every
driver (decides through ask/tell), on the systolic target's analytic measurer."""
from __future__ import annotations

import math

import numpy as np

import pytest

from dcoc import codesign as cd
from dcoc.errors import DcocError
from dcoc.search import Records, Space
from dcoc.targets.systolic import SystolicConfig

from systolic_helpers import BOARD, SYS, Counting, small_config, systolic_layers


def _session(budget=60, tuner="t", records=None, resume=True, m=None):
    return cd.Session(systolic_layers(), m or Counting(), budget, tuner, 0, records, resume, target=SYS)


def _ran_dcoc(cfg=None, budget=30):
    """(config, session, problem) of a finished DCOC co-design run (the config stays live:
    a test may change a field and query the problem again)."""
    cfg = cfg or small_config()
    s = _session(budget=budget, tuner="dcoc")
    d = cd.make_driver(s, BOARD, "dcoc", 0, config=cfg)
    s.run(d)
    return cfg, s, d.problem


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


@pytest.mark.parametrize("tuner", ["dcoc", "dcoc-agents", "dcoc-frozen", "dcoc-noagents", "dcoc-topk",
                                   "surrogate"])
def test_dcoc_codesign_decides_and_spends_the_budget(tuner):
    s = _session(budget=60, tuner=tuner)
    d = cd.make_driver(s, BOARD, tuner, 0, config=small_config())
    assert isinstance(d, cd.DCOCCoDesign)
    _asks_only(d, s)
    s.run(d)
    assert s.trials == 60 and math.isfinite(s.best_latency)
    assert len(s.hw) >= 2, "co-design explored only the default hardware"
    inc = s.hw[s.best_hw]
    assert not SYS.violations(inc, BOARD)
    if tuner == "dcoc-frozen":
        assert d.agents.updates == 0
    if tuner in ("dcoc", "dcoc-noagents", "dcoc-topk", "surrogate"):
        # co-design's default proposer is the surrogate's search (docs/method.md §12)
        assert d.core.proposer == "surrogate" and d.agents is None
    else:
        assert d.core.proposer == "agents" and d.agents is not None


def test_both_proposers_in_codesign_pool_walks_and_annealing():
    s = _session(budget=60, tuner="dcoc")
    d = cd.make_driver(s, BOARD, "dcoc", 0, config=small_config(), proposer="both")
    s.run(d)
    assert s.trials == 60 and math.isfinite(s.best_latency)
    assert d.agents is not None and d.agents.updates > 0
    rounds = [r for r in d.core.log if "from_agents" in r]
    assert rounds and all(r["from_agents"] > 0 and r["from_surrogate"] > 0 for r in rounds)


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


@pytest.mark.parametrize("by_shape", [False, True])
def test_hardware_shortlist_by_core_shape(by_shape, monkeypatch):
    """``shortlist_by_shape``: the configs scored in detail are the best of each core shape
    first (else the best cheap estimates, which may all share the incumbent's shape)."""
    cfg = small_config()
    cfg.codesign.shortlist_by_shape = by_shape
    s = _session(budget=40, tuner="dcoc")
    d = cd.make_driver(s, BOARD, "dcoc", 0, config=cfg)
    s.run(d)
    p = d.problem
    complete = set(s.complete_hws())
    hws = {}
    for vals in p.hs:
        if p.hs.check(vals):
            continue
        hw = p.target.make_hw(vals, p.board)
        if hw.name not in complete:
            hws[hw.name] = hw
    cands = [(0, hw, k) for hw in hws.values() for k in [p.default(0, hw)] if k is not None]
    order = sorted({c[1].name: c[1] for c in cands}.values(), key=p.model_estimate)
    shapes = {p.shape(hw) for hw in order}
    assert len(shapes) >= 3 and len({p.shape(hw) for hw in order[:3]}) < 3  # the case that matters
    scored = []
    real = p.predict_time
    monkeypatch.setattr(p, "predict_time", lambda lj, hw, opts: (scored.append(hw.name), real(lj, hw, opts))[1])
    p.choose_new_hw(cands, complete, s.best_latency)
    names = list(dict.fromkeys(scored))
    assert len(names) == cfg.codesign.new_hw_shortlist and names[0] == order[0].name
    n_shapes = len({p.shape(hws[n]) for n in names})
    assert n_shapes == (3 if by_shape else len({p.shape(hw) for hw in order[:3]}))


def test_codesign_bound_setting_is_checked_and_used():
    cfg = small_config()
    cfg.codesign.bound = "ideal"
    d = cd.make_driver(_session(), BOARD, "dcoc", 0, config=cfg)
    layer, hw = d.problem.s.layers[0], SYS.default_hw(BOARD)
    assert d.problem.bound(layer, hw) == layer.ideal_seconds(hw)
    cfg.codesign.bound = "roofline"
    with pytest.raises(DcocError, match="unknown co-design bound 'roofline'"):
        cd.make_driver(_session(), BOARD, "dcoc", 0, config=cfg)


def test_drivers_say_whether_agents_search():
    """``uses_agents`` (what ``TuneResult.agents`` reports): co-design's dcoc proposes with
    the surrogate, dcoc-agents with agents, per-layer DCOC with agents, baselines never."""
    hw = SYS.default_hw(BOARD)
    cfg = small_config()
    assert not cd.make_driver(_session(), BOARD, "dcoc", 0, config=cfg).uses_agents
    assert cd.make_driver(_session(), BOARD, "dcoc-agents", 0, config=cfg).uses_agents
    assert cd.make_driver(_session(), BOARD, "dcoc", 0, hardware=hw).uses_agents
    assert not cd.make_driver(_session(), BOARD, "random", 0, hardware=hw).uses_agents
    assert not getattr(cd.make_driver(_session(), BOARD, "sweep", 0), "uses_agents", False)


def test_open_ref_predicted_compares_refined_with_refined(monkeypatch):
    """``open_ref="predicted"``: an unopened config must beat the incumbent's *predicted*
    refined latency (the best of its measured and predicted candidates), never worse than
    its measured one; ``measured`` ignores the prediction."""
    cfg = small_config()
    cfg.codesign.open_ref = "predicted"
    s = _session(budget=40, tuner="dcoc")
    d = cd.make_driver(s, BOARD, "dcoc", 0, config=cfg)
    s.run(d)
    p, inc = d.problem, s.hw[s.best_hw]
    complete = set(s.complete_hws())
    hws = [inc] + [p.target.make_hw(v, p.board) for v in p.hs if not p.hs.check(v)]
    cands = [(li, hw, k) for li in range(len(s.layers)) for hw in hws
             for k in [p.default(li, hw), p.transfer(li, hw)] if k is not None]
    pred = p.incumbent_prediction(cands)
    assert 0 < pred <= s.best_latency + 1e-12
    assert p.incumbent_prediction([]) == pytest.approx(s.best_latency)
    # an incumbent predicted to become 10x faster: nothing is worth opening
    monkeypatch.setattr(p, "incumbent_prediction", lambda c: s.best_latency / 10)
    assert p.choose_new_hw(cands, complete, s.best_latency) is None
    cfg.codesign.open_ref = "measured"  # the same problem object reads its config live
    opened = p.choose_new_hw(cands, complete, s.best_latency, explore=True)
    assert opened is not None and opened[0].name not in complete
    cfg.codesign.open_ref = "guess"
    with pytest.raises(DcocError, match="unknown co-design open_ref 'guess'"):
        cd.make_driver(_session(), BOARD, "dcoc", 0, config=cfg)


def test_layer_weights_latency_share_or_distance_to_the_bound():
    """``layer_weights``: walkers' layers by latency share (default) or by count x (best -
    bound), floored at 5% of the latency weight; an unknown value is an error."""
    cfg, s, p = _ran_dcoc()
    inc = s.hw[s.best_hw]
    L = s.layers
    lat = [l.count * s.best[(inc.name, i)][0] for i, l in enumerate(L)]
    w = p.layer_weights(inc)
    assert w.sum() == pytest.approx(1.0) and w == pytest.approx([x / sum(lat) for x in lat])
    cfg.codesign.layer_weights = "potential"
    raw = [max(l.count * (s.best[(inc.name, i)][0] - p.bound(l, inc)), 0.05 * x)
           for (i, l), x in zip(enumerate(L), lat)]
    assert p.layer_weights(inc) == pytest.approx([x / sum(raw) for x in raw])
    assert all(g > 0 for g in p.layer_weights(inc))
    cfg.codesign.layer_weights = "flops"
    with pytest.raises(DcocError, match="unknown co-design layer_weights 'flops'"):
        cd.make_driver(_session(), BOARD, "dcoc", 0, config=cfg)


def test_timing_classes_know_a_sibling_config_and_skip_dominated_ones(monkeypatch):
    """``timing_classes``: a schedule measured on one config is known exactly (sd 0) on a
    config differing only in the target's fit knobs, where it fits; a config whose fit knobs
    are all <= an opened one of its class is never opened.  Off (default): no such knowledge.
    (The systolic target makes no fit-knob claim; declared here to test the mechanics.)"""
    from dataclasses import replace

    monkeypatch.setattr(SYS, "fit_knobs", ("log_ifmap", "log_wgt", "log_ofmap"))
    cfg = small_config()
    cfg.codesign.timing_classes = True
    s = _session(budget=40, tuner="dcoc")
    d = cd.make_driver(s, BOARD, "dcoc", 0, config=cfg)
    s.run(d)
    p, inc = d.problem, s.hw[s.best_hw]
    p.refit()
    li, (cost, knobs) = 0, s.best[(inc.name, 0)]
    big = replace(inc, log_ifmap=17, log_wgt=17, log_ofmap=17)
    assert p.fits(li, big, knobs)
    assert p.class_time(li, big, knobs) == cost
    mu, sd = p.predict_many([(li, big, knobs), (li, inc, knobs)])
    assert (mu[0], sd[0]) == (cost, 0.0) and (mu[1], sd[1]) == (cost, 0.0)
    assert p.class_time(li, replace(big, rows=inc.rows * 2), knobs) is None    # another core
    small = replace(inc, log_ifmap=min(inc.log_ifmap, 14), log_wgt=min(inc.log_wgt, 14),
                    log_ofmap=min(inc.log_ofmap, 14))
    assert small.name != inc.name and p.dominated(small, [inc.name]) and not p.dominated(big, [inc.name])
    cands = [(lj, small, k) for lj in range(len(s.layers)) for k in [p.default(lj, small)] if k is not None]
    assert cands and p.choose_new_hw(cands, {inc.name}, s.best_latency, explore=True) is None
    cfg.codesign.timing_classes = False   # read live: off, nothing is known off-config
    assert p.class_time(li, big, knobs) is None and not p.dominated(small, [inc.name])


def test_sweep_incumbent_adds_every_unmeasured_schedule_of_the_incumbent():
    """``sweep_incumbent``: each round's candidates hold every valid, unmeasured schedule of
    every layer on the incumbent config (beside the walks' points); none when the layers'
    spaces together exceed ``exhaustive_limit`` or when it is off."""
    cfg = small_config()
    cfg.codesign.sweep_incumbent = False
    cfg, s, p = _ran_dcoc(cfg)
    inc = s.hw[s.best_hw]
    empty = (np.empty((0, p.dims.shape[1]), dtype=np.int64), np.empty(0, dtype=np.int64))
    p.starts(4)
    assert p.candidates(*empty, 8) == []
    cfg.codesign.sweep_incumbent = True
    cands = p.candidates(*empty, 8)
    want = {(li, Space.key(k)) for li in range(len(s.layers)) for k in p.space(li, inc)
            if p.space(li, inc).is_valid(k) and not s.is_measured(inc, li, k)}
    assert cands and {(li, Space.key(k)) for li, hw, k in cands} == want
    assert all(hw.name == inc.name for _, hw, _ in cands)
    p.cfg.exhaustive_limit = 10   # (the driver's copy of the top-level config)
    p._inc_items = ("", [])
    assert p.candidates(*empty, 8) == []


def test_sweep_open_scores_an_unopened_config_by_every_schedule():
    """``sweep_open``: the opening plan of an unopened config takes, per layer, the best
    predicted schedule over its whole valid space (without it: over the walks' candidates,
    the transferred and the default schedule only, which can only be worse)."""
    cfg, s, p = _ran_dcoc()
    complete = set(s.complete_hws())
    hw = next(h for h in (p.target.make_hw(v, p.board) for v in p.hs if not p.hs.check(v))
              if h.name not in complete and all(p.default(li, h) is not None for li in range(len(s.layers))))
    cands = [(0, hw, p.default(0, hw))]

    def plan_time(plan):
        return sum(s.layers[li].count * float(p.predict_time(li, h, [k])[0][0]) for li, h, k in plan)

    _, plain = p.choose_new_hw(cands, complete, s.best_latency * 1e3)
    cfg.codesign.sweep_open = True
    _, swept = p.choose_new_hw(cands, complete, s.best_latency * 1e3)
    for li, h, k in swept:
        assert h.name == hw.name
        assert float(p.predict_time(li, hw, [k])[0][0]) == pytest.approx(
            float(p.predict_time(li, hw, p.valid_schedules(li, hw))[0].min()))
    assert plan_time(swept) <= plan_time(plain) + 1e-15
    # sweep_open_stalled: the whole-space scoring only on a hardware exploration round
    cfg.codesign.sweep_open, cfg.codesign.sweep_open_stalled = False, True
    assert p.choose_new_hw(cands, complete, s.best_latency * 1e3)[1] == plain
    assert p.choose_new_hw(cands, complete, s.best_latency * 1e3, explore=True)[1] == swept


def test_explore_shapes_opens_the_unmeasured_core_shape_with_the_lowest_bound():
    """``explore_shapes``: a hardware exploration round with no confident opening opens a
    never-measured core shape, lowest model compute bound first and only within the factor
    of the best shape's bound, at a config of that shape; off (0) or with every such shape
    measured, nothing is forced."""
    cfg, s, p = _ran_dcoc()
    complete = set(s.complete_hws())
    bounds = p.shapes.bounds()
    assert len(bounds) > 1 and p.shapes_opened
    cfg.codesign.explore_shapes, cfg.codesign.explore_shapes_first = 0.0, 1.0
    assert p.choose_new_hw([], complete, math.inf, explore=True) is None   # off
    cfg.codesign.explore_shapes = 100.0
    out = p.choose_new_hw([], complete, math.inf, explore=True)
    assert out is not None
    hw, plan = out
    unmeasured = {sh: b for sh, (b, _) in bounds.items() if sh != p.shape(hw) and sh not in p.shapes_opened}
    assert p.shape(hw) in p.shapes_opened                     # now it is
    assert all(bounds[p.shape(hw)][0] <= b for b in unmeasured.values())
    assert {li for li, _, _ in plan} == set(range(len(s.layers))) and all(h.name == hw.name for _, h, _ in plan)
    assert p.choose_new_hw([], complete, math.inf, explore=False) is None  # only on exploration rounds
    # a factor that admits only shapes no slower-bound than the one just opened: all measured
    floor = min(b for b, _ in bounds.values())
    cfg.codesign.explore_shapes = bounds[p.shape(hw)][0] / floor * (1 + 1e-9)
    assert p.shapes.new_shape(complete, math.inf) is None
    assert p.shapes.new_shape(complete, 0.0) is None                  # no bound beats a 0 s incumbent


def test_explore_shapes_first_opens_the_dominant_layers_then_finishes_only_if_still_ahead():
    """``explore_shapes_first`` < 1: the forced opening of a new core shape measures first its
    layers with the largest predicted share of the model time (until they make up that share);
    the next round opens the rest only if measured + predicted still beats the incumbent."""
    cfg, s, p = _ran_dcoc()
    complete = set(s.complete_hws())
    cfg.codesign.explore_shapes, cfg.codesign.explore_shapes_first = 100.0, 0.5
    hw, part = p.choose_new_hw([], complete, math.inf, explore=True)
    _, _, full, times = p.opening_plan(hw, [])
    share = {li: s.layers[li].count * float(p.predict_time(li, h, [k])[0][0]) for li, h, k in full}
    assert times == pytest.approx([float(p.predict_time(li, h, [k])[0][0]) for li, h, k in full])
    first = {li for li, _, _ in part}
    assert 0 < len(part) < len(full) and p.shapes.staged is hw
    assert min(share[li] for li in first) >= max(share[li] for li in share if li not in first)
    total = sum(share.values())
    assert sum(share[li] for li in first) >= 0.5 * total
    assert sum(share[li] for li in first) - min(share[li] for li in first) < 0.5 * total
    s.budget += len(full)
    s.measure(part)
    p.refit()
    p._best_lat = math.inf                      # still ahead of any incumbent: the rest
    out = p.shapes.finish([], set(s.complete_hws()))
    assert out[0] is hw and {li for li, _, _ in out[1]} == set(range(len(s.layers))) - first
    assert p.shapes.staged is None
    p.shapes.staged, p._best_lat = hw, 0.0            # behind: dropped
    assert p.shapes.finish([], set(s.complete_hws())) is None and p.shapes.staged is None
    # explore_shapes_finish="opened": against the incumbent as it was when first complete
    p.shapes.opened_lat[s.best_hw] = math.inf
    p.shapes.staged = hw
    assert p.shapes.finish([], set(s.complete_hws())) is None   # "measured" ignores it
    cfg.codesign.explore_shapes_finish = "opened"
    p.shapes.staged = hw
    assert p.shapes.finish([], set(s.complete_hws()))[0] is hw
    cfg.codesign.explore_shapes_first = 1.0     # session 11: every layer at once
    assert p.shapes.stage(hw, full) == full and p.shapes.staged is None


def test_layer_quota_measures_each_incumbent_layers_best_ranked_schedule_in_turn():
    """``layer_quota``: each pick is one incumbent layer's candidate with the best predicted
    mean; the layers take turns (fewest quota picks first, larger latency share first)."""
    cfg, s, p = _ran_dcoc()
    inc = s.hw[s.best_hw]
    cands = [c for c in p.candidates([], [], 0) if c[1].name == inc.name]
    assert {li for li, _, _ in cands} == set(range(len(s.layers)))
    mu, _ = p.predict(cands)
    assert p.layer_quota_picks(cands, mu, inc, 0) == set()
    share = {li: s.layers[li].count * p.layer_estimate(li, inc) for li in range(len(s.layers))}
    order = sorted(share, key=lambda li: -share[li])
    first = p.layer_quota_picks(cands, mu, inc, 1)
    (i,) = first
    li = cands[i][0]
    assert li == order[0]
    assert mu[i] == max(mu[j] for j, c in enumerate(cands) if c[0] == li)
    rest = p.layer_quota_picks(cands, mu, inc, len(s.layers))   # the others first, then it again
    assert sorted(cands[j][0] for j in rest) == sorted(range(len(s.layers)))
    assert p._quota[(inc.name, li)] == 2 and all(p._quota[(inc.name, l)] == 1 for l in order[1:])


def test_stall_rounds_opens_the_buffer_variant_that_dominates_the_incumbent(monkeypatch):
    """``stall_rounds``: a stalled exploration round opens the unopened config of the
    incumbent's timing class with every buffer >= the incumbent's (the most schedules fit),
    measuring every layer's incumbent schedule there (so it ties or beats the incumbent) and
    its best predicted one.  (Fit knobs declared for the systolic target, as above.)"""
    cfg, s, p = _ran_dcoc()
    assert p.stall.opening(set(s.complete_hws())) is None  # no fit knobs: no timing class
    monkeypatch.setattr(SYS, "fit_knobs", ("log_ifmap", "log_wgt", "log_ofmap"))
    complete = set(s.complete_hws())
    inc = s.hw[s.best_hw]
    cfg.codesign.stall_rounds, p.stall.rounds_since_better = 0, 100
    assert not p.stall.stalled()                                     # 0: off
    cfg.codesign.stall_rounds = 3
    p.stall.rounds_since_better = 2
    assert not p.stall.stalled()
    p.stall.rounds_since_better = 3
    assert p.stall.stalled()
    out = p.stall.opening(complete)
    mine = p.target.fit_values(inc)
    variants = [h for h in p.shapes.bounds()[p.shape(inc)][1]
                if h.name not in complete and p.target.timing_key(h) == p.target.timing_key(inc)
                and p.target.fit_values(h) != mine
                and all(a >= b for a, b in zip(p.target.fit_values(h), mine))]
    assert variants
    _, hw, plan = out
    assert hw in variants and all(h is hw for _, h, _ in plan)
    fits = {v.name: sum(len(p.valid_schedules(li, v)) for li in range(len(s.layers))) for v in variants}
    assert fits[hw.name] == max(fits.values())
    for li in range(len(s.layers)):                            # the incumbent's schedules, all of them
        assert (li, hw, s.best[(inc.name, li)][1]) in plan
    assert len(plan) <= 2 * len(s.layers)


def test_gain_units_layer_gives_the_selection_each_layers_normalized_throughput():
    """``gain_units="layer"``: a candidate on the incumbent is scored as its layer's best
    measured time over the predicted one (the per-task rule's units), ranked within a layer
    as in the model's units, with larger gains; an unknown unit is a one-line error."""
    cfg, s, p = _ran_dcoc()
    inc = s.hw[s.best_hw]
    p.starts(4)
    cands = [(li, inc, k) for li in range(len(s.layers)) for k in p.valid_schedules(li, inc)
             if not s.is_measured(inc, li, k)]
    assert cands
    cfg.codesign.gain_units = "model"   # read live
    mu_m, _ = p.predict(cands)
    cfg.codesign.gain_units = "layer"
    mu_l, sd_l = p.predict(cands)
    m, dev = p.predict_many(cands)
    for i, (li, _, _) in enumerate(cands):
        best = s.best[(inc.name, li)][0]
        assert mu_l[i] == pytest.approx(best / m[i])
        assert sd_l[i] == pytest.approx(best * dev[i] / m[i] ** 2)
    for li in range(len(s.layers)):
        idx = [i for i, c in enumerate(cands) if c[0] == li]
        assert list(np.argsort(mu_l[idx], kind="stable")) == list(np.argsort(mu_m[idx], kind="stable"))
    # gains: a layer's relative gain is larger than its share of the model's
    assert np.all(np.abs(mu_l - 1) >= np.abs(mu_m - 1) - 1e-12)
    cfg.codesign.gain_units = "step"
    with pytest.raises(DcocError, match="unknown co-design gain_units 'step'"):
        cd.make_driver(s, BOARD, "dcoc", 0, config=cfg)


def test_layer_calibration_learns_each_layers_measured_over_predicted_ratio():
    from dcoc.codesign.calibration import LayerCalibration

    c = LayerCalibration(2.0)
    c.note_pick("h", 0, ("k",), 1.0)
    c.note_measured("h", 0, ("k",), 2.0)      # measured twice the predicted time
    c.note_measured("h", 1, ("j",), 5.0)      # never picked: no evidence
    assert c.factor(1) == 1.0 and c.summary() == {0: (1, c.factor(0))}
    assert abs(c.factor(0) - 2.0 ** (1 / 3)) < 1e-12      # shrunk by 2 pseudo-picks at ratio 1
    assert LayerCalibration(0.0).factor(0) == 1.0
    # a co-design run: every measured pick's ratio reaches its layer, predictions are scaled
    cfg = small_config()
    cfg.codesign.layer_calibration = 2.0
    _, s, p = _ran_dcoc(cfg, budget=60)
    summ = p.calib.summary()
    assert summ and sum(n for n, _ in summ.values()) >= 8
    assert any(abs(f - 1.0) > 1e-6 for _, f in summ.values())
    li = next(iter(summ))
    hw = s.hw[s.best_hw]
    k = p.valid_schedules(li, hw)[0]
    mu_cal, _ = p.predict([(li, hw, k)])
    p.calib.w = 0.0                                # off: the uncalibrated prediction
    mu_raw, _ = p.predict([(li, hw, k)])
    p.calib.w = 2.0
    assert np.allclose(mu_cal * p.calib.factor(li), mu_raw)   # layer units: ref / (t * factor)


def test_stale_discount_counts_each_layers_measurements_since_its_best():
    """``stale_discount``: the session counts, per (config, layer), the measurements since
    that layer's best was found (the count the selection damps predicted gains by)."""
    from collections import Counter

    cfg = small_config()
    cfg.codesign.stale_discount = 0.25
    _, s, p = _ran_dcoc(cfg, budget=60)
    expect, best = Counter(), {}
    for (hn, li, _), r in s.results.items():   # insertion order = measurement order
        if r.valid and ((hn, li) not in best or r.cost < best[(hn, li)]):
            best[(hn, li)] = r.cost
            expect[(hn, li)] = 0
        else:
            expect[(hn, li)] += 1
    assert +s.stale == +expect and sum(s.stale.values()) > 0
    assert {k: v[0] for k, v in s.best.items()} == best
    # the selection sees each predicted gain damped by c / (c + f); losses as they are
    inc = s.hw[s.best_hw]
    cands = [c for c in p.candidates([], [], 0) if c[1].name == inc.name]
    mu = np.linspace(0.9, 1.2, len(cands))
    f = np.array([s.stale[(inc.name, li)] for li, _, _ in cands], dtype=float)
    assert f.max() > 0
    want = np.where(mu > 1, 1 + (mu - 1) * 0.25 / (0.25 + f), mu)
    assert np.allclose(p.damped(cands, mu), want)
    cfg.codesign.stale_discount = 0.0
    assert p.damped(cands, mu) is mu
