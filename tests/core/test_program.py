"""Program features and the pool shared across tasks (tvm_plugin.metaschedule.program, TaskProblem)."""
from __future__ import annotations

import numpy as np

from dcoc.method.core import DCOCConfig
from dcoc.search import FunctionMeasurer, Knob, Space, TuningTask
from tvm_plugin.metaschedule.program import SharedPool
from dcoc.tuners import create

VALUES = tuple(range(12))


def _task(name: str, order: str):
    """The same bowl under two knob layouts: task B names, orders and permutes its knobs
    differently, so knob features do not carry over -- only program features can."""
    if order == "ab":
        sp = Space([Knob("x", VALUES, "tile"), Knob("y", VALUES, "tile")])
    else:
        perm = tuple(reversed(VALUES))
        sp = Space([Knob("v", perm, "tile"), Knob("u", perm[::2] + perm[1::2], "tile")])
    return TuningTask(name, sp, "test", f"test:{name}", flop=1.0)


def _xy(cfg):
    return (cfg["x"], cfg["y"]) if "x" in cfg else (cfg["u"], cfg["v"])


def _cost(task, cfg):
    x, y = _xy(cfg)
    return 1.0 + (x - 9) ** 2 + (y - 3) ** 2


class Program:
    """Task-independent features: the loop extents the knobs stand for."""

    dim = 2

    def __init__(self, space):
        self.space = space
        self.calls = 0

    def __call__(self, points):
        self.calls += len(points)
        return np.array([_xy(self.space.config(tuple(p))) for p in points], np.float32)


def _tuner(task, pool, **cfg):
    cfg.setdefault("program_rerank", 4)     # opt-in (DCOCConfig default 0)
    t = create("dcoc", task, seed=0, config=DCOCConfig(**cfg))
    t.problem.set_program(Program(task.space), pool, key=task.name)
    return t


def _pool_after_task_a() -> SharedPool:
    """A pool holding the rows of task A tuned for 48 trials (what a cold task B learns from)."""
    pool = SharedPool()
    _tuner(_task("a", "ab"), pool).tune(48, FunctionMeasurer(_cost))
    return pool


def test_pool_excludes_own_rows_caps_and_drops_unbuildable():
    pool = SharedPool(max_rows=4)
    pool.put("a", np.array([[1, 2], [3, 4], [np.nan, 0], [5, 6]]), [0.1, 0.2, 0.3, 1.0])
    pool.put("b", np.ones((5, 2)), np.full(5, 0.5))
    assert pool.n_rows() == 8 and pool.n_rows(exclude="a") == 5
    X, y = pool.others("a")
    assert X.shape == (4, 2) and np.all(y == 0.5)      # capped at max_rows
    X, y = pool.others("c")
    assert len(y) == 4 and np.isfinite(X).all()          # two per task, NaN row dropped
    assert pool.others("only") is not None and SharedPool().others("a") is None


def test_pooled_rows_rank_a_new_task_from_its_first_round():
    pool = _pool_after_task_a()
    assert len(pool.others("b")[1]) == 48

    b = _tuner(_task("b", "vu"), pool)
    assert b.problem.n_init() == 0                       # the pool replaces the random warm-up
    first = b.ask(8)
    shared = [_cost(None, c) for c in first]
    alone = _tuner(_task("b", "vu"), None)               # same task, no pool: random warm-up
    assert alone.problem.n_init() == 8
    cold = [_cost(None, c) for c in alone.ask(8)]
    # the optimum costs 1, a random point ~50 on average
    assert np.mean(shared) < 0.5 * np.mean(cold), (shared, cold)
    assert min(shared) <= 5.0


def test_program_features_only_for_the_reranked_candidates_and_off_switch():
    task = _task("a", "ab")
    t = _tuner(task, SharedPool(), program_rerank=2)
    t.tune(40, FunctionMeasurer(_cost))
    prog = t.problem.program
    # per round at most 2 x plan_size candidates (and the measured points) are featurized
    assert 0 < prog.calls <= 40 + 2 * t.cfg.plan_size * t.rounds
    assert t.problem.prog_model.fitted and t.best_cost < 4.0

    off = _tuner(task, SharedPool(), program_rerank=0)
    off.tune(24, FunctionMeasurer(_cost))
    assert not off.problem.program_on and off.problem.program.calls == 0
    assert off.problem.n_init() == off.cfg.n_init


