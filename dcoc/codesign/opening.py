"""When co-design opens a new hardware config, and which (docs/method.md, "Co-design").

Opening a config measures one schedule of every layer on it, so its model latency becomes
known.  At most one config is opened per round:

1. the few unopened configs the search reached with the best cheap estimate are scored
   properly (per layer the best predicted of the search's candidates there, the schedule
   transferred from the incumbent and the default) and one is opened if its predicted
   throughput beats the incumbent's measured one by ``open_margin`` (lower confidence
   bound under confidence sampling, the mean under top-k); a never-measured core shape
   gets ``new_shape_bonus``;
2. after ``hw_explore_every`` rounds without an opening, first a never-measured core
   shape with a padded compute bound close to the best shape's (:class:`ShapeExplorer`,
   opened in stages), else the most optimistic shortlisted config (upper bound), else,
   once the incumbent has stalled for ``stall_rounds`` rounds, its dominating buffer
   variant (:class:`StalledIncumbent`).
"""
from __future__ import annotations

import math

import numpy as np

from dcoc.search.space import Space


class HardwareOpening:
    """The hardware-opening policy of one co-design run.

    Reads the session ``s``, the encoding ``enc``, the cost models ``models`` and the
    co-design config; ``kappa`` is the confidence multiplier in use (0 under top-k).
    """

    def __init__(self, session, enc, models, cfg, kappa: float):
        self.s, self.enc, self.models = session, enc, models
        self.ccfg = cfg.codesign
        self.exhaustive_limit = cfg.exhaustive_limit
        self.kappa = kappa
        self.shapes_opened: set = set()     # core shapes opened so far (default first)
        self.rounds_since_open = 0
        self.new_hw: list = []              # configs opened this round (for the log)
        self.shapes = ShapeExplorer(self)
        self.stall = StalledIncumbent(self)

    def sweepable(self, hw) -> bool:
        """The layers' schedule spaces on ``hw`` hold <= ``exhaustive_limit`` points together."""
        return sum(len(self.enc.space(li, hw)) for li in range(len(self.s.layers))) <= self.exhaustive_limit

    def choose(self, cands, complete: set, best_lat: float):
        """(hw, jobs) of the config to open this round, or None (see the module docstring);
        ``complete``: the configs with every layer measured, ``best_lat``: the incumbent's
        latency when the round started."""
        explore = self.rounds_since_open >= self.ccfg.hw_explore_every
        self.stall.note_round(self.s.best_latency)
        self.new_hw = []
        opening = self.shapes.finish(cands, complete, best_lat) if self.shapes.staged is not None else None
        if opening is None:
            opening = self.choose_new_hw(cands, complete, best_lat, explore)
        self.rounds_since_open += 1
        if opening is not None and len(opening[1]) <= self.s.remaining:
            hw, plan = opening
            self.new_hw.append(hw.name)
            self.rounds_since_open = 0
            return hw, plan
        self.shapes.staged = None
        return None

    def choose_new_hw(self, cands, complete, best_lat, explore: bool = False):
        """(hw, jobs) of the most promising unopened config, or None (rules 1 and 2)."""
        enc, ccfg = self.enc, self.ccfg
        by_hw: dict = {}
        for i, (li, hw, k) in enumerate(cands):
            if hw.name not in complete:
                by_hw.setdefault(hw.name, (hw, []))[1].append(i)
        # warm start: the source runs' best configs are always scored (until opened)
        extra = [hw for hw in self.models.prior_hw[: ccfg.prior_hw]
                 if hw.name not in complete and hw.name not in by_hw]
        if not by_hw and not extra and not (explore and ccfg.explore_shapes > 0):
            return None
        order = sorted(by_hw.values(), key=lambda v: self.models.model_estimate(v[0]))
        ranked = order[: ccfg.new_hw_shortlist] + [(hw, []) for hw in extra]
        best, best_ucb = None, None
        for hw, idx in ranked:
            mu_lat, var_lat, plan, _ = self.opening_plan(hw, [cands[i] for i in idx])
            if not math.isfinite(mu_lat) or not plan:
                continue
            thr = best_lat / mu_lat
            half = self.kappa * best_lat * math.sqrt(var_lat) / mu_lat ** 2
            lcb, ucb = thr - half, thr + half
            if enc.shape(hw) not in self.shapes_opened:  # optimism for never-measured core shapes
                lcb += ccfg.new_shape_bonus
                ucb += ccfg.new_shape_bonus
            if lcb > 1.0 + ccfg.open_margin and (best is None or lcb > best[0]):
                best = (lcb, hw, plan)
            if ucb > 1.0 and (best_ucb is None or ucb > best_ucb[0]):
                best_ucb = (ucb, hw, plan)
        if best is None and explore and ccfg.explore_shapes > 0:
            best = self.shapes.new_shape(complete, best_lat)
        if best is None and explore:
            best = best_ucb
        if best is None and explore and self.stall.stalled():
            best = self.stall.opening(complete)
        if best is None:
            return None
        hw = best[1]
        self.shapes_opened.add(enc.shape(hw))
        return hw, best[2]

    def opening_plan(self, hw, cands, sweep: bool = False) -> tuple[float, float, list, list]:
        """(predicted model seconds, its variance, jobs, each job's predicted seconds) of
        opening ``hw``: per layer not yet measured there, the best predicted among ``cands``
        (the search's candidates on it), the transferred and the default schedule
        (``sweep``: every valid schedule)."""
        mu_lat, var_lat, plan, times = 0.0, 0.0, [], []
        for lj, layer in enumerate(self.s.layers):
            b = self.s.best.get((hw.name, lj))
            if b is not None:
                mu_lat += layer.count * b[0]
                continue
            opts = [k for li, _, k in cands if li == lj]
            opts += [k for k in (self.models.transfer(lj, hw), self.models.default(lj, hw)) if k is not None]
            if sweep:
                opts += self.enc.valid_schedules(lj, hw)
            opts = list({Space.key(k): k for k in opts}.values())
            if not opts:
                return math.inf, 0.0, [], []
            m, d = self.models.predict_time(lj, hw, opts)
            j = int(np.argmin(m))
            mu_lat += layer.count * m[j]
            var_lat += (layer.count * d[j]) ** 2
            plan.append((lj, hw, opts[j]))
            times.append(float(m[j]))
        return mu_lat, var_lat, plan, times


