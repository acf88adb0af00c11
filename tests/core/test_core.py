"""The DCOC core (dcoc.method.core): one round engine, ablation flags, and the registered variants."""
from __future__ import annotations

import numpy as np
import pytest

from dcoc.method.core import DCOCConfig, DCOCCore, Problem
from dcoc.errors import DcocError
from dcoc.search import FunctionMeasurer, Knob, Space, TuningTask
from dcoc.seeding import child_seed
from dcoc.tuners import DCOC_FAMILY, create, names


class Bowl(Problem):
    """A 2-knob grid (8 x 8) with a bowl-shaped throughput peaking at (5, 2); the corner
    (0, 0) is invalid.  Stands in for a task or a co-design problem."""

    def __init__(self, measured=()):
        self.agent_space = Space([Knob("tile_a", tuple(range(8)), "tile"),
                                  Knob("thread_b", tuple(range(8)), "thread")])
        self.context_dim = 2
        self.cluster_after = 4
        self.measured = dict(measured)   # point -> throughput
        self.refits = 0

    def thr(self, p):
        return 1.0 / (1.0 + (p[0] - 5) ** 2 + (p[1] - 2) ** 2)

    def refit(self):
        self.refits += 1

    def n_measured(self):
        return len(self.measured)

    def cluster_data(self):
        pts = list(self.measured)
        return np.array(pts), np.array([self.measured[p] for p in pts])

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
    cfg = DCOCConfig(**flags)
    cfg.mappo.n_walkers, cfg.mappo.walk_length = 8, 6
    return DCOCCore(problem, cfg, np.random.default_rng(0), agent_seed=lambda n: child_seed(0, "t", n))


def test_selection_defaults_to_the_problems_and_an_explicit_one_wins():
    """select=None takes Problem.default_select: confidence sampling per task and in
    MetaSchedule, top-k in whole-model co-design (session 14, docs/method.md §12)."""
    from dcoc.codesign.joint import CoDesignProblem

    assert DCOCConfig().select is None
    assert Problem.default_select == "confidence" and CoDesignProblem.default_select == "topk"
    p = Bowl()
    assert _core(p).select == "confidence" and _core(p).kappa > 0

    class TopKBowl(Bowl):
        default_select = "topk"

    q = TopKBowl()
    core = _core(q, proposer="surrogate")
    assert core.select == "topk" and core.kappa == 0.0
    best3 = sorted((q.thr((a, b)) for a in range(8) for b in range(8) if (a, b) != (0, 0)), reverse=True)[:3]
    assert sorted((q.thr(x) for x in core.propose(3)), reverse=True) == best3   # top-k: the best means
    assert _core(q, select="confidence").select == "confidence"


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


def test_default_proposer_comes_from_the_problem_unless_the_config_names_one():
    """``DCOCConfig.proposer=None`` takes ``Problem.default_proposer`` (agents per task,
    surrogate in co-design); a proposer named in the config wins."""
    assert _core(Bowl()).proposer == "agents"
    p = Bowl()
    p.default_proposer = "surrogate"
    core = _core(p)
    assert core.proposer == "surrogate"
    core.propose(3)
    assert core.agents is None
    assert _core(p, proposer="agents").proposer == "agents"
    assert _core(p, proposer="both").proposer == "both"


def test_surrogate_annealing_when_the_space_is_too_large():
    p = Bowl()
    core = _core(p, proposer="surrogate", exhaustive_limit=10, sa_steps=20)
    pts, walkers = core._surrogate_search(*p.starts(8))
    assert len(pts) > 8 and all(p.valid(tuple(x), 0) for x in pts)
    assert len(core.propose(4)) == 4


def test_both_proposers_pool_the_agents_walks_and_the_surrogate_search():
    """proposer="both": the agents walk (and learn) and the surrogate's search joins their
    candidates; the selection sees the union of what either proposer alone would give."""
    p_agents, p_sur, p_both = Bowl(), Bowl(), Bowl()
    agents = _core(p_agents)
    sur = _core(p_sur, proposer="surrogate", exhaustive_limit=10, sa_steps=20)
    both = _core(p_both, proposer="both", exhaustive_limit=10, sa_steps=20)
    out = both.propose(4)
    assert len(out) == 4 and both.agents is not None and both.agents.updates == 1
    agents.propose(4)
    sur.propose(4)
    log = both.log[-1]
    assert log["from_agents"] > 0 and log["from_surrogate"] > 0
    assert log["candidates"] > max(agents.log[-1]["candidates"], sur.log[-1]["candidates"])