def test_program_model_refits_only_when_own_or_pooled_rows_change():
    pool = SharedPool()
    t = _tuner(_task("a", "ab"), pool)
    t.tune(24, FunctionMeasurer(_cost))
    t.problem.refit()                                    # fit on the last round's rows
    fits = []
    fit = t.problem.prog_model.fit
    t.problem.prog_model.fit = lambda X, y: (fits.append(len(y)), fit(X, y))
    t.problem.refit()
    t.problem.refit()                                    # nothing new: no refit
    assert fits == []
    pool.put("other", np.ones((3, 2), np.float32), np.full(3, 0.5))
    t.problem.refit()                                    # another task published rows
    assert fits == [24 + 3]
    t.problem.refit()
    assert fits == [27]
    t.problem.observe((0, 0), 5.0)                      # a new own measurement
    t.problem.refit()
    assert fits == [27, 28]


def test_program_pool_only_leaves_a_cold_tasks_own_rows_out():
    """program_pool_only: while a task is cold its program model is fitted on the other
    tasks' pooled rows alone (own measurements do not refit it); warm, on both again; with
    too few pooled rows to rank, on its own rows as before."""
    pool = _pool_after_task_a()
    n_pool = pool.n_rows(exclude="b")
    assert n_pool >= 32
    b = _tuner(_task("b", "vu"), pool, program_cold=8, program_cold_until=12,
               program_pool_only=True)
    fits = []
    fit = b.problem.prog_model.fit
    b.problem.prog_model.fit = lambda X, y: (fits.append(len(y)), fit(X, y))
    b.tune(8, FunctionMeasurer(_cost))               # cold throughout (8 < 12 own rows)
    b.problem.refit()
    assert b.problem.model.fitted and b.problem.cold() and b.problem.pool_only()
    assert fits and set(fits) == {n_pool}, fits      # own rows never entered the fit
    fits.clear()
    b.problem.observe((0, 0), 5.0)                   # a new own row while cold: no refit
    b.problem.refit()
    assert fits == []
    b.tune(16, FunctionMeasurer(_cost))              # >= 12 own rows: warm
    b.problem.refit()
    assert not b.problem.cold() and fits[-1] == n_pool + b.problem.n_measured(), fits
    # default: own rows in the cold fit too
    d = _tuner(_task("b", "vu"), pool, program_cold=8, program_cold_until=12)
    d.tune(8, FunctionMeasurer(_cost))
    d.problem.refit()
    assert d.problem.cold() and not d.problem.pool_only()
    assert d.problem._prog_fit_key == (8, n_pool)
    # a pool too small to rank: own rows as before
    small = SharedPool()
    small.put("a", np.ones((3, 2), np.float32), np.full(3, 0.5))
    e = _tuner(_task("b", "vu"), small, program_cold=8, program_cold_until=12,
               program_pool_only=True)
    e.tune(8, FunctionMeasurer(_cost))
    e.problem.refit()
    assert not e.problem.pool_only() and e.problem._prog_fit_key == (8, 3)


def test_cold_task_ranks_a_wider_sample_with_program_cold():
    pool = _pool_after_task_a()
    means = {}
    for cold in (0, 16):
        b = _tuner(_task("b", "vu"), pool, program_cold=cold)
        first = b.ask(8)
        means[cold] = np.mean([_cost(None, c) for c in first])
        if cold:
            # 16 x 8 candidates went through the program model (a 12 x 12 space: nearly all)
            assert b.problem.program.calls >= 100
    assert means[16] < means[0], means


def test_program_cold_until_keeps_a_task_cold_while_it_has_few_rows():
    pool = _pool_after_task_a()
    sizes = {}
    for until in (0, 32):
        b = _tuner(_task("b", "vu"), pool, program_cold=8, program_cold_until=until)
        b.tune(8, FunctionMeasurer(_cost))            # own model fitted: warm by default
        b.problem.refit()
        assert b.problem.model.fitted
        sizes[until] = len(b.problem.candidates(np.zeros((0, 2), np.int64), None, 4))
    # warm: the round's 4 candidates; still cold (8 < 32 rows): 8 x 4 ranked by the pool
    assert sizes == {0: 4, 32: 32}, sizes


