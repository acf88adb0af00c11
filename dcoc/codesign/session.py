"""The Session: the one place that measures, resumes, counts trials and records.

Drivers (:mod:`dcoc.codesign.software`, :mod:`dcoc.codesign.driver`,
:mod:`dcoc.codesign.baselines`) only decide: ``driver.ask()`` returns jobs
``[(layer index, hardware, knobs)]`` and ``driver.tell(jobs, results)`` hears back.
:meth:`Session.run` connects the two until the budget is spent or the driver has
nothing left to propose.

A model's latency on a hardware config is the sum over its accelerator layers of
occurrences x the best measured time of that layer on that config; it is known once
every layer has at least one valid measurement there (the hardware is then *complete*).
"""
from __future__ import annotations

import math
import time

from dcoc.search.measure import Measurer, MeasureResult, ReplayMeasurer, recorded_results
from dcoc.search.records import Records
from dcoc.search.space import Space


class Session:
    """Measures (layer, hardware, knobs) jobs, writes records, keeps the bests.

    Every new job counts as one trial.  With ``records`` and ``resume``, jobs already in
    the records of this (tuner, seed) are answered from the file (not measured again:
    :class:`~dcoc.search.measure.ReplayMeasurer`, the same resume mechanism as
    :meth:`dcoc.tuners.Tuner.tune`), so a deterministic driver re-run after an
    interruption continues where it stopped.

    ``target``: the :class:`dcoc.targets.Target` the layers run on (default VTA).
    """

    def __init__(self, layers: list, measurer: Measurer, budget: int, tuner: str, seed: int,
                 records: Records | None = None, resume: bool = True, progress=None, target=None):
        from dcoc.targets import get as get_target

        self.target = get_target(target)
        self.layers = layers
        self.budget = int(budget)
        self.tuner, self.seed = tuner, seed
        self.records = records
        self.progress = progress
        self.trials = 0
        self.hw: dict[str, object] = {}                 # name -> hardware config
        self.best: dict[tuple, tuple] = {}              # (hw name, layer idx) -> (cost, knobs)
        self.measured: dict[tuple, float] = {}          # (hw name, layer idx, knobs key) -> cost|inf
        self.results: dict[tuple, MeasureResult] = {}   # same keys -> the result
        self.history: list[tuple[int, float]] = []      # (trial, best model latency s so far)
        self.best_latency = math.inf
        self.best_hw: str | None = None
        self._tasks: dict = {}
        self._t0 = time.perf_counter()
        known = {}
        if records is not None and resume:
            known = recorded_results(records, self.target.name, tuner, seed,
                                     tasks={l.key for l in layers})
        self.measurer = ReplayMeasurer(measurer, known)
        if known and progress is not None:  # say so on the console: nothing recorded is re-measured
            from dcoc.progress import resume_note

            resume_note(len(known), records.path, progress)

    @property
    def replayed(self) -> int:
        """Trials answered from the records of an earlier run (resume)."""
        return self.measurer.replayed

    @property
    def remaining(self) -> int:
        return self.budget - self.trials

    def task(self, li: int, hw):
        key = (li, hw.name)
        if key not in self._tasks:
            self.hw[hw.name] = hw
            self._tasks[key] = self.target.task(self.layers[li], hw)
        return self._tasks[key]

    def is_measured(self, hw, li: int, knobs: dict) -> bool:
        return (hw.name, li, Space.key(knobs)) in self.measured

    def measure(self, jobs: list[tuple[int, object, dict]]) -> list[MeasureResult]:
        """Measure ``[(layer index, hw, knobs)]``; returns one result per job answered.

        A job already measured in this run is answered from memory and costs nothing; a new
        one costs a trial (jobs beyond the remaining budget are dropped from the end).
        """
        out: list = []
        new: list[int] = []
        batch_keys: set = set()
        for li, hw, knobs in jobs:
            self.task(li, hw)  # registers the hardware
            key = (hw.name, li, Space.key(knobs))
            if key in self.results or key in batch_keys:
                out.append(key)
                continue
            if len(new) >= self.remaining:
                break
            batch_keys.add(key)
            new.append(len(out))
            out.append(key)
        if not out:
            return []
        fresh: list[int] = []
        if new:
            res, replayed = self.measurer.measure_flagged(
                [(self.task(jobs[i][0], jobs[i][1]), jobs[i][2]) for i in new])
            for i, r, rep in zip(new, res, replayed):
                self.results[out[i]] = r
                if not rep:
                    fresh.append(i)
        first = self.trials
        for i in new:
            li, hw, knobs = jobs[i]
            r = self.results[out[i]]
            self.measured[out[i]] = r.cost
            cur = self.best.get((hw.name, li))
            if r.valid and (cur is None or r.cost < cur[0]):
                self.best[(hw.name, li)] = (r.cost, dict(knobs))
            self.trials += 1
            lat = self.latency(hw.name)
            if lat is not None and lat < self.best_latency:
                self.best_latency, self.best_hw = lat, hw.name
            self.history.append((self.trials - 1, self.best_latency))
        if self.records is not None and fresh:
            rows = []
            order = {i: n for n, i in enumerate(new)}
            for i in fresh:
                li, hw, knobs = jobs[i]
                rows += _rows(self.task(li, hw), knobs, self.results[out[i]], self.tuner, self.seed,
                              first + order[i])
            self.records.append(rows)
        if self.progress is not None and new:
            self.progress(self)
        return [self.results[k] for k in out]

    def run(self, driver) -> int:
        """Measure what ``driver`` asks for until the budget is spent or it has nothing left.

        Returns the trials spent.  ``driver.ask()`` -> jobs (empty: done);
        ``driver.tell(jobs, results)`` with the results of the jobs answered.
        """
        start = self.trials
        while self.remaining > 0:
            jobs = driver.ask()
            if not jobs:
                break
            res = self.measure(jobs)
            driver.tell(jobs[: len(res)], res)
        return self.trials - start

    def results_for(self, li: int, hw) -> list[tuple[dict, MeasureResult]]:
        """Everything measured for one layer on one hardware config in this run."""
        return [(dict(k[2]), r) for k, r in self.results.items() if k[0] == hw.name and k[1] == li]

    def latency(self, hw_name: str) -> float | None:
        """Model latency (seconds) on a hardware config, or None if not complete."""
        total = 0.0
        for li, layer in enumerate(self.layers):
            b = self.best.get((hw_name, li))
            if b is None:
                return None
            total += layer.count * b[0]
        return total

    def complete_hws(self) -> list[str]:
        return [h for h in self.hw if self.latency(h) is not None]

    def schedules(self, hw_name: str) -> dict:
        return {self.layers[li].name: dict(self.best[(hw_name, li)][1])
                for li in range(len(self.layers)) if (hw_name, li) in self.best}

    def wall(self) -> float:
        return time.perf_counter() - self._t0


def _rows(task, knobs, res, tuner, seed, trial) -> list[dict]:
    """Records rows of one measurement (built in memory; the caller appends them)."""
    from dcoc.search.measure import MeasureInput

    return Records(None).log(task, [MeasureInput(task.target, task, knobs)], [res], tuner=tuner,
                             seed=seed, first_trial=trial)
