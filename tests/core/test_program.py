"""Program features and the pool shared across tasks (tvm_plugin.metaschedule.program):
the ranker a MetaSchedule run attaches to its DCOC-family tuners.  No TVM needed."""
from __future__ import annotations

import numpy as np
import pytest

from dcoc.errors import DcocError
from dcoc.method.config import DCOCConfig
from dcoc.search import FunctionMeasurer, Knob, Space, TuningTask
from dcoc.tuners import create
from tvm_plugin.metaschedule.program import ProgramConfig, ProgramRanker, SharedPool

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


def _tuner(task, pool, tuner="surrogate", **program):
    """A tuner of ``task`` with a program ranker on ``pool`` (none when ``pool`` is None)."""
    t = create(tuner, task, seed=0)
    if pool is not None:
        t.attach_ranker(ProgramRanker(t.problem, Program(task.space), pool, task.name,
                                      ProgramConfig(**program)))
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


@pytest.mark.parametrize("tuner", ["surrogate", "dcoc"])
def test_program_features_only_for_the_reranked_candidates(tuner):
    task = _task("a", "ab")
    t = _tuner(task, SharedPool(), tuner, rerank=2, cold=0)
    t.tune(40, FunctionMeasurer(_cost))
    prog = t.problem.ranker.features
    # per round at most 2 x plan_size candidates (and the measured points) are featurized
    assert 0 < prog.calls <= 40 + 2 * t.cfg.plan_size * t.rounds
    assert t.problem.ranker.model.fitted and t.best_cost < 4.0

    off = _tuner(task, None)                  # no ranker: knob features only, the usual warm-up
    off.tune(24, FunctionMeasurer(_cost))
    assert off.problem.ranker is None and off.problem.n_init() == off.cfg.n_init


def test_program_model_refits_only_when_own_or_pooled_rows_change():
    pool = SharedPool()
    t = _tuner(_task("a", "ab"), pool)
    t.tune(24, FunctionMeasurer(_cost))
    t.problem.refit()                                    # fit on the last round's rows
    fits = []
    fit = t.problem.ranker.model.fit
    t.problem.ranker.model.fit = lambda X, y: (fits.append(len(y)), fit(X, y))
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


def test_cold_task_ranks_a_wider_sample_with_program_cold():
    pool = _pool_after_task_a()
    means = {}
    for cold in (0, 16):
        b = _tuner(_task("b", "vu"), pool, cold=cold)
        first = b.ask(8)
        means[cold] = np.mean([_cost(None, c) for c in first])
        if cold:
            # 16 x 8 candidates went through the program model (a 12 x 12 space: nearly all)
            assert b.problem.ranker.features.calls >= 100
    assert means[16] < means[0], means


def test_program_cold_until_keeps_a_task_cold_while_it_has_few_rows():
    pool = _pool_after_task_a()
    sizes = {}
    for until in (0, 32):
        b = _tuner(_task("b", "vu"), pool, cold=8, cold_until=until)
        b.tune(8, FunctionMeasurer(_cost))            # own model fitted: warm by default
        b.problem.refit()
        assert b.problem.model.fitted
        sizes[until] = len(b.problem.candidates(np.zeros((0, 2), np.int64), None, 4))
    # warm: the round's 4 candidates; still cold (8 < 32 rows): 8 x 4 ranked by the pool
    assert sizes == {0: 4, 32: 32}, sizes


def test_the_learn_flag_is_a_bool():
    assert DCOCConfig(learn=0).learn is False
    task = _task("a", "ab")
    assert create("dcoc", task, seed=0).cfg.learn is True
    assert create("dcoc-frozen", task, seed=0).cfg.learn is False
    with pytest.raises(DcocError, match="learn must be true or false"):
        DCOCConfig(learn="no")
