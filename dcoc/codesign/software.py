"""Software-only tuning on one fixed hardware config (a driver: it decides, never measures).

:class:`SoftwareTuning` runs one tuner per layer through ask/tell.  Budget split: each
layer first gets ``warmup`` trials; then every chunk of ``chunk`` trials goes to the layer
with the largest remaining potential ``count * (best_time - ideal_time)`` (ideal =
compute-bound time), i.e. where a relative improvement buys the most end-to-end
latency.  Layers whose tuner has no proposals left are skipped -- also when they never
found a valid schedule (they do not keep an infinite priority).
"""
from __future__ import annotations

import math

import numpy as np

from dcoc.errors import DcocError
from dcoc.seeding import child_seed


def default_jobs(session, hw) -> list[tuple]:
    """Jobs measuring every layer's default schedule on ``hw`` (a fitting random schedule
    where the target's heuristic does not fit; nothing for a layer with no valid schedule)."""
    jobs = []
    for li, layer in enumerate(session.layers):
        sp = session.task(li, hw).space
        k = session.target.default_schedule(layer, hw, sp)
        if k is None:
            rng = np.random.default_rng(child_seed(session.seed, "default", layer.key, hw.name))
            try:
                k = sp.sample(rng)
            except DcocError:
                continue
        jobs.append((li, hw, k))
    return jobs


def default_schedules(session, hw):
    """Measure every layer's default schedule on ``hw`` (see :func:`default_jobs`)."""
    return session.measure(default_jobs(session, hw))


class SoftwareTuning:
    """Ask/tell driver: tune every layer's schedule on ``hw`` with one tuner per layer.

    ``budget``: trials this driver may spend (None: until the session's budget ends).
    """

    def __init__(self, session, hw, tuner: str, seed: int, chunk: int = 8, warmup: int = 8,
                 tuner_kwargs: dict | None = None, budget: int | None = None):
        from dcoc.tuners import create

        self.s, self.hw, self.chunk, self.warmup = session, hw, chunk, warmup
        self.budget = budget
        self.used = 0
        self.tuners = []
        for li, layer in enumerate(session.layers):
            task = session.task(li, hw)
            t = create(tuner, task, seed=child_seed(seed, "sw", layer.key, hw.name), **(tuner_kwargs or {}))
            prior = [(k, r) for k, r in session.results_for(li, hw) if task.space.check(k) is None]
            if prior:  # what this run already measured here is known, not proposed again
                t.tell([k for k, _ in prior], [r for _, r in prior])
            self.tuners.append(t)
        self.spent = [0] * len(session.layers)
        self.exhausted: set[int] = set()
        self._pending = None

    def ask(self) -> list[tuple]:
        limit = self.s.remaining if self.budget is None else min(self.budget - self.used, self.s.remaining)
        picked = next_layer(self, limit, self.hw)
        if picked is None:
            return []
        li, configs = picked
        self._pending = (li, configs, self.s.trials)
        return [(li, self.hw, c) for c in configs]

    def tell(self, jobs, results) -> None:
        li, configs, before = self._pending
        self._pending = None
        self.tuners[li].tell(configs[: len(results)], results)
        self.spent[li] += len(results)
        self.used += self.s.trials - before
        if self.s.trials == before:  # only repeats: the tuner is going in circles
            self.spent[li] = 10 ** 9
            if (self.hw.name, li) not in self.s.best:  # and nothing valid: do not come back
                self.exhausted.add(li)

    def missing(self) -> list[int]:
        """Layers with no valid schedule on ``hw`` whose tuner has nothing left to propose."""
        return [li for li in range(len(self.tuners)) if (self.hw.name, li) not in self.s.best
                and layer_priority(self, li, self.hw) == -math.inf]


def tune_software(session, hw, tuner: str, budget: int, seed: int, **kw) -> SoftwareTuning:
    """Spend up to ``budget`` trials tuning the schedules on ``hw``; returns the driver."""
    st = SoftwareTuning(session, hw, tuner, seed, budget=budget, **kw)
    session.run(st)
    return st


def layer_priority(drv, li: int, hw) -> float:
    """How much layer ``li``'s tuner should propose next in a per-layer driver ``drv``
    (``tuners``, ``spent``, ``warmup``, ``exhausted``, session ``s``): layers below their
    warm-up first, then the largest ``count x (best - ideal)`` time on ``hw`` (None: no
    reference design yet); ``-inf`` when its tuner has nothing left."""
    if li in drv.exhausted or not drv.tuners[li].has_next():
        return -math.inf
    if drv.spent[li] < drv.warmup:
        return math.inf
    b = drv.s.best.get((hw.name, li)) if hw is not None else None
    if b is None:
        return math.inf
    layer = drv.s.layers[li]
    return layer.count * max(b[0] - layer.ideal_seconds(hw), 0.0)


def next_layer(drv, limit: int, hw) -> tuple[int, list] | None:
    """(layer, up to ``limit`` proposals of its tuner -- at most ``drv.chunk``, and no more
    than its warm-up still needs) for the layer of highest :func:`layer_priority`, or None
    when no tuner has anything left."""
    while limit > 0:
        pri = [layer_priority(drv, li, hw) for li in range(len(drv.tuners))]
        li = int(np.argmax(pri))
        if pri[li] == -math.inf:
            return None
        k = min(drv.chunk, limit)
        if drv.spent[li] < drv.warmup:
            k = min(k, drv.warmup - drv.spent[li])
        configs = drv.tuners[li].ask(k)
        if configs:
            return li, configs
        drv.exhausted.add(li)
    return None
