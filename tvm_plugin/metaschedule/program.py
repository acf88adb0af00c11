"""Program features: how the tuners of one MetaSchedule run learn from each other's tasks.

Knob features (:meth:`dcoc.search.space.Space.point_features`) mean something only inside
one task's space: "tile 3 of loop i = 8" says nothing about another conv2d.  *Program
features* describe the scheduled program itself (MetaSchedule's per-store features: loop
extents, vectorisation, cache reuse, arithmetic intensity, ...) and have the same meaning
in every task, which is what lets a model learned on one task help the next (MetaSchedule
shares one XGBoost cost model across the tasks of a model for the same reason).

* :class:`ProgramFeatures` -- what a task provides: ``features(points) -> [n, dim]``
  (NaN rows for points that do not build); :class:`tvm_plugin.metaschedule.features.MSProgramFeatures`
  implements it;
* :class:`SharedPool` -- every task's measurements in program-feature space, as
  ``(features, throughput normalized by the task's best)``;
* :class:`ProgramRanker` -- attached to a DCOC-family tuner
  (:meth:`dcoc.tuners.dcoc_tuner.DCOCTuner.attach_ranker`) by the strategy when the run
  has few trials per task (:class:`ProgramConfig`): a second ensemble on ``[knob |
  program]`` features, fitted on the task's own rows and the other tasks' pooled rows
  (their knob columns missing, which XGBoost handles natively), ranks the candidates.
  A *cold* task (no knob model of its own yet, or few measurements) lets it rank a wide
  random sample, as EvolutionarySearch ranks its population; a warm one lets it re-rank
  the knob ensemble's best.  Once the pool can rank, a task skips its random warm-up.

Nothing here imports TVM.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


class ProgramFeatures(Protocol):
    """Task-independent features of a task's points (see the module docstring)."""

    dim: int

    def __call__(self, points: np.ndarray) -> np.ndarray:
        """``[n, dim]`` float32 features of int points ``[n, n_knobs]`` (NaN: does not build)."""


