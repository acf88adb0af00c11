"""The DCOC core (dcoc.method.core): one round engine, ablation flags, and the registered variants."""
from __future__ import annotations

import numpy as np
import pytest

from dcoc.errors import DcocError
from dcoc.method.config import with_fields
from dcoc.method.core import DCOCConfig, DCOCCore, Problem
from dcoc.search import FunctionMeasurer, Knob, Space, TuningTask
from dcoc.seeding import child_seed
from dcoc.tuners import create, names


class Bowl(Problem):
    """A 2-knob grid (8 x 8) with a bowl-shaped throughput peaking at (5, 2); the corner
    (0, 0) is invalid.  Stands in for a task or a co-design problem."""

    def __init__(self, measured=()):
        self.agent_space = Space([Knob("tile_a", tuple(range(8)), "tile"),
                                  Knob("thread_b", tuple(range(8)), "thread")])
        self.context_dim = 2
        self.measured = dict(measured)   # point -> throughput
        self.refits = 0

    def thr(self, p):
        return 1.0 / (1.0 + (p[0] - 5) ** 2 + (p[1] - 2) ** 2)

    def refit(self):
        self.refits += 1

    def n_measured(self):
        return len(self.measured)

    def starts(self, W):
        rng = np.random.default_rng(len(self.measured))
        pts = []
        while len(pts) < W:
            p = tuple(int(x) for x in rng.integers(0, 8, 2))
            if self.valid(p, 0):
                pts.append(p)
        return np.array([8, 8]), np.array(pts), np.zeros(2, np.float32)

    def score(self, points, walkers):
        return np.array([self.thr(tuple(p)) for p in points])

    def valid(self, p, w):
        return tuple(int(x) for x in p) != (0, 0)

    def all_points(self, limit):
        pts = [(a, b) for a in range(8) for b in range(8) if (a, b) != (0, 0)]
        return (np.array(pts), np.zeros(len(pts), np.int64)) if len(pts) <= limit else None

    def candidates(self, points, walkers, n):
        return list(dict.fromkeys(tuple(int(x) for x in p) for p in points
                                  if tuple(int(x) for x in p) not in self.measured and self.valid(p, 0)))

    def predict(self, items):
        mu = np.array([self.thr(p) for p in items])
        return mu, np.full(len(items), 0.05)


def _core(problem, **flags):
    cfg = with_fields(DCOCConfig(), {"n_walkers": 8, "walk_length": 6, **flags})
    return DCOCCore(problem, cfg, np.random.default_rng(0), agent_seed=lambda n: child_seed(0, "t", n))


def test_propose_returns_unmeasured_valid_items():
    p = Bowl(measured={(5, 2): 1.0})
    core = _core(p)
    out = core.propose(5)
    assert 0 < len(out) <= 5
    assert all(x not in p.measured and x != (0, 0) for x in out)
    assert len(set(out)) == len(out)
    assert p.refits == 1 and core.rounds == 1 and core.log[-1]["candidates"] >= len(out)


def test_learning_updates_the_agents_and_frozen_does_not():
    learn, frozen = _core(Bowl()), _core(Bowl(), learn=False)
    for _ in range(2):
        learn.propose(4)
        frozen.propose(4)
    assert learn.agents.updates == 2
    assert frozen.agents.updates == 0 and frozen.agents.buffer == []


def test_topk_takes_the_best_predicted_means():
    p = Bowl()
    core = _core(p, select="topk", proposer="surrogate")
    out = core.propose(3)
    # surrogate proposer scores every valid point; top-k by mean: the peak and two neighbours
    assert out[0] == (5, 2)
    assert sorted(p.thr(x) for x in out) == sorted(sorted((p.thr((a, b)) for a in range(8) for b in range(8)
                                                            if (a, b) != (0, 0)), reverse=True)[:3])
    assert core.agents is None  # no agents without the agents proposer


def test_surrogate_annealing_when_the_space_is_too_large():
    p = Bowl()
    core = _core(p, proposer="surrogate", exhaustive_limit=10, sa_steps=20)
    pts, walkers = core._surrogate_search(*p.starts(8))
    assert len(pts) > 8 and all(p.valid(tuple(x), 0) for x in pts)
    assert len(core.propose(4)) == 4


def test_bad_flags_are_one_line_errors():
    with pytest.raises(DcocError, match="proposer"):
        DCOCConfig(proposer="magic")
    with pytest.raises(DcocError, match="selection"):
        DCOCConfig(select="best")


# ------------------------------------------------------------------ registered tuners
def _task():
    sp = Space([Knob("x", tuple(range(12)), "tile"), Knob("y", tuple(range(12)), "tile"),
                Knob("z", (1, 2, 4), "thread")], [lambda c: "odd" if (c["x"] + c["y"]) % 7 == 6 else None])
    return TuningTask("bowl", sp, "test", "test:bowl", flop=1.0)


def _cost(task, cfg):
    return 1.0 + (cfg["x"] - 9) ** 2 + (cfg["y"] - 3) ** 2 + abs(cfg["z"] - 2)


@pytest.mark.parametrize("name", ["surrogate", "dcoc", "dcoc-frozen", "surrogate:select=confidence",
                                  "dcoc:select=topk", "sweep"])
def test_registered_variants_tune_by_name(name):
    assert name.partition(":")[0] in names()
    t = create(name, _task(), seed=0)
    t.tune(40, FunctionMeasurer(_cost))
    assert t.trials == 40 and len(t.visited) == 40
    assert t.best_cost < 4.0   # every variant finds the basin of the optimum (cost 1) in 40 of 432
    expect = {"surrogate": ("surrogate", "topk", True), "dcoc": ("agents", "confidence", True),
              "dcoc-frozen": ("agents", "confidence", False),
              "surrogate:select=confidence": ("surrogate", "confidence", True),
              "dcoc:select=topk": ("agents", "topk", True)}.get(name)
    if expect is not None:
        assert (t.cfg.proposer, t.cfg.select, t.cfg.learn) == expect
        assert (t.agents is not None) == (expect[0] == "agents")
    if name == "dcoc-frozen":
        assert t.agents.updates == 0


def test_a_name_always_means_its_algorithm():
    """A config may vary a DCOC-family tuner's selection, never what defines its name."""
    with pytest.raises(DcocError, match="tuner 'dcoc' runs proposer='agents'"):
        create("dcoc", _task(), seed=0, config=DCOCConfig(proposer="surrogate"))
    with pytest.raises(DcocError, match="tuner 'dcoc-frozen' runs learn=False"):
        create("dcoc-frozen:learn=true", _task(), seed=0)
    with pytest.raises(DcocError, match="unknown DCOC setting 'agents'"):
        create("dcoc:agents=single", _task(), seed=0)
    with pytest.raises(DcocError, match="unknown tuner 'dcoc-agents'"):
        create("dcoc-agents", _task(), seed=0)


def test_configs_are_frozen():
    import dataclasses

    cfg = DCOCConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.select = "topk"
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.codesign.round_size = 4


def test_frozen_variant_differs_from_dcoc_only_by_the_updates():
    full, frozen = create("dcoc", _task(), seed=0), create("dcoc-frozen", _task(), seed=0)
    for t in (full, frozen):
        t.tune(32, FunctionMeasurer(_cost))
    assert full.agents.updates > 0 and frozen.agents.updates == 0
    assert full.cfg.proposer == frozen.cfg.proposer == "agents"

