"""DCOC's joint hardware/software co-design: the co-design :class:`~dcoc.method.core.Problem`
and the :class:`DCOCCoDesign` driver (it decides; the :class:`~dcoc.codesign.session.Session`
measures).

State of a walker: (hardware knob positions, the software knob positions of one layer
-- over the union of that knob's choices across hardware options, mapped onto the
target's software *slots*).  With the default split the hardware agent moves the
hardware knobs, the mapping agent the tiling knobs, the scheduling agent the virtual
threads.  Reward = estimated model throughput normalized by the best measured one,
where the estimate combines the walker's layer at its schedule (predicted, or measured
when known) with every other layer's best time on that hardware (measured, or predicted
for a schedule transferred from the incumbent).  Confidence sampling picks the round's
measurements among the walks' candidates on complete hardware configs; at most one new
hardware config is opened per round, when its predicted model latency beats the
incumbent with confidence (docs/method.md).
"""
from __future__ import annotations

import math
from collections import Counter

import numpy as np

from dcoc.codesign.calibration import LayerCalibration
from dcoc.codesign.prior import training_data
from dcoc.codesign.shapes import ShapeExplorer
from dcoc.codesign.stall import StalledIncumbent
from dcoc.method.core import DCOCConfig, DCOCCore, Problem, ensemble
from dcoc.errors import DcocError
from dcoc.search.space import Knob, Space
from dcoc.seeding import child_seed

#: DCOC's agents' context length (workload descriptor + kind + share + count, zero-padded)
CONTEXT_DIM = 18


