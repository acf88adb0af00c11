"""The cost models of co-design and the latency estimates built on them.

Two XGBoost ensembles (conv2d, dense) are shared by every layer and hardware config.  They
learn *efficiency* = padded compute bound / measured seconds (the bound is the layer's work
padded to the core's tiles, one GEMM per cycle: ``Layer.bound_seconds``), which is
comparable across layers and hardware, so a predicted time is ``bound / predicted
efficiency``.  A warm start (:mod:`dcoc.codesign.prior`) adds other models' measurements.

A layer's time on a config is its best measured schedule there, or the prediction for the
incumbent's best schedule *transferred* to that config (channel tiles rescaled, shrunk
until they fit); a model's estimated latency sums them.
"""
from __future__ import annotations

import math
from collections import Counter

import numpy as np

from dcoc.errors import DcocError
from dcoc.method.core import ensemble
from dcoc.seeding import child_seed

KINDS = ("conv2d", "dense")


def training_data(prior, enc) -> tuple[dict, list]:
    """The prior as co-design data: ``({kind: (features, efficiency)}, hw)``.

    Features and efficiencies (padded compute bound / measured seconds, 0 for a failed
    measurement) are computed as for the run's own measurements; rows of kinds co-design
    has no cost model for, or outside the target's spaces, are skipped.  ``hw``: the
    prior's best configs rebuilt on the board of ``enc`` (a
    :class:`~dcoc.codesign.encoding.JointEncoding`), those outside its hardware space left
    out, best first.
    """

    groups: dict = {}
    for layer, hw, knobs, cost in prior.rows:
        if layer.kind in KINDS:
            groups.setdefault((layer.key, hw.name), (layer, hw, []))[2].append((knobs, cost))
    feats: dict = {}
    for layer, hw, rows in groups.values():
        sp = enc.target.sw_space(layer, hw)
        pts, ys = [], []
        for knobs, cost in rows:
            try:
                pts.append(sp.point(knobs))
            except (DcocError, KeyError, ValueError):
                continue  # a schedule outside this target's space
            ys.append(layer.bound_seconds(hw) / cost if math.isfinite(cost) and cost > 0 else 0.0)
        if pts:
            Xs, ys_ = feats.setdefault(layer.kind, ([], []))
            Xs.append(sp.point_features(np.array(pts, dtype=np.int64)))
            ys_.append(np.array(ys))
    data: dict = {}
    for kind, (Xs, ys) in feats.items():
        width = Counter(x.shape[1] for x in Xs).most_common(1)[0][0]
        keep = [i for i, x in enumerate(Xs) if x.shape[1] == width]
        X = np.concatenate([Xs[i] for i in keep])
        y = np.concatenate([ys[i] for i in keep])
        if len(y) and y.max() > 0:
            data[kind] = (X, y)
    hws, names = [], set()
    for hw in prior.best_hw:
        vals = {k: getattr(hw, k, None) for k in enc.hw_knobs}
        if any(v not in c for v, c in zip(vals.values(), enc.hw_choices)) or enc.hs.check(vals):
            continue
        h = enc.target.make_hw(vals, enc.board)
        if h.name not in names:
            names.add(h.name)
            hws.append(h)
    return data, hws


