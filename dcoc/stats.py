"""Statistics for tuner comparisons: median + IQR over seeds, paired Wilcoxon tests.

Every comparison row of the benchmarks reports, per tuner, the median and interquartile
range of a metric over all (layer/model, seed) runs, and a paired two-sided Wilcoxon
signed-rank test against the reference tuner (DCOC) over the same (layer, seed) pairs
(scipy).  A difference is called a win or a loss only at ``p < ALPHA`` (0.05); otherwise
it is reported as "no significant difference" -- whatever the medians say.

Metrics where a run can fail to reach the target (trials to 99% of the optimum) are
compared with the failures set to ``budget + 1`` (a failed run ranks behind every run
that reached the target within the budget; ties among failures count as ties).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: significance level of every claim in docs/RESULTS.md
ALPHA = 0.05


def median_iqr(values) -> tuple[float, float, float]:
    """(median, 25th percentile, 75th percentile) of finite-or-inf values (nan if empty)."""
    v = np.asarray([float(x) for x in values], dtype=np.float64)
    if len(v) == 0:
        return math.nan, math.nan, math.nan
    q25, med, q75 = np.percentile(v, [25, 50, 75], method="linear") if np.isfinite(v).all() else \
        _inf_percentiles(v)
    return float(med), float(q25), float(q75)


def _inf_percentiles(v: np.ndarray):
    # percentiles with +inf values (rank-based: inf sorts last)
    s = np.sort(v)
    out = []
    for q in (25, 50, 75):
        pos = (len(s) - 1) * q / 100
        lo, hi = int(math.floor(pos)), int(math.ceil(pos))
        a, b = s[lo], s[hi]
        if not (math.isfinite(a) and math.isfinite(b)):
            out.append(b if pos > lo else a)
        else:
            out.append(a + (b - a) * (pos - lo))
    return out


@dataclass
class Paired:
    """A paired comparison of ``other`` against the reference over the same pairs."""

    n: int                 # pairs
    better: int            # pairs where other is better than the reference
    worse: int             # pairs where other is worse
    median_diff: float     # median of (other - reference)
    p: float               # two-sided Wilcoxon signed-rank p-value (1.0 if every pair ties)

    def verdict(self, ref: str = "dcoc", other: str = "other", alpha: float = ALPHA) -> str:
        """``"other better"``, ``"ref better"`` or ``"n.s."``."""
        if self.n == 0 or not self.p < alpha:
            return "n.s."
        return f"{other} better" if self.better > self.worse else f"{ref} better"

    def sign(self, alpha: float = ALPHA) -> int:
        """+1: other significantly better, -1: significantly worse, 0: no significant difference."""
        if self.n == 0 or not self.p < alpha:
            return 0
        return 1 if self.better > self.worse else -1


def paired_test(reference, other, lower_is_better: bool = True) -> Paired:
    """Wilcoxon signed-rank test of ``other`` vs ``reference`` (equal-length, paired arrays).

    Pairs with equal values are dropped by the test (``zero_method="wilcox"``) but counted
    in ``n``; if every pair ties, ``p = 1``.
    """
    from scipy.stats import wilcoxon

    a = np.asarray(reference, dtype=np.float64)
    b = np.asarray(other, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired samples differ in length: {a.shape} vs {b.shape}")
    ok = ~(np.isnan(a) | np.isnan(b))
    a, b = a[ok], b[ok]
    if len(a) == 0:
        return Paired(0, 0, 0, math.nan, math.nan)
    d = b - a
    better = int((d < 0).sum() if lower_is_better else (d > 0).sum())
    worse = int((d > 0).sum() if lower_is_better else (d < 0).sum())
    nz = d[d != 0]
    if len(nz) == 0:
        p = 1.0
    else:
        p = float(wilcoxon(b, a, zero_method="wilcox", alternative="two-sided").pvalue)
    return Paired(len(a), better, worse, float(np.median(d)), p)


def ratio_test(reference, other) -> tuple[float, Paired]:
    """(geomean of other / reference, paired test on the logs) over paired positive values
    (latencies): the read-out of the MetaSchedule A/Bs (lower is better)."""
    la = np.log(np.asarray(reference, dtype=np.float64))
    lb = np.log(np.asarray(other, dtype=np.float64))
    return float(np.exp(np.mean(lb - la))), paired_test(la, lb)


def fmt_p(p: float) -> str:
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "n/a"
    return "<0.001" if p < 1e-3 else f"{p:.3f}"


__all__ = ["ALPHA", "Paired", "fmt_p", "median_iqr", "paired_test", "ratio_test"]
