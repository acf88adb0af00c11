"""How a whole-model run spends its trials over the tasks: :class:`BudgetScheduler`.

A MetaSchedule task scheduler (``PyTaskScheduler``) used by
:func:`tvm_plugin.metaschedule.tuning.tune_model` for every search strategy alike (the dcoc
tuners and MetaSchedule's own EvolutionarySearch / ReplayTrace), so a comparison between
them differs in the search only:

* **First round, largest share first.**  Every task gets one batch before any task gets a
  second, in the order of its estimated share of the model's time (weight x FLOP; tasks
  without FLOP -- reshapes, concatenations -- last).  With the batch size
  :func:`batch_size` chooses, a budget of at least one trial per task leaves no task
  untuned; a smaller budget tunes the tasks that weigh most.
* **Then by gradient.**  MetaSchedule's gradient-based rule (``GradientBased``: the task
  whose weighted best latency is expected to drop most, ``alpha=0.2``, window 3): trials go
  where the model's time is.  Ties are broken by the run's seed (TVM's own scheduler draws
  them from an unseeded generator).
* **Wall-clock budget.**  With ``deadline`` (a ``time.perf_counter()`` value) no new batch
  starts once it has passed; batches in flight finish and are recorded, and
  :attr:`BudgetScheduler.stopped_on_time` says so.  When time rather than trials is what
  binds, ``tune_model`` runs the first round as a phase of its own with one-trial batches
  (a second scheduler, given the first one's ``history``, continues with full batches), so
  that the first round reaches every task before the time is spent.

The scheduler learns each batch's results through :meth:`BudgetScheduler.callback` (a
measure callback; add it to ``tune_tasks``' ``measure_callbacks``).
"""
from __future__ import annotations

import math
import random
import time
from typing import Sequence

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule import _ffi_api
from tvm.s_tir.meta_schedule.task_scheduler import PyTaskScheduler

#: MetaSchedule's GradientBased defaults
ALPHA = 0.2
WINDOW = 3


