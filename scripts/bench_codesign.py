"""Co-design benchmark: DCOC vs the baselines searching the same joint space, same budget.

For each (model, board, tuner, seed) one co-design run with ``trials`` simulations
(``dcoc.codesign``: DCOC's joint agents, or the nested hardware/software search for the
baselines).  Reported per (model, board, tuner), median over seeds:

* ``latency``: end-to-end accelerator latency of the best (hardware, schedules) found;
* ``vs tuned preset``: speed-up over the board's default hardware (the pynq preset on
  pynq; the same 1x16x16 core at the board's clock/bus elsewhere) with the
  *exhaustively optimal* schedule for every layer -- the best software alone can do;
* ``vs default``: speed-up over the default hardware with the default schedules;
* the hardware chosen (most frequent over seeds) and its resources;
* wall seconds per run (simulation included; a memo answers repeated configs).

Statistics (:mod:`dcoc.stats`): per tuner, the median [IQR] over every (model, board,
seed) run of the latency relative to the reference (tuned preset / latency), and a paired
two-sided Wilcoxon signed-rank test against ``dcoc`` over the same (model, board, seed)
triples; "better"/"worse" only at p < 0.05.  With 5 seeds a single (model, board) pair
gives 5 pairs, too few for p < 0.05 (the smallest two-sided p is 0.0625): the quick suite
pools two boards.

Baselines propose (hardware, schedules) jointly (:class:`dcoc.codesign.JointCoDesign`);
``sweep`` and ``surrogate`` are the non-learning references; ``dcoc-frozen``,
``dcoc-noagents`` and ``dcoc-topk`` the ablations (:func:`dcoc.codesign.make_driver`).

The explored hardware configs (measured model latency vs BRAM/DSP/LUT) are kept for the
Pareto plot of ``scripts.bench``.

    python -m scripts.bench_codesign --models resnet18 --boards pynq --trials 500 --seeds 0
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor

TUNERS = ["dcoc", "dcoc-frozen", "dcoc-noagents", "dcoc-topk", "dcoc:hw_explore_every=1000000000",
          "surrogate", "sweep", "random", "ga", "xgb", "rl", "chameleon"]
REFERENCE = "dcoc"

_LAYER_CACHE: dict = {}


def _layers(model):
    if model not in _LAYER_CACHE:
        from dcoc.codesign import vta_layers
        from tvm_plugin.frontend import model_tasks

        _LAYER_CACHE[model] = vta_layers(model_tasks(model, "vta"))[0]
    return _LAYER_CACHE[model]


def reference(model: str, board: str) -> dict:
    """Default hardware with exhaustively optimal and with default schedules."""
    from dcoc.api import _baseline_latency
    from dcoc.search.vta_task import exhaustive
    from dcoc.vta import BOARDS, HWConfig

    bd = BOARDS[board]
    hw = HWConfig.preset("pynq") if board == "pynq" else bd.default_hw()
    opt = 0.0
    layers = _layers(model)
    for layer in layers:
        table = exhaustive(layer.workload, hw, epilogue=layer.epilogue)
        opt += layer.count * min(v for v in table.values() if v is not None)
    return {"hw": hw.name, "tuned_ms": opt * 1e3, "default_ms": _baseline_latency(layers, hw) * 1e3}


def _run(args):
    model, board, tuner, seed, trials, agents = args
    import torch

    torch.set_num_threads(1)
    from dcoc import codesign as cd
    from dcoc.search.measure import MemoMeasurer, VTASimMeasurer
    from dcoc.vta import BOARDS

    layers = _layers(model)
    bd = BOARDS[board]
    m = MemoMeasurer(VTASimMeasurer(n_workers=0))
    s = cd.Session(layers, m, trials, tuner, seed)
    t0 = time.perf_counter()
    from scripts.bench_sw import parse_spec, tuner_kwargs

    name, kw = parse_spec(tuner)
    kw = tuner_kwargs(name, kw)
    cd.make_driver(s, bd, name, seed, agents=kw.pop("agents", agents or "dcoc"), **kw).run()
    wall = time.perf_counter() - t0
    hw = s.hw[s.best_hw]
    explored = []
    for name in s.complete_hws():
        h = s.hw[name]
        explored.append({"hw": name, "latency_ms": s.latency(name) * 1e3,
                         "resources": h.resources(dsp_budget=bd.dsp)})
    return {"model": model, "board": board, "tuner": tuner, "seed": seed, "trials": s.trials,
            "latency_ms": s.best_latency * 1e3, "hw": hw.name,
            "resources": hw.resources(dsp_budget=bd.dsp), "wall": wall,
            "history": [(t, lat * 1e3) for t, lat in s.history if lat != float("inf")],
            "explored": explored, "agents": agents if tuner.startswith("dcoc") else None}


def run(models=("resnet18",), boards=("pynq",), tuners=None, seeds=(0,), trials=500, jobs=None,
        agents=None, quiet=False) -> dict:
    from dcoc.tuners import REGISTRY

    tuners = [t for t in (tuners or TUNERS) if t.partition(":")[0] in REGISTRY]
    refs = {}
    for mdl in models:
        for b in boards:
            refs[(mdl, b)] = reference(mdl, b)
    work = [(mdl, b, t, s, trials, agents) for mdl in models for b in boards for t in tuners for s in seeds]
    runs = []
    t0 = time.perf_counter()
    with ProcessPoolExecutor(jobs or os.cpu_count()) as ex:
        for i, r in enumerate(ex.map(_run, work)):
            runs.append(r)
            if not quiet:
                ref = refs[(r["model"], r["board"])]
                print(f"[{i + 1}/{len(work)}] {r['model']} {r['board']} {r['tuner']} s{r['seed']}: "
                      f"{r['latency_ms']:.3f} ms ({ref['tuned_ms'] / r['latency_ms']:.3f}x tuned preset) "
                      f"on {r['hw']} in {r['wall']:.0f} s", file=sys.stderr)
    res = {"runs": runs, "refs": {f"{k[0]}|{k[1]}": v for k, v in refs.items()}, "trials": trials,
           "seeds": list(seeds), "tuners": tuners, "wall": time.perf_counter() - t0}
    res["compare"] = compare(res)
    return res


def compare(res: dict, reference: str = REFERENCE) -> list[dict]:
    """Per tuner over every (model, board, seed): median [IQR] of tuned-preset / latency
    (higher = faster designs) and a paired Wilcoxon test against ``reference``."""
    from dcoc.stats import median_iqr, paired_test

    by: dict = {}
    for r in res["runs"]:
        ref = res["refs"][f"{r['model']}|{r['board']}"]
        by.setdefault(r["tuner"], {})[(r["model"], r["board"], r["seed"])] = ref["tuned_ms"] / r["latency_ms"]
    base = by.get(reference, {})
    out = []
    for tuner, v in by.items():
        keys = sorted(v)
        row = {"tuner": tuner, "runs": len(keys), "speedup": median_iqr([v[k] for k in keys])}
        pairs = [k for k in keys if k in base]
        if tuner != reference and pairs:
            pt = paired_test([base[k] for k in pairs], [v[k] for k in pairs], lower_is_better=False)
            row["test"] = {"n": pt.n, "better": pt.better, "worse": pt.worse, "median_diff": pt.median_diff,
                           "p": pt.p, "sign": pt.sign()}
        out.append(row)
    return out


def render_compare(rows: list[dict], reference: str = REFERENCE, md: bool = False) -> str:
    from dcoc.stats import fmt_p

    def verdict(t):
        if not t:
            return "(reference)"
        return {1: "better than " + reference, -1: "worse than " + reference, 0: "n.s."}[t["sign"]] + \
            f" (p={fmt_p(t['p'])}; {t['better']}+/{t['worse']}-)"

    headers = ["tuner", "runs", "speed-up vs tuned preset, median [IQR]", f"paired test vs {reference}"]
    body = [[r["tuner"], r["runs"], "{:.4f} [{:.4f}-{:.4f}]".format(*r["speedup"]), verdict(r.get("test"))]
            for r in rows]
    if md:
        out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        out += ["| " + " | ".join(str(c) for c in b) + " |" for b in body]
        return "\n".join(out)
    from dcoc.commands._common import render_table

    return render_table(headers, body, right={1})


def summarize(res: dict) -> list[dict]:
    rows = []
    by = collections.defaultdict(list)
    for r in res["runs"]:
        by[(r["model"], r["board"], r["tuner"])].append(r)
    for (model, board, tuner), rs in by.items():
        ref = res["refs"][f"{model}|{board}"]
        lat = statistics.median(r["latency_ms"] for r in rs)
        hw = collections.Counter(r["hw"] for r in rs).most_common(1)[0][0]
        rows.append({"model": model, "board": board, "tuner": tuner, "seeds": len(rs),
                     "latency_ms": lat, "best_ms": min(r["latency_ms"] for r in rs),
                     "vs_tuned_preset": ref["tuned_ms"] / lat, "vs_default": ref["default_ms"] / lat,
                     "hw": hw, "resources": next(r["resources"] for r in rs if r["hw"] == hw),
                     "wall_s": statistics.median(r["wall"] for r in rs),
                     "ref_tuned_ms": ref["tuned_ms"], "ref_default_ms": ref["default_ms"]})
    return rows


def render(res: dict) -> str:
    from dcoc.commands._common import render_table

    rows = summarize(res)
    out = ["Every (model, board, seed) run: median [IQR] and paired Wilcoxon vs " + REFERENCE,
           render_compare(res.get("compare") or compare(res)), ""]
    out += [render_table(
        ["model", "board", "tuner", "latency ms", "vs tuned preset", "vs default", "hardware", "BRAM", "DSP",
         "wall s"],
        [[r["model"], r["board"], r["tuner"], f"{r['latency_ms']:.3f}", f"{r['vs_tuned_preset']:.3f}x",
          f"{r['vs_default']:.3f}x", r["hw"], r["resources"]["bram36"], r["resources"]["dsp"],
          f"{r['wall_s']:.0f}"] for r in rows],
        right={3, 4, 5, 7, 8, 9})]
    out.append("")
    out.append("reference (default hardware): " + "; ".join(
        f"{k}: tuned {v['tuned_ms']:.3f} ms, default schedules {v['default_ms']:.3f} ms on {v['hw']}"
        for k, v in res["refs"].items()))
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="*", default=["resnet18", "mobilenetv2"])
    ap.add_argument("--boards", nargs="*", default=["pynq", "ultra96"])
    ap.add_argument("--tuners", nargs="*", default=TUNERS)
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2, 3, 4])
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--agents", default=None)
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    res = run(a.models, a.boards, a.tuners, a.seeds, a.trials, a.jobs, a.agents)
    print(render(res))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f)


if __name__ == "__main__":
    main()
