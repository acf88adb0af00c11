"""Re-time tuned whole models from kept work dirs: how reproducible is the benchmark's
compiled-model latency, and so how small a difference can a handful of groups resolve?

Each work directory that ``python -m scripts.bench_metaschedule ... --work-dir D`` keeps
(MetaSchedule's JSON database, ``ms_tasks.json``, ``result.json``) is compiled again as
``tune_model`` compiled it -- the best record of every task, the tasks its ``result.json``
lists as kept untuned left untuned -- and all executables are then timed by the
benchmark's own interleaved timing (``time_models``: alternating rounds, each a median of
3 timings of >= 100 ms, the fastest round kept), ``--passes`` times over.  Printed: each
dir's latency per pass and the latency the benchmark recorded for it (``best_ms`` in
``--rows``, matched by work-dir name), the spread across passes, and for ``--pairs A B``
(dir names; ``A/B`` ratio per pass) how stable a group's ratio is::

    python -m scripts.ms_retime --workload mobilenetv2 D/mobilenetv2_256_64_dcoc \
        D/mobilenetv2_256_64_dcoc_program_pool_only=true --passes 3 \
        --rows docs/data/ms_poolonly_s26.jsonl

``--pair-by SUFFIX`` pairs every dir ending in ``SUFFIX`` with the dir of the same group
(model, budget, seed) ending in the reference strategy (``--ref``, default ``dcoc``).
Over two or more pairs a line gives the paired read-out: per pair the ratio of the
medians of the passes, their geomean, A faster / slower, and the exact two-sided paired
Wilcoxon test on the logs.  When every pair is two runs of one group, a table by workload
follows -- each workload's geomean over its groups (and, with ``--rows``, of the tuning-time
ratios) and the geomean over the workloads, each model weighed once: the figure the
issue's whole-model target is stated in.

``--times F.json [F.json ...]`` re-reads the raw times an earlier ``--out`` wrote instead of
timing again (no TVM, seconds): several workloads' files are merged, and dirs in
``--pairs`` may be given by name (e.g. the read-out of docs/RESULTS.md's session-29
paragraph)::

    python -m scripts.ms_retime --times docs/data/ms_retime_s29_mobilenetv2.json \
        docs/data/ms_retime_s29_resnet18.json --pair-by dcoc --ref evolutionary

``--combine`` reads each ``--times`` file as one interleaved re-timing of its own: a dir
may then be timed in several files (matched by dir name), a pair's ratio is taken within
each file that times both its dirs (never across two timings) and the pair's figure is the
geomean of those ratios -- several re-timings averaged, e.g. sessions 29 and 30::

    python -m scripts.ms_retime --combine --times docs/data/ms_retime_s29_resnet18.json \
        docs/data/ms_retime_s30_resnet18.json --pair-by dcoc --ref evolutionary
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import sys

from dcoc.errors import DcocError
from dcoc.progress import Progress
from scripts.bench_metaschedule import dir_name, read_rows, run_dir_name


def _best_records(work_dir: str):
    """A MemoryDatabase holding what tune_model compiled from ``work_dir``: each task's best
    record, except the tasks its result.json lists as kept untuned."""
    from tvm.s_tir import meta_schedule as ms

    from dcoc.search.msdb import task_names
    from tvm_plugin.tune import copy_record

    kept = set()
    res = os.path.join(work_dir, "result.json")
    if os.path.exists(res):
        with open(res, encoding="utf-8") as f:
            kept = set((json.load(f).get("extra") or {}).get("kept_untuned") or [])
    names = task_names(work_dir)
    db = ms.database.JSONDatabase(work_dir=work_dir)
    out = ms.database.MemoryDatabase()
    seen = set()
    for rec in db.get_all_tuning_records():
        key = str(rec.workload.as_json()[0])
        if key in seen or names.get(key) in kept:
            continue
        seen.add(key)
        top = db.get_top_k(rec.workload, 1)
        if not len(top):
            continue
        copy_record(out, top[0])
    return out, kept


def _recorded(rows_files, dirs, key: str = "best_ms", log=None) -> dict:
    """{dir: the row's ``key`` (best_ms: the latency the benchmark recorded; tune_s: its
    tuning time)} for dirs named like the bench names them.  A dir name that two rows with
    different values carry (e.g. two sessions' runs of one group, rows files passed together)
    is left out -- which run was re-timed is unknowable from the name -- and named via
    ``log``."""
    want = {dir_name(d): d for d in dirs}
    seen: dict = {}
    for r in read_rows(rows_files or []):
        if "budget" not in r or "seed" not in r or key not in r:
            continue
        name = run_dir_name(r["workload"], r["budget"], r["seed"], r["strategy"])
        if name in want:
            seen.setdefault(want[name], set()).add(r[key])
    clash = sorted(dir_name(d) for d, v in seen.items() if len(v) > 1)
    if clash and log:
        log(f"rows: {', '.join(clash)} each match several runs' rows ({key} differs); "
            "left out")
    return {d: next(iter(v)) for d, v in seen.items() if len(v) == 1}


_RUN = re.compile(r"^(?P<workload>.+?)_(?P<budget>\d+)_(?P<seed>\d+)_(?P<strategy>.+)$")


def _run_of(d: str):
    """((workload, budget, seed), strategy) of a run dir named by ``run_dir_name``, else
    (None, None)."""
    m = _RUN.match(dir_name(d))
    return ((m["workload"], int(m["budget"]), int(m["seed"])), m["strategy"]) if m else (None, None)


def _group_of(d: str):
    """(workload, budget, seed) of a run dir named by ``run_dir_name``, else None."""
    return _run_of(d)[0]


def by_model(pairs, ratios, tune: dict | None = None) -> str:
    """The whole-model read-out the issue's target is stated in: per workload the geomean of
    its groups' A / B ratios (and of their tuning-time ratios, where ``tune`` -- {dir:
    tune_s} -- has both runs of every pair), then the geomean over the workloads, each model
    weighed once however many groups it has.  Empty unless every pair is two runs of one
    group (model, budget, seed)."""
    groups = [(_group_of(a), _group_of(b)) for a, b in pairs]
    if not pairs or any(x is None or x != y for x, y in groups):
        return ""
    gm = lambda v: math.exp(statistics.fmean(math.log(x) for x in v))  # noqa: E731
    per: dict = {}
    for (g, _), (a, b), r in zip(groups, pairs, ratios):
        t = tune[a] / tune[b] if tune and a in tune and b in tune else None
        per.setdefault(g[0], []).append((r, t))
    has_t = all(t is not None for v in per.values() for _, t in v)
    lines = ["| workload | groups | A / B (geomean over its groups) |" +
             (" tuning time A / B |" if has_t else ""),
             "|---|---|---|" + ("---|" if has_t else "")]
    models, times = [], []
    for w, v in per.items():
        models.append(gm([r for r, _ in v]))
        if has_t:
            times.append(gm([t for _, t in v]))
        lines.append(f"| {w} | {len(v)} | {models[-1]:.3f} |" +
                     (f" {times[-1]:.3f} |" if has_t else ""))
    return "\n".join(lines + ["", f"by workload: geomean over the {len(models)} workloads "
                               f"{gm(models):.3f}" + (f", tuning time A / B {gm(times):.3f}"
                                                     if has_t else "")])


def load_workload(workload: str):
    """(llvm target, Model, ONNX source, inputs) of a benchmark whole-model workload, as the
    benchmark builds and feeds it."""
    from scripts.bench_metaschedule import load_model
    from tvm_plugin.build import preload_tensor_intrin, random_inputs
    from tvm_plugin.frontend import resolve_target

    preload_tensor_intrin()
    target = resolve_target("llvm")
    model, src = load_model(workload)
    return target, model, src, random_inputs(model.input_shapes, model.input_dtypes, seed=0)


def check_work_dirs(dirs) -> None:
    """One-line DcocError unless every dir is a work dir ``bench_metaschedule --work-dir``
    kept (it holds result.json)."""
    for d in dirs:
        if not os.path.isfile(os.path.join(d, "result.json")):
            raise DcocError(f"not a kept work directory (no result.json): {d}")


def check_kept_dirs(workload: str, dirs) -> None:
    """One-line DcocError unless ``workload`` is a benchmark whole model and every dir is a
    kept work dir (``check_work_dirs``)."""
    from scripts.bench_metaschedule import MODELS

    if workload not in MODELS:
        raise DcocError(f"unknown --workload {workload}; one of {', '.join(MODELS)}")
    check_work_dirs(dirs)


def compile_dir(work_dir: str, model, target):
    """(executable, compile report, tasks kept untuned) of a kept work dir, compiled as
    tune_model compiled it."""
    from tvm_plugin.build import compile_model

    db, kept = _best_records(work_dir)
    exe, report = compile_model(db, model.mod, target.tvm)
    return exe, report, kept


def retime(workload: str, dirs, passes: int = 3, rounds: int = 3, log=print) -> dict:
    """{dir: [ms per pass]} plus ``"onnxruntime"``: every dir compiled once, then timed
    interleaved ``passes`` times over by the benchmark's time_models."""
    from scripts.bench_metaschedule import time_models

    target, model, src, inputs = load_workload(workload)
    threads = int(target.tvm.attrs.get("num-cores", 1))
    exes = {}
    prog = Progress(len(dirs) + passes, desc="retime", unit="step")
    for d in dirs:
        exes[d], report, kept = compile_dir(d, model, target)
        log(f"{dir_name(d)}: {len(report['tuned'])} tuned functions, "
            f"{len(report['untuned'])} untuned (kept untuned: {', '.join(sorted(kept)) or '-'})")
        prog.update(1)
    out = {d: [] for d in dirs}
    out["onnxruntime"] = []
    for _ in range(passes):
        t = time_models(exes, target.tvm, model, src, inputs, threads, rounds=rounds)
        for k, v in t.items():
            out[k].append(v)
        prog.update(1)
    prog.close()
    return out