def test_clustered_agents_keep_the_fixed_split_below_the_clustering_gate():
    """Below dcoc.method.agent_groups.MIN_POINTS a partition is noise (docs/method.md §2):
    'clustered' keeps the fixed split, checks again on more data, and never adopts it."""
    from dcoc.method.agent_groups import make_groups

    p = Bowl()
    core = _core(p, agents="clustered")
    core.propose(2)
    assert not core._clustered
    p.measured = {(a, b): p.thr((a, b)) for a in range(1, 4) for b in range(1, 4)}
    core.propose(2)
    assert not core._clustered
    assert [list(g) for g in core.groups] == [list(g) for g in make_groups(p.agent_space, "dcoc")[0]]
    assert core.cluster_checks and not any(c["adopted"] for c in core.cluster_checks)


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


@pytest.mark.parametrize("name", ["dcoc-agents", "dcoc-frozen", "dcoc-noagents", "dcoc-topk", "surrogate",
                                  "sweep"])
def test_registered_variants_tune_by_name(name):
    assert name in names()
    t = create(name, _task(), seed=0)
    t.tune(40, FunctionMeasurer(_cost))
    assert t.trials == 40 and len(t.visited) == 40
    assert t.best_cost < 4.0   # every variant finds the basin of the optimum (cost 1) in 40 of 432
    if name in DCOC_FAMILY:
        flag = {"dcoc-agents": ("proposer", "agents"), "dcoc-frozen": ("learn", False), "dcoc-noagents": ("proposer", "surrogate"),
                "dcoc-topk": ("select", "topk"), "surrogate": ("select", "topk")}[name]
        assert getattr(t.cfg, flag[0]) == flag[1]
    if name == "dcoc-frozen":
        assert t.agents is not None and t.agents.updates == 0


def test_frozen_variant_differs_from_dcoc_only_by_the_updates():
    full, frozen = create("dcoc", _task(), seed=0), create("dcoc-frozen", _task(), seed=0)
    for t in (full, frozen):
        t.tune(32, FunctionMeasurer(_cost))
    assert full.agents.updates > 0 and frozen.agents.updates == 0
    assert full.core.proposer == frozen.core.proposer == "agents"


def test_dcoc_tuner_config_is_not_mutated():
    cfg = DCOCConfig()
    create("dcoc", _task(), seed=0, agents="single", config=cfg)
    assert cfg.agents == "dcoc"


class Noise(Bowl):
    """Four knobs and throughput that is pure noise: no knob structure to find."""

    def __init__(self, n):
        super().__init__()
        self.agent_space = Space([Knob(f"tile_{c}", tuple(range(8)), "tile") for c in "abc"]
                                 + [Knob("thread_d", tuple(range(8)), "thread")])
        rng = np.random.default_rng(1)
        self.measured = {tuple(int(x) for x in rng.integers(0, 8, 4)): float(rng.random()) for _ in range(n)}

    def starts(self, W):
        rng = np.random.default_rng(len(self.measured))
        return np.array([8] * 4), rng.integers(0, 8, (W, 4)), np.zeros(2, np.float32)

    def valid(self, p, w):
        return True

    def candidates(self, points, walkers, n):
        return [tuple(int(x) for x in p) for p in points][:n]


def test_clustering_on_noise_is_not_adopted_and_retried_on_more_data():
    p = Noise(12)
    core = _core(p, agents="clustered")
    core.propose(2)
    assert core.cluster_checks and not core.cluster_checks[0]["adopted"]
    assert not core._clustered and core._cluster_at == 2 * p.cluster_after
    groups = core.groups
    core.propose(2)                    # not enough new data: no new check
    assert len(core.cluster_checks) == 1 and core.groups == groups
