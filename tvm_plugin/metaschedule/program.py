"""Program features and the pool that shares them across the tasks of a model.

Knob features (:meth:`dcoc.search.space.Space.point_features`) mean something only inside
one task's space: "tile 3 of loop i = 8" says nothing about another conv2d.  *Program
features* describe the scheduled program itself (MetaSchedule's per-store features: loop
extents, vectorisation, cache reuse, arithmetic intensity, ...) and have the same meaning
in every task, which is what lets a model learned on one task help the next (MetaSchedule
shares one XGBoost cost model across the tasks of a model for the same reason).

This module is the TVM-free half of that contract:

* :class:`ProgramFeatures` -- what a task provides: ``features(points) -> [n, dim]``
  (a fixed ``dim`` for every task; NaN rows for points that do not build);
  ``tvm_plugin.metaschedule.features.MSProgramFeatures`` implements it for MetaSchedule tasks;
* :class:`SharedPool` -- the measurements of every task of a run in program-feature
  space, as ``(features, throughput normalized by the task's best)``; each task's tuner
  :meth:`SharedPool.put` s its own rows and trains on :meth:`SharedPool.others`.

How the DCOC tuner uses both when ``DCOCConfig.program_rerank > 0`` (opt-in: no
significant gain on whole models yet; :class:`dcoc.tuners.dcoc_tuner.TaskProblem`,
docs/method.md §13): the agents walk on the fast knob-feature ensemble, the best ``program_rerank x n``
candidates of a round are re-scored by a second ensemble on ``[knob | program]`` features
fitted on the task's own measurements plus the other tasks' pooled rows (their knob
columns missing, which XGBoost handles natively), and confidence sampling picks from those.
"""
from __future__ import annotations

from typing import Protocol

import numpy as np


class ProgramFeatures(Protocol):
    """Task-independent features of a task's points (see the module docstring)."""

    dim: int

    def __call__(self, points: np.ndarray) -> np.ndarray:
        """``[n, dim]`` float32 features of int points ``[n, n_knobs]`` (NaN: does not build)."""

    # optional, for DCOCConfig.program_model = "per-store":
    # with_stores(points) -> (features [n, dim], [rows_i x f] arrays, rows_i = 0: does not build)


class SharedPool:
    """Measured rows of several tasks in program-feature space, shared by their tuners.

    ``max_rows``: rows returned by :meth:`others` at most (the most recent per task, in
    equal shares), so an early task's hundreds of rows do not drown a late task's own.
    """

    def __init__(self, max_rows: int = 1024):
        self.max_rows = int(max_rows)
        self._rows: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def put(self, task: str, X, y: np.ndarray) -> None:
        """Replace ``task``'s rows: program features ``X [n, dim]`` and normalized ``y [n]``.

        ``X`` may instead be a list of ``n`` per-store arrays ``[stores_i, f]``
        (``ProgramFeatures.with_stores``); samples that do not build (non-finite or no
        rows) are dropped either way, and :meth:`others` returns the kind it was given."""
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        if isinstance(X, list):
            ok = [i for i, x in enumerate(X) if len(x) and np.isfinite(x).all()]
            self._rows[str(task)] = ([np.asarray(X[i], np.float32) for i in ok], y[ok])
            return
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
        if isinstance(parts[0][0], list):
            return [x for X, _ in parts for x in X[-share:]], np.concatenate([y[-share:] for _, y in parts])
        X = np.concatenate([X[-share:] for X, _ in parts])
        y = np.concatenate([y[-share:] for _, y in parts])
        return X, y


__all__ = ["ProgramFeatures", "SharedPool"]
