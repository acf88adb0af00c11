"""Where a co-design run's last percent goes: its final config's per-layer schedule gap.

Runs one co-design run (``--tuner``, default ``dcoc``) and then, on the config it ends
on, compares every layer's best measured time with the layer's exhaustively optimal
schedule there (``dcoc.benchmarks.exhaustive``, cached).  Prints, largest gap first:
the gap's share of the model latency (count x (best - optimum)), the measurements the
run spent on that layer there, the size of its valid space, where the cost model (refit
at the end) ranks the optimum, where the true ranking puts the run's best, and the
Spearman correlation of the model's predictions with the truth over the layer's space.
A gap on a config whose own optimum is the best-known is a *schedule* gap; a config
whose optimum is itself behind the best-known is a *hardware* gap
(``bench_codesign --merge ... --exhaustive-found``).  RESULTS.md, session 13.

    python -m scripts.codesign_gap mobilenetv2 zcu104 --seed 1 --trials 500
"""
from __future__ import annotations

import argparse
import time


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="zoo model (resnet18, mobilenetv2, vgg16, transformer, ...)")
    ap.add_argument("board", help="board (pynq, ultra96, zcu104)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--trials", type=int, default=500, help="simulations of the run")
    ap.add_argument("--tuner", default="dcoc", help="tuner spec, e.g. dcoc or dcoc:stall_rounds=8")
    a = ap.parse_args(argv)

    import numpy as np
    from scipy.stats import spearmanr

    from dcoc.benchmarks import exhaustive
    from scripts.bench_codesign import _layers, session_and_driver

    layers = _layers(a.model)
    s, drv = session_and_driver(a.model, a.board, a.tuner, a.seed, a.trials)
    t0 = time.perf_counter()
    drv.run()
    inc = s.hw[s.best_hw]
    print(f"{a.model}/{a.board} {a.tuner} seed {a.seed}: {s.best_latency * 1e3:.3f} ms on {inc.name} "
          f"after {s.trials} simulations ({time.perf_counter() - t0:.0f} s)")
    p = getattr(drv, "problem", None)
    if p is not None:
        p.refit()
    rows, opt_total = [], 0.0
    for li, layer in enumerate(layers):
        table = {k: v for k, v in exhaustive(layer.workload, inc, epilogue=layer.epilogue).items() if v is not None}
        true = np.array(list(table.values()))
        opt, best = true.min(), s.best[(inc.name, li)][0]
        opt_total += layer.count * opt
        n = sum(1 for (h, l, _) in s.measured if h == inc.name and l == li)
        rank = rho = float("nan")
        if p is not None:
            mu, _ = p.predict_time(li, inc, [dict(k) for k in table])
            rank = int((mu < mu[int(np.argmin(true))]).sum())
            rho = spearmanr(mu, true).correlation
        rows.append((layer.count * (best - opt), li, layer.count, best, opt, n, len(true), rank,
                     int((true < best - 1e-15).sum()), rho))
    print(f"config optimum {opt_total * 1e3:.3f} ms: the run reaches {opt_total / s.best_latency:.4f} of it")
    print("gap(ms) layer count best(ms) optimum(ms) measured space model-rank-of-optimum "
          "true-rank-of-best spearman")
    for r in sorted(rows, reverse=True):
        print(f"{r[0] * 1e3:7.4f} {r[1]:5d} {r[2]:5d} {r[3] * 1e3:8.4f} {r[4] * 1e3:11.4f} {r[5]:8d} "
              f"{r[6]:5d} {r[7]:20} {r[8]:17d} {r[9]:8.3f}")


if __name__ == "__main__":
    main()
