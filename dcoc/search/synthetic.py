"""A synthetic tuning task with a known optimum, for testing and demonstrating tuners.

The cost surface mimics a schedule space: knobs are powers of two (tile sizes) plus a
two-valued "thread" knob; cost is a smooth bowl in log2 space with an interaction term,
a ripple (local optima) and an invalid region (a "buffer overflow" when the product of
the tile knobs is too large).  Everything is deterministic.
"""
from __future__ import annotations

import math

from dcoc.search.space import Knob, Space
from dcoc.search.task import TuningTask

_OPT = {"a": 8, "b": 32, "c": 4, "d": 2}


def synthetic_space(limit: int = 4096) -> Space:
    knobs = [
        Knob("a", (1, 2, 4, 8, 16, 32, 64), "tile"),
        Knob("b", (1, 2, 4, 8, 16, 32, 64), "tile"),
        Knob("c", (1, 2, 4, 8, 16), "tile"),
        Knob("d", (1, 2), "thread"),
    ]

    def fits(cfg):
        if cfg["a"] * cfg["b"] * cfg["c"] > limit:
            return f"buffer overflow: a*b*c={cfg['a'] * cfg['b'] * cfg['c']} > {limit}"
        return None

    return Space(knobs, [fits], {"limit": limit}, "synthetic")


def synthetic_cost(task, config) -> tuple:
    """Cost in seconds (None + reason for invalid configs)."""
    reason = task.space.check(config)
    if reason:
        return None, {"reason": reason}
    la, lb, lc = (math.log2(config[k]) for k in "abc")
    oa, ob, oc = (math.log2(_OPT[k]) for k in "abc")
    bowl = 0.6 * (la - oa) ** 2 + 0.3 * (lb - ob) ** 2 + 0.8 * (lc - oc) ** 2
    inter = 0.25 * (la - oa) * (lc - oc)
    ripple = 0.4 * (math.sin(2.1 * la) ** 2 + math.cos(1.7 * lb) ** 2) * (1 if bowl > 1 else 0)
    thread = 0.0 if config["d"] == _OPT["d"] else 0.9
    return 1e-3 * (1.0 + bowl + inter + ripple + thread), {"cycles": 0}


def synthetic_task(limit: int = 4096) -> TuningTask:
    return TuningTask("synthetic", synthetic_space(limit), "synthetic", "synthetic(v1)", flop=1e9)


def exhaustive_optimum(task: TuningTask) -> tuple[dict, float]:
    best, best_cost = None, math.inf
    for cfg in task.space:
        cost, _ = synthetic_cost(task, cfg)
        if cost is not None and cost < best_cost:
            best, best_cost = cfg, cost
    return best, best_cost
