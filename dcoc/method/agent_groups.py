"""Which knobs each agent owns: the fixed DCOC split, or correlation clustering.

Modes (``agents=`` everywhere in dcoc):

* ``"dcoc"`` (default): the paper's split -- a hardware agent (knobs of group ``hw``), a
  mapping agent (group ``tile``: the tiling knobs) and a scheduling agent (everything
  else: virtual threads, unrolling, compute locations).  Empty agents are dropped.
* ``"single"``: one agent owns every knob (the single-agent RL ablation).
* ``"per-knob"``: one agent per knob.
* ``"clustered"``: knobs grouped by correlation analysis on warm-up measurements
  (after arXiv 2507.16249, which assigns "similar mapping parameters to the same agents
  based on correlation analysis" but does not publish the measure; ours follows).

Clustering rule (documented in docs/method.md):

1. Take the valid warm-up measurements and keep the better half by throughput (the
   region the agents must navigate; in uniformly random samples knobs are independent,
   but among good configs interacting knobs co-vary, e.g. tile sizes bounded by a buffer).
2. Spearman rank correlation between every pair of knobs on that subset (constant knobs
   and correlations not significant at p < 0.01 get correlation 0); distance ``1 - |rho|``.
3. Average-linkage hierarchical clustering (scipy); the number of agents ``k`` in
   ``[2, min(max_agents, K-1)]`` maximizes the silhouette score (scikit-learn, precomputed
   distances).  If no ``k`` has a positive silhouette (no structure) the fixed DCOC split
   is used.
"""
from __future__ import annotations

import numpy as np

MODES = ("dcoc", "single", "per-knob", "clustered")

#: ``clustered`` clusters only with at least this many valid measurements; below it the
#: fixed DCOC split is used.  Rule (tuning set ResNet-18 C2..C11, ``python -m
#: scripts.cluster_stability``): the smallest sample size n from which the median adjusted
#: Rand index between the partitions of 10 independent random samples stays >= 0.8.  No
#: size up to 1024 qualifies (median ARI 0.66 at 128, 0.57 at 512, 0.75 at 1024; the high
#: values at n <= 32 are the fixed-split fallback chosen every time, not a stable
#: clustering; docs/data/cluster_stability_tuning.txt), so the threshold lies beyond every
#: measured size and every benchmark budget: ``clustered`` behaves as the fixed split.
MIN_POINTS = 2 ** 31

#: agent names of the fixed split, by knob group
_DCOC_AGENT = {"hw": "hardware", "tile": "mapping"}


def fixed_groups(space, mode: str = "dcoc") -> tuple[list[list[int]], list[str]]:
    """(knob index groups, agent names) for the non-data-driven modes."""
    K = len(space.knobs)
    if mode == "single":
        return [list(range(K))], ["single"]
    if mode == "per-knob":
        return [[i] for i in range(K)], [k.name for k in space.knobs]
    if mode in ("dcoc", "clustered"):
        order = ["hardware", "mapping", "scheduling"]
        buckets: dict = {n: [] for n in order}
        for i, k in enumerate(space.knobs):
            buckets[_DCOC_AGENT.get(k.group, "scheduling")].append(i)
        names = [n for n in order if buckets[n]]
        return [buckets[n] for n in names], names
    from dcoc.errors import DcocError

    raise DcocError(f"unknown agents mode '{mode}'; choose one of {', '.join(MODES)}")


def correlation_distance(points: np.ndarray, y: np.ndarray, alpha: float = 0.01) -> np.ndarray:
    """``1 - |spearman rho|`` between knobs over the better half of valid samples; a
    correlation whose p-value is not below ``alpha`` counts as 0 (without this, noise
    correlations of random samples produced a "structure" from pure noise)."""
    from scipy.stats import spearmanr

    points = np.asarray(points, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    ok = y > 0
    pts, yy = points[ok], y[ok]
    if len(yy) >= 8:
        keep = yy >= np.median(yy)
        pts = pts[keep]
    K = points.shape[1]
    rho = np.zeros((K, K))
    var = pts.std(axis=0) > 0 if len(pts) else np.zeros(K, bool)
    idx = np.flatnonzero(var)
    if len(idx) >= 2 and len(pts) >= 3:
        res = spearmanr(pts[:, idx])
        r = np.atleast_2d(np.nan_to_num(res.statistic, nan=0.0))
        p = np.atleast_2d(np.nan_to_num(res.pvalue, nan=1.0))
        r = np.where(p < alpha, r, 0.0)  # correlations indistinguishable from noise count as none
        rho[np.ix_(idx, idx)] = r
    np.fill_diagonal(rho, 1.0)
    return 1.0 - np.abs(rho)


def cluster_knobs(points, y, max_agents: int = 4) -> list[list[int]] | None:
    """Knob index groups from correlation clustering, or None if there is no structure."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform
    from sklearn.metrics import silhouette_score

    D = correlation_distance(points, y)
    K = len(D)
    if K < 3:
        return None
    Z = linkage(squareform(D, checks=False), method="average")
    best, best_s = None, 0.0
    for k in range(2, min(max_agents, K - 1) + 1):
        labels = fcluster(Z, k, criterion="maxclust")
        if len(set(labels)) < 2:
            continue
        s = silhouette_score(D, labels, metric="precomputed")
        if s > best_s + 1e-12:
            best, best_s = labels, s
    if best is None:
        return None
    groups: dict = {}
    for i, lab in enumerate(best):
        groups.setdefault(int(lab), []).append(i)
    return sorted(groups.values(), key=lambda g: g[0])


def make_groups(space, mode: str = "dcoc", points=None, y=None,
                min_points: int | None = None) -> tuple[list[list[int]], list[str]]:
    """Agent groups for a space.  ``clustered`` needs warm-up ``points``/``y``.

    ``clustered`` with fewer than ``min_points`` (default :data:`MIN_POINTS`) valid
    measurements returns the fixed DCOC split: too few points give an unstable partition.

    Knobs that never varied in the warm-up data carry no correlation information: they
    are clustered out and then join the cluster holding most knobs of their fixed-split
    agent (hardware / mapping / scheduling), or the largest cluster.
    """
    if mode != "clustered":
        return fixed_groups(space, mode)
    if points is None or not len(points):
        return fixed_groups(space, "dcoc")
    need = MIN_POINTS if min_points is None else int(min_points)
    n_valid = int((np.asarray(y) > 0).sum()) if y is not None else 0
    if n_valid < need:
        return fixed_groups(space, "dcoc")
    points = np.asarray(points)
    varying = [i for i in range(points.shape[1]) if np.ptp(points[:, i]) > 0]
    const = [i for i in range(points.shape[1]) if i not in varying]
    sub = cluster_knobs(points[:, varying], y) if len(varying) >= 3 else None
    if sub is None:
        return fixed_groups(space, "dcoc")
    groups = [[varying[j] for j in g] for g in sub]
    fixed, _ = fixed_groups(space, "dcoc")
    for i in const:
        home = next(g for g in fixed if i in g)
        overlap = [len(set(g) & set(home)) for g in groups]
        target = int(np.argmax(overlap)) if max(overlap) > 0 else int(np.argmax([len(g) for g in groups]))
        groups[target].append(i)
    groups = sorted((sorted(g) for g in groups), key=lambda g: g[0])
    names = ["+".join(space.knobs[i].name for i in g) for g in groups]
    return groups, names
