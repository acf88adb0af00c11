"""Speed benchmark of dcoc's VTA timing simulator.

For each ResNet-18 conv layer (C2-C11 of vta-reference §4.2) it measures simulations per
second with random valid knobs, and the time to evaluate the whole knob space of the
56x56 3x3 layer (C2, 2304 points) on one core (target: < 30 s).  ``--check`` also runs
the instruction-level reference simulation on sampled schedules and reports the largest
cycle difference of the fast path (contract: <= 0.5 %).

    python -m scripts.bench_vta_sim                 # table
    python -m scripts.bench_vta_sim --check         # + fast path vs reference
    python -m scripts.bench_vta_sim --layers C2,C9 --samples 100 --no-exhaustive

Importable without side effects: :func:`run` returns the rows.
"""
from __future__ import annotations

import argparse
import itertools
import random
import time

RESNET18 = {  # name: (H=W, CI, CO, K, stride)
    "C2": (56, 64, 64, 3, 1), "C3": (56, 64, 128, 3, 2), "C4": (56, 64, 128, 1, 2),
    "C5": (28, 128, 128, 3, 1), "C6": (28, 128, 256, 3, 2), "C7": (28, 128, 256, 1, 2),
    "C8": (14, 256, 256, 3, 1), "C9": (14, 256, 512, 3, 2), "C10": (14, 256, 512, 1, 2),
    "C11": (7, 512, 512, 3, 1),
}


def layer_workload(name: str):
    from dcoc.targets.vta import Conv2DWorkload

    h, ci, co, k, s = RESNET18[name]
    return Conv2DWorkload(1, h, h, ci, co, k, s, k // 2)


def _valid_samples(wl, hw, n, rng, max_insns=None):
    from dcoc.targets.vta import conv2d_space, simulate

    space = conv2d_space(wl, hw)
    names = list(space)
    combos = list(itertools.product(*space.values()))
    rng.shuffle(combos)
    out = []
    for c in combos:
        k = dict(zip(names, c))
        r = simulate(wl, hw, k)
        if r.valid and (max_insns is None or r.instructions <= max_insns):
            out.append((k, r))
            if len(out) >= n:
                break
    return out


def run(layers=None, samples: int = 50, seed: int = 0, exhaustive: bool = True,
        check: bool = False, check_samples: int = 8, check_max_insns: int = 60000,
        hw: str = "pynq") -> list[dict]:
    """Benchmark rows: one per layer (+ one ``exhaustive`` row).  No printing."""
    from dcoc.targets.vta import HWConfig, conv2d_space, simulate

    hwc = HWConfig.parse(hw)
    rng = random.Random(seed)
    rows = []
    for name in layers or list(RESNET18):
        wl = layer_workload(name)
        picks = _valid_samples(wl, hwc, samples, rng)
        t0 = time.perf_counter()
        insns = 0
        for k, _ in picks:
            insns += simulate(wl, hwc, k).instructions
        dt = time.perf_counter() - t0
        row = {"layer": name, "workload": wl.name, "space": 0, "samples": len(picks),
               "sims_per_s": len(picks) / dt if dt > 0 else float("inf"),
               "ms_per_sim": 1e3 * dt / max(len(picks), 1),
               "mean_insns": insns / max(len(picks), 1)}
        sp = conv2d_space(wl, hwc)
        row["space"] = 1
        for v in sp.values():
            row["space"] *= len(v)
        if check:
            worst = 0.0
            n = 0
            for k, f in _valid_samples(wl, hwc, check_samples, random.Random(seed + 1),
                                       max_insns=check_max_insns):
                r = simulate(wl, hwc, k, mode="reference")
                worst = max(worst, abs(f.cycles - r.cycles) / r.cycles)
                n += 1
            row["check_cases"] = n
            row["check_max_rel_diff"] = worst
        rows.append(row)
    if exhaustive:
        wl = layer_workload("C2")
        sp = conv2d_space(wl, hwc)
        names = list(sp)
        t0 = time.perf_counter()
        best = None
        nvalid = 0
        for c in itertools.product(*sp.values()):
            k = dict(zip(names, c))
            r = simulate(wl, hwc, k)
            if r.valid:
                nvalid += 1
                if best is None or r.cycles < best[0]:
                    best = (r.cycles, k)
        dt = time.perf_counter() - t0
        rows.append({"layer": "C2 exhaustive", "workload": wl.name,
                     "space": len(list(itertools.product(*sp.values()))), "valid": nvalid,
                     "seconds": dt, "best_cycles": best[0], "best_knobs": best[1]})
    return rows


def format_rows(rows) -> str:
    lines = [f"{'layer':<6} {'workload':<27} {'space':>6} {'n':>4} {'sims/s':>8} "
             f"{'ms/sim':>7} {'insns':>8} {'check':>14}"]
    for r in rows:
        if "seconds" in r:
            continue
        chk = ""
        if "check_max_rel_diff" in r:
            chk = f"{r['check_max_rel_diff'] * 100:.3f}% ({r['check_cases']})"
        lines.append(f"{r['layer']:<6} {r['workload']:<27} {r['space']:>6} {r['samples']:>4} "
                     f"{r['sims_per_s']:>8.0f} {r['ms_per_sim']:>7.2f} {r['mean_insns']:>8.0f} "
                     f"{chk:>14}")
    for r in rows:
        if "seconds" in r:
            lines.append("")
            lines.append(f"exhaustive {r['workload']}: {r['space']} points ({r['valid']} valid) in "
                         f"{r['seconds']:.2f} s on one core (target < 30 s); best "
                         f"{r['best_cycles']:,} cycles with {r['best_knobs']}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", default=None, help="comma-separated subset of C2..C11")
    ap.add_argument("--samples", type=int, default=50, help="random valid schedules per layer")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--hw", default="pynq", help="HW preset or config name (default pynq)")
    ap.add_argument("--no-exhaustive", action="store_true", help="skip the C2 full-space run")
    ap.add_argument("--check", action="store_true",
                    help="compare the fast path with the instruction-level reference")
    ap.add_argument("--check-samples", type=int, default=8)
    args = ap.parse_args(argv)
    layers = args.layers.split(",") if args.layers else None
    rows = run(layers, args.samples, args.seed, not args.no_exhaustive, args.check,
               args.check_samples, hw=args.hw)
    print(format_rows(rows))
    if args.check:
        worst = max(r.get("check_max_rel_diff", 0.0) for r in rows)
        print(f"\nfast path vs reference: max cycle difference {worst * 100:.4f}% "
              f"(contract <= 0.5%)")
        return 0 if worst <= 0.005 else 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
