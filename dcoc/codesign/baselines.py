"""Co-design drivers for the baseline tuners and the non-learning ``sweep`` reference.

* :class:`JointCoDesign` (the default for every baseline tuner): the baseline proposes
  (hardware, schedule) pairs JOINTLY, one tuner per layer over the joint space
  (hardware knobs x that layer's schedule knobs); a proposal on a hardware config not
  yet complete *opens* it by measuring, for every other layer, the schedule transferred
  from the incumbent (the same transfer DCOC's opening uses, :meth:`Target.transfer`);
  the tuner is told the model latency its proposal gives.  So a baseline sees about as
  many hardware configs per budget as DCOC, and hardware is judged by the whole model.
* :class:`NestedCoDesign` (``baseline="nested"``): outer search over hardware with the
  tuner, inner software tuning for a fixed sub-budget per hardware config.
* :class:`SweepCoDesign` (tuner ``sweep``): every compute-core shape with the default
  schedules, then the buffer variants of the best shapes, then local software search.

All are ask/tell drivers: they decide, the :class:`~dcoc.codesign.session.Session` measures.
"""
from __future__ import annotations

import math

import numpy as np

from dcoc.codesign.software import SoftwareTuning, default_jobs, next_layer
from dcoc.search.measure import MeasureErrorNo, MeasureResult
from dcoc.search.space import Knob, Space
from dcoc.search.tuning_task import TuningTask
from dcoc.seeding import child_seed


def _opening_jobs(session, hw, rng_path) -> list[tuple]:
    """Jobs that open ``hw``: for every layer without a valid result there, its schedule
    transferred from the incumbent (default / random valid as fallbacks) -- the same
    transferred schedules DCOC's opening considers, so a proposed config is judged with
    reasonable schedules for every layer, not only the proposing one."""
    s, t = session, session.target
    jobs = []
    for lj, layer in enumerate(s.layers):
        if (hw.name, lj) in s.best:
            continue
        sp = s.task(lj, hw).space
        src_hw = src = None
        if s.best_hw is not None and (s.best_hw, lj) in s.best:
            src_hw, src = s.hw[s.best_hw], s.best[(s.best_hw, lj)][1]
        k = t.transfer(layer, src_hw, src, hw, sp) if src is not None else None
        if k is None or not sp.is_valid(k):
            k = t.default_schedule(layer, hw, sp)
        if k is None:
            try:
                k = sp.sample(np.random.default_rng(child_seed(s.seed, *rng_path, layer.key, hw.name)))
            except Exception:  # noqa: BLE001 - no valid schedule: the config stays incomplete
                continue
        if not s.is_measured(hw, lj, k):
            jobs.append((lj, hw, k))
    return jobs


