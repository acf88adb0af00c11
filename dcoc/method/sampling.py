"""Confidence sampling: which of the agents' candidates are worth a measurement.

DCOC (arXiv 2407.08192) measures only "high-confidence" configurations selected with a
soft threshold; the paper does not publish the rule, so this is ours (docs/method.md).

Inputs per candidate: the cost model's ensemble mean ``mu`` and standard deviation
``sigma`` of the *normalized throughput* (1.0 = the best measured config so far).

1. **Lower confidence bound** ``lcb = mu - kappa * sigma``: a candidate ranks high only if
   it is predicted good *and* the prediction is confident (the ensemble agrees).
2. **Soft threshold**: only candidates with ``lcb >= threshold * max(lcb)`` are eligible
   for the exploit part of the batch; among them the batch is drawn without replacement
   with probability ``softmax(lcb / temperature)``, so near-ties are broken at random
   instead of always picking the same cluster of neighbours.  If too few are eligible,
   the rest of the exploit quota goes to the next best by ``lcb``.
3. **Exploration quota**: ``explore_frac`` of the batch goes to the remaining candidates
   with the highest upper bound ``mu + kappa * sigma`` (predicted good but uncertain:
   the measurements that teach the model most).

Also CHAMELEON's adaptive sampling lives with the ChameleonTuner
(:mod:`dcoc.tuners.chameleon_tuner`).
"""
from __future__ import annotations

import numpy as np

from dcoc.method.config import ConfidenceConfig


def confidence_select(mu, sigma, n: int, rng: np.random.Generator,
                      cfg: ConfidenceConfig | None = None) -> np.ndarray:
    """Indices of the ``n`` candidates to measure (exploit picks first, then explore picks)."""
    cfg = cfg or ConfidenceConfig()
    mu = np.asarray(mu, dtype=np.float64)
    sigma = np.asarray(sigma, dtype=np.float64)
    m = len(mu)
    n = min(int(n), m)
    if n <= 0:
        return np.empty(0, dtype=np.int64)
    lcb = mu - cfg.kappa * sigma
    ucb = mu + cfg.kappa * sigma
    n_explore = int(round(cfg.explore_frac * n)) if n > 1 else 0
    n_exploit = n - n_explore

    chosen: list[int] = []
    top = lcb.max()
    cut = cfg.threshold * top if top > 0 else top - abs(top) * (1 - cfg.threshold)
    eligible = np.flatnonzero(lcb >= cut)
    k = min(n_exploit, len(eligible))
    if k:
        logits = (lcb[eligible] - top) / max(cfg.temperature, 1e-9)
        p = np.exp(logits - logits.max())
        p /= p.sum()
        # Gumbel-top-k == sampling without replacement proportional to p
        g = np.log(p + 1e-300) - np.log(-np.log(rng.random(len(p))))
        chosen += [int(i) for i in eligible[np.argsort(-g)[:k]]]
    if len(chosen) < n_exploit:
        taken = set(chosen)
        for i in np.argsort(-lcb, kind="stable"):
            if len(chosen) >= n_exploit:
                break
            if int(i) not in taken:
                chosen.append(int(i))
                taken.add(int(i))
    taken = set(chosen)
    for i in np.argsort(-ucb, kind="stable"):
        if len(chosen) >= n:
            break
        if int(i) not in taken:
            chosen.append(int(i))
            taken.add(int(i))
    return np.array(chosen, dtype=np.int64)
