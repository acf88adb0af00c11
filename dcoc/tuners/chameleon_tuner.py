"""ChameleonTuner: RL adaptive exploration + adaptive sampling + sample synthesis.

Source: CHAMELEON (Ahn, Pilligundla, Yazdanbakhsh, Esmaeilzadeh, ICLR 2020), official code
https://github.com/anony-sub/chameleon (``chameleon/tuner/adaptive_sampler.py``,
``model_based_tuner.py``) and ReLeASE (https://github.com/he-actlab/release,
``release/adaptive_sampling.py``).

Exploration is :class:`~dcoc.tuners.rl_tuner.RLTuner`'s (PPO walks over an XGBoost
regression model; same class, same :class:`~dcoc.tuners.rl_tuner.PPOConfig`).  What the
explorer proposes (the model's top ``plan_size`` unvisited points) is then reduced before
anything is measured (:class:`AdaptiveSampler`):

1. **Projection.** Candidates are projected on the ``valid_dims`` knobs with the most
   choices (official code: 2; ReLeASE: 3).
2. **Adaptive k-means.** k-means (scikit-learn, k-means++ init) for k = 8, 16, ... up to
   the plan size; the first k whose loss (inertia) is not below ``last_loss / 2.5`` is the
   knee, and its clustering is used (the official loop's ``break``).  k never exceeds the
   number of distinct projected candidates.
3. **Sample synthesis.** One config per cluster: the (rounded) centroid on the projected
   knobs; on the other knobs the most frequent value among the cluster's members
   (``reduction="mode"``) or a value drawn from the members (``"sample"``; the official
   code draws from all candidates, ReLeASE from the members).  A synthesized config that
   is a duplicate, already visited or violates the constraints is re-drawn with sampled
   values (``max_redraws`` tries); failing that, the cluster's best-ranked member stands in.

Only these samples (plus the epsilon-greedy random tail) are measured, so a plan holds as
many trials as there are clusters and the model is refit as soon as they are measured.
As in ReLeASE, adaptive sampling runs for the first ``adaptive_updates`` = 16 model
updates; afterwards plans are the plain top-``plan_size`` points.
"""
from __future__ import annotations

import warnings
from typing import Callable

import numpy as np

from dcoc.seeding import child_rng
from dcoc.tuners.rl_tuner import RLTuner


class AdaptiveSampler:
    """CHAMELEON's adaptive sampling over a candidate set (points in choice-index form).

    Parameters
    ----------
    dims: number of choices per knob.
    max_samples: the largest k tried (the plan size).
    step: k grows by this (8: the official ``sample_cnt_step``).
    threshold: knee criterion, stop at the first k with ``loss >= last_loss / threshold``.
    valid_dims: how many largest-cardinality knobs the clustering sees.
    reduction: ``"mode"`` or ``"sample"`` for the non-projected knobs.
    max_redraws: re-draws of a rejected synthesized sample before its best member stands in.
    rng: numpy Generator (k-means seeds and sampled values).
    """

    def __init__(self, dims, max_samples: int, rng: np.random.Generator, step: int = 8,
                 threshold: float = 2.5, valid_dims: int = 2, reduction: str = "mode",
                 max_redraws: int = 16):
        if reduction not in ("mode", "sample"):
            raise ValueError("reduction must be 'mode' or 'sample'")
        self.dims = np.asarray(dims, dtype=np.int64)
        self.max_samples = int(max_samples)
        self.step = int(step)
        self.threshold = float(threshold)
        self.cardinal = np.argsort(-self.dims, kind="stable")[: min(valid_dims, len(self.dims))]
        self.reduction = reduction
        self.max_redraws = int(max_redraws)
        self.rng = rng
        self.last_k = 0

    def cluster(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(labels, centroids on the projected knobs) at the knee of the k-means loss curve."""
        from sklearn.cluster import KMeans

        proj = points[:, self.cardinal].astype(np.float64)
        n_distinct = len(np.unique(proj, axis=0))
        last_loss, km = np.inf, None
        for k in range(self.step, max(self.max_samples, self.step) + 1, self.step):
            k_eff = min(k, n_distinct)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                km = KMeans(n_clusters=k_eff, n_init=1,
                            random_state=int(self.rng.integers(2 ** 31 - 1))).fit(proj)
            if km.inertia_ >= last_loss / self.threshold or k_eff == n_distinct:
                break
            last_loss = km.inertia_
        self.last_k = km.n_clusters
        return km.labels_, km.cluster_centers_

    def _synthesize(self, centroid, members: np.ndarray, draw: bool) -> np.ndarray:
        sample = np.empty(len(self.dims), dtype=np.int64)
        for d in range(len(self.dims)):
            col = members[:, d]
            if draw or self.reduction == "sample":
                sample[d] = col[self.rng.integers(len(col))]
            else:  # mode; ties -> the smallest value
                vals, counts = np.unique(col, return_counts=True)
                sample[d] = vals[np.argmax(counts)]
        sample[self.cardinal] = np.clip(np.rint(centroid), 0, self.dims[self.cardinal] - 1)
        return sample

    def sample(self, points: np.ndarray, accept: Callable[[np.ndarray], bool]) -> np.ndarray:
        """One synthesized point per cluster of ``points`` (best first: ``points`` in rank order).

        ``accept(point)`` says whether a synthesized point may be measured (unvisited,
        feasible).  Returns distinct accepted points, at most one per cluster.
        """
        points = np.asarray(points, dtype=np.int64)
        if len(points) == 0:
            return points.reshape(0, len(self.dims))
        labels, centroids = self.cluster(points)
        out, seen = [], set()
        for c in range(len(centroids)):
            members = points[labels == c]
            if len(members) == 0:
                continue
            chosen = None
            for attempt in range(self.max_redraws + 1):
                s = self._synthesize(centroids[c], members, draw=attempt > 0)
                if tuple(s) not in seen and accept(s):
                    chosen = s
                    break
            if chosen is None:  # the best-ranked member not yet taken (members are acceptable)
                chosen = next((m for m in members if tuple(m) not in seen), None)
            if chosen is not None:
                seen.add(tuple(chosen))
                out.append(chosen)
        return np.array(out, dtype=np.int64).reshape(-1, len(self.dims))


class ChameleonTuner(RLTuner):
    """CHAMELEON: PPO adaptive exploration + k-means adaptive sampling + sample synthesis.

    Parameters (besides :class:`~dcoc.tuners.rl_tuner.RLTuner`'s)
    ----------
    adaptive_updates: model updates that use adaptive sampling (ReLeASE: 16).
    valid_dims, threshold, step, reduction, max_redraws: see :class:`AdaptiveSampler`.
    """

    name = "chameleon"

    def __init__(self, task, seed=0, adaptive_updates=16, valid_dims=2, threshold=2.5,
                 step=8, reduction="mode", max_redraws=16, **kwargs):
        super().__init__(task, seed=seed, **kwargs)
        self.adaptive_updates = int(adaptive_updates)
        self.sampler = AdaptiveSampler(
            self.space.dims, self.plan_size, child_rng(self.seed, self.name, "sampler", task.workload_key),
            step=step, threshold=threshold, valid_dims=valid_dims, reduction=reduction,
            max_redraws=max_redraws)

    def _acceptable(self, point) -> bool:
        i = int(self.codec.index(point)[0])
        return i not in self.proposed and self.feasible(i)

    def postprocess_plan(self, plan):
        if self.train_ct >= self.adaptive_updates or len(plan) == 0:
            return plan
        reduced = self.sampler.sample(self.codec.points(plan), self._acceptable)
        return self.codec.index(reduced)