def test_program_evolve_climbs_the_pooled_model_on_a_cold_task():
    """A cold task ranking only 1 x n random candidates, with and without mutating the
    pooled model's best of them (program_evolve generations): the mutants climb towards
    the optimum the pool knows, so the first batch is better (optimum 1, random ~50)."""
    pool = _pool_after_task_a()
    mean_cost, calls = {}, {}
    for gens in (0, 3):
        costs = []
        for seed in range(5):
            task = _task("b", "vu")
            t = create("dcoc", task, seed=seed, config=DCOCConfig(
                program_rerank=4, program_cold=1, program_evolve=gens))
            t.problem.set_program(Program(task.space), pool, key=task.name)
            costs += [_cost(None, c) for c in t.ask(4)]
            calls[gens] = t.problem.program.calls
        mean_cost[gens] = float(np.mean(costs))
    assert calls[3] > calls[0]                 # the mutants were featurized and scored
    assert mean_cost[3] < 0.5 * mean_cost[0], mean_cost


def test_program_local_adds_mutants_of_the_measured_best_to_a_cold_task():
    """program_local: a cold task's candidates include one- or two-knob mutants of its best
    measured points (EvolutionarySearch's seeding with the measured best), kept through the
    random cut; without it the candidates are walks and random points only."""
    pool = _pool_after_task_a()
    # four knobs (two that the cost ignores), so "two knobs away" is a small neighbourhood
    space = Space([Knob(k, VALUES, "tile") for k in "xypq"])
    near = {}
    for local in (0, 4):
        b = _tuner(TuningTask("c", space, "test", "test:c", flop=1.0), pool, program_cold=4,
                   program_cold_until=32, program_local=local)
        b.tune(4, FunctionMeasurer(_cost))
        b.problem.refit()
        cands = b.problem.candidates(np.zeros((0, 4), np.int64), None, 2)
        assert len(cands) == 4 * 2 and len(set(cands)) == len(cands)
        assert all(b.problem.fresh(c) for c in cands)
        parents = b.problem.points
        dist = [min(sum(u != v for u, v in zip(c, p)) for p in parents) for c in cands]
        near[local] = sum(d <= 2 for d in dist)
    assert near[4] == 8 and near[0] < 8, near  # 4 x 2 mutants, one or two knobs from a parent


def test_program_local_share_measures_the_best_mutants():
    """program_local_share: that share of a cold task's batch is local mutants, the program
    model's best of them by mean; without it the selection may pass them all over."""
    pool = _pool_after_task_a()
    space = Space([Knob(k, VALUES, "tile") for k in "xypq"])
    b = _tuner(TuningTask("c", space, "test", "test:c", flop=1.0), pool, program_cold=8,
               program_cold_until=32, program_local=2, program_local_share=0.5)
    b.tune(4, FunctionMeasurer(_cost))
    p = b.problem
    p.refit()
    cands = p.candidates(np.zeros((0, 4), np.int64), None, 4)
    local = [c for c in cands if c in p._local]
    assert len(local) == 2 * 4 and len(cands) > len(local)
    mu, sd = p.predict(cands)
    mu = np.asarray(mu, float)
    # make the model rank every mutant below every other candidate: the share still holds
    low = np.array([-1.0 if c in p._local else 1.0 for c in cands]) + 1e-3 * mu
    out = p.select(cands, low, np.zeros(len(cands)), 4, lambda m, s, n: np.argsort(-m)[:n])
    got = [c for c in out if c in p._local]
    assert len(out) == 4 and len(got) == 2, (out, got)
    best2 = sorted(local, key=lambda c: -low[cands.index(c)])[:2]
    assert set(got) == set(best2)
    # share 0: the same ranking takes no mutant
    b.cfg.program_local_share = 0.0
    out0 = p.select(cands, low, np.zeros(len(cands)), 4, lambda m, s, n: np.argsort(-m)[:n])
    assert not [c for c in out0 if c in p._local]


def test_program_local_share_needs_mutants_and_a_share():
    import pytest

    from dcoc.errors import DcocError

    with pytest.raises(DcocError, match="needs program_local"):
        DCOCConfig(program_local_share=0.5)
    with pytest.raises(DcocError, match="program_local_share"):
        DCOCConfig(program_local=4, program_local_share=1.5)


def test_program_pool_only_must_be_a_bool():
    import pytest

    from dcoc.errors import DcocError

    assert DCOCConfig(program_pool_only=1).program_pool_only is True
    with pytest.raises(DcocError, match="program_pool_only must be true or false"):
        DCOCConfig(program_pool_only="yes")


def test_learn_is_a_bool_or_unset():
    import pytest

    from dcoc.errors import DcocError

    assert DCOCConfig().learn is None and DCOCConfig(learn=0).learn is False
    task = _task("a", "up")
    assert create("dcoc", task, seed=0).core.learn is True            # the problem's default
    assert create("dcoc-frozen", task, seed=0).core.learn is False
    assert create("dcoc", task, seed=0, config=DCOCConfig(learn=False)).core.learn is False
    with pytest.raises(DcocError, match="learn must be true or false, or unset"):
        DCOCConfig(learn="no")


