"""MetaSchedule program features of a TraceSpace's points (tvm_plugin.metaschedule.program contract).

A point of a :class:`~tvm_plugin.metaschedule.trace_space.TraceSpace` is replayed into a postprocessed
schedule (:meth:`TraceSpace.apply`), MetaSchedule's ``PerStoreFeature`` extractor (the one
its XGBoost cost model learns on) gives one 164-wide row per buffer store, and the rows
are aggregated into a fixed-width vector -- the sum and the maximum over stores -- so that
every task, whatever its number of stores, lives in the same feature space.

Replaying and extracting costs about 20 ms per point on a 2-core machine, so the ranker
asks for program features only for the candidates a round re-ranks
(:class:`~tvm_plugin.metaschedule.program.ProgramConfig`); the schedules built for them are kept (a bounded cache)
so that the search strategy does not replay a chosen candidate a second time.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np


def store_rows(extractor, context, schs) -> list[np.ndarray]:
    """MetaSchedule's per-store rows of schedules: one ``[stores, 164]`` array per
    schedule (one zero row if it has no store), from ``extractor`` (a ``PerStoreFeature``)
    in ``context`` (the task's TuneContext)."""
    from tvm.s_tir import meta_schedule as ms

    cands = [ms.MeasureCandidate(s, ms.arg_info.ArgInfo.from_prim_func(s.mod["main"]))
             for s in schs]
    out = []
    for f in extractor.extract_from(context, cands):
        a = np.asarray(f.numpy(), dtype=np.float32)
        if a.ndim != 2 or not len(a):
            a = np.zeros((1, a.shape[-1] if a.ndim == 2 else 164), np.float32)
        out.append(a)
    return out


def sum_max(rows: np.ndarray) -> np.ndarray:
    """A program's fixed-width features: the sum and the maximum of its per-store rows."""
    return np.concatenate([rows.sum(axis=0), rows.max(axis=0)])


class MSProgramFeatures:
    """``features(points) -> [n, 2 * 164]`` for one MetaSchedule task (NaN: does not build).

    ``tspace``: the task's :class:`~tvm_plugin.metaschedule.trace_space.TraceSpace`; ``context``: its
    TuneContext (the extractor needs it); ``keep``: schedules kept for :meth:`schedule`.
    """

    def __init__(self, tspace, context, keep: int = 256):
        from tvm.s_tir import meta_schedule as ms

        self.ts = tspace
        self.ctx = context
        self.extractor = ms.feature_extractor.PerStoreFeature()
        self.keep = int(keep)
        self._sch: OrderedDict = OrderedDict()
        self.seconds = 0.0
        self.n_points = 0
        self.dim = 0
        sch = tspace.apply(tspace.default_config(0))
        if sch is not None:
            self.dim = int(self._extract([sch]).shape[1])
        if not self.dim:
            raise ValueError(f"task '{tspace.task_name}': the default schedule gives no program features")

    def _extract(self, schs) -> np.ndarray:
        return np.stack([sum_max(a) for a in store_rows(self.extractor, self.ctx, schs)])

    def __call__(self, points) -> np.ndarray:
        """``[n, dim]`` features of ``points`` (NaN rows where a point does not build)."""
        import time

        t0 = time.perf_counter()
        space = self.ts.space
        out = np.full((len(points), self.dim), np.nan, np.float32)
        schs, where = [], []
        for i, p in enumerate(np.asarray(points, dtype=np.int64)):
            cfg = space.config(tuple(int(x) for x in p))
            sch = self.ts.apply(cfg)
            if sch is None:
                continue
            self._remember(space.key(cfg), sch)
            schs.append(sch)
            where.append(i)
        if schs:
            out[where] = self._extract(schs)
        self.seconds += time.perf_counter() - t0
        self.n_points += len(points)
        return out

    def _remember(self, key, sch) -> None:
        self._sch[key] = sch
        self._sch.move_to_end(key)
        while len(self._sch) > self.keep:
            self._sch.popitem(last=False)

    def schedule(self, config: dict):
        """The schedule built for ``config`` while featurizing it, if still kept (else None)."""
        return self._sch.pop(self.ts.space.key(config), None)


__all__ = ["MSProgramFeatures", "store_rows", "sum_max"]