def _spread(v) -> float:
    return max(v) / min(v) if v and min(v) > 0 else math.nan


def load_times(files) -> dict:
    """{dir: [ms per pass]} merged from the ``.json`` files of earlier ``--out`` runs; each
    file's ``onnxruntime`` entry is kept as ``onnxruntime (<file name>)`` when several are
    merged; a dir timed in two of the files is an error (which timing would count?)."""
    out: dict = {}
    src: dict = {}
    for f in files:
        if not os.path.isfile(f):
            raise DcocError(f"no such times file: {f}")
        try:
            with open(f, encoding="utf-8") as fh:
                t = json.load(fh)
        except ValueError as e:
            raise DcocError(f"{f} is not a times file of ms_retime --out ({e})") from None
        for k, v in t.items():
            if k == "onnxruntime" and len(files) > 1:
                k = f"onnxruntime ({dir_name(f)})"
            if k in out:
                raise DcocError(f"{dir_name(k)} is timed in both {src[k]} and {f}: read one "
                                "of them")
            out[k], src[k] = v, f
    return out


def _resolve(times: dict, d: str, what: str = "--pairs") -> str:
    """The key of ``times`` that is ``d`` or, failing that, the one dir named ``d``
    (``what``: the option the error names)."""
    if d in times:
        return d
    hits = [k for k in times if dir_name(k) == dir_name(d)]
    if len(hits) != 1:
        raise DcocError(f"{what}: {d} is {'not' if not hits else 'ambiguously'} among the "
                        "timed dirs")
    return hits[0]


