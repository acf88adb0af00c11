"""How stable is ``agents="clustered"``'s knob partition as a function of the data it sees?

For each ResNet-18 layer (C2..C11, exhaustive tables on the pynq preset, cached by
:func:`dcoc.benchmarks.exhaustive`) and each sample size n, draw n random valid schedules
for each of 10 seeds, cluster the knobs on them (:func:`dcoc.agents.make_groups`, the rule
DCOCTuner uses) and count the distinct partitions.  1 = the same agents whatever the
seed; 10 = noise.

    python -m scripts.cluster_stability [--sizes 8 16 32 64] [--seeds 10]
"""
from __future__ import annotations

import argparse

import numpy as np


def run(sizes, seeds, layers=None):
    from dcoc.agents import make_groups
    from dcoc.benchmarks import RESNET18_CONV, exhaustive, resnet18_layer
    from dcoc.search.vta_task import sw_space
    from dcoc.vta import HWConfig

    hw = HWConfig.preset("pynq")
    out = {}
    for name in layers or list(RESNET18_CONV):
        wl = resnet18_layer(name)
        table = exhaustive(wl, hw)
        sp = sw_space(wl, hw)
        valid = [(sp.point(dict(k)), v) for k, v in table.items() if v is not None]
        pts = np.array([p for p, _ in valid])
        thr = np.array([1.0 / v for _, v in valid])
        for n in sizes:
            parts = set()
            for s in range(seeds):
                idx = np.random.default_rng(s).choice(len(pts), size=min(n, len(pts)), replace=False)
                groups, _ = make_groups(sp, "clustered", pts[idx], thr[idx])
                parts.add(tuple(tuple(g) for g in groups))
            out[(name, n)] = len(parts)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[8, 16, 32, 64, 128])
    ap.add_argument("--seeds", type=int, default=10)
    a = ap.parse_args(argv)
    res = run(a.sizes, a.seeds)
    layers = sorted({k[0] for k in res}, key=lambda s: int(s[1:]))
    print("distinct knob partitions over", a.seeds, "seeds (1 = stable)")
    print("layer  " + "  ".join(f"n={n:<4d}" for n in a.sizes))
    for name in layers:
        print(f"{name:<6} " + "  ".join(f"{res[(name, n)]:<6d}" for n in a.sizes))
    print("mean   " + "  ".join(f"{np.mean([res[(l, n)] for l in layers]):<6.1f}" for n in a.sizes))


if __name__ == "__main__":
    main()
