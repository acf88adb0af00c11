"""ModelBasedTuner: AutoTVM's loop of "fit a cost model, optimize it, measure its best".

Source: ``python/tvm/autotvm/tuner/model_based_tuner.py`` (TVM <= 0.19), with the
``next_update`` bookkeeping of CHAMELEON's copy (``anony-sub/chameleon``,
``chameleon/tuner/model_based_tuner.py``) so that plans shorter than ``plan_size`` (adaptive
sampling) trigger the next refit as soon as they are measured.

The loop:

1. Until the model has data, every proposal is uniformly random (unvisited, proposable).
2. When ``len(xs) >= next_update`` (initially ``plan_size``) and some config succeeded,
   the cost model is refit on all observations (``y = flop / cost``, 0 for failures) and
   the optimizer returns the model's top unvisited points (``find_maximums(model, num,
   exclusive)``).  With ``diversity_filter_ratio`` r, it returns ``r * plan_size`` candidates
   and :func:`submodular_pick` keeps ``plan_size`` diverse ones (AutoTVM calls it with zeroed
   scores, i.e. pure knob diversity with ties broken by model rank; kept as is).  The plan
   is then post-processed by :meth:`ModelBasedTuner.postprocess_plan` (CHAMELEON's sampler
   hook), and ``next_update = len(xs) + len(plan)``.
3. ``next_batch`` walks the plan, skipping visited/unproposable points; once only the last
   ``int(eps * plan_size)`` entries of a plan remain, proposals are random (epsilon-greedy,
   eps = 0.05 as AutoTVM's hard-coded 5%).

Points and indices: the optimizers work on int64 *points* (one choice index per knob,
shape (n, n_knobs)) and identify them by their mixed-radix *index* (``Space.index``),
converted in bulk by :class:`PointCodec`.  The model sees ``space.point_features(points)``.
Every proposal is recorded in ``self.proposed`` (indices) the moment it is handed out, so a
batch never repeats a config and optimizers exclude in-flight configs too.

Also here: :class:`SimulatedAnnealingOptimizer` (AutoTVM's ``sa_model_optimizer.py``,
numpy-vectorised over the parallel chains), :class:`TopK` (the bounded heap the optimizers
share) and :class:`PointModel` (a cost model seen through the space, with a prediction
cache for spaces up to ``2**21`` points).
"""
from __future__ import annotations

import heapq
import math
from typing import Iterable

import numpy as np

from dcoc.errors import DcocError
from dcoc.method.costmodel import XGBCostModel
from dcoc.search.measure import MeasureInput, MeasureResult
from dcoc.tuners.tuner import Tuner
from dcoc.tuners.warmup import WARMUP_SIZE, initial_points

#: spaces up to this many points cache model predictions per index (float64: 16 MiB)
CACHE_LIMIT = 1 << 21


