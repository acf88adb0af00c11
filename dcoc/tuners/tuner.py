"""The tuner interface: AutoTVM-style ``tune()`` plus an ask/tell form.

A tuner proposes configs of one :class:`~dcoc.search.tuning_task.TuningTask`; a measurer
measures them; the results return through one call (``update`` / ``tell``).  Subclasses
implement :meth:`Tuner.next_batch` and usually :meth:`Tuner.update`; everything else
(bookkeeping of visited configs and the best result, the trial loop, early stopping,
callbacks, records, resume) lives here once.

AutoTVM compatibility (``python/tvm/autotvm/tuner/tuner.py``, TVM <= 0.19):
``Tuner(task)``, ``has_next()``, ``next_batch(n)``, ``update(inputs, results)``,
``tune(n_trial, measure_option, early_stopping, callbacks)``, ``reset()``,
``load_history(records)``, ``set_error_threshold()``, ``best_config``, ``best_flops``,
``best_measure_pair``, ``best_iter``.  Callbacks have the signature
``cb(tuner, inputs, results)``.
"""
from __future__ import annotations

import logging
import math
import time
from typing import Callable, Iterable, Sequence

from dcoc.search.measure import MeasureInput, Measurer, MeasureResult, ReplayMeasurer, recorded_results
from dcoc.search.records import Records
from dcoc.search.space import Space
from dcoc.search.tuning_task import TuningTask
from dcoc.seeding import child_rng

logger = logging.getLogger("dcoc.tuner")