class CoDesignProblem(Problem):
    """Whole-model co-design as a :class:`~dcoc.method.core.Problem` (items: (layer, hw, knobs))."""

    #: the agents did not beat the surrogate's own search in co-design (docs/method.md §12)
    default_proposer = "surrogate"
    #: the confidence rule did not beat top-k on the same candidates (session 14, method.md §12)
    default_select = "topk"

    def __init__(self, session, board, seed: int, cfg: DCOCConfig, rng, hw_ranges=None, prior=None):
        self.s, self.seed, self.cfg, self.rng = session, seed, cfg, rng
        self.target = session.target
        self.board = self.target.board(board)
        self.ccfg = cfg.codesign
        for name, choices in (("bound", ("padded", "ideal")), ("layer_weights", ("latency", "potential")),
                              ("open_ref", ("measured", "predicted")),
                              ("gain_units", ("model", "layer")),
                              ("explore_shapes_finish", ("measured", "opened"))):
            if getattr(self.ccfg, name) not in choices:
                raise DcocError(f"unknown co-design {name} '{getattr(self.ccfg, name)}'; "
                                f"choose {' or '.join(choices)}")
        self.core = None  # set by the driver (kappa, pick)
        self.hs = self.target.hw_space(self.board, hw_ranges)
        self.hw_knobs = tuple(k.name for k in self.hs.knobs)
        self.hw_choices = [np.array(k.choices) for k in self.hs.knobs]
        L = session.layers
        slots = self.target.slots
        self.union = [self.target.sw_union(layer, self.hs) for layer in L]
        self.dims = np.array([[len(c) for c in self.hw_choices] + [len(c) for c in un] for un in self.union])
        # one joint space only to name the knobs for the agent split
        self.agent_space = Space([Knob(k.name, k.choices, "hw") for k in self.hs.knobs] +
                                 [Knob(n, (0,), "tile" if n.startswith("tile") else "thread") for n in slots])
        self.joint = self.agent_space
        self.context_dim = CONTEXT_DIM
        self.cluster_after = self.ccfg.cluster_after
        self.models = {k: ensemble(cfg, child_seed(seed, "codesign", "model", k)) for k in ("conv2d", "dense")}
        self.ymax = {"conv2d": 1.0, "dense": 1.0}
        self.data = {"conv2d": ([], []), "dense": ([], [])}   # features, efficiency
        self._seen_data: set = set()
        self._hw_cache: dict = {}
        self._space_cache: dict = {}
        self._fit_cache: dict = {}
        self._transfer: dict = {}
        self._class_time: dict = {}       # (timing key, layer, knobs key) -> measured seconds
        self._tkey: dict = {}             # hw name -> timing key (timing_classes)
        self._inc_items: tuple = ("", [])  # (hw name, its every valid (layer, hw, knobs)) (sweep_incumbent)
        self._pred_cache: dict = {}
        self._defaults: dict = {}
        self.shapes_opened: set = set()
        self.shapes = ShapeExplorer(self)  # explore_shapes (dcoc.codesign.shapes)
        self._quota: Counter = Counter()  # (hw name, layer) -> layer_quota picks
        self.rounds_since_open = 0
        self.stall = StalledIncumbent(self)  # stall_rounds (dcoc.codesign.stall)
        self.calib = LayerCalibration(self.ccfg.layer_calibration)  # (dcoc.codesign.calibration)
        self._raw_pred = None              # the last predict()'s uncalibrated times (calibration)
        self.version = 0
        self.new_hw: list = []
        self._lis = None
        self._best_lat = math.inf
        # warm start (dcoc.codesign.prior): other models' data, kept apart from this run's
        self.prior_data: dict = {}          # kind -> (features, efficiency)
        self.prior_hw: list = []            # the source runs' best configs, rebuilt for this board
        if prior is not None and len(prior):
            self._load_prior(prior)

    def _load_prior(self, prior) -> None:
        """The cost models are fitted on the prior's measurements at once, so the first
        proposals already use them (dcoc.codesign.prior.training_data)."""
        self.prior_data, self.prior_hw = training_data(prior, self)
        for kind, (X, y) in self.prior_data.items():
            self.models[kind].fit(X, y)
            self.ymax[kind] = float(y.max())
        self.version += 1

    def _training_set(self, kind: str):
        """This run's data of a kind, plus the prior's while it is kept (``prior_drop_after``)."""
        Xs, ys = self.data[kind]
        prior = self.prior_data.get(kind)
        drop = self.ccfg.prior_drop_after
        if prior is None or (drop and len(ys) >= drop):
            return (np.array(Xs), np.array(ys)) if ys else (None, None)
        if not ys:
            return prior
        return np.concatenate([np.array(Xs), prior[0]]), np.concatenate([np.array(ys), prior[1]])

    def bound(self, layer, hw) -> float:
        """The compute bound the cost models' efficiency is relative to (``CoDesignConfig.bound``)."""
        return layer.bound_seconds(hw) if self.ccfg.bound == "padded" else layer.ideal_seconds(hw)

    @property
    def kappa(self) -> float:
        return self.core.kappa if self.core is not None else self.cfg.confidence.kappa

    def shape(self, hw) -> tuple:
        return tuple(getattr(hw, k) for k in self.target.core_knobs)

    # ------------------------------------------------------------------ encodings
    def hw_of(self, hpos: tuple):
        if hpos not in self._hw_cache:
            vals = {k: int(self.hw_choices[i][p]) for i, (k, p) in enumerate(zip(self.hw_knobs, hpos))}
            reason = self.hs.check(vals)
            self._hw_cache[hpos] = None if reason else self.target.make_hw(vals, self.board)
        return self._hw_cache[hpos]

    def hw_pos(self, hw) -> tuple:
        return tuple(int(np.flatnonzero(self.hw_choices[i] == getattr(hw, k))[0])
                     for i, k in enumerate(self.hw_knobs))

    def space(self, li: int, hw) -> Space:
        key = (li, hw.name)
        if key not in self._space_cache:
            self._space_cache[key] = self.target.sw_space(self.s.layers[li], hw)
        return self._space_cache[key]

    def knobs_of(self, li: int, hw, spos: tuple) -> dict | None:
        """Union positions -> knobs valid for ``hw`` (None if a value is not a choice or does not fit)."""
        layer = self.s.layers[li]
        sp = self.space(li, hw)
        knobs = {}
        for k in sp.knobs:
            sl = self.target.slot(layer, k.name)
            v = self.union[li][sl][spos[sl]]
            if v not in k.choices:
                return None
            knobs[k.name] = v
        return knobs if self.fits(li, hw, knobs) else None

    def fits(self, li: int, hw, knobs: dict) -> bool:
        """Whether ``knobs`` is a valid schedule of layer ``li`` on ``hw`` (static check, cached)."""
        key = (li, hw.name, Space.key(knobs))
        if key not in self._fit_cache:
            self._fit_cache[key] = self.space(li, hw).is_valid(knobs)
        return self._fit_cache[key]

    # ------------------------------------------------------------------ timing classes
    def timing_key(self, hw):
        """``hw``'s timing class (None when ``timing_classes`` is off or the target has none)."""
        if not self.ccfg.timing_classes:
            return None
        if hw.name not in self._tkey:
            self._tkey[hw.name] = self.target.timing_key(hw)
        return self._tkey[hw.name]

    def class_time(self, li: int, hw, knobs: dict) -> float | None:
        """Seconds of ``knobs`` on ``hw`` known without simulating it there: measured on a
        config of ``hw``'s timing class, and the schedule fits ``hw`` (else None)."""
        tk = self.timing_key(hw)
        if tk is None:
            return None
        t = self._class_time.get((tk, li, Space.key(knobs)))
        return t if t is not None and self.fits(li, hw, knobs) else None

    def dominated(self, hw, complete) -> bool:
        """An opened config of ``hw``'s timing class has every fit knob >= ``hw``'s: every
        schedule that fits ``hw`` fits it at the same time, so ``hw`` cannot beat it."""
        tk = self.timing_key(hw)
        if tk is None:
            return False
        mine = self.target.fit_values(hw)
        return any(self.timing_key(self.s.hw[n]) == tk
                   and all(a >= b for a, b in zip(self.target.fit_values(self.s.hw[n]), mine))
                   for n in complete)

    def sw_pos(self, li: int, knobs: dict) -> tuple:
        layer = self.s.layers[li]
        pos = [0] * len(self.target.slots)
        for name, v in knobs.items():
            sl = self.target.slot(layer, name)
            pos[sl] = self.union[li][sl].index(v)
        return tuple(pos)

    def context(self, li: int) -> np.ndarray:
        layer = self.s.layers[li]
        d = self.target.descriptor(layer)
        total = sum(l.count * l.workload.macs for l in self.s.layers)
        share = layer.count * layer.workload.macs / total
        c = [math.log2(max(v, 1)) / 10.0 for v in d] + [float(layer.kind == "dense"), share,
                                                         math.log2(layer.count + 1) / 4.0]
        return np.array(c + [0.0] * (self.context_dim - len(c)), dtype=np.float32)

    # ------------------------------------------------------------------ cost model
    def _features(self, li: int, hw, knob_list: list[dict]) -> np.ndarray:
        sp = self.space(li, hw)
        pts = np.array([sp.point(k) for k in knob_list], dtype=np.int64).reshape(len(knob_list), -1)
        return sp.point_features(pts)

    def refit(self):
        """Add new measurements to the training sets and refit the cost models."""
        new = False
        for (hname, li, key), cost in self.s.measured.items():
            if (hname, li, key) in self._seen_data:
                continue
            self._seen_data.add((hname, li, key))
            self.calib.note_measured(hname, li, key, cost)
            hw = self.s.hw[hname]
            layer = self.s.layers[li]
            ok = math.isfinite(cost) and cost > 0
            tk = self.timing_key(hw)
            if tk is not None and ok:
                self._class_time[(tk, li, key)] = cost
            X = self._features(li, hw, [dict(key)])
            eff = self.bound(layer, hw) / cost if ok else 0.0
            self.data[layer.kind][0].append(X[0])
            self.data[layer.kind][1].append(eff)
            new = True
        if not new:
            return
        for kind in self.data:
            X, y = self._training_set(kind)
            if y is not None and len(y) and y.max() > 0:
                self.models[kind].fit(X, y)
                self.ymax[kind] = float(y.max())
        self.version += 1
        self._pred_cache.clear()

    def n_measured(self) -> int:
        return len(self.s.measured)

    def cluster_data(self):
        """Joint positions of every measurement and its efficiency (compute-bound / measured)."""
        pts, ys = [], []
        for (hname, li, key), cost in self.s.measured.items():
            hw = self.s.hw[hname]
            pts.append(self.hw_pos(hw) + self.sw_pos(li, dict(key)))
            ys.append(self.bound(self.s.layers[li], hw) / cost if math.isfinite(cost) and cost > 0 else 0.0)
        return np.array(pts), np.array(ys)

    def predict_many(self, items: list) -> tuple[np.ndarray, np.ndarray]:
        """(mean, std) predicted seconds of ``[(layer index, hw, knobs)]``, one model call per kind."""
        n = len(items)
        mu, sd = np.empty(n), np.empty(n)
        by_kind: dict = {}
        for i, (li, hw, k) in enumerate(items):
            t = self.class_time(li, hw, k)
            if t is not None:  # known exactly (timing_classes)
                mu[i], sd[i] = t, 0.0
                continue
            by_kind.setdefault(self.s.layers[li].kind, []).append(i)
        for kind, idx in by_kind.items():
            model = self.models[kind]
            bound = np.array([self.bound(self.s.layers[items[i][0]], items[i][1]) for i in idx])
            if not model.fitted:
                mu[idx], sd[idx] = bound * 4.0, bound * 4.0
                continue
            groups: dict = {}
            for j, i in enumerate(idx):
                groups.setdefault((items[i][0], items[i][1].name), []).append(j)
            parts, order = [], []
            for (li, _), js in groups.items():
                hw = items[idx[js[0]]][1]
                parts.append(self._features(li, hw, [items[idx[j]][2] for j in js]))
                order += js
            X = np.empty((len(idx), parts[0].shape[1]), dtype=np.float32)
            X[order] = np.concatenate(parts)
            m, d = model.predict_with_uncertainty(X)
            eff = np.maximum(m * self.ymax[kind], 1e-3)
            mu[idx] = bound / eff
            sd[idx] = bound * d * self.ymax[kind] / eff ** 2
        return mu, sd

    def predict_time(self, li: int, hw, knob_list: list[dict]) -> tuple[np.ndarray, np.ndarray]:
        """(mean, std) predicted seconds of a layer's schedules on ``hw``."""
        return self.predict_many([(li, hw, k) for k in knob_list])

    # ------------------------------------------------------------- transferred schedules
    def transfer(self, li: int, hw) -> dict | None:
        """A valid schedule for layer ``li`` on ``hw`` derived from its incumbent best."""
        key = (li, hw.name)
        if key in self._transfer:
            return self._transfer[key]
        src_hw = src = None
        if self.s.best_hw is not None and (self.s.best_hw, li) in self.s.best:
            src_hw = self.s.hw[self.s.best_hw]
            src = self.s.best[(self.s.best_hw, li)][1]
        out = self.target.transfer(self.s.layers[li], src_hw, src, hw, self.space(li, hw))
        self._transfer[key] = out
        return out

    def ensure_estimates(self, hws) -> None:
        """Predict (batched) every layer's transferred-schedule time on each of ``hws``."""
        need = []
        for hw in {h.name: h for h in hws}.values():
            for li in range(len(self.s.layers)):
                key = (li, hw.name)
                if (hw.name, li) in self.s.best or key in self._pred_cache:
                    continue
                k = self.transfer(li, hw)
                if k is None:
                    self._pred_cache[key] = math.inf
                else:
                    need.append((li, hw, k))
        if need:
            mu, _ = self.predict_many(need)
            for (li, hw, _), m in zip(need, mu):
                self._pred_cache[(li, hw.name)] = float(m)

    def layer_estimate(self, li: int, hw) -> float:
        """Best known (measured) or predicted (transferred schedule) seconds of a layer on ``hw``."""
        b = self.s.best.get((hw.name, li))
        if b is not None:
            return b[0]
        key = (li, hw.name)
        if key not in self._pred_cache:
            self.ensure_estimates([hw])
        return self._pred_cache[key]

    def model_estimate(self, hw) -> float:
        return sum(l.count * self.layer_estimate(li, hw) for li, l in enumerate(self.s.layers))

    def default(self, li: int, hw) -> dict | None:
        key = (li, hw.name)
        if key not in self._defaults:
            self._defaults[key] = self.target.default_schedule(self.s.layers[li], hw, self.space(li, hw))
        return self._defaults[key]

    def layer_weights(self, hw) -> np.ndarray:
        """Probability of each layer being a walker's layer (``CoDesignConfig.layer_weights``):
        its share of the model latency on ``hw``, or of the model's distance to the compute
        bound there (count x (best - bound), at least 5% of its latency share's weight)."""
        L = self.s.layers
        est = np.array([self.layer_estimate(i, hw) for i in range(len(L))])
        count = np.array([l.count for l in L], dtype=float)
        w = count * est
        if self.ccfg.layer_weights == "potential":
            bound = np.array([self.bound(l, hw) for l in L])
            w = np.maximum(count * np.maximum(est - bound, 0.0), 0.05 * w)
        return w / w.sum()

    # ------------------------------------------------------------------ Problem
    def starts(self, W: int):
        L = self.s.layers
        inc = self.s.hw[self.s.best_hw]
        weights = self.layer_weights(inc)
        lis = self.rng.choice(len(L), size=W, p=weights)
        opened = self.s.complete_hws()
        feasible = None
        starts, out_li = [], []
        for li in lis:
            r = self.rng.random()
            if r < self.ccfg.elite_hw_starts or len(opened) == 0:
                hw = inc
            elif r < 1 - self.ccfg.random_hw_starts:
                hw = self.s.hw[opened[int(self.rng.integers(len(opened)))]]
            else:
                if feasible is None:
                    feasible = [c for c in (self.hs.sample(self.rng) for _ in range(16))]
                hw = self.target.make_hw(feasible[int(self.rng.integers(len(feasible)))], self.board)
            b = self.s.best.get((hw.name, li))
            knobs = b[1] if b is not None else self.transfer(li, hw)
            if knobs is None:
                hw, knobs = inc, self.s.best[(inc.name, li)][1]
            starts.append(self.hw_pos(hw) + self.sw_pos(li, knobs))
            out_li.append(int(li))
        self._lis = np.array(out_li)
        self._best_lat = self.s.best_latency
        ctx = np.stack([self.context(li) for li in self._lis])
        return self.dims[self._lis], np.array(starts, dtype=np.int64), ctx

    def decode(self, p, w):
        nh = len(self.hw_knobs)
        hw = self.hw_of(tuple(int(x) for x in p[:nh]))
        if hw is None:
            return None, None
        return hw, self.knobs_of(int(self._lis[w]), hw, tuple(int(x) for x in p[nh:]))

    def valid(self, p, w) -> bool:
        return self.decode(np.asarray(p), w)[1] is not None

    def score(self, points, walkers):
        s, L, best_lat = self.s, self.s.layers, self._best_lat
        out = np.zeros(len(points))
        decoded = [(i, int(self._lis[w]), *self.decode(p, w)) for i, (p, w) in enumerate(zip(points, walkers))]
        decoded = [d for d in decoded if d[3] is not None]
        self.ensure_estimates([d[2] for d in decoded])
        model = {n: self.model_estimate(hw) for n, hw in {d[2].name: d[2] for d in decoded}.items()}
        todo, rests = [], []
        for i, li, hw, k in decoded:
            c = s.measured.get((hw.name, li, Space.key(k)))
            rest = model[hw.name] - L[li].count * self.layer_estimate(li, hw)
            if c is not None:
                out[i] = best_lat / (rest + L[li].count * c) if math.isfinite(c) else 0.0
            else:
                todo.append((i, li, hw, k))
                rests.append(rest)
        if todo:
            mu, _ = self.predict_many([(li, hw, k) for _, li, hw, k in todo])
            for (i, li, _, _), rest, m in zip(todo, rests, mu):
                out[i] = best_lat / (rest + L[li].count * m)
        return out

    def candidates(self, points, walkers, n):
        """Unmeasured valid (layer, hw, knobs): the search's points (walks or annealing) and,
        with ``sweep_incumbent`` (the default), every schedule of every layer on the incumbent."""
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
        if self.ccfg.sweep_incumbent:
            for li, hw, k in self.incumbent_items():
                key = (li, hw.name, Space.key(k))
                if key not in seen and not self.s.is_measured(hw, li, k):
                    seen.add(key)
                    cands.append((li, hw, k))
        return cands

    def incumbent_items(self) -> list:
        """Every valid schedule of every layer on the incumbent config (``sweep_incumbent``;
        none if the layers' spaces hold more than ``exhaustive_limit`` points together)."""
        inc = self.s.hw[self.s.best_hw]
        if self._inc_items[0] != inc.name:
            items = []
            if self.sweepable(inc):
                items = [(li, inc, k) for li in range(len(self.s.layers)) for k in self.valid_schedules(li, inc)]
            self._inc_items = (inc.name, items)
        return self._inc_items[1]

    def sweepable(self, hw) -> bool:
        """The layers' schedule spaces on ``hw`` hold <= ``exhaustive_limit`` points together."""
        return sum(len(self.space(li, hw)) for li in range(len(self.s.layers))) <= self.cfg.exhaustive_limit

    def valid_schedules(self, li: int, hw) -> list[dict]:
        """Every valid schedule of layer ``li`` on ``hw``."""
        sp = self.space(li, hw)
        return [k for k in sp if self.fits(li, hw, k)]

    def predict(self, cands):
        L = self.s.layers
        best_lat = self._best_lat
        self.ensure_estimates([c[1] for c in cands])
        m, d = self.predict_many(cands)
        if self.calib.on:
            self._raw_pred = (cands, m)
            f = np.array([self.calib.factor(li) for li, _, _ in cands])
            m, d = m * f, d * f
        cnt = np.array([L[li].count for li, _, _ in cands], dtype=float)
        model = {n: self.model_estimate(hw) for n, hw in {hw.name: hw for _, hw, _ in cands}.items()}
        rest = np.array([model[hw.name] - L[li].count * self.layer_estimate(li, hw)
                         for li, hw, _ in cands])
        if self.ccfg.gain_units == "layer":
            # the layer's time at which the model ties the incumbent, over the predicted time:
            # on the incumbent, the layer's normalized throughput (1.0 = its best measured)
            ref = (best_lat - rest) / cnt
            return ref / m, np.abs(ref) * d / m ** 2
        lat = rest + cnt * m
        return best_lat / lat, best_lat * cnt * d / lat ** 2

    def select(self, cands, mu, sd, n, pick):
        s, L = self.s, self.s.layers
        budget = n
        complete = set(s.complete_hws())
        self.shapes.note_complete(complete)
        jobs, self.new_hw = [], []
        # 1. open at most one new hardware config, and only when it is predicted, with
        #    confidence, to beat the incumbent's measured latency by open_margin
        explore = self.rounds_since_open >= self.ccfg.hw_explore_every
        self.stall.note_round(s.best_latency)
        opening = self.shapes.finish(cands, complete) if self.shapes.staged is not None else None
        if opening is None:
            opening = self.choose_new_hw(cands, complete, self._best_lat, explore)
        self.rounds_since_open += 1
        if opening is not None and len(opening[1]) <= s.remaining:
            hw, plan = opening
            self.new_hw.append(hw.name)
            self.rounds_since_open = 0
            jobs += plan
        else:
            self.shapes.staged = None
        # 2. a newly opened config that became the incumbent: its default-heuristic
        #    schedules too (a floor under the cost model's choice at opening)
        inc = s.hw[s.best_hw]
        for li in range(len(L)):
            k = self.default(li, inc)
            if k is not None and not s.is_measured(inc, li, k) and len(jobs) < budget:
                jobs.append((li, inc, k))
        # 3. layer_quota: the cost model's best-ranked schedule of the incumbent's layers in turn
        taken = self.layer_quota_picks(cands, mu, inc, min(self.ccfg.layer_quota, budget - len(jobs)))
        jobs += [cands[i] for i in taken]
        # 4. the rest of the round: confident candidates on complete hardware configs
        idx = [i for i, c in enumerate(cands) if c[1].name in complete and i not in taken]
        if idx and budget > len(jobs):
            chosen = pick(self.damped([cands[i] for i in idx], mu[idx]), sd[idx], budget - len(jobs))
            jobs += [cands[idx[j]] for j in chosen]
            if self._raw_pred is not None and self._raw_pred[0] is cands:
                for j in chosen:
                    li, hw, k = cands[idx[j]]
                    self.calib.note_pick(hw.name, li, Space.key(k), float(self._raw_pred[1][idx[j]]))
        self._raw_pred = None  # used once; do not hold the round's candidates until the next
        # dedupe (a completion job may coincide with a pick)
        uniq, keys = [], set()
        for li, hw, k in jobs:
            key = (li, hw.name, Space.key(k))
            if key not in keys and not s.is_measured(hw, li, k):
                keys.add(key)
                uniq.append((li, hw, k))
        return uniq

    def damped(self, cands, mu):
        """``mu`` with each predicted gain (> 1) damped by ``c / (c + f)``, f = the
        measurements of the candidate's layer on its config since that layer's best was found
        (``stale_discount`` = c; 0: ``mu`` unchanged; a predicted loss is left as it is)."""
        c = self.ccfg.stale_discount
        if c <= 0:
            return mu
        f = np.array([self.s.stale[(hw.name, li)] for li, hw, _ in cands], dtype=float)
        return np.where(mu > 1.0, 1.0 + (mu - 1.0) * c / (c + f), mu)

    def layer_quota_picks(self, cands, mu, inc, k: int) -> set:
        """Indices of ``k`` candidates: for the incumbent's layers with the fewest quota picks
        on it so far (the larger share of its latency first), each layer's candidate with the
        best predicted mean (``layer_quota``: the cost model ranks a layer's schedules better
        than it compares gains across layers, docs/method.md §5)."""
        if k <= 0:
            return set()
        best: dict = {}
        for i, (li, hw, _) in enumerate(cands):
            if hw.name == inc.name and (li not in best or mu[i] > mu[best[li]]):
                best[li] = i
        L = self.s.layers
        order = sorted(best, key=lambda li: (self._quota[(inc.name, li)],
                                             -L[li].count * self.layer_estimate(li, inc), li))
        out = set()
        for li in order[:k]:
            self._quota[(inc.name, li)] += 1
            out.add(best[li])
        return out

    def incumbent_prediction(self, cands) -> float:
        """The incumbent's model latency the cost model expects once refined: per layer the
        better of its measured best and the best predicted among ``cands`` on the incumbent
        (``open_ref="predicted"``: an unopened config, scored with its best predicted
        schedules, is compared with the incumbent scored the same way)."""
        s = self.s
        inc = s.best_hw
        per = {li: s.best[(inc, li)][0] for li in range(len(s.layers))}
        mine = [c for c in cands if c[1].name == inc]
        if mine:
            mu, _ = self.predict_many(mine)
            for (li, _, _), m in zip(mine, mu):
                per[li] = min(per[li], float(m))
        return sum(s.layers[li].count * t for li, t in per.items())

    def choose_new_hw(self, cands, complete, best_lat, explore: bool = False):
        """(hw, jobs) of the most promising unopened hardware config, or None.

        The few unopened configs the walks reached with the best cheap estimate (every
        layer at a schedule transferred from the incumbent) are scored properly: for each
        layer, the best predicted among the walks' candidates on that config, the
        transferred schedule and the default heuristic.  A config is opened only if the
        lower confidence bound of its predicted model throughput beats the incumbent's
        measured throughput (``open_ref="predicted"``: the incumbent's predicted refined
        throughput, if higher; :meth:`incumbent_prediction`) by ``open_margin``; opening
        measures that schedule for every layer (so the config's model latency becomes known).

        ``explore`` (no config opened for ``hw_explore_every`` rounds): if none passes the
        LCB rule, the shortlisted config with the highest *upper* confidence bound is
        opened, provided that bound beats the incumbent -- the hardware counterpart of the
        candidates' exploration quota (the cost model has never seen the unopened
        hardware, so its confident verdicts there are the least trustworthy).  With
        ``sweep_open_stalled`` such a round scores the shortlist as ``sweep_open`` does.
        """
        by_hw: dict = {}
        for i, (li, hw, k) in enumerate(cands):
            if hw.name not in complete:
                by_hw.setdefault(hw.name, (hw, []))[1].append(i)
        by_hw = {n: v for n, v in by_hw.items() if not self.dominated(v[0], complete)}
        # warm start: the source runs' best configs are always scored (until opened)
        extra = [hw for hw in self.prior_hw[: self.ccfg.prior_hw]
                 if hw.name not in complete and hw.name not in by_hw and not self.dominated(hw, complete)]
        if not by_hw and not extra and not (explore and self.ccfg.explore_shapes > 0):
            return None
        order = sorted(by_hw.values(), key=lambda v: self.model_estimate(v[0]))
        if self.ccfg.shortlist_by_shape:  # the best config of each core shape first
            firsts, rest, shapes = [], [], set()
            for v in order:
                sh = self.shape(v[0])
                (rest if sh in shapes else firsts).append(v)
                shapes.add(sh)
            order = firsts + rest
        ranked = order[: self.ccfg.new_hw_shortlist]
        ranked += [(hw, []) for hw in extra]
        if self.ccfg.open_ref == "predicted":
            best_lat = min(best_lat, self.incumbent_prediction(cands))
        best, best_ucb = None, None
        for hw, idx in ranked:
            sweep = (self.ccfg.sweep_open or (explore and self.ccfg.sweep_open_stalled)) and self.sweepable(hw)
            mu_lat, var_lat, plan, _ = self.opening_plan(hw, [cands[i] for i in idx], sweep)
            if not math.isfinite(mu_lat) or not plan:
                continue
            thr = best_lat / mu_lat
            half = self.kappa * best_lat * math.sqrt(var_lat) / mu_lat ** 2
            lcb, ucb = thr - half, thr + half
            if self.shape(hw) not in self.shapes_opened:  # optimism for never-measured core shapes
                lcb += self.ccfg.new_shape_bonus
                ucb += self.ccfg.new_shape_bonus
            if lcb > 1.0 + self.ccfg.open_margin and (best is None or lcb > best[0]):
                best = (lcb, hw, plan)
            if ucb > 1.0 and (best_ucb is None or ucb > best_ucb[0]):
                best_ucb = (ucb, hw, plan)
        if best is None and explore and self.ccfg.explore_shapes > 0:
            best = self.shapes.new_shape(complete, best_lat)
        if best is None and explore:
            best = best_ucb
        if best is None and explore and self.stall.stalled():
            best = self.stall.opening(complete)
        if best is None:
            return None
        hw = best[1]
        self.shapes_opened.add(self.shape(hw))
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
            opts += [k for k in (self.transfer(lj, hw), self.default(lj, hw)) if k is not None]
            if sweep:
                opts += self.valid_schedules(lj, hw)
            opts = list({Space.key(k): k for k in opts}.values())
            if not opts:
                return math.inf, 0.0, [], []
            m, d = self.predict_time(lj, hw, opts)
            j = int(np.argmin(m))
            mu_lat += layer.count * m[j]
            var_lat += (layer.count * d[j]) ** 2
            plan.append((lj, hw, opts[j]))
            times.append(float(m[j]))
        return mu_lat, var_lat, plan, times

