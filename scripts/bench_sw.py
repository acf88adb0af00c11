"""Software-only tuner comparison on VTA conv layers (pynq preset).

Two disjoint layer sets (docs/method.md, "Tuning set and evaluation set"): the **tuning
set** (ResNet-18 C2..C11: every hyperparameter of every tuner was chosen or checked on it)
and the **evaluation set** (conv layers of VGG-16 and MobileNetV2, never used to choose
anything: ``--set evaluation``, the default).  Claims are made on the evaluation set.

For each layer, the whole schedule space is simulated once (cached, see
:func:`dcoc.targets.vta.catalogue.exhaustive`) to know the exhaustive optimum; every tuner and
seed then measures through a :class:`~dcoc.search.measure.TableMeasurer` over that table
(the simulator is deterministic, so a lookup *is* the measurement), which makes the
comparison cheap and exactly fair.  Reported per layer and tuner (median over seeds):

* ``t99``: trials until the best found is within 1% of the exhaustive optimum
  (``cost <= opt / 0.99``); ``-`` if never within the budget;
* ``q@100`` / ``q@300``: optimum / best cost after 100 / 300 trials (1.000 = optimum);
* ``ms/trial``: the tuner's own overhead (wall time of the run / trials; no simulation).

What decides: per tuner, the median and IQR over every (layer, seed) run and a paired
two-sided Wilcoxon signed-rank test (:mod:`dcoc.stats`) over the same (layer, seed) pairs
against the default tuner ``surrogate``, for trials-to-99% (a run that never reached it
counts as budget + 1) and for the quality after 50 and 100 trials; "better"/"worse" only
at p < 0.05.  The paper's method ``dcoc`` is also paired against its own ablations
(``dcoc-frozen``, ``dcoc:select=topk``, ``dcoc:explore_frac=0``), and compared with RL:
the trials ``dcoc`` needs to reach the quality RL has at the end of its budget, versus the
trials RL needed for it (target: at least 30x).

Tuners are names or specs ``NAME:key=value,...`` (:func:`dcoc.tuners.parse`; the label is
the whole spec): ``surrogate:select=confidence``, ``dcoc:explore_frac=0``, ``xgb:plan_size=8``.

    python -m scripts.bench_sw --set evaluation --seeds 0 1 2 3 4 --budget 300
    python -m scripts.bench_sw --layers C2 C5 --tuners surrogate dcoc dcoc-frozen --seeds 0 1 2
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor

#: every tuner compared by default: the baselines, the default, the paper's method and
#: their ablations
ALL_TUNERS = ["random", "grid", "ga", "xgb", "rl", "chameleon", "sweep", "surrogate",
              "dcoc", "dcoc-frozen", "surrogate:select=confidence", "dcoc:select=topk",
              "dcoc:explore_frac=0"]
TUNERS = ALL_TUNERS
#: the reference of the main paired tests: the default tuner
REFERENCE = "surrogate"
#: the paper's method, paired against its ablations (specs of the dcoc family other than it)
PAPER = "dcoc"
#: tuning set: ResNet-18's VTA conv layers (every hyperparameter was chosen on these)
LAYERS = ["C2", "C3", "C4", "C5", "C6", "C7", "C8", "C9", "C10", "C11"]
TUNING_SET = LAYERS
#: evaluation set: conv layers of other zoo models (``tvm_plugin.frontend.model_tasks``,
#: VTA layers of vgg16 and mobilenetv2 at 224x224), never used to choose anything
EVALUATION_SET = {
    "mbv2.28": "conv:28,28,32,192,1,1,0",
    "mbv2.14b": "conv:14,14,384,64,1,1,0",
    "mbv2.7": "conv:7,7,160,960,1,1,0",
    "vgg16.14": "conv:14,14,512,512,3,1,1",
    "vgg16.56": "conv:56,56,128,256,3,1,1",
    "vgg16.28": "conv:28,28,256,512,3,1,1",
    "mbv2.14a": "conv:14,14,64,384,1,1,0",
}
#: the evaluation layers of the quick suite (``make bench``): three of the smallest spaces
QUICK_EVALUATION = ["mbv2.7", "vgg16.14", "mbv2.14b"]
SETS = {"tuning": TUNING_SET, "evaluation": list(EVALUATION_SET)}


def check_specs(tuners) -> list[str]:
    """The tuner specs, each checked by the library (unknown name or setting: SystemExit)."""
    from dcoc.errors import DcocError
    from dcoc.tuners import tuner_kwargs

    for t in tuners:
        try:
            tuner_kwargs(t)
        except DcocError as e:
            raise SystemExit(f"--tuners {t}: {e}") from None
    return list(tuners)


def ablations(tuners, paper: str = PAPER) -> list[str]:
    """The specs among ``tuners`` that are ablations of ``paper``: the same family
    (``dcoc``, ``dcoc-frozen``) with a setting or a fixed part changed."""
    from dcoc.tuners import parse

    return [t for t in tuners if t != paper and parse(t)[0] in (paper, f"{paper}-frozen")]


def layer_workload(layer: str):
    from dcoc.targets.vta.target import parse_workload

    return parse_workload(EVALUATION_SET.get(layer, layer))


def _table(layer: str, hw_name: str):
    from dcoc.targets.vta import HWConfig
    from dcoc.targets.vta.catalogue import exhaustive

    hw = HWConfig.parse(hw_name)
    wl = layer_workload(layer)
    return wl, hw, exhaustive(wl, hw)


def _run_one(args):
    layer, hw_name, tuner, seed, budget = args
    import torch

    torch.set_num_threads(1)
    from dcoc.search.measure import TableMeasurer
    from dcoc.targets.vta.spaces import vta_task
    from dcoc.tuners import create

    wl, hw, table = _table(layer, hw_name)
    valid = [v for v in table.values() if v is not None]
    opt = min(valid)
    task = vta_task(wl, hw)
    t = create(tuner, task, seed=seed)
    m = TableMeasurer(table, n_parallel=8)
    budget = min(budget, len(valid))
    t0 = time.perf_counter()
    t.tune(budget, m)
    wall = time.perf_counter() - t0
    curve = t.best_curve()
    return {"layer": layer, "tuner": tuner, "seed": seed, "budget": budget, "opt": opt,
            "space": len(table), "valid": len(valid), "curve": [c for _, c, _ in curve],
            "tuner_wall": [round(w, 4) for _, _, w in curve], "wall": wall, "trials": t.trials}


def sim_seconds(layer: str, hw_name: str, n: int = 40, seed: int = 0) -> float:
    """Mean wall seconds of one timing simulation of random valid schedules of a layer."""
    import random

    wl, hw, table = _table(layer, hw_name)
    from dcoc.targets.vta import simulate

    keys = [k for k, v in table.items() if v is not None]
    rng = random.Random(seed)
    picks = [dict(rng.choice(keys)) for _ in range(n)]
    t0 = time.perf_counter()
    for k in picks:
        simulate(wl, hw, k)
    return (time.perf_counter() - t0) / n


def trials_to(curve, target):
    for i, c in enumerate(curve):
        if c <= target:
            return i + 1
    return None


def summarize(runs: list[dict]) -> dict:
    """Per (layer, tuner): medians over seeds."""
    out = {}
    by: dict = {}
    for r in runs:
        by.setdefault((r["layer"], r["tuner"]), []).append(r)
    for (layer, tuner), rs in by.items():
        opt = rs[0]["opt"]
        t99 = [trials_to(r["curve"], opt / 0.99) for r in rs]
        q = {}
        for n in (50, 100, 300):
            vals = [opt / r["curve"][min(n, len(r["curve"])) - 1] for r in rs if r["curve"]]
            q[n] = statistics.median(vals) if vals else 0.0
        reached = [x for x in t99 if x is not None]
        out[(layer, tuner)] = {
            "t99_median": statistics.median([x if x is not None else math.inf for x in t99]),
            "t99_reached": f"{len(reached)}/{len(t99)}",
            "q50": q[50], "q100": q[100], "q300": q[300],
            "final": statistics.median(opt / r["curve"][-1] for r in rs),
            "ms_per_trial": 1e3 * statistics.median(r["wall"] / max(r["trials"], 1) for r in rs),
            "space": rs[0]["space"], "valid": rs[0]["valid"], "budget": rs[0]["budget"],
            "seeds": len(rs),
        }
    return out


def _t99(r) -> float:
    """Trials to 99% of the optimum; ``budget + 1`` if never reached (for paired tests)."""
    n = trials_to(r["curve"], r["opt"] / 0.99)
    return float(n) if n is not None else float(r["budget"] + 1)


def _q(r, n: int) -> float:
    c = r["curve"]
    return r["opt"] / c[min(n, len(c)) - 1] if c else 0.0


def compare(runs: list[dict], reference: str = REFERENCE, tuners=None) -> list[dict]:
    """Per tuner (all, or ``reference`` and ``tuners``), over every (layer, seed) run: median
    [IQR] of trials-to-99% and of the quality after 50/100 trials, and paired Wilcoxon tests
    against ``reference``."""
    from dcoc.stats import median_iqr, paired_test

    keep = None if tuners is None else {reference, *tuners}
    by: dict = {}
    for r in runs:
        if keep is None or r["tuner"] in keep:
            by.setdefault(r["tuner"], {})[(r["layer"], r["seed"])] = r
    ref = by.get(reference, {})
    out = []
    for tuner, rs in by.items():
        keys = sorted(rs)
        row = {"tuner": tuner, "runs": len(keys),
               "reached": sum(trials_to(rs[k]["curve"], rs[k]["opt"] / 0.99) is not None for k in keys)}
        for metric, fn, lower in (("t99", _t99, True), ("q50", lambda r: _q(r, 50), False),
                                  ("q100", lambda r: _q(r, 100), False)):
            vals = [fn(rs[k]) for k in keys]
            row[metric] = median_iqr(vals)
            pairs = [k for k in keys if k in ref]
            if tuner != reference and pairs:
                pt = paired_test([fn(ref[k]) for k in pairs], [fn(rs[k]) for k in pairs], lower)
                row[f"{metric}_test"] = {"n": pt.n, "better": pt.better, "worse": pt.worse,
                                         "median_diff": pt.median_diff, "p": pt.p, "sign": pt.sign()}
        out.append(row)
    return out


def render_compare(rows: list[dict], budget: int, reference: str = REFERENCE, md: bool = False) -> str:
    """The comparison table (markdown if ``md``)."""
    from dcoc.stats import fmt_p

    def mi(v, d):
        med, lo, hi = v
        def f(x):
            return f"{x:.{d}f}"
        return f"{f(med)} [{f(lo)}-{f(hi)}]"

    def verdict(t):
        if not t:
            return "(reference)"
        return {1: "better than " + reference, -1: "worse than " + reference, 0: "n.s."}[t["sign"]] + \
            f" (p={fmt_p(t['p'])}; {t['better']}+/{t['worse']}-)"

    vs = f"vs {reference}"
    headers = ["tuner", "runs", "reached 99%", f"trials to 99% (>{budget} = not reached)", vs,
               "q@50", vs, "q@100", vs]
    body = [[r["tuner"], r["runs"], r["reached"], mi(r["t99"], 0), verdict(r.get("t99_test")),
             mi(r["q50"], 3), verdict(r.get("q50_test")), mi(r["q100"], 3), verdict(r.get("q100_test"))]
            for r in rows]
    if md:
        out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        out += ["| " + " | ".join(str(c) for c in b) + " |" for b in body]
        return "\n".join(out)
    from dcoc.cli.options import render_table

    return render_table(headers, body, right={1, 2})


def thirty_x(runs: list[dict], paper: str = PAPER) -> list[dict]:
    """``paper`` (DCOC) vs RL: trials to reach RL's full-budget quality (target: 30x fewer)."""
    rows = []
    by: dict = {}
    for r in runs:
        by.setdefault((r["layer"], r["tuner"], r["seed"]), r)
    for (layer, tuner, seed), rl in sorted(by.items()):
        if tuner != "rl" or (layer, paper, seed) not in by:
            continue
        dc = by[(layer, paper, seed)]
        q = rl["curve"][-1]
        n_rl = trials_to(rl["curve"], q)
        n_dc = trials_to(dc["curve"], q)
        rows.append({"layer": layer, "seed": seed, "rl_budget": rl["budget"], "rl_trials": n_rl,
                     "dcoc_trials": n_dc, "ratio": (n_rl / n_dc) if n_dc else None})
    return rows