# --------------------------------------------------------------------------- helpers
class PointCodec:
    """Bulk conversion between points (n, n_knobs) and mixed-radix indices (n,)."""

    def __init__(self, space):
        if space.size >= 2 ** 62:
            raise DcocError(f"space '{space.name}' has {space.size} points; model-based tuners "
                            "index points with int64 and support at most 2**62")
        self.dims = np.array(space.dims, dtype=np.int64)
        strides, s = [], 1
        for r in reversed(space.dims):
            strides.append(s)
            s *= r
        self.strides = np.array(list(reversed(strides)), dtype=np.int64)
        self.size = int(space.size)

    def index(self, points) -> np.ndarray:
        points = np.asarray(points, dtype=np.int64).reshape(-1, len(self.dims))
        return points @ self.strides

    def points(self, indices) -> np.ndarray:
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        return (idx[:, None] // self.strides[None, :]) % self.dims[None, :]

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``min(n, size)`` distinct random indices."""
        n = min(int(n), self.size)
        if self.size <= 4 * n or self.size <= CACHE_LIMIT:
            return rng.choice(self.size, size=n, replace=False).astype(np.int64)
        out = np.unique(rng.integers(0, self.size, size=2 * n))
        while len(out) < n:
            out = np.unique(np.concatenate([out, rng.integers(0, self.size, size=n)]))
        return rng.permutation(out)[:n]


class PointModel:
    """A cost model seen through a space: ``predict(points) -> scores``.

    Predictions are cached per index for spaces up to :data:`CACHE_LIMIT` points, so
    optimizers that revisit neighbourhoods (SA, RL walks) pay for each point once per fit.
    """

    def __init__(self, model, space, codec: PointCodec | None = None):
        self.model = model
        self.space = space
        self.codec = codec or PointCodec(space)
        self._cache = np.full(self.codec.size, np.nan) if self.codec.size <= CACHE_LIMIT else None

    def predict(self, points) -> np.ndarray:
        points = np.asarray(points, dtype=np.int64).reshape(-1, len(self.codec.dims))
        if len(points) == 0:
            return np.zeros(0)
        if self._cache is None:
            return np.asarray(self.model.predict(self.space.point_features(points)), dtype=np.float64)
        idx = self.codec.index(points)
        out = self._cache[idx]
        miss = np.isnan(out)
        if miss.any():
            uidx, first = np.unique(idx[miss], return_index=True)
            upts = points[miss][first]
            self._cache[uidx] = self.model.predict(self.space.point_features(upts))
            out = self._cache[idx]
        return out


class TopK:
    """The ``num`` best distinct indices seen, excluding ``exclusive`` (a container of indices).

    AutoTVM's heap of ``(score, index)`` items; :meth:`push` is vectorised up to the items
    that beat the current minimum.
    """

    def __init__(self, num: int, exclusive):
        self.num = int(num)
        self.exclusive = exclusive
        self.heap: list[tuple[float, int]] = []
        self.members: set[int] = set()

    @property
    def threshold(self) -> float:
        return self.heap[0][0] if len(self.heap) >= self.num else -math.inf

    def push(self, scores, indices) -> bool:
        """Offer candidates; returns whether the heap changed."""
        if self.num <= 0:
            return False
        scores = np.asarray(scores, dtype=np.float64)
        indices = np.asarray(indices, dtype=np.int64)
        mask = scores > self.threshold
        if not mask.any():
            return False
        changed = False
        order = np.argsort(-scores[mask], kind="stable")
        for s, i in zip(scores[mask][order].tolist(), indices[mask][order].tolist()):
            if i in self.members or not s > self.threshold or i in self.exclusive:
                continue
            if len(self.heap) < self.num:
                heapq.heappush(self.heap, (s, i))
            else:
                _, old = heapq.heapreplace(self.heap, (s, i))
                self.members.discard(old)
            self.members.add(i)
            changed = True
        return changed

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """(indices, scores), best first."""
        items = sorted(self.heap, key=lambda t: (-t[0], t[1]))
        return (np.array([i for _, i in items], dtype=np.int64),
                np.array([s for s, _ in items], dtype=np.float64))


def submodular_pick(scores, knobs, n_pick: int, knob_weight: float = 1.0) -> list[int]:
    """Greedy pick of ``n_pick`` items maximizing ``sum(scores) + knob_weight * #unique knob values``.

    AutoTVM's ``submodular_pick`` (monotone submodular objective; greedy with ties broken
    by the lowest position), vectorised over the candidates.

    scores: (n,) floats; knobs: (n, n_knobs) ints (choice indices).  Returns positions.
    """
    scores = np.asarray(scores, dtype=np.float64)
    knobs = np.asarray(knobs, dtype=np.int64).reshape(len(scores), -1)
    n, d = knobs.shape
    n_pick = min(int(n_pick), n)
    seen = [np.zeros(int(knobs[:, j].max()) + 1 if n else 1, dtype=bool) for j in range(d)]
    remain = np.ones(n, dtype=bool)
    out = []
    for _ in range(n_pick):
        new_vals = np.zeros(n)
        for j in range(d):
            new_vals += ~seen[j][knobs[:, j]]
        delta = np.where(remain, scores + knob_weight * new_vals, -np.inf)
        x = int(np.argmax(delta))
        out.append(x)
        remain[x] = False
        for j in range(d):
            seen[j][knobs[x, j]] = True
    return out


class _Exclusion:
    """``index in exclusion`` iff the tuner has proposed it or it fails the constraints."""

    def __init__(self, tuner: "ModelBasedTuner"):
        self.tuner = tuner

    def __contains__(self, index) -> bool:
        t = self.tuner
        index = int(index)
        return index in t.proposed or not t.feasible(index)


# ------------------------------------------------------------------------ optimizers
class ModelOptimizer:
    """Finds the top points of a cost model (AutoTVM's ``ModelOptimizer``)."""

    def find_maximums(self, model: PointModel, num: int, exclusive) -> np.ndarray:
        """Up to ``num`` distinct indices, best predicted first, none in ``exclusive``."""
        raise NotImplementedError


class SimulatedAnnealingOptimizer(ModelOptimizer):
    """AutoTVM's parallel simulated annealing over the cost model.

    Source: ``python/tvm/autotvm/tuner/sa_model_optimizer.py`` (TVM <= 0.19).
    ``parallel_size`` chains start from random points (kept across calls when
    ``persistent``); each iteration every chain proposes a random neighbour (one knob set to
    another value: AutoTVM's ``random_walk``), accepted with probability
    ``exp((new - old) / t)``, ``t`` cooling linearly from ``temp[0]`` to ``temp[1]`` over
    ``n_iter``; stops after ``n_iter`` iterations or ``early_stop`` iterations without a
    change of the top-``num`` heap.  All chains move in one numpy step.
    """

    def __init__(self, codec: PointCodec, rng: np.random.Generator, n_iter: int = 500,
                 temp=(1, 0), persistent: bool = True, parallel_size: int = 128,
                 early_stop: int = 50):
        self.codec = codec
        self.rng = rng
        self.n_iter = int(n_iter)
        self.temp = temp
        self.persistent = persistent
        self.parallel_size = int(min(parallel_size, codec.size))
        self.early_stop = int(early_stop) if early_stop else 10 ** 9
        self.points: np.ndarray | None = None
        self.last_iters = 0

    def random_walk(self, points: np.ndarray) -> np.ndarray:
        """Each point with one knob changed to a different value, uniformly.

        Same distribution as AutoTVM's rejection loop (pick a knob and a value until the
        value differs): knob d is chosen with probability proportional to (r_d - 1) / r_d.
        """
        dims = self.codec.dims
        weight = np.where(dims > 1, (dims - 1) / dims, 0.0)
        if weight.sum() == 0:
            return points.copy()
        n = len(points)
        d = self.rng.choice(len(dims), size=n, p=weight / weight.sum())
        step = 1 + (self.rng.random(n) * (dims[d] - 1)).astype(np.int64)
        new = points.copy()
        rows = np.arange(n)
        new[rows, d] = (points[rows, d] + step) % dims[d]
        return new

    def find_maximums(self, model, num, exclusive):
        if self.persistent and self.points is not None:
            points = self.points
        else:
            points = self.codec.points(self.codec.sample(self.rng, self.parallel_size))
        scores = model.predict(points)
        top = TopK(num, exclusive)
        top.push(scores, self.codec.index(points))

        t = float(self.temp[0]) if isinstance(self.temp, (tuple, list)) else float(self.temp)
        cool = ((self.temp[0] - self.temp[1]) / (self.n_iter + 1)
                if isinstance(self.temp, (tuple, list)) else 0.0)
        k = k_last_modify = 0
        while k < self.n_iter and k < k_last_modify + self.early_stop:
            new_points = self.random_walk(points)
            new_scores = model.predict(new_points)
            with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
                ac_prob = np.exp(np.minimum((new_scores - scores) / max(t, 1e-12), 50.0))
            accept = self.rng.random(len(points)) < ac_prob
            points[accept] = new_points[accept]
            scores[accept] = new_scores[accept]
            if top.push(new_scores, self.codec.index(new_points)):
                k_last_modify = k
            k += 1
            t -= cool
        self.last_iters = k
        if self.persistent:
            self.points = points
        return top.result()[0]


# ---------------------------------------------------------------------------- tuner
class ModelBasedTuner(Tuner):
    """Base of the cost-model tuners (XGB, RL, CHAMELEON).

    Parameters
    ----------
    task, seed, skip_invalid: see :class:`~dcoc.tuners.tuner.Tuner`.
    cost_model: an object with ``fit(X, y)`` and ``predict(X)`` (e.g. :class:`XGBCostModel`).
    optimizer: a :class:`ModelOptimizer`.
    plan_size: refit the model every ``plan_size`` measurements (AutoTVM: 64).
    n_init: the warm-up: the first ``n_init`` proposals are the shared initial sample of
        :func:`dcoc.tuners.warmup.initial_points` (the same for every model-based tuner
        with this seed and task) and the model is first fitted after them.  ``None``:
        AutoTVM's own warm-up (``plan_size`` uniformly random trials).
    diversity_filter_ratio: None, or r >= 1: diversity-aware selection of the plan from the
        model's top ``r * plan_size`` points.
    eps: fraction of each plan (``int(eps * plan_size)`` trials) proposed at random.
    """

    name = "model_based"

    def __init__(self, task, cost_model=None, optimizer: ModelOptimizer | None = None,
                 plan_size: int = 64, diversity_filter_ratio: float | None = None,
                 eps: float = 0.05, seed: int = 0, n_init: int | None = WARMUP_SIZE, **kwargs):
        super().__init__(task, seed=seed, **kwargs)
        if diversity_filter_ratio is not None and diversity_filter_ratio < 1:
            raise ValueError("diversity_filter_ratio must be >= 1")
        self.codec = PointCodec(self.space)
        self.cost_model = cost_model
        self.optimizer = optimizer
        self.plan_size = int(plan_size)
        self.diversity_filter_ratio = diversity_filter_ratio
        self.eps = float(eps)
        # trial plan (indices) and the proposal bookkeeping
        self.plan = np.zeros(0, dtype=np.int64)
        self.plan_pt = 0
        self.proposed: set[int] = set()
        self._feasible: dict[int, bool] = {}
        self._exhausted = False
        self.exclusion = _Exclusion(self)
        # observations
        self.xs: list[tuple] = []
        self.ys: list[float] = []
        self.y_max = 0.0
        self.train_ct = 0
        self.n_init = None if n_init is None else max(1, int(n_init))
        self.next_update = self.plan_size if self.n_init is None else self.n_init
        self._warmup: list[int] | None = None  # indices of the shared initial sample, not yet proposed

    # ------------------------------------------------------------ feasibility
    def feasible(self, index: int) -> bool:
        """Whether the config at ``index`` may ever be proposed: :meth:`Tuner.proposable`
        apart from its visited test (visited configs are excluded through ``proposed``).
        Cached per index, so a subclass's ``proposable`` filter is honoured too."""
        ok = self._feasible.get(index)
        if ok is None:
            cfg = self.space.get(index)
            ok = True if self.is_visited(cfg) else self.proposable(cfg)
            self._feasible[index] = ok
        return ok

    def _random_index(self) -> int | None:
        """A random unproposed feasible index, or None when none is left."""
        for _ in range(64):
            i = int(self.rng.integers(self.codec.size))
            if i not in self.proposed and self.feasible(i):
                return i
        if self.codec.size > CACHE_LIMIT:  # huge space: keep trying a while longer
            for _ in range(100_000):
                i = int(self.rng.integers(self.codec.size))
                if i not in self.proposed and self.feasible(i):
                    return i
            return None
        blocked = np.fromiter(self.proposed, dtype=np.int64, count=len(self.proposed))
        infeasible = [i for i, ok in self._feasible.items() if not ok]
        rest = np.setdiff1d(np.arange(self.codec.size, dtype=np.int64),
                            np.concatenate([blocked, np.array(infeasible, dtype=np.int64)]))
        for i in self.rng.permutation(rest).tolist():
            if self.feasible(i):
                return i
        return None

    # ----------------------------------------------------------------- propose
    def _next_warmup(self) -> int | None:
        """The next index of the shared initial sample still to propose, or None."""
        if self._warmup is None:
            pts = initial_points(self.space, self.seed, self.n_init or 0, self.task.workload_key)
            self._warmup = [int(i) for i in self.codec.index(pts)] if pts else []
        while self._warmup:
            i = self._warmup.pop(0)
            if i not in self.proposed and self.feasible(i):
                return i
        return None

    def next_batch(self, batch_size):
        out = []
        n_eps = int(self.eps * self.plan_size)
        while len(out) < batch_size:
            if self.n_init and self.train_ct == 0 and len(self.plan) == 0:
                i = self._next_warmup()
                if i is not None:
                    cfg = self.space.get(i)
                    self.proposed.add(i)
                    if not self.is_visited(cfg):
                        out.append(cfg)
                    continue
            while self.plan_pt < len(self.plan):
                i = int(self.plan[self.plan_pt])
                if i not in self.proposed and self.feasible(i):
                    break
                self.plan_pt += 1
            if self.plan_pt >= len(self.plan) - n_eps:  # empty plan or its epsilon tail
                i = self._random_index()
                if i is None:
                    self._exhausted = True
                    break
            else:
                i = int(self.plan[self.plan_pt])
                self.plan_pt += 1
            cfg = self.space.get(i)
            if self.is_visited(cfg):  # observed through another path (tell, resume)
                self.proposed.add(i)
                continue
            self.proposed.add(i)
            out.append(cfg)
        return out

    def has_next(self):
        return not self._exhausted and len(self.proposed) < self.codec.size

    # ------------------------------------------------------------------ update
    def _score(self, inp: MeasureInput, res: MeasureResult) -> float:
        if not res.valid or not res.cost > 0 or not math.isfinite(res.cost):
            return 0.0
        flop = getattr(inp.task, "flop", 0.0) or 0.0
        return (flop if flop > 0 else 1.0) / res.cost

    def update(self, inputs, results):
        for inp, res in zip(inputs, results):
            point = self.space.point(inp.config)
            self.proposed.add(int(self.codec.index([point])[0]))
            y = self._score(inp, res)
            self.xs.append(point)
            self.ys.append(y)
            self.y_max = max(self.y_max, y)
        if len(self.xs) >= self.next_update and self.y_max > 1e-12:
            self.refit()

    def refit(self) -> None:
        """Fit the model on every observation and plan the next trials."""
        X = self.space.point_features(np.array(self.xs, dtype=np.int64))
        self.cost_model.fit(X, np.array(self.ys))
        self.plan = np.asarray(self.postprocess_plan(self.make_plan()), dtype=np.int64)
        self.plan_pt = 0
        self.train_ct += 1
        self.next_update = len(self.xs) + max(1, len(self.plan))

    def point_model(self, model=None) -> PointModel:
        return PointModel(model if model is not None else self.cost_model, self.space, self.codec)

    def make_plan(self, model=None) -> np.ndarray:
        """The optimizer's top points of the model, diversity-filtered if configured."""
        pm = self.point_model(model)
        ratio = self.diversity_filter_ratio
        if not ratio:
            return self.optimizer.find_maximums(pm, self.plan_size, self.exclusion)
        cand = self.optimizer.find_maximums(pm, int(self.plan_size * ratio), self.exclusion)
        if len(cand) == 0:
            return cand
        knobs = self.codec.points(cand)
        scores = pm.predict(knobs)
        pick = submodular_pick(0 * scores, knobs, self.plan_size, knob_weight=1)
        return cand[pick]

    def postprocess_plan(self, plan: np.ndarray) -> np.ndarray:
        """Hook between the optimizer and the measurements (CHAMELEON's sampler); identity here."""
        return plan

    # ------------------------------------------------------------------ history
    def load_history(self, data_set: Iterable, min_seed_records: int = 500) -> bool:
        """Transfer learning from earlier measurements (AutoTVM's ``load_history``).

        ``data_set``: ``(MeasureInput, MeasureResult)`` pairs or records rows (dicts with
        ``knobs`` and ``cost``/``valid``, e.g. ``Records.filter(...)``).  Entries whose
        config is not in this space are skipped.  With at least ``min_seed_records`` usable
        entries a base model is fitted on them; if no plan exists yet its top points become
        the first plan, and the tuner's own model starts from the base model's discounted
        margin.  Returns whether the history was used.
        """
        pts, ys = [], []
        for item in data_set:
            if isinstance(item, dict):
                cfg, cost = item.get("knobs", {}), item.get("cost")
                valid = bool(item.get("valid", cost is not None))
                flop = self.task.flop
            else:
                inp, res = item
                cfg, valid = inp.config, res.valid
                cost = res.cost
                flop = getattr(inp.task, "flop", self.task.flop)
            if cfg not in self.space:
                continue
            pts.append(self.space.point(cfg))
            ok = valid and cost is not None and math.isfinite(cost) and cost > 0
            ys.append(((flop or 1.0) / cost) if ok else 0.0)
        if len(pts) < min_seed_records or max(ys, default=0.0) <= 0:
            return False
        base = self.cost_model.spawn_base_model()
        base.fit(self.space.point_features(np.array(pts, dtype=np.int64)), np.array(ys))
        if len(self.plan) == 0:
            self.plan = np.asarray(self.make_plan(base), dtype=np.int64)
            self.plan_pt = 0
        self.cost_model.load_basemodel(base)
        return True


def default_cost_model(loss: str, seed: int, plan_size: int, num_threads: int = 1, **params):
    """AutoTVM's XGBoost cost model with this tuner's seed."""
    return XGBCostModel(loss=loss, seed=seed, nthread=num_threads, recall_n=plan_size, **params)


__all__ = [
    "CACHE_LIMIT", "ModelBasedTuner", "ModelOptimizer", "PointCodec", "PointModel",
    "SimulatedAnnealingOptimizer", "TopK", "default_cost_model", "submodular_pick",
]