class CoDesignModels:
    """Cost models, their training data and the estimates of one co-design run."""

    def __init__(self, session, enc, cfg, seed: int, prior=None):
        self.s, self.enc = session, enc
        self.models = {k: ensemble(cfg, child_seed(seed, "codesign", "model", k)) for k in KINDS}
        self.ymax = {k: 1.0 for k in KINDS}
        self.data = {k: ([], []) for k in KINDS}    # features, efficiency
        self._seen: set = set()
        self._transfer: dict = {}
        self._pred_cache: dict = {}
        self._defaults: dict = {}
        self.version = 0
        # warm start: other models' data, kept apart from this run's
        self.prior_data: dict = {}          # kind -> (features, efficiency)
        self.prior_hw: list = []            # the source runs' best configs, rebuilt for this board
        if prior is not None and len(prior):
            self.prior_data, self.prior_hw = training_data(prior, enc)
            for kind, (X, y) in self.prior_data.items():
                self.models[kind].fit(X, y)
                self.ymax[kind] = float(y.max())
            self.version += 1

    def _training_set(self, kind: str):
        Xs, ys = self.data[kind]
        prior = self.prior_data.get(kind)
        if prior is None:
            return (np.array(Xs), np.array(ys)) if ys else (None, None)
        if not ys:
            return prior
        return np.concatenate([np.array(Xs), prior[0]]), np.concatenate([np.array(ys), prior[1]])

    def refit(self) -> None:
        """Add the session's new measurements to the training sets and refit."""
        new = False
        for (hname, li, key), cost in self.s.measured.items():
            if (hname, li, key) in self._seen:
                continue
            self._seen.add((hname, li, key))
            hw = self.s.hw[hname]
            layer = self.s.layers[li]
            X = self.enc.features(li, hw, [dict(key)])
            eff = layer.bound_seconds(hw) / cost if math.isfinite(cost) and cost > 0 else 0.0
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

    def predict_many(self, items: list) -> tuple[np.ndarray, np.ndarray]:
        """(mean, std) predicted seconds of ``[(layer index, hw, knobs)]``, one model call per kind."""
        n = len(items)
        mu, sd = np.empty(n), np.empty(n)
        by_kind: dict = {}
        for i, (li, _, _) in enumerate(items):
            by_kind.setdefault(self.s.layers[li].kind, []).append(i)
        for kind, idx in by_kind.items():
            model = self.models[kind]
            bound = np.array([self.s.layers[items[i][0]].bound_seconds(items[i][1]) for i in idx])
            if not model.fitted:
                mu[idx], sd[idx] = bound * 4.0, bound * 4.0
                continue
            groups: dict = {}
            for j, i in enumerate(idx):
                groups.setdefault((items[i][0], items[i][1].name), []).append(j)
            parts, order = [], []
            for (li, _), js in groups.items():
                hw = items[idx[js[0]]][1]
                parts.append(self.enc.features(li, hw, [items[idx[j]][2] for j in js]))
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

    def transfer(self, li: int, hw) -> dict | None:
        """A valid schedule for layer ``li`` on ``hw`` derived from its incumbent best."""
        key = (li, hw.name)
        if key in self._transfer:
            return self._transfer[key]
        s = self.s
        src_hw = src = None
        if s.best_hw is not None and (s.best_hw, li) in s.best:
            src_hw = s.hw[s.best_hw]
            src = s.best[(s.best_hw, li)][1]
        out = s.target.transfer(s.layers[li], src_hw, src, hw, self.enc.space(li, hw))
        self._transfer[key] = out
        return out

    def default(self, li: int, hw) -> dict | None:
        """The target's default schedule of layer ``li`` on ``hw`` (None if none fits)."""
        key = (li, hw.name)
        if key not in self._defaults:
            self._defaults[key] = self.s.target.default_schedule(self.s.layers[li], hw, self.enc.space(li, hw))
        return self._defaults[key]

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
        """Best measured or predicted (transferred schedule) seconds of a layer on ``hw``."""
        b = self.s.best.get((hw.name, li))
        if b is not None:
            return b[0]
        key = (li, hw.name)
        if key not in self._pred_cache:
            self.ensure_estimates([hw])
        return self._pred_cache[key]

    def model_estimate(self, hw) -> float:
        """The model's estimated latency on ``hw`` (seconds)."""
        return sum(l.count * self.layer_estimate(li, hw) for li, l in enumerate(self.s.layers))

    def layer_weights(self, hw) -> np.ndarray:
        """Probability of each layer being a search start's layer: its share of ``hw``'s latency."""
        L = self.s.layers
        w = np.array([l.count * self.layer_estimate(i, hw) for i, l in enumerate(L)])
        return w / w.sum()
