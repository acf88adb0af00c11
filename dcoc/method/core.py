"""The DCOC round: one engine that every entry point drives.

``dcoc.tune_task`` and the MetaSchedule strategy (through the per-task tuner
:class:`dcoc.tuners.dcoc_tuner.DCOCTuner`) and whole-model co-design
(:class:`dcoc.codesign.driver.DCOCCoDesign`) all call :meth:`DCOCCore.propose`; they differ
only in the :class:`Problem` adapter that says what a point is, how it is scored and how a
round's measurements are picked.

One round (docs/method.md):

1. ``problem.refit()`` -- refit the XGBoost ensembles (:func:`ensemble`) on every
   measurement so far;
2. candidates are proposed from ``problem.starts(W)``: either the agents
   (:class:`dcoc.method.mappo.MAPPO`, the paper's hardware / mapping / scheduling split)
   walk the space rewarded by ``problem.score`` (normalized throughput, measured where
   known) and learn from the walks (PPO, CTDE), or -- ``proposer="surrogate"`` -- the
   ensemble scores every valid point of a small space, or anneals on a large one;
3. ``problem.candidates`` turns the visited points into unmeasured valid candidates;
   ``problem.predict`` gives their (mean, std) normalized throughput;
4. ``problem.select`` picks the measurements with :meth:`DCOCCore.pick`: confidence
   sampling (LCB + soft threshold + exploration quota) or the top-k predicted means.

Variants are fields of the one frozen :class:`~dcoc.method.config.DCOCConfig`, fixed by
the registered tuner name (:mod:`dcoc.tuners`), never copies of the algorithm.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from dcoc.method.config import CoDesignConfig, DCOCConfig
from dcoc.method.sampling import confidence_select


def ensemble(cfg: DCOCConfig, seed: int):
    """The cost model of DCOC: a bootstrap ensemble of XGBoost regressors."""
    from dcoc.method.costmodel import XGBCostModel

    return XGBCostModel(loss="reg", n_models=cfg.n_models, seed=seed,
                        num_boost_round=cfg.boost_rounds, early_stopping_rounds=None)


class Problem:
    """What :class:`DCOCCore` needs to know about a search problem (the space adapter).

    A *point* is an int vector of choice positions (one per knob of ``agent_space``); a
    walker may carry its own ``dims`` and context (co-design: one layer per walker).
    Items returned by :meth:`candidates` are opaque to the core.
    """

    #: a :class:`dcoc.search.space.Space` naming the knobs (and their groups) of a point
    agent_space = None
    context_dim: int = 0

    def refit(self) -> None:
        """Fit the cost model(s) on every measurement so far (no-op when nothing is new)."""

    def n_measured(self) -> int:
        raise NotImplementedError

    def starts(self, n_walkers: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(dims [K] or [W, K], start points [W, K], context [C] or [W, C])."""
        raise NotImplementedError

    def score(self, points: np.ndarray, walkers: np.ndarray) -> np.ndarray:
        """Normalized throughput of points (1.0 = best measured), measured where known."""
        raise NotImplementedError

    def valid(self, point: tuple, walker: int) -> bool:
        raise NotImplementedError

    def all_points(self, limit: int):
        """Every valid point as (points [n, K], walkers [n]), or None if more than ``limit``."""
        return None

    def candidates(self, points: np.ndarray, walkers: np.ndarray, n: int) -> list:
        """Unmeasured valid items among the visited points (deduplicated)."""
        raise NotImplementedError

    def predict(self, items: list) -> tuple[np.ndarray, np.ndarray]:
        """(mean, std) normalized throughput of the items."""
        raise NotImplementedError

    def select(self, items: list, mu, sd, n: int, pick: Callable) -> list:
        """The items to measure; ``pick(mu, sd, n) -> indices`` is the core's rule."""
        return [items[i] for i in pick(mu, sd, n)]