class ShapeExplorer:
    """Opening never-measured core shapes (``explore_shapes``, ``explore_shapes_first``).

    The cost model's verdict on a shape it never saw is the least trustworthy of all, so
    an exploration round opens the never-measured shape with the lowest padded compute
    bound (known without a measurement), in stages: first the layers making up
    ``explore_shapes_first`` of its predicted time; the rest next round only if the config
    -- measured layers plus predictions for the others -- still beats the incumbent.
    """

    def __init__(self, opening: HardwareOpening):
        self.o = opening
        self._bounds = None       # core shape -> (model bound, configs)
        self.staged = None        # the config opened by its dominant layers last round

    def bounds(self) -> dict:
        """{core shape: (the model's padded compute bound there, its feasible configs)} over
        the whole hardware space (cached: the bound needs no measurement)."""
        if self._bounds is None:
            enc, layers = self.o.enc, self.o.s.layers
            by: dict = {}
            for vals in enc.hs:
                if enc.hs.check(vals):
                    continue
                hw = enc.target.make_hw(vals, enc.board)
                by.setdefault(enc.shape(hw), []).append(hw)
            self._bounds = {sh: (sum(l.count * l.bound_seconds(hws[0]) for l in layers), hws)
                            for sh, hws in by.items()}
        return self._bounds

    def new_shape(self, complete, best_lat):
        """(None, hw, plan) opening the never-measured core shape with the lowest model
        compute bound, if that bound is within ``explore_shapes`` of the best shape's and
        below the incumbent's latency, at the config of that shape with the best cheap
        estimate (transferred schedules); None when no shape qualifies."""
        o = self.o
        shapes = self.bounds()
        floor = min(b for b, _ in shapes.values())
        for sh, (bound, hws) in sorted(shapes.items(), key=lambda x: x[1][0]):
            if bound > floor * o.ccfg.explore_shapes or bound >= best_lat:
                break
            if sh in o.shapes_opened:
                continue
            hws = [h for h in hws if h.name not in complete]
            if not hws:
                continue
            o.models.ensure_estimates(hws)
            hw = min(hws, key=o.models.model_estimate)
            mu_lat, _, plan, times = o.opening_plan(hw, [])
            if math.isfinite(mu_lat) and plan:
                return None, hw, self.stage(hw, plan, times)
            o.shapes_opened.add(sh)  # no schedule fits some layer there: never again
        return None

    def stage(self, hw, plan: list, times) -> list:
        """The first part of ``plan`` (an opening of ``hw``): its layers with the largest
        predicted share of the model time until they make up ``explore_shapes_first`` of
        it; :meth:`finish` decides on the rest next round."""
        first = self.o.ccfg.explore_shapes_first
        if first >= 1.0 or len(plan) < 2:
            return plan
        mu = np.asarray(times)
        share = np.array([self.o.s.layers[li].count for li, _, _ in plan]) * mu
        order = np.argsort(-share, kind="stable")
        n = int(np.searchsorted(np.cumsum(share[order]), first * share.sum())) + 1
        if n >= len(plan):
            return plan
        self.staged = hw
        return [plan[i] for i in sorted(order[:n])]

    def finish(self, cands, complete, best_lat):
        """(hw, the rest of its opening) of the config staged last round, if its model
        latency (measured layers plus predictions refit on them) still beats the
        incumbent's measured latency; None (the config is dropped) otherwise."""
        hw, self.staged = self.staged, None
        if hw.name in complete:
            return None
        mu_lat, _, plan, _ = self.o.opening_plan(hw, [c for c in cands if c[1].name == hw.name])
        if plan and math.isfinite(mu_lat) and mu_lat < best_lat:
            return hw, plan
        return None


