"""How many measurements does ``agents="clustered"`` need before its knob partition is stable?

For each layer, ``n`` valid configs are drawn at random from the layer's exhaustively
simulated table (what a tuner's warm-up would measure), the knobs are clustered with
:func:`dcoc.agents.clustering.make_groups` (``clustered`` mode, the rule of
docs/method.md §2), and this is repeated for ``draws`` independent draws.  Stability =
mean pairwise adjusted Rand index (scikit-learn) between the partitions of the draws
(1 = the same partition every time; ~0 = as similar as random partitions).  The
threshold :data:`dcoc.agents.clustering.MIN_POINTS` is the smallest ``n`` whose median
stability over the layers of the **tuning set** reaches 0.8; the evaluation set is only
reported.

    python -m scripts.cluster_stability --layers C2 C5 C8 C11 --sizes 8 16 32 64 128 256
"""
from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys

import numpy as np


def partition_labels(groups, n_knobs: int) -> list[int]:
    lab = [0] * n_knobs
    for gi, g in enumerate(groups):
        for k in g:
            lab[k] = gi
    return lab


def stability(layer: str, sizes, draws: int = 10, hw: str = "pynq", seed: int = 0) -> dict:
    from sklearn.metrics import adjusted_rand_score

    from dcoc.agents.clustering import make_groups
    from dcoc.search.vta_task import vta_task
    from dcoc.seeding import child_rng
    from scripts.bench_sw import _table

    wl, hwc, table = _table(layer, hw)
    task = vta_task(wl, hwc)
    space = task.space
    valid = [(space.point(dict(k)), v) for k, v in table.items() if v is not None]
    out = {}
    for n in sizes:
        parts = []
        for d in range(draws):
            rng = child_rng(seed, "cluster-stability", layer, n, d)
            idx = rng.choice(len(valid), size=min(n, len(valid)), replace=False)
            pts = np.array([valid[i][0] for i in idx], dtype=np.int64)
            y = np.array([1.0 / valid[i][1] for i in idx])
            groups, _ = make_groups(space, "clustered", pts, y, min_points=0)
            parts.append(partition_labels(groups, len(space.knobs)))
        aris = [adjusted_rand_score(a, b) for a, b in itertools.combinations(parts, 2)]
        distinct = len({tuple(p) for p in parts})
        out[n] = {"ari": float(np.mean(aris)), "distinct": distinct}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", nargs="*", default=["C2", "C3", "C4", "C5", "C6", "C7", "C8", "C9", "C10", "C11"])
    ap.add_argument("--sizes", nargs="*", type=int, default=[8, 16, 32, 64, 128, 256])
    ap.add_argument("--draws", type=int, default=10)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    res = {}
    for layer in a.layers:
        res[layer] = stability(layer, a.sizes, a.draws)
        print(f"{layer}: " + "  ".join(f"n={n}: ARI {v['ari']:.2f} ({v['distinct']} partitions)"
                                       for n, v in res[layer].items()), file=sys.stderr, flush=True)
    print("layer  " + "  ".join(f"n={n:>4}" for n in a.sizes))
    for layer, r in res.items():
        print(f"{layer:6} " + "  ".join(f"{r[n]['ari']:6.2f}" for n in a.sizes))
    med = {n: statistics.median(r[n]["ari"] for r in res.values()) for n in a.sizes}
    print("median " + "  ".join(f"{med[n]:6.2f}" for n in a.sizes))
    ok = [n for n in a.sizes if med[n] >= 0.8]
    print(f"smallest n with median ARI >= 0.8: {ok[0] if ok else 'none'}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"layers": res, "median": med, "draws": a.draws}, f)


if __name__ == "__main__":
    main()