def pair_summary(times: dict, pairs, tune: dict | None = None) -> str:
    """Paired read-out over ``pairs``: per pair the ratio of the medians of the passes (A/B),
    their geomean, A faster / slower, exact two-sided paired Wilcoxon on the logs; then the
    read-out by workload (``by_model``)."""
    ratios = [statistics.median(times[a]) / statistics.median(times[b]) for a, b in pairs]
    return _with_models(_summary(ratios, "on the medians of the passes"), pairs, ratios, tune)


def _with_models(text: str, pairs, ratios, tune) -> str:
    models = by_model(pairs, ratios, tune)
    return text + ("\n\n" + models if models else "")


def _summary(ratios, how: str) -> str:
    from dcoc.stats import fmt_p, ratio_test

    gm, pt = ratio_test([1.0] * len(ratios), ratios)
    return (f"{len(ratios)} pairs, A / B {how}: geomean {gm:.3f}, A faster {pt.better} / "
            f"slower {pt.worse}, exact two-sided paired Wilcoxon on the logs p = {fmt_p(pt.p)}")


def load_timings(files) -> list[tuple[str, dict]]:
    """[(file name, {dir name: [ms per pass]})]: each file one re-timing, kept apart."""
    out = []
    for f in files:
        t = load_times([f])
        out.append((dir_name(f), {k if k == "onnxruntime" else dir_name(k): v
                                  for k, v in t.items()}))
    return out


