"""Each tuner's own overhead per trial (time in ask/next_batch + tell/update, measurement excluded).

Runs every registered tuner side by side, same seed, on two synthetic tasks:

* ``synthetic``: the 490-point space of :mod:`dcoc.search.synthetic` (7 x 7 x 5 x 2);
* ``large6``: 6 knobs (10 x 8 x 8 x 6 x 6 x 4 = 92,160 points) with a smooth, rippled
  cost and a buffer-style constraint, built here.

Usage::

    python -m scripts.bench_tuner_overhead                 # all tuners, both tasks
    python -m scripts.bench_tuner_overhead --tuners xgb rl --trials 300 --batch 8

``run()`` returns the rows (dicts) for other scripts.  Columns: trials measured, total
overhead seconds, overhead ms per trial, trials per second of tuner overhead, and the best
cost found relative to the task's optimum (1.00 = optimum).
"""
from __future__ import annotations

import argparse
import math
import time

from dcoc.search import FunctionMeasurer, Knob, Space, TuningTask
from dcoc.search.synthetic import exhaustive_optimum, synthetic_cost, synthetic_task
from dcoc.tuners import create, names

_LARGE_DIMS = (10, 8, 8, 6, 6, 4)
_LARGE_OPT = (5, 3, 6, 2, 4, 1)
_LARGE_W = (0.5, 0.3, 0.2, 0.6, 0.4, 0.7)


def large_task() -> TuningTask:
    """6 power-of-two knobs, ~10^5 points; configs with k0*k1*k2 > 2^15 are invalid."""
    knobs = [Knob(f"k{i}", tuple(2 ** j for j in range(n)), "tile") for i, n in enumerate(_LARGE_DIMS)]

    def fits(cfg):
        size = cfg["k0"] * cfg["k1"] * cfg["k2"]
        return f"buffer overflow: {size} > 32768" if size > 2 ** 15 else None

    return TuningTask("large6", Space(knobs, [fits], {"limit": 2 ** 15}, "large6"), "synthetic",
                      "large6(v1)", flop=1e9)


def large_cost(task, config):
    reason = task.space.check(config)
    if reason:
        return None, {"reason": reason}
    v = [math.log2(config[f"k{i}"]) for i in range(len(_LARGE_DIMS))]
    bowl = sum(w * (a - o) ** 2 for w, a, o in zip(_LARGE_W, v, _LARGE_OPT))
    ripple = 0.3 * math.sin(v[0] * v[1]) ** 2 * (1 if bowl > 1 else 0)
    return 1e-3 * (1.0 + bowl + 0.2 * (v[3] - 2) * (v[4] - 4) ** 2 / 4 + ripple), {}


def _large_optimum(task) -> float:
    best = math.inf
    for cfg in task.space:
        c, _ = large_cost(task, cfg)
        if c is not None:
            best = min(best, c)
    return best


TASKS = {
    "synthetic": (synthetic_task, synthetic_cost, lambda t: exhaustive_optimum(t)[1]),
    "large6": (large_task, large_cost, _large_optimum),
}


def bench_one(tuner_name: str, task: TuningTask, cost_fn, trials: int, batch: int, seed: int) -> dict:
    """Drive one tuner through ask/tell; time only the tuner's calls."""
    tuner = create(tuner_name, task, seed=seed)
    measurer = FunctionMeasurer(cost_fn)
    overhead = 0.0
    t_start = time.perf_counter()
    while tuner.trials < trials and tuner.has_next():
        t0 = time.perf_counter()
        configs = tuner.ask(min(batch, trials - tuner.trials))
        overhead += time.perf_counter() - t0
        if not configs:
            break
        results = measurer.measure(task, configs)  # not timed
        t0 = time.perf_counter()
        tuner.tell(configs, results)
        overhead += time.perf_counter() - t0
    wall = time.perf_counter() - t_start
    n = max(tuner.trials, 1)
    return {"tuner": tuner_name, "task": task.name, "space": len(task.space), "trials": tuner.trials,
            "overhead_s": overhead, "ms_per_trial": 1e3 * overhead / n,
            "trials_per_s": n / overhead if overhead > 0 else math.inf,
            "best_cost": tuner.best_cost, "wall_s": wall}


def _warm_imports() -> None:
    """Import and first-use the heavy libraries (torch's first backward + Adam step alone
    takes ~2 s), so that no tuner's overhead includes one-time process start-up costs."""
    try:
        import numpy as np

        from dcoc.costmodel import XGBCostModel

        X = np.random.default_rng(0).random((32, 3))
        XGBCostModel("reg").fit(X, X.sum(1)).predict(X)
        import sklearn.cluster  # noqa: F401
        import torch

        layer = torch.nn.Linear(3, 3)
        opt = torch.optim.Adam(layer.parameters())
        layer(torch.zeros(4, 3)).tanh().sum().backward()
        opt.step()
    except ImportError:  # pragma: no cover - the tuner needing it reports the error
        pass


def run(tuners=None, tasks=("synthetic", "large6"), trials: int = 200, batch: int = 8,
        seed: int = 0, verbose: bool = False) -> list[dict]:
    """Benchmark rows, one per (task, tuner); tuners that cannot be built are skipped."""
    tuners = list(tuners or names())
    _warm_imports()
    rows = []
    for task_name in tasks:
        make, cost_fn, optimum = TASKS[task_name]
        task = make()
        opt = optimum(task)
        for name in tuners:
            try:
                row = bench_one(name, task, cost_fn, trials, batch, seed)
            except Exception as exc:  # noqa: BLE001 - report and go on with the others
                row = {"tuner": name, "task": task.name, "error": f"{type(exc).__name__}: {exc}"}
            else:
                row["best_vs_opt"] = row["best_cost"] / opt
            rows.append(row)
            if verbose:
                print(format_row(row), flush=True)
    return rows


HEADER = f"{'task':<10} {'tuner':<10} {'space':>7} {'trials':>6} {'overhead s':>10} {'ms/trial':>9} {'trials/s':>9} {'best/opt':>8}"


def format_row(r: dict) -> str:
    if "error" in r:
        return f"{r['task']:<10} {r['tuner']:<10} error: {r['error']}"
    return (f"{r['task']:<10} {r['tuner']:<10} {r['space']:>7} {r['trials']:>6} {r['overhead_s']:>10.2f} "
            f"{r['ms_per_trial']:>9.2f} {r['trials_per_s']:>9.0f} {r['best_vs_opt']:>8.3f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tuners", nargs="*", default=None, help="tuner names (default: all registered)")
    ap.add_argument("--tasks", nargs="*", default=["synthetic", "large6"], choices=list(TASKS))
    ap.add_argument("--trials", type=int, default=200, help="trials per tuner and task (default 200)")
    ap.add_argument("--batch", type=int, default=8, help="configs per ask (a measurer's n_parallel)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    print(HEADER)
    run(args.tuners, args.tasks, args.trials, args.batch, args.seed, verbose=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
