"""Tuned models next to ONNX Runtime on this CPU, at equal wall-clock tuning budgets.

    python -m scripts.bench_cpu --out rows.jsonl                  # the benchmark (see below)
    python -m scripts.bench_cpu --models small_cnn --budget-minutes 3 --out rows.jsonl
    python -m scripts.bench_cpu --summarize rows.jsonl            # read-out only

Models: the zoo (``TUNING_MODELS``: ``small_cnn``, ``transformer``, ``mobilenetv2`` and
``resnet18`` at 1x3x64x64, what every CPU setting of dcoc was chosen on) and the
evaluation models (``EVALUATION_MODELS``: the onnx wheel's ``light_squeezenet`` and
``light_shufflenet`` at 1x3x224x224), which chose nothing -- not a setting, not the
pre-trained start's data (:mod:`scripts.train_cpu_prior` learns from the zoo only).

Runs (``--runs``; ``NAME@M,M`` limits a run to those budgets): ``surrogate`` (dcoc's
default tuner as a MetaSchedule strategy, with the pre-trained start it ships),
``surrogate/no-prior`` (the same, random warm-up) and ``evolutionary`` (MetaSchedule's
EvolutionarySearch at its authors' population 512 with its XGBoost cost model).  Each run
tunes one model in a fresh work dir until its wall-clock budget is spent
(``tune_model(..., trials=None, time_budget=SECONDS)``: no trial limit, the clock ends it)
with the same builder, runner and compile pipeline (``compile_model``: weight
prepacking, the host's ``-mcpu``, the runtime on all physical cores).

Timing: every compiled model of a model (its untuned build and each run's, exported as a
library) and ONNX Runtime (CPU EP, the same threads) are timed in ``--rounds`` alternating
rounds, each runtime in a fresh process of its own per round (the order reversed every
other round); a round's figure is the median of 5 timings of >= 100 ms.  Reported: the
best round's ms, the ratio to ONNX Runtime's best round, and the spread of the per-round
ratios (each round's TVM figure over the same round's ONNX Runtime figure).

Resumable: with ``--out``, a row is appended as each run finishes tuning (its work dir is
kept under ``--work-dir``) and as each model is timed; a rerun with the same ``--out``
and ``--work-dir`` skips what its rows already hold, so a long benchmark can be split
across sittings.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

from scripts.bench_metaschedule import MODELS, TUNING_MODELS, load_model

#: evaluation models: named before any run, used for no choice
EVALUATION_MODELS = ("squeezenet", "shufflenet")
#: EvolutionarySearch's population at its authors' default (``tune_model``'s when None)
AUTHORS_POPULATION = 512
#: MetaSchedule's EvolutionarySearch as ``tune_model`` names it
EVOLUTIONARY = "evolutionary"
#: dcoc's default tuner with its pre-trained start turned off
NO_PRIOR = "/no-prior"
DEFAULT_MINUTES = (5.0, 15.0)
ROUNDS = 5


def default_runs() -> list[str]:
    from dcoc.tuners import DEFAULT

    return [DEFAULT, DEFAULT + NO_PRIOR, EVOLUTIONARY]


def _key(run: str, minutes: float) -> str:
    return f"{run}@{minutes:g}min"


def parse_run(spec: str) -> tuple[str, tuple | None]:
    """``NAME`` or ``NAME@M,M`` -> (name, budgets in minutes or None for all)."""
    name, at, mins = spec.partition("@")
    if not at:
        return name, None
    try:
        vals = tuple(float(m) for m in mins.split(",") if m)
    except ValueError:
        raise ValueError(f"run '{spec}': budgets after @ are minutes, e.g. {name}@5,15") from None
    if not vals or any(v <= 0 for v in vals):
        raise ValueError(f"run '{spec}': budgets after @ are minutes > 0")
    return name, vals


def plan(models, minutes, runs) -> list[tuple[str, float, str]]:
    """(model, minutes, run) of every tuning run, in order."""
    out = []
    for name in models:
        for m in minutes:
            for spec in runs:
                run, only = parse_run(spec)
                if only is None or any(abs(m - o) < 1e-9 for o in only):
                    out.append((name, float(m), run))
    return out


def tune_within(model, run: str, minutes: float, seed: int, work_dir: str,
                population: int | None = None):
    """``tune_model`` stopped by the wall clock after ``minutes`` of tuning (no trial limit);
    returns the TuneResult."""
    from dcoc.api.cpu import tune_metaschedule  # saves result.json

    tuner, _, flag = run.partition("/")
    kw = {"prior": False} if flag == NO_PRIOR[1:] else {}
    return tune_metaschedule(model, "llvm", trials=None, tuner=tuner, seed=seed,
                             work_dir=work_dir, population=population,
                             time_budget=minutes * 60.0, measure=False, baseline=False,
                             progress=False, **kw)


def _run_dir(root: str, name: str, minutes: float, run: str, seed: int) -> str:
    return os.path.join(root, f"{name}_{minutes:g}min_{run.replace(':', '_').replace('/', '_')}_{seed}")


def _tuning_row(name: str, minutes: float, run: str, extra: dict, wall_s, work_dir: str) -> dict:
    """What a row says about one tuning run (from its result's ``extra``)."""
    return {"kind": "tuning", "model": name, "strategy": _key(run, minutes), "minutes": minutes,
            "tuner": run, "trials": extra.get("new_trials"), "tuning_s": extra.get("tuning_seconds"),
            "wall_s": wall_s, "stopped_by": "clock" if extra.get("stopped_on_time") else "trials",
            "untuned_functions": len(extra.get("untuned_functions", [])),
            "tuned_functions": len(extra.get("tuned_functions", [])),
            "time_profile": extra.get("time_profile"), "work_dir": work_dir}


# ============================================================================ timing
def _time_one(kind: str, path: str, inputs: str, threads: int) -> float:
    """One round of one runtime (run in a fresh process): median ms of 5 timings."""
    import numpy as np

    data = dict(np.load(inputs))
    if kind == "onnxruntime":
        from dcoc.reference import onnxruntime_latency_ms

        return float(onnxruntime_latency_ms(path, threads=threads, repeat=5, inputs=data))
    import tvm

    from tvm_plugin.metaschedule.build import measure_latency, resolve_tvm_target

    with open(path + ".inputs.json") as f:
        names = json.load(f)
    ex = tvm.runtime.load_module(path)
    return float(measure_latency(ex, resolve_tvm_target("llvm"), [data[n] for n in names],
                                 repeat=5)["median_ms"])


def time_rounds(libs: dict, onnx_path: str, inputs_path: str, threads: int, rounds: int,
                say=None) -> dict:
    """``{runtime: [ms per round]}`` for the libraries ``{key: .so path}`` and ONNX Runtime,
    each round running every runtime once, each in a new process, in alternating order."""
    keys = list(libs) + ["onnxruntime"]
    out: dict = {k: [] for k in keys}
    env = {**os.environ, "TVM_NUM_THREADS": str(threads)}
    for r in range(rounds):
        for k in (keys if r % 2 == 0 else keys[::-1]):
            kind, path = ("onnxruntime", onnx_path) if k == "onnxruntime" else ("tvm", libs[k])
            cmd = [sys.executable, "-m", "scripts.bench_cpu", "--time-one", kind, path, inputs_path,
                   str(threads)]
            p = subprocess.run(cmd, capture_output=True, text=True, env=env,
                               cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
            try:
                out[k].append(float(p.stdout.strip().splitlines()[-1]))
            except (ValueError, IndexError):
                raise RuntimeError(f"timing {k} failed: {p.stderr.strip()[-300:]}") from None
        if say:
            say(f"bench_cpu: round {r + 1}/{rounds}: " +
                ", ".join(f"{k} {out[k][-1]:.3f}" for k in keys))
    return out


def timing_rows(name: str, per_round: dict, threads: int, meta: dict) -> list[dict]:
    """One row per runtime: best round, ratio to ONNX Runtime's best, per-round ratio spread."""
    ort = per_round["onnxruntime"]
    rows = [{"kind": "timing", "model": name, "strategy": "onnxruntime", "ms": min(ort),
             "rounds_ms": ort, "threads": threads}]
    for k, ms in per_round.items():
        if k == "onnxruntime":
            continue
        ratios = [a / b for a, b in zip(ms, ort)]
        rows.append({"kind": "timing", "model": name, "strategy": k, "ms": min(ms),
                     "ort_ms": min(ort), "ratio": min(ms) / min(ort), "rounds_ms": ms,
                     "ratio_lo": min(ratios), "ratio_hi": max(ratios), "threads": threads,
                     **meta.get(k, {})})
    return rows


# ============================================================================ run
def run(models=TUNING_MODELS + EVALUATION_MODELS, minutes=DEFAULT_MINUTES, runs=None, seed: int = 0,
        work_dir: str | None = None, population: int | None = None, rounds: int = ROUNDS,
        out: str | None = None, log=None) -> list[dict]:
    """Tune (what ``out`` does not hold yet), then time each model whose runs are all
    tuned and not yet timed; returns every row (``out``'s earlier ones included)."""
    from tvm_plugin.export import compile_from_work_dir
    from tvm_plugin.metaschedule.build import (
        compile_model,
        random_inputs,
        resolve_tvm_target,
        use_runtime_threads,
    )

    say = log or (lambda line: print(line, file=sys.stderr, flush=True))
    runs = list(runs or default_runs())
    root = os.path.abspath(work_dir or tempfile.mkdtemp(prefix="dcoc-bench-cpu-"))
    os.makedirs(root, exist_ok=True)
    say(f"bench_cpu: work dirs under {root}")
    rows = read_rows([out]) if out and os.path.exists(out) else []
    done = {(r["model"], r["strategy"]) for r in rows if r.get("kind") == "tuning"}
    timed = {(r["model"], r["strategy"]) for r in rows if r.get("kind") == "timing"}
    tgt = resolve_tvm_target("llvm")
    threads = use_runtime_threads(tgt)

    def emit(row):
        rows.append(row)
        if out:
            with open(out, "a") as f:
                f.write(json.dumps(row) + "\n")
                f.flush()
                os.fsync(f.fileno())

    todo = plan(models, minutes, runs)
    for name in models:
        mine = [(m, r) for n, m, r in todo if n == name]
        if mine and all((name, _key(r, m)) in timed for m, r in mine):
            continue  # tuned and timed by an earlier sitting
        model, src = load_model(name)
        for m, r in mine:
            k = _key(r, m)
            if (name, k) in done:
                continue
            wd = _run_dir(root, name, m, r, seed)
            if os.path.exists(wd):  # an interrupted run: start it again from nothing
                import shutil

                shutil.rmtree(wd)
            t0 = time.perf_counter()
            res = tune_within(model, r, m, seed, wd, population)
            row = _tuning_row(name, m, r, res.extra, round(time.perf_counter() - t0, 1), wd)
            emit(row)
            say(f"bench_cpu: {name} {k}: {row['trials']} trials in {row['tuning_s']} s")
        # time the model: its untuned build, each run (compiled from its work dir), ORT
        mdir = os.path.join(root, f"{name}_timing")
        os.makedirs(mdir, exist_ok=True)
        libs, meta = {}, {}
        ex0, _ = compile_model(None, model.mod, tgt)
        libs["untuned"] = _export(ex0, os.path.join(mdir, "untuned.so"), model)
        meta["untuned"] = {"minutes": 0.0}
        tuning = {r["strategy"]: r for r in rows if r.get("kind") == "tuning" and r["model"] == name}
        for m, r in mine:
            k = _key(r, m)
            trow = tuning.get(k)
            if trow is None:
                continue
            with open(os.path.join(trow["work_dir"], "result.json")) as f:
                data = json.load(f)
            ex = compile_from_work_dir(data, trow["work_dir"], model=model)[0]
            libs[k] = _export(ex, os.path.join(mdir, k.replace("/", "_") + ".so"), model)
            meta[k] = {x: trow.get(x) for x in ("minutes", "tuner", "trials", "tuning_s",
                                                "stopped_by", "tuned_functions",
                                                "untuned_functions")}
        import numpy as np

        inputs = random_inputs(model.input_shapes, model.input_dtypes, seed=seed)
        inputs_path = os.path.join(mdir, "inputs.npz")
        np.savez(inputs_path, **inputs)
        onnx_path = os.path.join(mdir, "model.onnx")
        if isinstance(src, str):
            with open(src, "rb") as f:
                src = f.read()
        with open(onnx_path, "wb") as f:
            f.write(src if isinstance(src, bytes) else src.SerializeToString())
        per_round = time_rounds(libs, onnx_path, inputs_path, threads, rounds, say)
        for row in timing_rows(name, per_round, threads, meta):
            emit(row)
        o = min(per_round["onnxruntime"])
        say(f"bench_cpu: {name}: ONNX Runtime {o:.3f} ms; " +
            ", ".join(f"{k} {min(v) / o:.2f}x" for k, v in per_round.items() if k != "onnxruntime"))
    return rows


def _export(ex, path: str, model) -> str:
    ex.export_library(path)
    with open(path + ".inputs.json", "w") as f:
        json.dump(list(model.input_shapes), f)
    return path


# ============================================================================ read-out
def _gmean(xs) -> float:
    xs = [x for x in xs if x and math.isfinite(x) and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan


def _fmt_ratio(r: dict) -> str:
    if r.get("ratio_lo") is None:
        return f"{r['ratio']:.2f}"
    return f"{r['ratio']:.2f} ({r['ratio_lo']:.2f}-{r['ratio_hi']:.2f})"


def summarize(rows: list[dict]) -> str:
    """Markdown: latency / ONNX Runtime per model and run (spread over rounds), geomeans
    (zoo and evaluation models apart), the time profiles, and the targets."""
    timing = [r for r in rows if r.get("kind", "timing") == "timing"]
    tuning = {(r["model"], r["strategy"]): r for r in rows if r.get("kind") == "tuning"}
    models = list(dict.fromkeys(r["model"] for r in timing))
    strategies = list(dict.fromkeys(r["strategy"] for r in timing if r["strategy"] != "onnxruntime"))
    ort = {r["model"]: r for r in timing if r["strategy"] == "onnxruntime"}
    by = {(r["model"], r["strategy"]): r for r in timing if r["strategy"] != "onnxruntime"}
    head = ["model", "ONNX Runtime ms"] + strategies
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for m in models:
        tag = f"{m} (evaluation)" if m in EVALUATION_MODELS else m
        cells = [tag, f"{ort[m]['ms']:.3f}" if m in ort else "-"]
        for s in strategies:
            r = by.get((m, s))
            cells.append(_fmt_ratio(r) if r else "-")
        lines.append("| " + " | ".join(cells) + " |")
    groups = (("zoo", [m for m in models if m not in EVALUATION_MODELS]),
              ("evaluation", [m for m in models if m in EVALUATION_MODELS]))
    gm = {}
    for label, ms in groups:
        if not ms:
            continue
        for s in strategies:
            gm[(label, s)] = _gmean(by[(m, s)]["ratio"] for m in ms if (m, s) in by)
        lines.append(f"| **geomean, {label}** | | " + " | ".join(
            f"**{gm[(label, s)]:.2f}**" if math.isfinite(gm[(label, s)]) else "-"
            for s in strategies) + " |")
    lines += ["", "Latency / ONNX Runtime latency, best round of each (< 1: faster than ONNX "
                  "Runtime); in brackets the spread of the per-round ratios."]
    if tuning:
        lines += ["", "| model | run | trials | tuning s | build | run | record | spaces | "
                      "search + fit + features | rest |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for (m, s), r in tuning.items():
            tp = (r.get("time_profile") or {}).get("share") or {}

            def pct(*parts):
                v = sum(tp.get(p) or 0 for p in parts)
                return f"{100 * v:.0f}%" if tp else "-"

            lines.append(f"| {m} | {s} | {r.get('trials')} | {r.get('tuning_s')} | {pct('build')} | "
                         f"{pct('run')} | {pct('record')} | {pct('spaces')} | "
                         f"{pct('search', 'fit', 'features')} | {pct('rest')} |")
        lines += ["", "Where each run's tuning wall time went (tvm_plugin/metaschedule/timeline.py; "
                      "EvolutionarySearch's own search is in `rest`)."]
    lines += [""] + [f"- {n}" for n in target_notes(by, models, strategies)]
    return "\n".join(lines) + "\n"


def target_notes(by: dict, models: list, strategies: list) -> list[str]:
    """The issue's targets, met or not, from what the rows hold."""
    from dcoc.tuners import DEFAULT

    notes = []
    zoo = [m for m in models if m not in EVALUATION_MODELS]
    ev = [m for m in models if m in EVALUATION_MODELS]
    mins = sorted({float(s.rpartition("@")[2][:-3]) for s in strategies if "@" in s})
    for mi in mins:
        ours = _key(DEFAULT, mi)
        if ours not in strategies:
            continue
        zr = [by[(m, ours)]["ratio"] for m in zoo if (m, ours) in by]
        er = [by[(m, ours)]["ratio"] for m in ev if (m, ours) in by]
        if zr:
            worst = max(zr)
            notes.append(f"`{ours}`, zoo: geomean {_gmean(zr):.2f}, worst {worst:.2f}, "
                         f"<= 1.0 on {sum(x <= 1.0 for x in zr)} of {len(zr)} models")
        if er:
            notes.append(f"`{ours}`, evaluation models: geomean {_gmean(er):.2f} over {len(er)}")
        nop = _key(DEFAULT + NO_PRIOR, mi)
        pairs = [by[(m, ours)]["ms"] / by[(m, nop)]["ms"] for m in ev if (m, ours) in by and (m, nop) in by]
        if pairs:
            notes.append(f"pre-trained start at {mi:g} min, evaluation models: latency with / "
                         f"without geomean {_gmean(pairs):.2f} over {len(pairs)} "
                         f"({', '.join(f'{p:.2f}' for p in pairs)}; < 1: the prior helps)")
        evo = _key(EVOLUTIONARY, mi)
        pairs = [by[(m, ours)]["ms"] / by[(m, evo)]["ms"] for m in models
                 if (m, ours) in by and (m, evo) in by]
        if pairs:
            notes.append(f"`{ours}` / `{evo}` latency: geomean {_gmean(pairs):.2f} over "
                         f"{len(pairs)} models (equal wall-clock time)")
    return notes


def read_rows(paths) -> list[dict]:
    rows = []
    for p in paths:
        with open(p) as f:
            for line in f:
                if not line.strip():
                    continue
                try:
                    rows.append(json.loads(line))
                except ValueError:  # a row torn by an interrupted write
                    continue
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.bench_cpu",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=list(TUNING_MODELS + EVALUATION_MODELS),
                    choices=list(MODELS))
    ap.add_argument("--budget-minutes", nargs="+", type=float, default=None,
                    help=f"wall-clock tuning budgets (default {' '.join(f'{m:g}' for m in DEFAULT_MINUTES)})")
    ap.add_argument("--runs", nargs="+", default=None, metavar="RUN",
                    help="surrogate, surrogate/no-prior, evolutionary or any dcoc tuner spec; "
                         "NAME@M,M: only at those budgets (default: surrogate "
                         "surrogate/no-prior evolutionary)")
    ap.add_argument("--population", type=int, default=None,
                    help="EvolutionarySearch population (default: its authors' 512)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=ROUNDS, help="alternating timing rounds")
    ap.add_argument("--threads", type=int, default=None,
                    help="TVM runtime and ONNX Runtime threads (default: physical cores)")
    ap.add_argument("--work-dir", default=None,
                    help="keep every run's work dir under this (default: a new temporary dir)")
    ap.add_argument("--out", default=None,
                    help="append rows (JSON lines) here as they finish; rerun to resume")
    ap.add_argument("--summarize", nargs="+", default=None, metavar="ROWS",
                    help="only print the summary of these row files")
    ap.add_argument("--time-one", nargs=4, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.time_one:
        kind, path, inputs, threads = a.time_one
        print(f"{_time_one(kind, path, inputs, int(threads)):.6f}")
        return 0
    if a.summarize:
        print(summarize(read_rows(a.summarize)))
        return 0
    minutes = a.budget_minutes or DEFAULT_MINUTES
    if any(m <= 0 for m in minutes):
        print("bench_cpu: --budget-minutes must be > 0", file=sys.stderr)
        return 2
    if a.rounds < 1:
        print("bench_cpu: --rounds must be >= 1", file=sys.stderr)
        return 2
    try:
        for spec in a.runs or []:
            parse_run(spec)
    except ValueError as exc:
        print(f"bench_cpu: {exc}", file=sys.stderr)
        return 2
    if a.out and a.work_dir is None:
        a.work_dir = os.path.splitext(a.out)[0] + "_runs"
    if a.threads is not None:
        if a.threads < 1:
            print("bench_cpu: --threads must be >= 1", file=sys.stderr)
            return 2
        os.environ["TVM_NUM_THREADS"] = str(a.threads)  # read by use_runtime_threads
    from dcoc.errors import DcocError

    try:
        rows = run(a.models, minutes, a.runs, a.seed, a.work_dir, a.population, a.rounds, a.out)
    except DcocError as exc:
        print(f"bench_cpu: {exc}", file=sys.stderr)
        return 2
    print(summarize(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