class Tuner:
    """Base class of every tuner.

    Parameters
    ----------
    task: the task to tune.
    seed: the one seed of this tuner's random choices.
    skip_invalid: propose only configs that pass the space's cheap constraints.
    """

    #: short name used by ``tune_task(tuner=...)`` and in records
    name = "base"

    def __init__(self, task: TuningTask, seed: int = 0, skip_invalid: bool = True, **kwargs):
        self.task = task
        self.space: Space = task.space
        self.seed = int(seed)
        self.skip_invalid = skip_invalid
        self.param = kwargs
        self.rng = child_rng(self.seed, "tuner", self.name, task.workload_key)
        self.visited: set = set()
        self.trials = 0
        self.history: list[tuple[int, float, float]] = []  # (trial, cost s, wall s since start)
        self.error_ct_threshold = 150
        self.error_ct = 0
        self._t0 = None
        self.reset()

    # ----------------------------------------------------------- to implement
    def next_batch(self, batch_size: int) -> list[dict]:
        """Propose up to ``batch_size`` new configs (never already-visited ones)."""
        raise NotImplementedError

    def update(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        """Learn from measured results (default: nothing beyond the base bookkeeping)."""

    def has_next(self) -> bool:
        """Whether there are unvisited configs left."""
        return len(self.visited) < len(self.space)

    def load_history(self, data_set: Iterable, min_seed_records: int = 500) -> None:
        """Warm-start from previous (MeasureInput, MeasureResult) pairs (model-based tuners)."""

    # ------------------------------------------------------------- bookkeeping
    def reset(self) -> None:
        self.best_config = None
        self.best_cost = math.inf
        self.best_flops = 0.0
        self.best_measure_pair = None
        self.best_iter = 0

    def set_error_threshold(self, threshold: int) -> None:
        self.error_ct_threshold = threshold

    def is_visited(self, config: dict) -> bool:
        return Space.key(config) in self.visited

    def mark_visited(self, config: dict) -> None:
        self.visited.add(Space.key(config))

    def proposable(self, config: dict) -> bool:
        """Not visited and (if ``skip_invalid``) passes the space's constraints."""
        if self.is_visited(config):
            return False
        return not self.skip_invalid or self.space.is_valid(config)

    def _observe(self, inputs, results) -> None:
        """Record trial results: visited set, best, history, error count."""
        if self._t0 is None:
            self._t0 = time.perf_counter()
        for inp, res in zip(inputs, results):
            self.mark_visited(inp.config)
            cost = res.cost
            if res.valid and cost < self.best_cost:
                self.best_cost = cost
                self.best_config = dict(inp.config)
                self.best_flops = self.task.flop / cost if cost > 0 else 0.0
                self.best_measure_pair = (inp, res)
                self.best_iter = self.trials
            if not res.valid:
                self.error_ct += 1
            else:
                self.error_ct = 0
            self.history.append((self.trials, cost, time.perf_counter() - self._t0))
            self.trials += 1

    # ----------------------------------------------------------------- ask/tell
    def ask(self, n: int = 1) -> list[dict]:
        """Propose up to ``n`` configs for an external driver to measure."""
        return self.next_batch(n)

    def tell(self, configs: Sequence[dict], results: Sequence[MeasureResult]) -> None:
        """Report the measured results of configs from :meth:`ask`."""
        inputs = [MeasureInput(self.task.target, self.task, c) for c in configs]
        self._observe(inputs, results)
        self.update(inputs, results)

    # --------------------------------------------------------------------- tune
    def tune(
        self,
        n_trial: int,
        measure_option: dict | Measurer | None = None,
        early_stopping: int | None = None,
        callbacks: Sequence[Callable] = (),
        records: Records | None = None,
        resume: bool = True,
    ) -> "Tuner":
        """Run up to ``n_trial`` measurements.

        measure_option: ``{"measurer": m}`` (see :func:`dcoc.search.measure_option`) or a
            Measurer; default the default target's measurer (VTA: the simulator).
        early_stopping: stop when the best has not improved for this many trials.
        callbacks: ``cb(tuner, inputs, results)`` after every batch.
        records: append every measurement to this database; with ``resume`` the configs
            this tuner/seed already measured for this task are replayed from it (not
            re-measured), so an interrupted run continues where it stopped.
        """
        measurer = _measurer_of(measure_option)
        known = (recorded_results(records, self.task.target, self.name, self.seed,
                                  tasks={self.task.workload_key}, hw=self.task.hw_name)
                 if (records and resume) else {})
        replay = ReplayMeasurer(measurer, known)
        #: trials of this task recorded by an earlier run of this (tuner, seed): answered from the file
        self.recorded = len(known)
        n_parallel = max(1, getattr(measurer, "n_parallel", 1))
        self._t0 = time.perf_counter()
        while self.trials < n_trial and self.has_next():
            configs = self.next_batch(min(n_parallel, n_trial - self.trials))
            if not configs:
                break
            inputs = [MeasureInput(self.task.target, self.task, c) for c in configs]
            results, replayed = replay.measure_flagged([(self.task, c) for c in configs])
            first = self.trials
            self._observe(inputs, results)
            if records is not None:
                fresh = [(i, r) for i, r, rep in zip(inputs, results, replayed) if not rep]
                if fresh:
                    records.log(self.task, [i for i, _ in fresh], [r for _, r in fresh],
                                tuner=self.name, seed=self.seed, first_trial=first)
            self.update(inputs, results)
            for cb in callbacks:
                cb(self, inputs, results)
            if early_stopping is not None and self.trials >= self.best_iter + early_stopping:
                logger.debug("early stopped at trial %d", self.trials)
                break
            if self.error_ct > self.error_ct_threshold:
                logger.setLevel(logging.DEBUG)
        return self

    # ------------------------------------------------------------------ results
    def best_curve(self) -> list[tuple[int, float, float]]:
        """(trial, best cost so far, wall seconds) per trial."""
        out, best = [], math.inf
        for t, c, w in self.history:
            best = min(best, c)
            out.append((t, best, w))
        return out


def _measurer_of(option) -> Measurer:
    if option is None:  # the default target's own measurer
        from dcoc.targets import get

        return get().measurer()
    if isinstance(option, Measurer):
        return option
    if isinstance(option, dict) and "measurer" in option:
        return option["measurer"]
    raise TypeError("measure_option must be a Measurer or dcoc.search.measure_option(...)")