class JointCoDesign:
    """Baseline co-design: per-layer tuners over (hardware, schedule), told the model latency."""

    def __init__(self, session, board, tuner: str, seed: int, chunk: int = 8, warmup: int = 8,
                 hw_ranges: dict | None = None, tuner_kwargs: dict | None = None):
        from dcoc.tuners import create

        self.s, self.seed, self.tuner_name = session, seed, tuner
        self.t = session.target
        self.board = self.t.board(board)
        self.chunk, self.warmup = chunk, warmup
        self.hs = self.t.hw_space(self.board, hw_ranges)
        self.hw_knobs = tuple(k.name for k in self.hs.knobs)
        self._hw: dict = {}
        self._sp: dict = {}
        self.tuners = []
        self.sw_names = []
        default = self.t.default_hw(self.board)
        for li, layer in enumerate(session.layers):
            union = self.t.sw_union(layer, self.hs)
            names = [k.name for k in self.t.sw_space(layer, default).knobs]
            self.sw_names.append(names)
            knobs = list(self.hs.knobs) + [Knob(n, union[self.t.slot(layer, n)],
                                                "thread" if "thread" in n else "tile") for n in names]
            space = Space(knobs, [self._constraint(li)], {}, name=f"{layer.name}@{self.board.name}")
            task = TuningTask(layer.name, space, self.t.name, layer.key,
                              flop=float(2 * layer.workload.macs), hw_name=None,
                              hw_knobs=self.hw_knobs, hw_namer=lambda part: self.hw(part).name)
            self.tuners.append(create(tuner, task, seed=child_seed(seed, "joint", layer.key),
                                      **(tuner_kwargs or {})))
        self.spent = [0] * len(session.layers)
        self.strikes = [0] * len(session.layers)
        self.exhausted: set[int] = set()
        self._phase = "start"
        self._pending = None

    # ------------------------------------------------------------------ spaces
    def hw(self, values: dict):
        key = tuple(values[k] for k in self.hw_knobs)
        if key not in self._hw:
            self._hw[key] = self.t.make_hw({k: values[k] for k in self.hw_knobs}, self.board)
        return self._hw[key]

    def sw_space(self, li: int, hw) -> Space:
        key = (li, hw.name)
        if key not in self._sp:
            self._sp[key] = self.t.sw_space(self.s.layers[li], hw)
        return self._sp[key]

    def _constraint(self, li: int):
        def check(cfg):
            reason = self.hs.check({k: cfg[k] for k in self.hw_knobs})
            if reason:
                return reason
            hw = self.hw(cfg)
            return self.sw_space(li, hw).check({n: cfg[n] for n in self.sw_names[li]})
        return check

    def joint(self, li: int, hw, knobs: dict) -> dict:
        return {**self.t.hw_values(hw), **knobs}

    # ------------------------------------------------------------------ driver
    def ask(self) -> list[tuple]:
        s = self.s
        if self._phase == "start":  # the same start as DCOC: default schedules on the default config
            self._phase = "start-tell"
            return default_jobs(s, self.t.default_hw(self.board))
        # layers are weighed on the best design so far (the incumbent)
        picked = next_layer(self, s.remaining, s.hw[s.best_hw] if s.best_hw is not None else None)
        if picked is None:
            return []
        li, configs = picked
        jobs, props, opened = [], [], set()
        for c in configs:
            hw = self.hw(c)
            knobs = {n: c[n] for n in self.sw_names[li]}
            props.append((c, hw, knobs))
            jobs.append((li, hw, knobs))
            if s.latency(hw.name) is None and hw.name not in opened:
                opened.add(hw.name)
                jobs += _opening_jobs(s, hw, ("joint-open",))
        self._pending = (li, props, s.trials)
        return jobs

    def tell(self, jobs, results) -> None:
        s = self.s
        if self._phase == "start-tell":
            self._phase = "run"
            for (li, hw, knobs), r in zip(jobs, results):  # every tuner starts from the default
                if s.latency(hw.name) is not None:
                    self.tuners[li].tell([self.joint(li, hw, knobs)], [self._model_result(li, hw, r)])
            return
        li, props, before = self._pending
        self._pending = None
        got = {(j[0], j[1].name, Space.key(j[2])): r for j, r in zip(jobs, results)}
        told_c, told_r = [], []
        for c, hw, knobs in props:
            r = got.get((li, hw.name, Space.key(knobs)))
            if r is None:
                continue  # dropped at the end of the budget
            told_c.append(c)
            told_r.append(self._model_result(li, hw, r))
        if told_c:
            self.tuners[li].tell(told_c, told_r)
        self.spent[li] += len(told_c)
        if s.trials == before:
            self.strikes[li] += 1
            if self.strikes[li] >= 3:
                self.exhausted.add(li)
        else:
            self.strikes[li] = 0

    def _model_result(self, li: int, hw, r: MeasureResult) -> MeasureResult:
        """The model latency with layer ``li`` at this result on ``hw`` (error if unknown)."""
        if not r.valid:
            return r
        total = 0.0
        for lj, layer in enumerate(self.s.layers):
            if lj == li:
                total += layer.count * r.cost
                continue
            b = self.s.best.get((hw.name, lj))
            if b is None:
                return MeasureResult.error(MeasureErrorNo.INSTANTIATION_ERROR,
                                           f"hardware {hw.name} has no valid schedule for {layer.name}")
            total += layer.count * b[0]
        return MeasureResult((total,), 0, r.all_cost)

    def run(self) -> None:
        self.s.run(self)


