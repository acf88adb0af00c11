"""Opening never-measured core shapes in co-design (``CoDesignConfig.explore_shapes``,
``explore_shapes_first``, ``explore_shapes_finish``; docs/method.md §5, §12).

A mixin of :class:`dcoc.codesign.joint.CoDesignProblem`: it uses the problem's session
(``s``), hardware space (``hs``), target, board, config (``ccfg``) and its cost-model
helpers (``opening_plan``, ``ensure_estimates``, ``model_estimate``, ``predict_many``,
``dominated``, ``shape``).
"""
from __future__ import annotations

import math

import numpy as np


class ShapeExploration:
    """Core-shape exploration: which never-measured shape to open, and staged openings."""

    def shape_bounds(self) -> dict:
        """{core shape: (the model's padded compute bound there, its feasible configs)} over
        the whole hardware space (cached: the bound needs no measurement)."""
        if self._shapes is None:
            by: dict = {}
            for vals in self.hs:
                if self.hs.check(vals):
                    continue
                hw = self.target.make_hw(vals, self.board)
                by.setdefault(self.shape(hw), []).append(hw)
            self._shapes = {sh: (sum(l.count * l.bound_seconds(hws[0]) for l in self.s.layers), hws)
                            for sh, hws in by.items()}
        return self._shapes

    def new_shape(self, complete, best_lat):
        """``explore_shapes``: (None, hw, plan) opening the never-measured core shape with the
        lowest model compute bound, if that bound is within ``explore_shapes`` of the best
        shape's and below the incumbent's latency, at the config of that shape with the best
        cheap estimate (transferred schedules); None when no shape qualifies."""
        shapes = self.shape_bounds()
        floor = min(b for b, _ in shapes.values())
        for sh, (bound, hws) in sorted(shapes.items(), key=lambda x: x[1][0]):
            if bound > floor * self.ccfg.explore_shapes or bound >= best_lat:
                break
            if sh in self.shapes_opened:
                continue
            hws = [h for h in hws if h.name not in complete and not self.dominated(h, complete)]
            if not hws:
                continue
            self.ensure_estimates(hws)
            hw = min(hws, key=self.model_estimate)
            mu_lat, _, plan, times = self.opening_plan(hw, [])
            if math.isfinite(mu_lat) and plan:
                return None, hw, self.stage(hw, plan, times)
            self.shapes_opened.add(sh)  # no schedule fits some layer there: never again
        return None

    def stage(self, hw, plan: list, times=None) -> list:
        """``explore_shapes_first`` < 1: the first part of ``plan`` (an opening of ``hw``), its
        layers with the largest predicted share of the model time until they make up
        ``explore_shapes_first`` of it; :meth:`finish_staged` decides on the rest next round.
        ``times``: the plan's predicted seconds per job (from :meth:`opening_plan`; else
        predicted here)."""
        first = self.ccfg.explore_shapes_first
        if first >= 1.0 or len(plan) < 2:
            return plan
        mu = np.asarray(times) if times is not None else self.predict_many(plan)[0]
        share = np.array([self.s.layers[li].count for li, _, _ in plan]) * mu
        order = np.argsort(-share, kind="stable")
        n = int(np.searchsorted(np.cumsum(share[order]), first * share.sum())) + 1
        if n >= len(plan):
            return plan
        self._staged = hw
        return [plan[i] for i in sorted(order[:n])]

    def finish_staged(self, cands, complete):
        """(hw, the rest of its opening) of the config :meth:`stage` opened by its dominant
        layers last round, if its model latency -- measured layers plus the cost model's
        predictions, refit on those measurements, for the rest -- still beats the incumbent's
        measured latency (``explore_shapes_finish="opened"``: its latency when it was first
        complete, before its refinement, if higher); None (the config is dropped) otherwise."""
        hw, self._staged = self._staged, None
        if hw.name in complete:
            return None
        ref = self._best_lat
        if self.ccfg.explore_shapes_finish == "opened" and self.s.best_hw is not None:
            ref = max(ref, self._opened_lat.get(self.s.best_hw, ref))
        mu_lat, _, plan, _ = self.opening_plan(hw, [c for c in cands if c[1].name == hw.name])
        if plan and math.isfinite(mu_lat) and mu_lat < ref:
            return hw, plan
        return None
