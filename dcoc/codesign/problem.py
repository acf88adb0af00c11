"""Whole-model co-design as a :class:`~dcoc.method.core.Problem` of the DCOC round.

An item is ``(layer index, hardware config, schedule knobs)``.  A search start is a layer
(drawn by its share of the incumbent's latency) at a hardware config (the incumbent, an
opened one or a random feasible one) and its best known schedule there; its points are
joint (hardware, schedule) points (:mod:`dcoc.codesign.encoding`).  A point's score is the
model throughput it implies, normalized by the best measured one: the point's layer at its
schedule (measured, or predicted) plus every other layer's best estimate on that hardware
(:mod:`dcoc.codesign.models`).

A round's measurements (:meth:`CoDesignProblem.select`):

1. at most one new hardware config (:mod:`dcoc.codesign.opening`);
2. the default schedule of every layer on a new incumbent (a floor under the cost
   model's choice at opening);
3. the rest chosen by the core's rule among the candidates on complete configs: the
   search's points and every valid schedule of every layer on the incumbent (when those
   spaces hold <= ``exhaustive_limit`` points together), each seen in its layer's units
   (1.0 = the time at which the model ties the incumbent), the units the rule has per task.
"""
from __future__ import annotations

import numpy as np

from dcoc.codesign.encoding import CONTEXT_DIM, JointEncoding
from dcoc.codesign.models import CoDesignModels
from dcoc.codesign.opening import HardwareOpening
from dcoc.method.core import Problem
from dcoc.search.space import Space