def combine_readout(files, pairs, pair_by: str | None, ref: str, rows=None) -> str:
    """--combine: per pair (dirs by name) its ratio of pass medians within each file that
    times both dirs, the pair's figure the geomean of those; table and paired read-out."""
    if not files:
        raise DcocError("--combine reads --times files")
    timings = load_timings(files)
    union = {k: v for _, t in timings for k, v in t.items() if k != "onnxruntime"}
    pairs = [(_resolve(union, x), _resolve(union, y)) for x, y in pairs]
    if pair_by:
        pairs += _pairs_by(list(union), pair_by.replace(":", "_"), ref.replace(":", "_"))
    if not pairs:
        raise DcocError("--combine needs --pairs or --pair-by")
    lines = ["| A / B | ratio in each re-timing (file order) | combined |", "|---|---|---|"]
    ratios = []
    for a, b in pairs:
        got = [statistics.median(t[a]) / statistics.median(t[b])
               for _, t in timings if a in t and b in t]
        if not got:
            raise DcocError(f"no times file times both {a} and {b}")
        ratios.append(math.exp(statistics.fmean(math.log(x) for x in got)))
        lines.append(f"| {a} / {b} | " + ", ".join(f"{x:.3f}" for x in got) +
                     f" | {ratios[-1]:.3f} |")
    tune = _recorded(rows, [d for p in pairs for d in p], "tune_s",
                     log=lambda s: print(s, file=sys.stderr))
    return _with_models("\n".join(lines + ["", _summary(ratios, "combined over the "
                                                         "re-timings")]), pairs, ratios, tune)


def report(times: dict, recorded: dict, pairs, tune: dict | None = None) -> str:
    n = max(len(v) for v in times.values())
    lines = ["| run | " + " | ".join(f"pass {i + 1} ms" for i in range(n)) +
             " | max/min | recorded ms | recorded / median |",
             "|---|" + "---|" * (n + 3)]
    for d, v in times.items():
        rec = recorded.get(d)
        med = statistics.median(v)
        lines.append(f"| {dir_name(d)} | " + " | ".join(f"{x:.4f}" for x in v) +
                     f" | {_spread(v):.3f} | " +
                     (f"{rec:.4f} | {rec / med:.3f} |" if rec else "- | - |"))
    if pairs:
        lines += ["", "| A / B | " + " | ".join(f"pass {i + 1}" for i in range(n)) +
                  " | recorded | max/min of passes |", "|---|" + "---|" * (n + 2)]
        for a, b in pairs:
            r = [x / y for x, y in zip(times[a], times[b])]
            rec = (recorded[a] / recorded[b]) if a in recorded and b in recorded else None
            rec_s = f"{rec:.3f}" if rec else "-"
            lines.append(f"| {dir_name(a)} / {dir_name(b)} | " + " | ".join(f"{x:.3f}" for x in r) +
                         f" | {rec_s} | {_spread(r):.3f} |")
        if len(pairs) > 1:
            lines += ["", pair_summary(times, pairs, tune)]
    return "\n".join(lines)


