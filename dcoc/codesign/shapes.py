"""Opening never-measured core shapes in co-design (``CoDesignConfig.explore_shapes``,
``explore_shapes_first``, ``explore_shapes_finish``; docs/method.md §5, §12).

:class:`ShapeExplorer` holds this part's state (the shapes' compute bounds, the config
opened by its dominant layers, the configs' latencies when first complete) and reads the
:class:`~dcoc.codesign.joint.CoDesignProblem` it is given through a small interface: the
session ``s``, hardware space ``hs``, ``target``, ``board``, config ``ccfg``, the set
``shapes_opened``, and ``shape``, ``dominated``, ``ensure_estimates``, ``model_estimate``,
``opening_plan``, ``predict_many`` and ``_best_lat`` (the incumbent's measured latency
this round).
"""
from __future__ import annotations

import math

import numpy as np


class ShapeExplorer:
    """Core-shape exploration of one co-design problem: which never-measured shape to open,
    and staged openings."""

    def __init__(self, problem):
        self.p = problem
        self._bounds = None       # core shape -> (model bound, configs)
        self.staged = None        # explore_shapes_first: the config opened by its dominant layers
        self.opened_lat: dict = {}  # hw name -> model latency when first seen complete ("opened")

    def note_complete(self, complete) -> None:
        """Record each complete config's latency when first seen complete (read only by
        ``explore_shapes_finish="opened"``, so only kept then)."""
        if self.p.ccfg.explore_shapes_finish == "opened":
            for name in complete:
                self.opened_lat.setdefault(name, self.p.s.latency(name))

    def bounds(self) -> dict:
        """{core shape: (the model's padded compute bound there, its feasible configs)} over
        the whole hardware space (cached: the bound needs no measurement)."""
        if self._bounds is None:
            p = self.p
            by: dict = {}
            for vals in p.hs:
                if p.hs.check(vals):
                    continue
                hw = p.target.make_hw(vals, p.board)
                by.setdefault(p.shape(hw), []).append(hw)
            self._bounds = {sh: (sum(l.count * l.bound_seconds(hws[0]) for l in p.s.layers), hws)
                            for sh, hws in by.items()}
        return self._bounds

    def new_shape(self, complete, best_lat):
        """``explore_shapes``: (None, hw, plan) opening the never-measured core shape with the
        lowest model compute bound, if that bound is within ``explore_shapes`` of the best
        shape's and below the incumbent's latency, at the config of that shape with the best
        cheap estimate (transferred schedules); None when no shape qualifies."""
        p = self.p
        shapes = self.bounds()
        floor = min(b for b, _ in shapes.values())
        for sh, (bound, hws) in sorted(shapes.items(), key=lambda x: x[1][0]):
            if bound > floor * p.ccfg.explore_shapes or bound >= best_lat:
                break
            if sh in p.shapes_opened:
                continue
            hws = [h for h in hws if h.name not in complete and not p.dominated(h, complete)]
            if not hws:
                continue
            p.ensure_estimates(hws)
            hw = min(hws, key=p.model_estimate)
            mu_lat, _, plan, times = p.opening_plan(hw, [])
            if math.isfinite(mu_lat) and plan:
                return None, hw, self.stage(hw, plan, times)
            p.shapes_opened.add(sh)  # no schedule fits some layer there: never again
        return None

    def stage(self, hw, plan: list, times=None) -> list:
        """``explore_shapes_first`` < 1: the first part of ``plan`` (an opening of ``hw``), its
        layers with the largest predicted share of the model time until they make up
        ``explore_shapes_first`` of it; :meth:`finish` decides on the rest next round.
        ``times``: the plan's predicted seconds per job (from ``opening_plan``; else
        predicted here)."""
        p = self.p
        first = p.ccfg.explore_shapes_first
        if first >= 1.0 or len(plan) < 2:
            return plan
        mu = np.asarray(times) if times is not None else p.predict_many(plan)[0]
        share = np.array([p.s.layers[li].count for li, _, _ in plan]) * mu
        order = np.argsort(-share, kind="stable")
        n = int(np.searchsorted(np.cumsum(share[order]), first * share.sum())) + 1
        if n >= len(plan):
            return plan
        self.staged = hw
        return [plan[i] for i in sorted(order[:n])]

    def finish(self, cands, complete):
        """(hw, the rest of its opening) of the config :meth:`stage` opened by its dominant
        layers last round, if its model latency -- measured layers plus the cost model's
        predictions, refit on those measurements, for the rest -- still beats the incumbent's
        measured latency (``explore_shapes_finish="opened"``: its latency when it was first
        complete, before its refinement, if higher); None (the config is dropped) otherwise."""
        p = self.p
        hw, self.staged = self.staged, None
        if hw.name in complete:
            return None
        ref = p._best_lat
        if p.ccfg.explore_shapes_finish == "opened" and p.s.best_hw is not None:
            ref = max(ref, self.opened_lat.get(p.s.best_hw, ref))
        mu_lat, _, plan, _ = p.opening_plan(hw, [c for c in cands if c[1].name == hw.name])
        if plan and math.isfinite(mu_lat) and mu_lat < ref:
            return hw, plan
        return None
