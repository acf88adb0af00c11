"""Target-neutral timing helpers: whole-model time from per-layer times and the roofline
arithmetic every accelerator target shares.

* :func:`model_seconds` -- the sum of count x seconds over a model's layers (inf when a
  layer has no valid schedule): the whole-model latency ``dcoc tune`` reports.
* :func:`compute_seconds`, :func:`roofline_fraction`, :func:`cycles` -- the compute bound
  (MACs at the core's peak), the fraction of a bound a measured time reaches, and seconds
  in clock cycles.

Nothing here knows an accelerator: targets compute their own bytes and MACs per cycle.
"""
from __future__ import annotations

import math
from typing import Iterable

__all__ = ["compute_seconds", "cycles", "model_seconds", "roofline_fraction"]


def model_seconds(pairs: Iterable) -> float:
    """Whole-model accelerator time: the sum over ``(count, seconds)`` pairs of count x
    seconds per run (inf when a layer's seconds are inf: it has no valid schedule)."""
    tot = 0.0
    for count, sec in pairs:
        tot += count * sec
    return tot


def compute_seconds(macs: float, macs_per_cycle: float, freq_mhz: float) -> float:
    """Compute bound: ``macs`` at ``macs_per_cycle`` per cycle of a ``freq_mhz`` clock."""
    return macs / macs_per_cycle / (freq_mhz * 1e6)


def roofline_fraction(bound: float, seconds: float) -> float:
    """Fraction of the lower bound ``bound`` reached in ``seconds`` (0 when not finite)."""
    if not seconds or not math.isfinite(seconds):
        return 0.0
    return bound / seconds


def cycles(seconds: float, freq_mhz: float) -> int:
    """``seconds`` in cycles of a ``freq_mhz`` clock (rounded)."""
    return int(round(seconds * freq_mhz * 1e6))