def batch_size(trials: int, n_tasks: int, cap: int = 16) -> int:
    """Candidates per measured batch: ``trials // (2 x tasks)``, between 1 and ``cap``.

    The first round gives every task one batch, so at most half the budget goes to it and
    the rest follows the gradient; with fewer than two trials per task the batch is one
    trial, and the first round reaches ``min(trials, tasks)`` tasks."""
    return max(1, min(int(cap), int(trials) // max(1, 2 * int(n_tasks))))


def coverage_warning(trials: int, n_tasks: int) -> str | None:
    """The console warning when ``trials < 2 x tasks`` (None otherwise)."""
    trials, n_tasks = int(trials), int(n_tasks)
    if trials >= 2 * n_tasks:
        return None
    untuned = max(0, n_tasks - trials)
    what = (f"{untuned} tasks keep untuned code" if untuned
            else "most tasks get one trial, too few to tune")
    return (f"{n_tasks} tasks, trials < 2 x tasks: {what}; use --trials >= {2 * n_tasks}")


def first_round_order(weights: Sequence[float], flops: Sequence[float]) -> list[int]:
    """Task indices by estimated share of the model's time (weight x FLOP), largest first;
    equal shares keep their order."""
    share = [float(w) * max(float(f), 0.0) for w, f in zip(weights, flops)]
    return sorted(range(len(share)), key=lambda i: -share[i])


class _BudgetScheduler(PyTaskScheduler):
    """Implementation of :class:`BudgetScheduler` (use the decorated class)."""

    def __init__(self, order: Sequence[int], seed: int = 0, deadline: float | None = None,
                 alpha: float = ALPHA, window: int = WINDOW, history: dict | None = None):
        super().__init__()
        self.order = [int(i) for i in order]
        self.rng = random.Random(int(seed))
        self.deadline = deadline
        self.alpha = float(alpha)
        self.window = int(window)
        self.stopped_on_time = False
        self.batches = 0
        self._rr = 0
        self._joined = False
        # task id -> best cost after each of its batches (``history``: an earlier phase's)
        self.history: dict = {int(k): list(v) for k, v in (history or {}).items()}
        self.best: dict = {k: v[-1] for k, v in self.history.items() if v}

    # ------------------------------------------------------------ results
    def observe(self, task_id: int, costs: Sequence[float | None]) -> None:
        """One joined batch of ``task_id``: its candidates' costs (None: failed)."""
        b = self.best.get(task_id, math.inf)
        for c in costs:
            if c is not None and math.isfinite(c):
                b = min(b, float(c))
        self.best[task_id] = b
        self.history.setdefault(task_id, []).append(b)

    def callback(self):
        """A measure callback feeding each joined batch to :meth:`observe`."""
        from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

        from tvm_plugin.metaschedule.strategy import runner_result

        sched = self

        @derived_object
        class _Observe(PyMeasureCallback):
            def apply(self, task_scheduler, task_id, measure_candidates, builder_results,
                      runner_results):
                costs = []
                for r in runner_results:
                    m = runner_result(r)
                    costs.append(m.cost if m.valid else None)
                sched.observe(int(task_id), costs)

        return _Observe()

    # ------------------------------------------------------ MetaSchedule API
    def next_task_id(self) -> int:
        outer = self._outer()
        tasks = outer.tasks_
        n = len(tasks)
        if self.deadline is not None and time.perf_counter() >= self.deadline:
            self.stopped_on_time = True
            return -1
        while self._rr < len(self.order):  # first round: one batch each, largest share first
            i = self.order[self._rr]
            self._rr += 1
            if 0 <= i < n and not bool(tasks[i].is_terminated):
                self.batches += 1
                return i
        if not self._joined:  # as GradientBased: wait for the first round's results
            self._joined = True
            for i in range(n):
                if not bool(tasks[i].is_terminated):
                    _ffi_api.TaskSchedulerTouchTask(outer, i)
                    if _running(tasks[i]):
                        _ffi_api.TaskSchedulerJoinRunningTask(outer, i)
        alive = []
        for i in range(n):
            _ffi_api.TaskSchedulerTouchTask(outer, i)
            if not bool(tasks[i].is_terminated):
                alive.append(i)
        if not alive:
            return -1
        grads = [self._gradient(i, float(tasks[i].task_weight)) for i in alive]
        hi, lo = max(grads), min(grads)
        pick = alive[self.rng.randrange(len(alive))] if hi == lo else alive[grads.index(hi)]
        if _running(tasks[pick]):
            _ffi_api.TaskSchedulerJoinRunningTask(outer, pick)
        self.batches += 1
        return pick

    def _gradient(self, task_id: int, weight: float) -> float:
        """MetaSchedule's ``GradientBased`` estimate of the weighted latency gain."""
        h = self.history.get(task_id, [])
        n = len(h)
        if not n or not math.isfinite(h[-1]):
            return -1e9  # no valid schedule yet: as GradientBased, picked last
        best, w = h[-1], self.window
        g1 = (h[n - 1 - w] - best) / w if n >= 1 + w and math.isfinite(h[n - 1 - w]) else 0.0
        g2 = best / n
        return (self.alpha * g1 + (1 - self.alpha) * g2) * weight


def _running(task_record) -> bool:
    """Whether the task has a batch in flight (its runner futures are set)."""
    futs = getattr(task_record, "runner_futures", None)
    return futs is not None


BudgetScheduler = derived_object(_BudgetScheduler)
BudgetScheduler.__doc__ = """The task scheduler of :func:`tune_model` (see the module docstring).

Parameters
----------
order: task indices for the first round (:func:`first_round_order`).
seed: breaks ties between tasks of equal gradient.
deadline: ``time.perf_counter()`` value after which no new batch starts (None: no limit).
alpha, window: the gradient's parameters (MetaSchedule's defaults).
history: ``{task id: best cost after each batch}`` of an earlier phase of the same run.
"""

__all__ = ["BudgetScheduler", "batch_size", "coverage_warning", "first_round_order"]