class DCOCCoDesign:
    """DCOC's co-design driver: ask = a round of :class:`~dcoc.method.core.DCOCCore`, tell = nothing
    to learn beyond what the session recorded (the problem reads the session).

    First ask: every layer's default schedule on the board's default hardware (the same
    start as every baseline).  When a round finds nothing new, the search widens around
    the incumbent with a few random schedules (``fill``); when that finds nothing either,
    the driver is done.
    """

    def __init__(self, session, board, seed: int, agents: str = "dcoc",
                 config: DCOCConfig | None = None, hw_ranges: dict | None = None, prior=None, **variant):
        from dataclasses import replace

        cfg = replace(config) if config is not None else DCOCConfig()
        if variant:
            cfg = replace(cfg, **variant)
        cfg.agents = agents
        self.cfg = cfg
        self.s, self.seed = session, seed
        self.board = session.target.board(board)
        self.rng = np.random.default_rng(child_seed(seed, "codesign"))
        from dcoc.codesign.prior import as_prior

        self.prior = as_prior(prior, session.target.name, self.board)
        self.problem = CoDesignProblem(session, self.board, seed, cfg, self.rng, hw_ranges, prior=self.prior)
        self.core = DCOCCore(self.problem, cfg, self.rng,
                             agent_seed=lambda n: child_seed(seed, "codesign", "agents", n))
        if self.prior is not None and self.prior.agents is not None and cfg.codesign.prior_agents:
            self.core.agent_init = self.prior.agents
        self.problem.core = self.core
        if agents != "dcoc" and self.core.proposer == "surrogate":
            raise DcocError(f"agents '{agents}' has no effect: this co-design proposes with the cost "
                            "model's own search, not agents (docs/method.md §12); use the tuner "
                            "dcoc-agents (or dcoc-frozen) to search with agents")
        self.log: list[dict] = []
        self._phase = "start"
        self._fill = None
        self._asked = None

    # compatibility views
    @property
    def agents(self):
        return self.core.agents

    @property
    def uses_agents(self) -> bool:
        return self.core.uses_agents

    def agent_state(self) -> dict | None:
        """The agents' weights after the run (``Prior.agents`` of a later warm start)."""
        return self.core.agent_state()

    def ask(self) -> list[tuple]:
        s = self.s
        if self._phase == "start":
            from dcoc.codesign.software import default_jobs

            default = s.target.default_hw(self.board)
            self.problem.shapes_opened.add(self.problem.shape(default))
            self._phase = "check"
            self._asked = ("default", default)
            return default_jobs(s, default)
        while True:
            if self._fill is not None:
                st = self._fill
                jobs = st.ask()
                if jobs:
                    self._asked = ("fill", None)
                    return jobs
                self._fill = None
                if st.used == 0:
                    return []
            jobs = self.core.propose(min(self.cfg.codesign.round_size, s.remaining))
            if jobs:
                self._asked = ("round", None)
                return jobs
            # the walks found nothing new: widen the search around the incumbent
            from dcoc.codesign.software import SoftwareTuning

            inc = s.hw[s.best_hw]
            self._fill = SoftwareTuning(s, inc, "random", child_seed(self.seed, "fill", s.trials),
                                        budget=min(8, s.remaining))

    def tell(self, jobs, results) -> None:
        s = self.s
        what, hw = self._asked
        if what == "default":
            if s.latency(hw.name) is None:
                raise DcocError(f"no default schedule fits {hw.name} for every layer")
            self._phase = "rounds"
        elif what == "fill":
            self._fill.tell(jobs, results)
            if self._fill.used >= self._fill.budget:
                self._fill = None
        else:
            self.log.append({"round": len(self.log) + 1, "trials": s.trials,
                             "candidates": self.core.log[-1]["candidates"],
                             "new_hw": list(self.problem.new_hw), "best_latency_ms": s.best_latency * 1e3,
                             **{k: v for k, v in self.core.log[-1].items() if k not in ("round", "candidates")}})

    def run(self) -> None:
        self.s.run(self)


def config_tag(cfg: DCOCConfig | None = None) -> str:
    """8 hex digits naming co-design DCOC's effective defaults (``cfg``, default
    :class:`DCOCConfig`, and the problem's default proposer): cached benchmark runs are keyed
    by it, so a changed default never reuses runs made under the old one."""
    import hashlib

    cfg = cfg if cfg is not None else DCOCConfig()
    p = CoDesignProblem
    return hashlib.sha256(f"{cfg!r}|{p.default_proposer}|{p.default_select}|{p.default_learn}".encode()).hexdigest()[:8]
