"""A synthetic tuning task with a known optimum, for testing and demonstrating tuners.

The cost surface mimics a schedule space: knobs are powers of two (tile sizes) plus a
two-valued "thread" knob; cost is a smooth bowl in log2 space with an interaction term,
a ripple (local optima) and an invalid region (a "buffer overflow" when the product of
the tile knobs is too large).  Everything is deterministic.
"""
from __future__ import annotations

import math

from dcoc.search.space import Knob, Space
from dcoc.search.tuning_task import TuningTask

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


# ----------------------------------------------------------------------------------
# A family of large synthetic tasks with interacting knobs.
#
# The small task above has 490 points: any surrogate can score all of them, so it cannot
# show what a learned proposal policy adds.  ``interacting_task(seed, ...)`` is a family
# (one member per ``seed``) of spaces too large to score exhaustively (16**12 = 2.8e14
# points by default) whose optimum is known in closed form:
#
# * ``2 * n_pairs`` knobs with ``n_choices`` positions each (values 1..n_choices);
# * knobs come in interacting pairs (a, b): with u = (position - target) / n_choices the
#   cost of a pair is ``alpha * (u_a + u_b)**2 + beta * (u_a - u_b)**2`` (alpha != beta:
#   the bowl is rotated, moving one knob alone is expensive, moving both together along
#   the valley is cheap);
# * the per-member targets lie in the upper part of every knob's range (a random start
#   is ~0.4 * n_choices positions away per knob), so search must travel far;
# * a "buffer" constraint: the positions of the first knob of every pair may not sum to
#   more than ``slack`` above their targets' sum (the optimum is feasible, part of the
#   space is not);
# * cost = 1e-3 * (1 + sum over pairs), so the optimum costs exactly 1 ms.

def _interacting_targets(seed: int, n_pairs: int, n_choices: int):
    from dcoc.seeding import child_rng

    rng = child_rng(seed, "interacting-targets")
    lo, hi = int(0.6 * (n_choices - 1)), n_choices - 1
    return [int(x) for x in rng.integers(lo, hi + 1, size=2 * n_pairs)]


def interacting_space(seed: int = 0, n_pairs: int = 6, n_choices: int = 16, slack: int = 6) -> Space:
    targets = _interacting_targets(seed, n_pairs, n_choices)
    knobs = []
    for p in range(n_pairs):
        knobs.append(Knob(f"a{p}", tuple(range(1, n_choices + 1)), "tile"))
        knobs.append(Knob(f"b{p}", tuple(range(1, n_choices + 1)), "thread" if p % 2 else "tile"))
    cap = sum(targets[2 * p] + 1 for p in range(n_pairs)) + slack

    def fits(cfg):
        used = sum(cfg[f"a{p}"] for p in range(n_pairs))
        if used > cap:
            return f"buffer overflow: sum(a)={used} > {cap}"
        return None

    return Space(knobs, [fits], {"pairs": n_pairs, "choices": n_choices}, f"interacting{seed}")


def interacting_cost(task, config, alpha: float = 4.0, beta: float = 0.25) -> tuple:
    """Cost in seconds of a member of the interacting family (None + reason if invalid)."""
    reason = task.space.check(config)
    if reason:
        return None, {"reason": reason}
    seed, n_pairs, n_choices = task.payload
    t = _interacting_targets(seed, n_pairs, n_choices)
    total = 0.0
    for p in range(n_pairs):
        ua = (config[f"a{p}"] - 1 - t[2 * p]) / n_choices
        ub = (config[f"b{p}"] - 1 - t[2 * p + 1]) / n_choices
        total += alpha * (ua + ub) ** 2 + beta * (ua - ub) ** 2
    return 1e-3 * (1.0 + total), {"cycles": 0}


def interacting_task(seed: int = 0, n_pairs: int = 6, n_choices: int = 16) -> TuningTask:
    """Member ``seed`` of the interacting family; its optimum costs exactly 1e-3 s."""
    return TuningTask(f"interacting{seed}", interacting_space(seed, n_pairs, n_choices), "synthetic",
                      f"interacting(v1,{seed},{n_pairs},{n_choices})", flop=1e9,
                      payload=(seed, n_pairs, n_choices))


#: the optimum cost of every member of the interacting family (seconds)
INTERACTING_OPTIMUM = 1e-3
