"""Tuned models next to ONNX Runtime on this CPU, at equal wall-clock tuning budgets.

    python -m scripts.bench_cpu                                   # 4 models x 10 and 60 min
    python -m scripts.bench_cpu --quick                           # 10 min per tuner and model
    python -m scripts.bench_cpu --models small_cnn --budget-minutes 3 --out rows.jsonl
    python -m scripts.bench_cpu --summarize rows.jsonl            # read-out only
    python -m scripts.bench_cpu --quick --work-dir W --retime     # time W's runs again

For each model (``scripts.bench_metaschedule``'s tuning set: ``small_cnn``, ``transformer``,
``mobilenetv2`` and ``resnet18`` at 1x3x64x64) it compiles the untuned model, then tunes
with each tuner (default: dcoc's default tuner and MetaSchedule's EvolutionarySearch) for
each budget in a fresh work dir: ``tune_model(..., time_budget=SECONDS)`` (``dcoc tune
--time-budget``), so no batch starts once the wall clock has run out (every task gets its
first trial first; the trial cap, 4 per second of budget, is set so that the clock, not
the count, ends a run).  EvolutionarySearch runs at its authors' defaults (population
512, MetaSchedule's XGBoost model).  All of a model's compiled
versions and ONNX Runtime (CPU EP) are then re-timed in alternating rounds on the same
threads (the TVM runtime's = ``intra_op_num_threads``), and reported as latency ratios to
ONNX Runtime (< 1: faster than ONNX Runtime) with geomeans over the models.
Every tuner gets the same compile pipeline (``compile_model``: weight prepacking, the
host's ``-mcpu``, the runtime on all physical cores).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time

from scripts.bench_metaschedule import TUNING_MODELS, load_model

#: EvolutionarySearch's population at its authors' default (``tune_model``'s when None)
AUTHORS_POPULATION = 512
#: MetaSchedule's EvolutionarySearch as ``tune_model`` names it
EVOLUTIONARY = "evolutionary"
#: trial cap per second of budget (the deadline is meant to end a run)
TRIALS_PER_SECOND = 4
QUICK_MINUTES = (10.0,)
FULL_MINUTES = (10.0, 60.0)


def default_tuners() -> list[str]:
    from dcoc.tuners import DEFAULT

    return [DEFAULT, EVOLUTIONARY]


def _key(tuner: str, minutes: float) -> str:
    return f"{tuner}@{minutes:g}min"


def tune_within(model, tuner: str, minutes: float, seed: int, work_dir: str,
                population: int | None = None):
    """``tune_model`` stopped by the wall clock after ``minutes`` of tuning; returns
    (TuneResult, stopped by the clock)."""
    from dcoc.api.cpu import tune_metaschedule  # saves result.json (what --retime reads)

    trials = max(1, int(math.ceil(minutes * 60.0 * TRIALS_PER_SECOND)))
    r = tune_metaschedule(model, "llvm", trials=trials, tuner=tuner, seed=seed, work_dir=work_dir,
                          population=population, time_budget=minutes * 60.0, measure=False,
                          baseline=False, progress=False)
    return r, bool(r.extra.get("stopped_on_time"))


def _run_dir(root: str, name: str, minutes: float, tuner: str, seed: int) -> str:
    return os.path.join(root, f"{name}_{minutes:g}min_{tuner.replace(':', '_')}_{seed}")


def _meta(extra: dict, trials: int, minutes: float, tuner: str, wall_s) -> dict:
    """What a row says about one tuning run (from its result's ``extra``)."""
    return {"minutes": minutes, "tuner": tuner, "trials": extra.get("new_trials", trials),
            "tuning_s": extra.get("tuning_seconds"), "wall_s": wall_s,
            "stopped_by": "clock" if extra.get("stopped_on_time") else "trial cap",
            "untuned_functions": len(extra.get("untuned_functions", [])),
            "tuned_functions": len(extra.get("tuned_functions", []))}


def run(models=TUNING_MODELS, minutes=FULL_MINUTES, tuners=None, seed: int = 0,
        work_dir: str | None = None, population: int | None = None, rounds: int = 3,
        out: str | None = None, log=None, retime: bool = False) -> list[dict]:
    """Rows ``{model, strategy, minutes, ms, ort_ms, ratio, ...}``, one per compiled model
    (``untuned`` and ``tuner@Nmin``) and one ``onnxruntime`` row per model.

    ``retime``: tune nothing; compile each run already in ``work_dir`` (an earlier
    ``run(..., work_dir=...)``) from its database as its tuning did, without changing it,
    and time them again -- e.g. on a quieter machine."""
    from tvm_plugin.export import compile_from_work_dir
    from tvm_plugin.metaschedule.build import (
        compile_model,
        random_inputs,
        resolve_tvm_target,
        use_runtime_threads,
    )
    from tvm_plugin.metaschedule.profile import interleaved_latency

    say = log or (lambda line: print(line, file=sys.stderr, flush=True))
    tuners = list(tuners or default_tuners())
    if retime and not work_dir:
        raise ValueError("retime needs the work_dir of the runs to time again")
    root = work_dir or tempfile.mkdtemp(prefix="dcoc-bench-cpu-")
    say(f"bench_cpu: work dirs under {root}")
    tgt = resolve_tvm_target("llvm")
    threads = use_runtime_threads(tgt)
    rows: list[dict] = []

    def emit(row):
        rows.append(row)
        if out:
            with open(out, "a") as f:
                f.write(json.dumps(row) + "\n")

    for name in models:
        model, src = load_model(name)
        ex0, _ = compile_model(None, model.mod, tgt)
        exes, meta = {"untuned": ex0}, {"untuned": {"minutes": 0.0}}
        for m in minutes:
            for tuner in tuners:
                wd, k = _run_dir(root, name, m, tuner, seed), _key(tuner, m)
                if retime:
                    res = os.path.join(wd, "result.json")
                    if not os.path.isfile(res):
                        say(f"bench_cpu: {name} {k}: no finished run in {wd}; skipped")
                        continue
                    with open(res) as f:
                        done = json.load(f)
                    # the compile tune_model made (each task's best record, minus the tasks
                    # it kept untuned), as `dcoc export` makes it; the work dir is only read
                    exes[k] = compile_from_work_dir(done, wd, model=model)[0]
                    meta[k] = _meta(done["extra"], done["trials"], m, tuner, done.get("wall_seconds"))
                else:
                    t0 = time.perf_counter()
                    r, _ = tune_within(model, tuner, m, seed, wd, population)
                    meta[k] = _meta(r.extra, r.trials, m, tuner, round(time.perf_counter() - t0, 1))
                    exes[k] = r.executable
                say(f"bench_cpu: {name} {k}: {meta[k]['trials']} trials in "
                    f"{meta[k]['tuning_s']} s (stopped by {meta[k]['stopped_by']})")
        inputs = random_inputs(model.input_shapes, model.input_dtypes, seed=seed)
        t = interleaved_latency(exes, tgt, inputs, list(model.input_shapes), src, threads,
                                rounds=rounds)
        ort = t["onnxruntime"]
        emit({"model": name, "strategy": "onnxruntime", "ms": ort, "threads": threads})
        for k in exes:
            emit({"model": name, "strategy": k, "ms": t[k], "ort_ms": ort, "ratio": t[k] / ort,
                  "threads": threads, **meta[k]})
        say(f"bench_cpu: {name}: ONNX Runtime {ort:.3f} ms; " +
            ", ".join(f"{k} {t[k] / ort:.2f}x" for k in exes))
        del exes
    return rows


def _gmean(xs) -> float:
    xs = [x for x in xs if x and math.isfinite(x) and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan


def summarize(rows: list[dict]) -> str:
    """Markdown: latency / ONNX Runtime per model and strategy, geomeans, and the targets."""
    models = list(dict.fromkeys(r["model"] for r in rows))
    strategies = list(dict.fromkeys(r["strategy"] for r in rows if r["strategy"] != "onnxruntime"))
    ort = {r["model"]: r for r in rows if r["strategy"] == "onnxruntime"}
    by = {(r["model"], r["strategy"]): r for r in rows if r["strategy"] != "onnxruntime"}
    head = ["model", "ONNX Runtime ms"] + strategies
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for m in models:
        cells = [m, f"{ort[m]['ms']:.3f}" if m in ort else "-"]
        for s in strategies:
            r = by.get((m, s))
            cells.append(f"{r['ratio']:.2f}" if r else "-")
        lines.append("| " + " | ".join(cells) + " |")
    gm = {s: _gmean(by[(m, s)]["ratio"] for m in models if (m, s) in by) for s in strategies}
    lines.append("| **geomean** | | " + " | ".join(f"**{gm[s]:.2f}**" for s in strategies) + " |")
    lines += ["", "Latency / ONNX Runtime latency (< 1: faster than ONNX Runtime), re-timed "
                  "interleaved on the same threads."]
    tuned = [r for r in by.values() if r.get("tuner")]
    if tuned:
        lines += ["", "| model | run | trials | tuning s | stopped by | functions tuned / untuned |",
                  "|---|---|---:|---:|---|---|"]
        for r in tuned:
            lines.append(f"| {r['model']} | {r['strategy']} | {r.get('trials')} | "
                         f"{r.get('tuning_s')} | {r.get('stopped_by')} | "
                         f"{r.get('tuned_functions')} / {r.get('untuned_functions')} |")
    mins = sorted({r["minutes"] for r in tuned})
    notes = []
    for s in strategies:
        if s == "untuned":
            continue
        at_or_below = sum(1 for m in models if (m, s) in by and by[(m, s)]["ratio"] <= 1.0)
        notes.append(f"`{s}`: geomean {gm[s]:.2f}, <= 1.0 on {at_or_below} of "
                     f"{sum(1 for m in models if (m, s) in by)} models")
    if mins:
        lo, hi = mins[0], mins[-1]
        tuner_names = list(dict.fromkeys(r["tuner"] for r in tuned))
        ours = next((t for t in tuner_names if t != EVOLUTIONARY), None)
        if ours and EVOLUTIONARY in tuner_names:
            a, b = _key(ours, lo), _key(EVOLUTIONARY, hi)
            pairs = [by[(m, a)]["ms"] / by[(m, b)]["ms"] for m in models
                     if (m, a) in by and (m, b) in by]
            if pairs:
                notes.append(f"`{a}` / `{b}` latency: geomean {_gmean(pairs):.2f} over "
                             f"{len(pairs)} models (<= 1: {ours} at {lo:g} min reaches "
                             f"EvolutionarySearch's {hi:g}-min latency)")
    if notes:
        lines += [""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def read_rows(paths) -> list[dict]:
    rows = []
    for p in paths:
        with open(p) as f:
            rows += [json.loads(line) for line in f if line.strip()]
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.bench_cpu",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=list(TUNING_MODELS), choices=list(TUNING_MODELS))
    ap.add_argument("--budget-minutes", nargs="+", type=float, default=None,
                    help=f"wall-clock tuning budgets (default {' '.join(map(str, FULL_MINUTES))})")
    ap.add_argument("--quick", action="store_true",
                    help=f"budget {QUICK_MINUTES[0]:g} min (make bench's quick suite)")
    ap.add_argument("--tuners", nargs="+", default=None,
                    help="dcoc tuner names/specs or 'evolutionary' (default: dcoc's default and "
                         "evolutionary)")
    ap.add_argument("--population", type=int, default=None,
                    help="EvolutionarySearch population (default: its authors' 512)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None,
                    help="TVM runtime and ONNX Runtime threads (default: physical cores)")
    ap.add_argument("--work-dir", default=None,
                    help="keep every run's work dir under this (default: a new temporary dir, "
                         "printed at the start)")
    ap.add_argument("--retime", action="store_true",
                    help="tune nothing: time the runs already in --work-dir again (same "
                         "models, budgets, tuners and seed as the run that made them)")
    ap.add_argument("--out", default=None, help="append rows (JSON lines) here as they finish")
    ap.add_argument("--summarize", nargs="+", default=None, metavar="ROWS",
                    help="only print the summary of these row files")
    a = ap.parse_args(argv)
    if a.summarize:
        print(summarize(read_rows(a.summarize)))
        return 0
    minutes = a.budget_minutes or (QUICK_MINUTES if a.quick else FULL_MINUTES)
    if any(m <= 0 for m in minutes):
        print("bench_cpu: --budget-minutes must be > 0", file=sys.stderr)
        return 2
    if a.threads is not None:
        if a.threads < 1:
            print("bench_cpu: --threads must be >= 1", file=sys.stderr)
            return 2
        os.environ["TVM_NUM_THREADS"] = str(a.threads)  # read by use_runtime_threads
    if a.retime and not a.work_dir:
        print("bench_cpu: --retime needs the --work-dir of the runs to time again", file=sys.stderr)
        return 2
    from dcoc.errors import DcocError

    try:
        rows = run(a.models, minutes, a.tuners, a.seed, a.work_dir, a.population, out=a.out,
                   retime=a.retime)
    except DcocError as exc:
        print(f"bench_cpu: {exc}", file=sys.stderr)
        return 2
    print(summarize(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