def run(layers=None, tuners=None, seeds=(0, 1, 2, 3, 4), budget: int = 1000, hw: str = "pynq",
        jobs: int | None = None, quiet: bool = False) -> dict:
    layers = layers or SETS["evaluation"]
    tuners = check_specs(tuners or TUNERS)
    # exhaustive tables first (cached), in parallel over layers
    jobs = jobs or os.cpu_count() or 1
    with ProcessPoolExecutor(jobs) as ex:
        list(ex.map(_table, layers, [hw] * len(layers)))
    work = [(l, hw, t, s, budget) for l in layers for t in tuners for s in seeds]
    runs = []
    t0 = time.perf_counter()
    with ProcessPoolExecutor(jobs) as ex:
        for i, r in enumerate(ex.map(_run_one, work)):
            runs.append(r)
            if not quiet:
                print(f"[{i + 1}/{len(work)}] {r['layer']} {r['tuner']} s{r['seed']}: "
                      f"best {r['opt'] / r['curve'][-1]:.3f} of optimum after {r['trials']} trials "
                      f"({r['wall']:.1f} s)", file=sys.stderr)
    sims = {l: sim_seconds(l, hw) for l in layers}
    abl = ablations(tuners)
    return {"runs": runs, "summary": summarize(runs), "thirty_x": thirty_x(runs),
            "compare": compare(runs),
            "compare_paper": compare(runs, PAPER, abl) if PAPER in tuners and abl else [],
            "tuners": tuners, "layers": list(layers),
            "wall": time.perf_counter() - t0, "hw": hw, "budget": budget, "seeds": list(seeds),
            "sim_seconds": sims}