class StalledIncumbent:
    """Once the incumbent has not improved for ``stall_rounds`` rounds, an exploration round
    with nothing else to open opens its *dominating buffer variant*: the unopened config of
    its timing class (the target's ``timing_key``: same core and clock) with every fit knob
    (VTA: buffer size) >= the incumbent's, the one under which the most schedules fit.  It
    runs every incumbent schedule in the same time and may admit faster ones."""

    def __init__(self, opening: HardwareOpening):
        self.o = opening
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
        n = self.o.ccfg.stall_rounds
        return bool(n) and self.rounds_since_better >= n

    def n_fit(self, hw) -> int:
        """How many schedules of all layers fit ``hw`` (cached)."""
        if hw.name not in self._n_fit:
            enc = self.o.enc
            self._n_fit[hw.name] = sum(len(enc.valid_schedules(li, hw)) for li in range(len(self.o.s.layers)))
        return self._n_fit[hw.name]

    def opening(self, complete):
        """(None, hw, plan) opening the dominating buffer variant, or None if there is none.
        The plan measures each layer's incumbent schedule and its best predicted one over
        the variant's whole space, so the variant ties the incumbent or beats it."""
        o = self.o
        s, target = o.s, o.enc.target
        inc = s.hw[s.best_hw]
        tk = target.timing_key(inc)
        if tk is None:
            return None
        mine = target.fit_values(inc)
        best, best_n = None, -1
        for hw in o.shapes.bounds().get(o.enc.shape(inc), (None, []))[1]:  # (hw_ranges may exclude it)
            fv = target.fit_values(hw)
            if (hw.name in complete or fv == mine or any(a < b for a, b in zip(fv, mine))
                    or target.timing_key(hw) != tk or not o.sweepable(hw)):
                continue
            n = self.n_fit(hw)
            if n > best_n:
                best, best_n = hw, n
        if best is None:
            return None
        _, _, swept, _ = o.opening_plan(best, [], sweep=True)
        plan = [(li, best, s.best[(inc.name, li)][1]) for li in range(len(s.layers))]
        keys = {(li, Space.key(k)) for li, _, k in plan}
        plan += [job for job in swept if (job[0], Space.key(job[2])) not in keys]
        return None, best, plan