def test_program_local_must_be_a_whole_number():
    import pytest

    from dcoc.errors import DcocError

    with pytest.raises(DcocError, match="program_local"):
        DCOCConfig(program_local=-1)


class StoreProgram(Program):
    """Program with per-store rows too: one row per "store" (x's, y's), as MSProgramFeatures."""

    def with_stores(self, points):
        F = self(points)
        return F, [np.array([[x, 0, 1], [0, y, 2]], np.float32) for x, y in F]


def test_pool_keeps_per_store_rows_as_lists():
    pool = SharedPool(max_rows=4)
    pool.put("a", [np.ones((2, 3)), np.zeros((0, 3)), np.full((1, 3), np.nan), np.ones((3, 3))],
             [0.5, 0.1, 0.2, 1.0])
    X, y = pool.others("b")
    assert isinstance(X, list) and [len(x) for x in X] == [2, 3] and list(y) == [0.5, 1.0]


def test_per_store_program_model_ranks_a_cold_task_from_the_pool():
    """program_model = "per-store": the pooled model is the pack-sum model on per-store rows
    (PackSumModel); a cold task's first batch, ranked by it, beats a random warm-up."""
    from dcoc.method.costmodel import PackSumModel

    pool = SharedPool()
    a = _task("a", "ab")
    ta = create("dcoc", a, seed=0, config=DCOCConfig(program_rerank=4, program_model="per-store"))
    ta.problem.set_program(StoreProgram(a.space), pool, key="a")
    ta.tune(48, FunctionMeasurer(_cost))
    X, y = pool.others("b")
    assert isinstance(X, list) and len(y) == 48 and X[0].shape == (2, 3)

    costs = []
    for seed in range(3):
        b = _task("b", "vu")
        t = create("dcoc", b, seed=seed, config=DCOCConfig(
            program_rerank=4, program_cold=16, program_model="per-store"))
        t.problem.set_program(StoreProgram(b.space), pool, key="b")
        costs += [_cost(None, c) for c in t.ask(8)]
        assert isinstance(t.problem.prog_model, PackSumModel) and t.problem.prog_model.fitted
    assert np.mean(costs) < 10.0, np.mean(costs)  # a random point costs ~50 on average


def test_unknown_program_model_is_a_one_line_error():
    import pytest

    from dcoc.errors import DcocError

    with pytest.raises(DcocError, match="program_model 'nope'.*sum-max, per-store"):
        DCOCConfig(program_model="nope")


def test_replan_drops_a_stale_warm_up_once_the_pool_can_rank():
    """MetaSchedule asks every task for its first (small) batch before any result: with
    the pool still empty the task plans its whole random warm-up (n_init = 8) and, without
    ``replan``, its next batches are the rest of that plan even after the pool filled up.
    With ``replan`` (True or "warmup") the second batch is planned afresh, by the pooled
    program model; "warmup" then keeps that proposal plan for the third batch, True replans."""
    full = _pool_after_task_a()
    second, third = {}, {}
    for replan in (False, True, "warmup"):
        pool = SharedPool()
        b = _task("b", "vu")
        t = create("dcoc", b, seed=0, config=DCOCConfig(program_rerank=4, program_cold=16,
                                                        replan=replan))
        t.problem.set_program(Program(b.space), pool, key="b")
        first = t.ask(3)                                   # empty pool: random warm-up
        assert t.problem.n_init() == 8 and t.core.rounds == 0
        t.tell(first, FunctionMeasurer(_cost).measure(b, first))
        X, y = full.others("b")
        pool.put("a", X, y)                                # the other task's results arrive
        batch = t.ask(3)
        second[replan] = (t.core.rounds, np.mean([_cost(None, c) for c in batch]))
        t.tell(batch, FunctionMeasurer(_cost).measure(b, batch))
        t.ask(3)
        third[replan] = t.core.rounds
    assert second[False][0] == 0                           # still the stale warm-up plan
    for r in (True, "warmup"):
        assert second[r][0] == 1 and second[r][1] < 0.5 * second[False][1], second  # by the pool
    assert third == {False: 1, True: 2, "warmup": 1}, third  # "warmup" keeps its proposals


def test_unknown_replan_is_a_one_line_error():
    import pytest

    from dcoc.errors import DcocError

    with pytest.raises(DcocError, match="replan 'often'.*false, true, warmup"):
        DCOCConfig(replan="often")