def render(res: dict) -> str:
    from dcoc.cli.options import render_table

    s = res["summary"]
    layers = res.get("layers") or sorted({k[0] for k in s})
    tuners = res.get("tuners") or [t for t in TUNERS if any(k[1] == t for k in s)]
    out = [f"All layers, every (layer, seed) run: median [IQR] and paired Wilcoxon vs {REFERENCE} "
           "(the default)", render_compare(res["compare"], res["budget"]), ""]
    if res.get("compare_paper"):
        out += [f"{PAPER} (the paper's method) vs its ablations, paired the same way",
                render_compare(res["compare_paper"], res["budget"], PAPER), ""]
    rows = []
    for l in layers:
        first = s[(l, tuners[0])]
        row = [l, f"{first['valid']}/{first['space']}"]
        for t in tuners:
            v = s[(l, t)]
            t99 = v["t99_median"]
            row.append("-" if t99 == math.inf else f"{t99:.0f}")
        rows.append(row)
    out.append("Trials to reach 99% of the exhaustive optimum (median over seeds; '-' = not within budget)")
    out.append(render_table(["layer", "valid/space"] + tuners, rows, right=set(range(1, len(tuners) + 2))))
    for qk, label in (("q100", "after 100 trials"), ("q300", "after 300 trials (or the whole budget if smaller)")):
        rows = [[l] + [f"{s[(l, t)][qk]:.3f}" for t in tuners] for l in layers]
        out.append("")
        out.append(f"Best found {label} as a fraction of the optimum's throughput (median)")
        out.append(render_table(["layer"] + tuners, rows, right=set(range(1, len(tuners) + 1))))
    rows = [[t, f"{statistics.median(s[(l, t)]['ms_per_trial'] for l in layers):.2f}"] for t in tuners]
    out.append("")
    out.append("Tuner overhead per trial (ms, median over layers; simulation excluded)")
    out.append(render_table(["tuner", "ms/trial"], rows, right={1}))
    if res["thirty_x"]:
        rows = [[r["layer"], r["seed"], r["rl_trials"], r["dcoc_trials"] or "-",
                 f"{r['ratio']:.1f}x" if r["ratio"] else "-"] for r in res["thirty_x"]]
        out.append("")
        out.append(f"Trials to reach RL's quality at its full budget ({res['budget']} or the space; "
                   "target: rl/dcoc at least 30x)")
        out.append(render_table(["layer", "seed", "rl", PAPER, f"rl/{PAPER}"], rows, right={1, 2, 3, 4}))
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", choices=list(SETS), default="evaluation",
                    help="layer set (tuning: ResNet-18 C2..C11; evaluation: vgg16/mobilenetv2 layers)")
    ap.add_argument("--layers", nargs="*", default=None, help="explicit layers (overrides --set): C2..C11, "
                    f"{' '.join(EVALUATION_SET)} or conv:H,W,CI,CO,K,S,P")
    ap.add_argument("--tuners", nargs="*", default=None,
                    help=f"names or NAME:key=value specs (default: {' '.join(TUNERS)})")
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2, 3, 4])
    ap.add_argument("--budget", type=int, default=1000, help="trials per run (capped at the valid space)")
    ap.add_argument("--hw", default="pynq")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--json", default=None, help="write raw results here")
    a = ap.parse_args(argv)
    res = run(a.layers or SETS[a.set], a.tuners, a.seeds, a.budget, a.hw, a.jobs)
    print(render(res))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({**res, "summary": {f"{k[0]}|{k[1]}": v for k, v in res["summary"].items()}}, f)


if __name__ == "__main__":
    main()