class CoDesignProblem(Problem):
    """Whole-model co-design as a :class:`~dcoc.method.core.Problem` (items: (layer, hw, knobs))."""

    context_dim = CONTEXT_DIM

    def __init__(self, session, board, seed: int, cfg, rng, hw_ranges=None, prior=None):
        self.s, self.seed, self.cfg, self.rng = session, seed, cfg, rng
        self.board = session.target.board(board)
        self.ccfg = cfg.codesign
        self.enc = JointEncoding(session, self.board, hw_ranges)
        self.agent_space = self.enc.agent_space
        self.models = CoDesignModels(session, self.enc, cfg, seed, prior)
        self.opening = HardwareOpening(session, self.enc, self.models, cfg, cfg.kappa)
        self._inc_items: tuple = ("", [])  # (hw name, its every valid (layer, hw, knobs))
        self._lis = None                   # the layer of each search start this round
        self._best_lat = None              # the incumbent's latency when the round started

    # ------------------------------------------------------------------ Problem
    def refit(self) -> None:
        self.models.refit()

    def n_measured(self) -> int:
        return len(self.s.measured)

    def starts(self, W: int):
        s, enc, models = self.s, self.enc, self.models
        L = s.layers
        inc = s.hw[s.best_hw]
        lis = self.rng.choice(len(L), size=W, p=models.layer_weights(inc))
        opened = s.complete_hws()
        feasible = None
        starts, out_li = [], []
        for li in lis:
            r = self.rng.random()
            if r < self.ccfg.elite_hw_starts or len(opened) == 0:
                hw = inc
            elif r < 1 - self.ccfg.random_hw_starts:
                hw = s.hw[opened[int(self.rng.integers(len(opened)))]]
            else:
                if feasible is None:
                    feasible = [enc.hs.sample(self.rng) for _ in range(16)]
                hw = s.target.make_hw(feasible[int(self.rng.integers(len(feasible)))], self.board)
            b = s.best.get((hw.name, li))
            knobs = b[1] if b is not None else models.transfer(li, hw)
            if knobs is None:
                hw, knobs = inc, s.best[(inc.name, li)][1]
            starts.append(enc.hw_pos(hw) + enc.sw_pos(li, knobs))
            out_li.append(int(li))
        self._lis = np.array(out_li)
        self._best_lat = s.best_latency
        ctx = np.stack([enc.context(li) for li in self._lis])
        return enc.dims[self._lis], np.array(starts, dtype=np.int64), ctx

    def decode(self, p, w):
        return self.enc.decode(p, int(self._lis[w]))

    def valid(self, p, w) -> bool:
        return self.decode(np.asarray(p), w)[1] is not None

    def score(self, points, walkers):
        s, L, best_lat, models = self.s, self.s.layers, self._best_lat, self.models
        out = np.zeros(len(points))
        decoded = [(i, int(self._lis[w]), *self.decode(p, w)) for i, (p, w) in enumerate(zip(points, walkers))]
        decoded = [d for d in decoded if d[3] is not None]
        models.ensure_estimates([d[2] for d in decoded])
        model = {n: models.model_estimate(hw) for n, hw in {d[2].name: d[2] for d in decoded}.items()}
        todo, rests = [], []
        for i, li, hw, k in decoded:
            c = s.measured.get((hw.name, li, Space.key(k)))
            rest = model[hw.name] - L[li].count * models.layer_estimate(li, hw)
            if c is not None:
                out[i] = best_lat / (rest + L[li].count * c) if np.isfinite(c) else 0.0
            else:
                todo.append((i, li, hw, k))
                rests.append(rest)
        if todo:
            mu, _ = models.predict_many([(li, hw, k) for _, li, hw, k in todo])
            for (i, li, _, _), rest, m in zip(todo, rests, mu):
                out[i] = best_lat / (rest + L[li].count * m)
        return out

    def candidates(self, points, walkers, n):
        """Unmeasured valid (layer, hw, knobs): the search's points and every schedule of
        every layer on the incumbent."""
        cands, seen = [], set()
        for p, w in zip(points, walkers):
            hw, k = self.decode(p, w)
            li = int(self._lis[w])
            if k is None or self.s.is_measured(hw, li, k):
                continue
            key = (li, hw.name, Space.key(k))
            if key not in seen:
                seen.add(key)
                cands.append((li, hw, k))
        for li, hw, k in self.incumbent_items():
            key = (li, hw.name, Space.key(k))
            if key not in seen and not self.s.is_measured(hw, li, k):
                seen.add(key)
                cands.append((li, hw, k))
        return cands

    def incumbent_items(self) -> list:
        """Every valid schedule of every layer on the incumbent config (none if the layers'
        spaces hold more than ``exhaustive_limit`` points together)."""
        inc = self.s.hw[self.s.best_hw]
        if self._inc_items[0] != inc.name:
            items = []
            if self.opening.sweepable(inc):
                items = [(li, inc, k) for li in range(len(self.s.layers))
                         for k in self.enc.valid_schedules(li, inc)]
            self._inc_items = (inc.name, items)
        return self._inc_items[1]

    def predict(self, cands):
        """(mean, std) of each candidate in its layer's units: the layer time at which the
        model ties the incumbent over the predicted time (on the incumbent: the layer's
        normalized throughput, 1.0 = its best measured)."""
        L, models = self.s.layers, self.models
        models.ensure_estimates([c[1] for c in cands])
        m, d = models.predict_many(cands)
        cnt = np.array([L[li].count for li, _, _ in cands], dtype=float)
        model = {n: models.model_estimate(hw) for n, hw in {hw.name: hw for _, hw, _ in cands}.items()}
        rest = np.array([model[hw.name] - L[li].count * models.layer_estimate(li, hw)
                         for li, hw, _ in cands])
        ref = (self._best_lat - rest) / cnt
        return ref / m, np.abs(ref) * d / m ** 2

    def select(self, cands, mu, sd, n, pick):
        s = self.s
        complete = set(s.complete_hws())
        jobs = []
        opening = self.opening.choose(cands, complete, self._best_lat)
        if opening is not None:
            jobs += opening[1]
        inc = s.hw[s.best_hw]
        for li in range(len(s.layers)):
            k = self.models.default(li, inc)
            if k is not None and not s.is_measured(inc, li, k) and len(jobs) < n:
                jobs.append((li, inc, k))
        idx = [i for i, c in enumerate(cands) if c[1].name in complete]
        if idx and n > len(jobs):
            chosen = pick(mu[idx], sd[idx], n - len(jobs))
            jobs += [cands[idx[j]] for j in chosen]
        uniq, keys = [], set()  # a default or an opening job may coincide with a pick
        for li, hw, k in jobs:
            key = (li, hw.name, Space.key(k))
            if key not in keys and not s.is_measured(hw, li, k):
                keys.add(key)
                uniq.append((li, hw, k))
        return uniq