class NestedCoDesign:
    """Co-design with a baseline tuner: outer search over hardware, inner over software.

    The board's default hardware is evaluated first (same start for every tuner); each
    later hardware proposal gets ``per_hw`` trials of software tuning; its cost is the
    model latency reached.  (An option: the fair default for baselines is :class:`JointCoDesign`.)
    """

    def __init__(self, session, board, tuner: str, seed: int, per_hw: int | None = None,
                 hw_ranges: dict | None = None):
        from dcoc.tuners import create

        self.s, self.tuner_name, self.seed = session, tuner, seed
        self.t = session.target
        self.board = self.t.board(board)
        T = len(session.layers)
        if per_hw is None:
            per_layer = int(min(16, max(4, session.budget // max(3 * T, 1))))
            per_hw = per_layer * T
        self.per_hw = per_hw
        space = self.t.hw_space(self.board, hw_ranges)
        self.hw_task = TuningTask("hardware", space, self.t.name, f"{self.t.name}:hardware", hw_name=None)
        self.hw_tuner = create(tuner, self.hw_task, seed=child_seed(seed, "hw"))
        self._queue = [self.t.hw_values(self.t.default_hw(self.board))]
        self._cur = None     # (hw config values, hw, trials at start)
        self._sw = None

    def _finish_hw(self):
        cfg, hw, _ = self._cur
        lat = self.s.latency(hw.name)
        res = (MeasureResult((lat,)) if lat is not None else
               MeasureResult.error(MeasureErrorNo.INSTANTIATION_ERROR, "incomplete"))
        self.hw_tuner.tell([cfg], [res])
        self._cur = self._sw = None

    def ask(self) -> list[tuple]:
        s = self.s
        while s.remaining > 0:
            if self._cur is None:
                cfgs = self._queue or self.hw_tuner.ask(1)
                self._queue = []
                if not cfgs:
                    return []
                hw = self.t.make_hw(cfgs[0], self.board)
                self._cur = (cfgs[0], hw, s.trials)
                self._sw = "defaults"
                jobs = default_jobs(s, hw)
                if jobs:
                    return jobs
            cfg, hw, start = self._cur
            if self._sw == "defaults":
                self._sw = SoftwareTuning(s, hw, self.tuner_name, child_seed(self.seed, "nested", hw.name),
                                          budget=self.per_hw - (s.trials - start))
            jobs = self._sw.ask()
            if jobs:
                return jobs
            self._finish_hw()
        return []

    def tell(self, jobs, results) -> None:
        if not isinstance(self._sw, str) and self._sw is not None:
            self._sw.tell(jobs, results)

    def run(self) -> None:
        self.s.run(self)


class SweepCoDesign:
    """The ``sweep`` reference: no model, no learning.

    1. every compute-core shape (values of :attr:`Target.core_knobs`), each on its
       feasible config with the largest buffers, with every layer's default schedule
       (the board's default config first);
    2. every other buffer variant of the ``n_best`` fastest shapes, default schedules;
    3. the remaining budget: per-layer ``sweep`` tuners (default schedule, then its
       neighbours) on the incumbent.
    """

    def __init__(self, session, board, seed: int, n_best: int = 2, hw_ranges: dict | None = None):
        self.s, self.seed, self.n_best = session, seed, n_best
        self.t = session.target
        self.board = self.t.board(board)
        feas = self.t.feasible_hw(self.board, hw_ranges)
        core = self.t.core_knobs
        self.by_shape: dict = {}
        for hw in feas:
            self.by_shape.setdefault(tuple(getattr(hw, k) for k in core), []).append(hw)
        buf = [k for k in self.t.hw_knobs if k not in core]

        def size(hw):
            return sum(getattr(hw, k) for k in buf)

        default = self.t.default_hw(self.board)
        first = [(tuple(getattr(default, k) for k in core), default)]
        self.queue = [default] + [max(v, key=size) for sh, v in self.by_shape.items() if sh != first[0][0]]
        self.phase = 1
        self._sw = None

    def ask(self) -> list[tuple]:
        s = self.s
        while s.remaining > 0:
            while self.queue:
                hw = self.queue.pop(0)
                if hw.name in s.hw and s.latency(hw.name) is not None:
                    continue
                jobs = default_jobs(s, hw)
                if jobs:
                    return jobs
            if self.phase == 1:
                self.phase = 2
                lat = {}
                for name in s.complete_hws():
                    hw = s.hw[name]
                    sh = tuple(getattr(hw, k) for k in self.t.core_knobs)
                    lat[sh] = min(lat.get(sh, math.inf), s.latency(name))
                best = sorted(lat, key=lat.get)[: self.n_best]
                self.queue = [hw for sh in best for hw in self.by_shape.get(sh, []) if hw.name not in s.hw]
                continue
            if self.phase == 2:
                self.phase = 3
                if s.best_hw is None:
                    return []
                self._sw = SoftwareTuning(s, s.hw[s.best_hw], "sweep", child_seed(self.seed, "sweep"))
            return self._sw.ask()
        return []

    def tell(self, jobs, results) -> None:
        if self._sw is not None:
            self._sw.tell(jobs, results)

    def run(self) -> None:
        self.s.run(self)
