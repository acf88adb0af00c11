"""The shared warm-up: the same initial random sample for every model-based tuner.

A model-based tuner cannot use its model before it has data, so it starts by measuring
random configs.  When tuners are compared, the warm-up must be the *same* for all of
them: otherwise a tuner that acts after 8 random trials is compared
against one that acts after 64 and the difference measured is the warm-up, not the
method.  Every model-based tuner (xgb, rl, chameleon, DCOC and its ablations) therefore
draws its first ``n`` proposals from :func:`initial_points`, which depends only on the
task's space, the task's ``workload_key`` and the run seed -- not on the tuner.

``WARMUP_SIZE`` (8) is the warm-up every model-based tuner uses by default: DCOC's
``n_init``, kept for all tuners; xgb's plan size was then chosen with it on the tuning
set (ResNet-18 C2..C11, ``python -m scripts.bench_sw --set tuning``; docs/method.md),
never on the evaluation set.
"""
from __future__ import annotations

from dcoc.seeding import child_rng

#: warm-up measurements of every model-based tuner (random, shared, valid configs)
WARMUP_SIZE = 8


def initial_points(space, seed: int, n: int = WARMUP_SIZE, workload_key: str = "",
                   valid=None, max_tries: int | None = None) -> list[tuple]:
    """``n`` distinct random points (choice-index tuples) of ``space`` that pass ``valid``.

    The draw depends only on ``(seed, workload_key)`` and the space, never on which tuner
    asks: two tuners with the same seed measure the same warm-up.  ``valid(point) -> bool``
    defaults to the space's constraints.  Fewer than ``n`` points come back only when
    ``max_tries`` (default ``200 * n``) random draws did not find ``n`` valid ones.
    """
    rng = child_rng(seed, "warmup", workload_key)
    if valid is None:
        def valid(p):
            return space.is_valid(space.config(p))
    n = min(int(n), len(space))
    out: list[tuple] = []
    seen: set = set()
    tries, limit = 0, max_tries if max_tries is not None else 200 * max(n, 1)
    while len(out) < n and tries < limit:
        tries += 1
        p = tuple(int(i) for i in space.sample_point(rng))
        if p in seen:
            continue
        seen.add(p)
        if valid(p):
            out.append(p)
    return out


def initial_configs(task, seed: int, n: int = WARMUP_SIZE, valid=None) -> list[dict]:
    """:func:`initial_points` of a task, as configs."""
    pts = initial_points(task.space, seed, n, task.workload_key, valid)
    return [task.space.config(p) for p in pts]


__all__ = ["WARMUP_SIZE", "initial_configs", "initial_points"]
