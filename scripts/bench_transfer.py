"""Transfer across models: co-design warm-started from OTHER zoo models' runs.

Leave-one-model-out.  For each held-out model M on board B:

1. **sources**: one co-design run of the default tuner ``surrogate`` (``--source-trials``
   simulations, seed ``--source-seed``) on every other zoo model on B; their records (+
   ``layers.json``) are cached under ``$DCOC_CACHE/transfer/sources`` and reused;
2. on M, same measurer, ``--trials`` simulations, every seed: ``transfer`` (``surrogate``
   with ``prior=`` those run directories, :class:`dcoc.codesign.Prior`: cost models
   pre-fitted on the sources' measurements, the sources' best hardware on the shortlist)
   against the same tuner from scratch (``surrogate``), the paper's method from scratch
   (``dcoc``) and the baselines ``sweep`` and ``xgb`` (joint co-design);
   ``transfer:FIELD=VALUE`` overrides a field of ``surrogate``'s
   :class:`~dcoc.method.config.DCOCConfig` (``transfer:prior_hw=0``: the sources' best
   configs are not shortlisted);
3. **metric**: simulations (trials) until the run's best design reaches 99% of the
   best-known throughput (latency <= best-known / 0.99).  A run that never reaches it
   counts as ``trials + 1`` (its true value is larger: the median is then a lower bound).
   The best-known design (:func:`best_known`) is the lowest latency over the top ``--top``
   (20) hardware configs of ``scripts.hw_landscape`` with per-layer exhaustive schedules,
   plus the best hardware every run found (also evaluated exhaustively), cached under
   ``$DCOC_CACHE/best_known`` (the same file as ``scripts.bench_codesign.best_known``).

What decides: per method, the median [IQR] of the trials-to-99% over every (model, board,
seed), the paired Wilcoxon test (:func:`dcoc.stats.paired_test`) of ``transfer`` against
each other method, and the ratio of medians (other / transfer; target: at least 2 against
``surrogate`` from scratch).  The tuning set (``--tuning``: held-out transformer on pynq,
2 seeds, 300 simulations, reference = the best design any run found) compares the
transfer variants of ``TUNING_METHODS``; the evaluation set (held-out resnet18,
mobilenetv2, vgg16 on pynq and ultra96) is disjoint (docs/method.md, "Transfer across
models").  One process (the memo of simulated configs is shared by every run of the
process).

    python -m scripts.bench_transfer --tuning --json tuning.json
    python -m scripts.bench_transfer                       # default: held-out resnet18 on pynq, 5 seeds
    python -m scripts.bench_transfer --heldout resnet18 mobilenetv2 vgg16 --boards pynq ultra96
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

ZOO = ("resnet18", "mobilenetv2", "vgg16", "transformer")
#: the tuner of the source runs and of ``transfer`` (warm-started)
SOURCE = "surrogate"
METHODS = ["transfer", "surrogate", "dcoc", "sweep", "xgb"]
#: the variants compared on the tuning set
TUNING_METHODS = ["transfer", "transfer:prior_hw=0", "surrogate"]
REFERENCE = "transfer"
TARGET = 0.99

_MEMO = None


def _layers(model):
    from scripts.bench_codesign import _layers as layers  # one cache of extracted layers

    return layers(model)


def _measurer():
    """One memo for the whole process: the simulator is deterministic, so a repeated
    (workload, hardware, schedule) costs a lookup -- it still counts as a trial."""
    global _MEMO
    if _MEMO is None:
        from dcoc.search.measure import MemoMeasurer
        from dcoc.targets.vta import VTASimMeasurer

        _MEMO = MemoMeasurer(VTASimMeasurer(n_workers=0))
    return _MEMO


# ------------------------------------------------------------------------- best known
def best_known(model: str, board: str, extra=(), top: int = 20, quiet: bool = False) -> dict:
    """The best-known design (ms) of ``model`` on ``board``:
    :func:`scripts.bench_codesign.best_known` (same cache), one process."""
    from scripts.bench_codesign import best_known as search

    return search(model, board, extra=extra, top=top, jobs=1, quiet=quiet)


# ------------------------------------------------------------------------- runs
def source_dir(model: str, board: str, trials: int, seed: int) -> str:
    """The cached source run's directory, keyed by the timing model and the source tuner's
    config (a changed default must not reuse runs made under the old one)."""
    from dcoc.codesign import config_tag
    from dcoc.targets.vta.catalogue import cache_root, timing_model_tag
    from dcoc.targets.vta.report import MODEL_EPILOGUE
    from dcoc.tuners import get_tuner

    cfg = config_tag(get_tuner(SOURCE).config())
    return os.path.join(cache_root("transfer"), "sources",
                        f"{model}_{board}_{SOURCE}_t{trials}_s{seed}_{timing_model_tag(MODEL_EPILOGUE)}_{cfg}")


def source_run(model: str, board: str, trials: int, seed: int, quiet: bool = False) -> str:
    """A ``surrogate`` co-design run on ``model`` (cached run directory; records resume)."""
    import torch

    torch.set_num_threads(1)
    from dcoc import codesign as cd
    from dcoc.codesign.prior import LAYERS_FILE, write_layers
    from dcoc.search.records import Records
    from dcoc.targets.vta import BOARDS

    d = source_dir(model, board, trials, seed)
    done = os.path.join(d, "done.json")
    if os.path.exists(done):
        return d
    t0 = time.perf_counter()
    write_layers(os.path.join(d, LAYERS_FILE), _layers(model))
    s = cd.Session(_layers(model), _measurer(), trials, SOURCE, seed, Records(os.path.join(d, "records.jsonl")))
    cd.make_driver(s, BOARDS[board], SOURCE, seed).run()
    with open(done, "w") as f:
        json.dump({"model": model, "board": board, "trials": s.trials, "latency_ms": s.best_latency * 1e3,
                   "hw": s.best_hw}, f)
    if not quiet:
        print(f"  source {model}/{board}: {s.best_latency * 1e3:.3f} ms on {s.best_hw} "
              f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    return d


def _run(model, board, method, seed, trials, sources):
    import torch

    torch.set_num_threads(1)
    from dcoc import codesign as cd
    from dcoc.targets.vta import BOARDS

    s = cd.Session(_layers(model), _measurer(), trials, method, seed)
    bd = BOARDS[board]
    t0 = time.perf_counter()
    name, _, settings = method.partition(":")
    if name == "transfer":  # the source tuner warm-started from the sources (``transfer:prior_hw=0``)
        spec = SOURCE + (":" + settings if settings else "")
        drv = cd.make_driver(s, bd, spec, seed, prior=list(sources))
    else:  # a tuner name or spec (``surrogate:select=confidence``)
        drv = cd.make_driver(s, bd, method, seed)
    drv.run()
    return {"model": model, "board": board, "method": method, "seed": seed, "trials": s.trials,
            "latency_ms": s.best_latency * 1e3, "hw": s.best_hw, "hw_obj": s.hw[s.best_hw],
            "wall": time.perf_counter() - t0,
            "history": [(t, lat * 1e3) for t, lat in s.history if math.isfinite(lat)]}


def trials_to(history, target_ms: float, budget: int) -> int:
    """Simulations until the best design is within ``target_ms`` (``budget + 1`` if never)."""
    for t, lat in history:
        if lat <= target_ms * (1 + 1e-12):
            return t + 1
    return budget + 1


def run(heldout=("resnet18",), boards=("pynq",), methods=None, seeds=(0, 1, 2, 3, 4), trials=500,
        source_trials=None, source_seed=0, top=20, zoo=ZOO, quiet=False, reference="best-known",
        partial=None) -> dict:
    from dcoc.errors import DcocError
    from dcoc.tuners import tuner_kwargs

    methods = list(methods or METHODS)
    for m in methods:  # a typo fails before the source runs
        try:
            tuner_kwargs(SOURCE + m[len("transfer"):] if m.partition(":")[0] == "transfer" else m)
        except DcocError as e:
            raise SystemExit(f"--methods {m}: {e}") from None
    source_trials = source_trials or trials
    t_start = time.perf_counter()
    runs, refs, srcs = [], {}, {}
    for board in boards:
        for model in heldout:
            others = [m for m in zoo if m != model]
            dirs = [source_run(m, board, source_trials, source_seed, quiet) for m in others]
            srcs[f"{model}|{board}"] = {m: json.load(open(os.path.join(d, "done.json"))) for m, d in zip(others, dirs)}
            work = [(mt, sd) for sd in seeds for mt in methods]
            for i, (mt, sd) in enumerate(work):
                r = _run(model, board, mt, sd, trials, dirs)
                runs.append(r)
                if partial:  # every finished run, in case the process is stopped before the end
                    with open(partial, "w") as f:
                        json.dump([{k: v for k, v in x.items() if k != "hw_obj"} for x in runs], f)
                if not quiet:
                    print(f"[{i + 1}/{len(work)}] {model} {board} {mt} s{sd}: {r['latency_ms']:.4f} ms on "
                          f"{r['hw']} ({r['wall']:.0f} s)", file=sys.stderr, flush=True)
            mine = [r for r in runs if r["model"] == model and r["board"] == board]
            if reference == "found":  # tuning only: the best design any run found (no exhaustive search)
                b = min(mine, key=lambda r: r["latency_ms"])
                refs[f"{model}|{board}"] = {"latency_ms": b["latency_ms"], "hw": b["hw"], "evaluated": {},
                                            "landscape_top": 0, "kind": "found"}
            else:
                extra = {r["hw"]: r["hw_obj"] for r in mine}
                refs[f"{model}|{board}"] = best_known(model, board, extra.values(), top, quiet)
    for r in runs:
        r.pop("hw_obj", None)
        ref = refs[f"{r['model']}|{r['board']}"]["latency_ms"]
        r["to99"] = trials_to(r["history"], ref / TARGET, trials)
        r["reached"] = r["to99"] <= trials
        r["fraction"] = ref / r["latency_ms"]
    res = {"runs": runs, "best_known": refs, "sources": srcs, "trials": trials, "source_trials": source_trials,
           "seeds": list(seeds), "methods": methods, "heldout": list(heldout), "boards": list(boards),
           "top": top, "target": TARGET, "reference": reference, "wall": time.perf_counter() - t_start}
    res["compare"] = compare(res, next((m for m in methods if m.startswith("transfer")), REFERENCE))
    return res


def compare(res: dict, reference: str = REFERENCE) -> list[dict]:
    """Per method: trials-to-99% median [IQR] and the paired test of ``reference`` against it."""
    from dcoc.stats import median_iqr, paired_test

    by: dict = {}
    for r in res["runs"]:
        by.setdefault(r["method"], {})[(r["model"], r["board"], r["seed"])] = r
    base = by.get(reference, {})
    out = []
    for method, v in by.items():
        keys = sorted(v)
        vals = [v[k]["to99"] for k in keys]
        row = {"method": method, "runs": len(keys), "to99": median_iqr(vals),
               "reached": sum(v[k]["reached"] for k in keys),
               "fraction": median_iqr([v[k]["fraction"] for k in keys])}
        pairs = [k for k in keys if k in base]
        if method != reference and pairs:
            pt = paired_test([base[k]["to99"] for k in pairs], [v[k]["to99"] for k in pairs])
            med_ref = median_iqr([base[k]["to99"] for k in pairs])[0]
            row["test"] = {"n": pt.n, "transfer_better": pt.worse, "transfer_worse": pt.better,
                           "median_diff": pt.median_diff, "p": pt.p,
                           "ratio": row["to99"][0] / med_ref if med_ref else math.nan}
        out.append(row)
    return out


def render(res: dict) -> str:
    from dcoc.cli.options import render_table
    from dcoc.stats import fmt_p

    T = res["trials"]
    lines = [f"Simulations to {res['target']:.0%} of the best-known throughput (never reached: {T + 1}; "
             f"budget {T}, seeds {res['seeds']}, held out {res['heldout']} on {res['boards']}); "
             f"paired Wilcoxon vs {next((c['method'] for c in res['compare'] if 'test' not in c), REFERENCE)}"]
    body = []
    for r in res["compare"]:
        t = r.get("test")
        body.append([r["method"], r["runs"], "{:.0f} [{:.0f}-{:.0f}]".format(*r["to99"]),
                     f"{r['reached']}/{r['runs']}", "{:.4f} [{:.4f}-{:.4f}]".format(*r["fraction"]),
                     f"{t['ratio']:.2f}x" if t else "(reference)",
                     f"p={fmt_p(t['p'])} ({t['transfer_better']} better/{t['transfer_worse']} worse)" if t else ""])
    lines.append(render_table(["method", "runs", "sims to 99%, median [IQR]", "reached", "final / best-known",
                               "median / transfer's", "paired test (transfer vs it)"], body, right={1, 3}))
    lines.append("")
    per = {}
    for r in res["runs"]:
        per.setdefault((r["model"], r["board"], r["method"]), []).append(r["to99"])
    lines.append(render_table(["model", "board", "method", "sims to 99% per seed"],
                              [[m, b, mt, " ".join(str(x) for x in v)] for (m, b, mt), v in per.items()]))
    lines.append("")
    for k, v in res["best_known"].items():
        if v.get("kind") == "found":
            lines.append(f"reference {k}: {v['latency_ms']:.4f} ms on {v['hw']} (best design any run found)")
        else:
            lines.append(f"best-known {k}: {v['latency_ms']:.4f} ms on {v['hw']} ({len(v['evaluated'])} configs "
                         f"evaluated exhaustively, landscape top {v['landscape_top']})")
    for k, v in res["sources"].items():
        lines.append(f"sources for {k}: " + "; ".join(f"{m} {s['latency_ms']:.3f} ms on {s['hw']}"
                                                      for m, s in v.items()))
    lines.append(f"wall {res['wall']:.0f} s")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--heldout", nargs="*", default=["resnet18"], choices=ZOO)
    ap.add_argument("--boards", nargs="*", default=["pynq"])
    ap.add_argument("--methods", nargs="*", default=None,
                    help=f"transfer[:FIELD=VALUE] or tuner specs (default: {' '.join(METHODS)})")
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2, 3, 4])
    ap.add_argument("--trials", type=int, default=500)
    ap.add_argument("--source-trials", type=int, default=None, help="simulations of each source run "
                    "(default: --trials)")
    ap.add_argument("--source-seed", type=int, default=0)
    ap.add_argument("--top", type=int, default=20, help="landscape configs in the best-known reference")
    ap.add_argument("--reference", default="best-known", choices=["best-known", "found"],
                    help="found: the best design any run found (cheap; the tuning set uses it)")
    ap.add_argument("--tuning", action="store_true",
                    help="the tuning set: held-out transformer on pynq, the transfer variants, 2 seeds, "
                         "300 simulations, reference 'found'")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    if a.tuning:
        a.heldout, a.boards, a.reference = ["transformer"], ["pynq"], "found"
        a.methods = a.methods or TUNING_METHODS
        if a.seeds == [0, 1, 2, 3, 4]:
            a.seeds = [0, 1]
        if a.trials == 500:
            a.trials, a.source_trials = 300, a.source_trials or 500
    partial = a.json + ".partial" if a.json else None
    res = run(a.heldout, a.boards, a.methods, a.seeds, a.trials, a.source_trials, a.source_seed, a.top,
              reference=a.reference, partial=partial)
    print(render(res))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f)
        if os.path.exists(partial):  # the finished runs are all in a.json now
            os.remove(partial)


if __name__ == "__main__":
    main()