class SharedPool:
    """Measured rows of several tasks in program-feature space, shared by their tuners.

    ``max_rows``: rows returned by :meth:`others` at most (the most recent per task, in
    equal shares), so an early task's hundreds of rows do not drown a late task's own.
    """

    def __init__(self, max_rows: int = 1024):
        self.max_rows = int(max_rows)
        self._rows: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def put(self, task: str, X, y: np.ndarray) -> None:
        """Replace ``task``'s rows: program features ``X [n, dim]`` and normalized ``y [n]``
        (rows that do not build, non-finite, are dropped)."""
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        X = np.asarray(X, dtype=np.float32)
        ok = np.isfinite(X).all(axis=1) if len(X) else np.zeros(0, bool)
        self._rows[str(task)] = (X[ok], y[ok])

    def tasks(self) -> list[str]:
        return list(self._rows)

    def n_rows(self, exclude: str | None = None) -> int:
        return sum(len(y) for t, (_, y) in self._rows.items() if t != exclude)

    def others(self, task: str) -> tuple[np.ndarray, np.ndarray] | None:
        """Every other task's rows (capped at ``max_rows``), or None when there are none."""
        parts = [(X, y) for t, (X, y) in self._rows.items() if t != str(task) and len(y)]
        if not parts:
            return None
        share = max(1, self.max_rows // len(parts))
        X = np.concatenate([X[-share:] for X, _ in parts])
        y = np.concatenate([y[-share:] for _, y in parts])
        return X, y


@dataclass(frozen=True)
class ProgramConfig:
    """When and how program features rank a MetaSchedule run's candidates."""

    few_trials_below: int = 32  # a run with fewer trials per task than this attaches a ranker
                                # to every DCOC-family tuner (0: never)
    rerank: int = 4             # a warm task: the knob ensemble's best rerank x n candidates are
                                # re-scored on program features
    cold: int = 64              # a cold task: cold x n candidates (topped up with random valid
                                # points) are scored by the program model alone (0: never cold)
    cold_until: int = 32        # a task stays cold while it has fewer own measurements than this
    pool_min: int = 32          # pooled rows of other tasks after which a task skips its warm-up


class ProgramRanker:
    """Ranks one task's candidates with program features and the run's pool (module docstring).

    ``problem``: the task's :class:`dcoc.tuners.dcoc_tuner.TaskProblem` (its measured
    points, throughputs, knob model, space and random generator); ``key``: the task's name
    in ``pool``.
    """

    def __init__(self, problem, features: ProgramFeatures, pool: SharedPool, key: str,
                 cfg: ProgramConfig | None = None):
        from dcoc.method.core import ensemble
        from dcoc.seeding import child_seed

        self.p = problem
        self.features = features
        self.pool = pool
        self.key = str(key)
        self.cfg = cfg or ProgramConfig()
        self.model = ensemble(problem.t.cfg, child_seed(problem.t.seed, "dcoc", "program-model"))
        self._feat: dict = {}
        self._fit_key = None          # (own rows, pooled rows) at the last refit

    def program_features(self, points) -> np.ndarray:
        """Program features of points (cached per point)."""
        pts = [tuple(int(x) for x in p) for p in points]
        todo = [p for p in dict.fromkeys(pts) if p not in self._feat]
        if todo:
            F = self.features(np.array(todo, dtype=np.int64))
            for p, f in zip(todo, np.asarray(F, dtype=np.float32)):
                self._feat[p] = f
        if not pts:
            return np.zeros((0, int(self.features.dim)), np.float32)
        return np.stack([self._feat[p] for p in pts])

    def _joint(self, points) -> np.ndarray:
        pts = np.asarray(points, dtype=np.int64).reshape(-1, len(self.p.dims))
        return np.concatenate([self.p.t.space.point_features(pts), self.program_features(pts)], axis=1)

    def pooled_rows(self) -> int:
        return self.pool.n_rows(exclude=self.key)

    def n_init(self, n_init: int) -> int:
        """No random warm-up once the other tasks' pooled rows can rank."""
        return 0 if self.pooled_rows() >= self.cfg.pool_min else n_init

    def publish(self) -> None:
        """Put the task's measurements (program features, throughput / own best) in the pool."""
        p = self.p
        best = max(p.thr) if p.thr else 0.0
        if best > 0:
            self.pool.put(self.key, self.program_features(p.points), np.array(p.thr) / best)

    def cold(self) -> bool:
        """No knob model of its own yet, or fewer own measurements than ``cold_until``
        (never with ``cold`` = 0)."""
        return self.cfg.cold > 0 and (not self.p.model.fitted or self.p.n_measured() < self.cfg.cold_until)

    def refit(self) -> None:
        """Fit on own rows ([knob | program]) and the other tasks' pooled rows ([missing |
        program]); skipped when neither changed since the last fit."""
        p = self.p
        key = (len(p.points), self.pooled_rows())
        if key == self._fit_key:
            return
        Xs, ys = [], []
        if p.points and p._best > 0:
            Xs.append(self._joint(p.points))
            ys.append(np.array(p.thr) / p._best)
        other = self.pool.others(self.key)
        if other is not None:
            Xp, yp = other
            Xs.append(np.concatenate([np.full((len(Xp), p.knob_dim), np.nan, np.float32), Xp], axis=1))
            ys.append(yp)
        if not ys or max(float(np.max(y)) for y in ys) <= 0:
            return
        import time

        t0 = time.perf_counter()
        self.model.fit(np.concatenate(Xs), np.concatenate(ys))
        self._fit_key = key
        p.fit_seconds = getattr(p, "fit_seconds", 0.0) + time.perf_counter() - t0

    def candidates(self, cands: list, n: int) -> list:
        """A cold task: ``cold x n`` candidates (random top-up, a random cut); a warm one: the
        knob ensemble's best ``rerank x n`` (topped up to ``n``)."""
        p = self.p
        cold = self.cold() and self.model.fitted
        keep = (self.cfg.cold if cold else self.cfg.rerank) * max(int(n), 1)
        want = keep if cold else n
        if len(cands) < want:
            cands += p.random_valid(want - len(cands), exclude=set(cands))
        if len(cands) > keep:  # only the best go on to program features
            if p.model.fitted and not cold:  # a cold task's few rows do not steer the cut
                mu = p.model.predict(p.t.space.point_features(np.array(cands)))
                order = np.argsort(-mu, kind="stable")[:keep]
            else:
                order = np.sort(p.t.rng.choice(len(cands), size=keep, replace=False))
            cands = [cands[i] for i in order]
        return cands

    def predict(self, items):
        """(mean, std) by the program model (a point that does not build: -1), or None
        while it is not fitted."""
        if not self.model.fitted:
            return None
        X = self._joint(items)
        mu, sd = self.model.predict_with_uncertainty(X)
        bad = ~np.isfinite(X[:, -int(self.features.dim):]).all(axis=1)
        mu[bad], sd[bad] = -1.0, 0.0
        return mu, sd


__all__ = ["ProgramConfig", "ProgramFeatures", "ProgramRanker", "SharedPool"]
