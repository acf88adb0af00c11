"""A stalled incumbent in co-design (``CoDesignConfig.stall_rounds``; docs/method.md §5, §12).

Once the incumbent's latency has not fallen for ``stall_rounds`` rounds, an exploration
round with nothing else to open opens the incumbent's *dominating buffer variant*: the
unopened config of its timing class with every fit knob (VTA: buffer size) >= the
incumbent's, the one under which the most schedules fit.

:class:`StalledIncumbent` keeps the round count and reads the
:class:`~dcoc.codesign.joint.CoDesignProblem` it is given through: the session ``s``,
``target``, config ``ccfg``, ``shapes`` (the core shapes' configs), and ``shape``,
``sweepable``, ``valid_schedules`` and ``opening_plan``.
"""
from __future__ import annotations

import math

from dcoc.search.space import Space


class StalledIncumbent:
    """Counts the rounds since the incumbent improved; opens its dominating buffer variant."""

    def __init__(self, problem):
        self.p = problem
        self.rounds_since_better = 0
        self._last_best = math.inf
        self._n_fit: dict = {}     # hw name -> valid schedules of every layer there

    def note_round(self, best_latency: float) -> None:
        """Once per round: did the incumbent's latency fall since the last one?"""
        if best_latency < self._last_best * (1 - 1e-9):
            self._last_best, self.rounds_since_better = best_latency, 0
        else:
            self.rounds_since_better += 1

    def stalled(self) -> bool:
        """``stall_rounds``: the incumbent's latency has not fallen for that many rounds."""
        n = self.p.ccfg.stall_rounds
        return bool(n) and self.rounds_since_better >= n

    def n_fit(self, hw) -> int:
        """How many schedules of all layers fit ``hw`` (cached)."""
        if hw.name not in self._n_fit:
            p = self.p
            self._n_fit[hw.name] = sum(len(p.valid_schedules(li, hw)) for li in range(len(p.s.layers)))
        return self._n_fit[hw.name]

    def opening(self, complete):
        """(None, hw, plan) opening the unopened config of the incumbent's timing class whose
        buffers are all >= the incumbent's (so every incumbent schedule fits it, at the same
        time) under which the most schedules fit; the plan measures each layer's incumbent
        schedule and its best predicted one over the config's whole space, so the config
        ties the incumbent or beats it.  None if there is none."""
        p = self.p
        inc = p.s.hw[p.s.best_hw]
        tk = p.target.timing_key(inc)
        if tk is None:
            return None
        mine = p.target.fit_values(inc)
        best, best_n = None, -1
        for hw in p.shapes.bounds().get(p.shape(inc), (None, []))[1]:  # (hw_ranges may exclude it)
            fv = p.target.fit_values(hw)
            if (hw.name in complete or fv == mine or any(a < b for a, b in zip(fv, mine))
                    or p.target.timing_key(hw) != tk or not p.sweepable(hw)):
                continue
            n = self.n_fit(hw)
            if n > best_n:
                best, best_n = hw, n
        if best is None:
            return None
        _, _, swept, _ = p.opening_plan(best, [], sweep=True)
        plan = [(li, best, p.s.best[(inc.name, li)][1]) for li in range(len(p.s.layers))]
        keys = {(li, Space.key(k)) for li, _, k in plan}
        plan += [job for job in swept if (job[0], Space.key(job[2])) not in keys]
        return None, best, plan