def _pairs_by(dirs, suffix: str, ref: str):
    """(dir of strategy ``suffix``, dir of the same (workload, budget, seed) group of
    strategy ``ref``) for every ``suffix`` dir, dirs named by ``run_dir_name``."""
    refs = {g: d for d in dirs for g, s in [_run_of(d)] if g and s == ref}
    return [(d, refs[g]) for d in dirs for g, s in [_run_of(d)] if g and s == suffix and g in refs]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m scripts.ms_retime", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dirs", nargs="*", help="work dirs kept by bench_metaschedule --work-dir "
                   "(with --times: which of the read dirs to show; default all)")
    p.add_argument("--workload", help="the benchmark's whole-model workload the dirs tuned "
                   "(small_cnn, transformer, mobilenetv2, resnet18); needed unless --times")
    p.add_argument("--times", nargs="+", help="read the raw times (.json) of earlier --out "
                   "runs instead of timing again (no TVM); several files are merged")
    p.add_argument("--combine", action="store_true", help="with --times: each file is one "
                   "re-timing; a pair's figure is the geomean of its ratios in the files "
                   "that time both its dirs")
    p.add_argument("--passes", type=int, default=3, help="interleaved timings of all models")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds per timing "
                   "(the benchmark's 3)")
    p.add_argument("--rows", nargs="*", help="the benchmark's rows (.jsonl): recorded latency "
                   "per dir and, in the read-out by workload, the tuning-time ratio")
    p.add_argument("--pairs", nargs="*", default=[], help="A B [A B ...]: dirs to compare")
    p.add_argument("--pair-by", help="pair each dir ending in _SUFFIX with its group's --ref dir")
    p.add_argument("--ref", default="dcoc", help="reference strategy of --pair-by (dir suffix)")
    p.add_argument("--out", help="also write the table (markdown) here and, when timing, the "
                   "raw times next to it (same name, .json; so not a .json name itself)")
    a = p.parse_args(argv)
    try:
        if len(a.pairs) % 2:
            raise DcocError("--pairs takes dirs two by two (A B)")
        if a.out and os.path.splitext(a.out)[1] == ".json":  # a raw times file's name
            raise DcocError(f"--out {a.out}: the table would overwrite the raw times, which "
                            "go next to it as .json; name the table e.g. .md")
        if a.combine:
            if a.dirs or a.workload:
                raise DcocError("--combine re-reads --times files only: no dirs or --workload")
            text = combine_readout(a.times, list(zip(a.pairs[::2], a.pairs[1::2])),
                                   a.pair_by, a.ref, a.rows)
        else:
            text = _readout(a)
    except DcocError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(text)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return 0


def _readout(a) -> str:
    """Time the dirs (or re-read --times) and report; writes the raw times next to --out."""
    if a.times:
        times = load_times(a.times)
        if a.dirs:
            keep = {_resolve(times, d) for d in a.dirs}
            times = {k: v for k, v in times.items() if k in keep or k.startswith("onnxruntime")}
        dirs = [k for k in times if not k.startswith("onnxruntime")]
    else:
        if not a.dirs or not a.workload:
            raise DcocError("give the work dirs and --workload (or --times to re-read "
                            "earlier timings)")
        check_kept_dirs(a.workload, a.dirs)  # before minutes of compiling and timing
        dirs = a.dirs
    pairs = list(zip(a.pairs[::2], a.pairs[1::2]))
    if a.pair_by:
        pairs += _pairs_by(dirs, a.pair_by.replace(":", "_"), a.ref.replace(":", "_"))
    known = times if a.times else dict.fromkeys(dirs)  # checked before minutes of timing
    pairs = [(_resolve(known, x), _resolve(known, y)) for x, y in pairs]
    if not a.times:
        times = retime(a.workload, dirs, a.passes, a.rounds,
                       log=lambda s: print(s, file=sys.stderr))
    if a.out and not a.times:  # a read-out never rewrites raw times (it may read them)
        with open(os.path.splitext(a.out)[0] + ".json", "w", encoding="utf-8") as f:
            json.dump(times, f, indent=1)
    log = lambda s: print(s, file=sys.stderr)  # noqa: E731
    return report(times, _recorded(a.rows, dirs, log=log), pairs,
                  _recorded(a.rows, dirs, "tune_s", log=log))


if __name__ == "__main__":
    sys.exit(main())