class DCOCCore:
    """Runs DCOC's rounds on a :class:`Problem` (ask = :meth:`propose`).

    Parameters
    ----------
    problem: the space adapter.
    cfg: the one :class:`~dcoc.method.config.DCOCConfig`.
    rng: the generator of the core's random choices (shared with the problem's starts).
    agent_seed: ``n_groups -> seed`` of the agents (callers keep their seed paths).
    """

    def __init__(self, problem: Problem, cfg: DCOCConfig, rng: np.random.Generator,
                 agent_seed: Callable[[int], int]):
        self.p = problem
        self.cfg = cfg
        self.rng = rng
        self.agent_seed = agent_seed
        self.agents = None
        self.groups = None
        self.agent_names = None
        self.rounds = 0
        self.log: list[dict] = []

    @property
    def uses_agents(self) -> bool:
        return self.cfg.uses_agents

    def ensure_agents(self) -> None:
        """Build the agents on first use (torch is imported only here)."""
        if self.agents is not None or not self.uses_agents:
            return
        from dcoc.method.mappo import MAPPO, agent_groups

        self.groups, self.agent_names = agent_groups(self.p.agent_space)
        self.agents = MAPPO(self.groups, len(self.p.agent_space.knobs), self.p.context_dim,
                            self.cfg.mappo, seed=self.agent_seed(len(self.groups)),
                            names=self.agent_names)

    def pick(self, mu, sd, n: int) -> np.ndarray:
        """Indices of the ``n`` candidates to measure (confidence sampling, or top-k by mean)."""
        if self.cfg.select == "topk":
            return np.argsort(-np.asarray(mu, dtype=np.float64), kind="stable")[: max(int(n), 0)]
        return confidence_select(mu, sd, n, self.rng, self.cfg.confidence)

    # ------------------------------------------------------------------ proposals
    def _surrogate_search(self, dims, starts, ctx) -> tuple[np.ndarray, np.ndarray]:
        """Points the surrogate looks at: all valid points, or simulated annealing."""
        allp = self.p.all_points(self.cfg.exhaustive_limit)
        if allp is not None:
            return allp
        dims = np.asarray(dims, dtype=np.int64)
        pos = np.array(starts, dtype=np.int64)
        W, K = pos.shape
        dims = np.broadcast_to(dims, (W, K))
        walkers = np.arange(W)
        cur = np.asarray(self.p.score(pos, walkers), dtype=np.float64)
        seen: dict = {(int(w), tuple(p)): None for w, p in zip(walkers, pos)}
        steps = max(1, self.cfg.sa_steps)
        for t in range(steps):
            temp = 0.1 * (1.0 - t / steps) + 1e-3     # normalized-throughput units
            new = pos.copy()
            d = self.rng.integers(K, size=W)
            step = self.rng.choice((-2, -1, 1, 2), size=W)
            rows = np.arange(W)
            new[rows, d] = np.clip(pos[rows, d] + step, 0, dims[rows, d] - 1)
            ok = np.array([self.p.valid(tuple(p), w) for w, p in enumerate(new)])
            new[~ok] = pos[~ok]
            sc = np.asarray(self.p.score(new, walkers), dtype=np.float64)
            accept = ok & (self.rng.random(W) < np.exp(np.minimum((sc - cur) / temp, 0.0)))
            pos[accept], cur[accept] = new[accept], sc[accept]
            for w in np.flatnonzero(ok):
                seen[(int(w), tuple(new[w]))] = None
        keys = list(seen)
        return (np.array([k[1] for k in keys], dtype=np.int64).reshape(-1, K),
                np.array([k[0] for k in keys], dtype=np.int64))

    def propose(self, n: int) -> list:
        """One round: the items to measure next (empty when nothing new was found)."""
        p = self.p
        p.refit()
        self.ensure_agents()
        dims, starts, ctx = p.starts(self.cfg.mappo.n_walkers)
        metrics: dict = {}
        if self.uses_agents:
            walk = self.agents.rollout(dims, starts, ctx, p.score, p.valid)
            if self.cfg.learn:
                metrics = self.agents.update()
            else:
                self.agents.buffer.clear()  # frozen: the walks teach nothing
            points, walkers = walk.points, walk.walkers
            metrics.update(invalid_moves=walk.invalid_moves, mean_reward=walk.mean_reward)
        else:
            points, walkers = self._surrogate_search(dims, starts, ctx)
        K = np.shape(dims)[-1]
        points = np.asarray(points, dtype=np.int64).reshape(-1, K)
        cands = p.candidates(points, np.asarray(walkers, dtype=np.int64), n)
        if not cands:
            return []
        mu, sd = p.predict(cands)
        out = p.select(cands, mu, sd, n, self.pick)
        self.rounds += 1
        self.log.append({"round": self.rounds, "candidates": len(cands),
                         "pred_best": float(np.max(mu)) if len(mu) else 0.0, **metrics})
        return out


__all__ = ["CoDesignConfig", "DCOCConfig", "DCOCCore", "Problem", "ensemble"]
