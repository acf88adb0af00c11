"""Where a whole-model MetaSchedule gap between two strategies lies, task by task.

Reads the work directories that ``python -m scripts.bench_metaschedule ... --work-dir D``
keeps (one per strategy: MetaSchedule's JSON database, ``ms_tasks.json`` and
``result.json``) and prints, per task: its weight (how often the model calls it), the
trials each strategy spent on it, each strategy's best measured latency, the weighted
difference (weight x (best_B - best_A), ms of model time) and its cumulative share of the
total gap, plus two measures of how well a strategy chose what to measure:

* ``near``: the fraction of the task's measured candidates within 1.25x of the best
  latency any of the strategies found for it (a strategy whose model ranks well measures
  many near-best candidates);
* ``first``: the best latency of the task's first batch divided by the task's final
  best over all strategies (how good the cold start was).

and per run ``local``: the fraction of the trials after a task's first batch that are one
or two trace decisions away from the task's best-so-far (same design space) -- how much
of the search exploits the measured best (EvolutionarySearch seeds its population with it
and mutates).

    python -m scripts.ms_task_gap D/mobilenetv2_256_46_evolutionary D/mobilenetv2_256_46_dcoc

``--pooled`` reads several (reference, other) pairs -- e.g. one per seed -- and pools their
per-task ratios by operator class (the task name up to its shape: ``depthwise_conv2d``,
``conv2d``, ``dense``, ...): per class the geomean of best_other / best_ref, how many tasks
the other strategy won, and, for a chosen class (``--test-class``), a two-sided
Mann-Whitney test of its log ratios against every other task's and an exact binomial test
of its wins::

    python -m scripts.ms_task_gap --pooled D/mobilenetv2_256_47_evolutionary \
        D/mobilenetv2_256_47_dcoc D/mobilenetv2_256_48_evolutionary D/mobilenetv2_256_48_dcoc

``--sums`` reads (reference, other) pairs too -- one per (model, seed) group of an A/B --
and prints each pair's sum of weighted best kernels, their ratio, the geomean ratio and
the exact two-sided paired Wilcoxon test on the log sums (the primary measure of the
MetaSchedule A/Bs since session 27)::

    python -m scripts.ms_task_gap --sums D/small_cnn_256_71_dcoc \
        D/small_cnn_256_71_dcoc_proposer=surrogate D/transformer_256_71_dcoc ...

``--model-times F.json`` reads the raw times an ``ms_retime --out`` wrote and prints, per
work dir, the compiled model's latency (median of the re-timing passes) over its sum of
weighted best kernels: how far the tuning-time kernel timing predicts the model (1.0: the
model is the sum of its tuned kernels; above: time outside them, or kernels slower inside
the model than when timed alone -- on ResNet-18 1.14-1.59x when tuned warm, 0.94-1.02x
when tuned cold with ``--flush-cache``: inside the model its weights are not in cache,
session 34; ``scripts.ms_profile`` shows it kernel by kernel)::

    python -m scripts.ms_task_gap --model-times docs/data/ms_retime1000_s32_resnet1865.json \
        D/resnet18_1000_65_evolutionary D/resnet18_1000_65_dcoc D/resnet18_1000_65_replay-trace

Only measured data: nothing is re-timed, so per-task numbers carry tuning-time noise (the
benchmark's interleaved re-timing is for the compiled models, not per task).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys

from scripts.bench_metaschedule import dir_name


def load_run(work_dir: str) -> dict:
    """{task name: {"weight", "flop", "costs" (seconds, measurement order, None = failed)}}."""
    from dcoc.search.msdb import load_ms_rows

    with open(os.path.join(work_dir, "result.json"), encoding="utf-8") as f:
        res = json.load(f)
    tasks = {r["task"]: {"weight": float(r.get("weight", 1.0)), "flop": float(r.get("flop", 0.0)),
                         "costs": []} for r in res.get("layers", [])}
    for row in load_ms_rows(work_dir, with_trace=True):
        t = tasks.setdefault(row["task_name"], {"weight": 1.0, "flop": 0.0, "costs": []})
        t["costs"].append(row["cost"] if row["valid"] else None)
        t.setdefault("traces", []).append(_decisions(row["trace"]))
    return tasks


def _decisions(trace):
    """(design-space signature, {instruction index: decision}) of a trace's JSON, or None."""
    try:
        insts, decisions = trace
        sig = tuple(i[0] + (f":{i[1][1]}" if i[0] == "ReverseComputeAt" else "") for i in insts)
        return sig, {int(k): json.dumps(v) for k, v in decisions}
    except (ValueError, TypeError, IndexError, KeyError):
        return None


def local_share(tasks: dict, batch: int = 3, radius: int = 2) -> float:
    """Fraction of the trials after each task's first ``batch`` that are within ``radius``
    decisions of the task's best-so-far in the same design space."""
    near = total = 0
    for t in tasks.values():
        costs, traces = t["costs"], t.get("traces") or [None] * len(t["costs"])
        best = None  # index of the best valid trial so far (the first of equals)
        for k in range(len(costs)):
            if k >= batch and best is not None and traces[k] is not None:
                b = traces[best]
                total += 1
                if b is not None and b[0] == traces[k][0]:
                    d = sum(traces[k][1].get(i) != v for i, v in b[1].items())
                    near += 0 < d <= radius
            if costs[k] is not None and (best is None or costs[k] < costs[best]):
                best = k
    return near / total if total else math.nan


def _best(costs) -> float:
    ok = [c for c in costs if c is not None]
    return min(ok) if ok else math.inf


def gap_table(runs: dict, batch: int = 3, near: float = 1.25) -> tuple[list[dict], dict]:
    """Per-task rows comparing the runs (the first is the reference) and per-run totals."""
    labels = list(runs)
    ref, other = labels[0], labels[-1]
    names = sorted(set().union(*[set(r) for r in runs.values()]))
    rows = []
    for n in names:
        per = {lab: runs[lab].get(n, {"weight": 1.0, "flop": 0.0, "costs": []}) for lab in labels}
        w = next(p["weight"] for p in per.values())
        best_all = min(_best(p["costs"]) for p in per.values())
        row = {"task": n, "weight": w, "flop": next(p["flop"] for p in per.values())}
        for lab, p in per.items():
            ok = [c for c in p["costs"] if c is not None]
            row[f"trials:{lab}"] = len(p["costs"])
            row[f"best_ms:{lab}"] = _best(p["costs"]) * 1e3
            row[f"near:{lab}"] = (sum(c <= near * best_all for c in ok) / len(ok)) if ok else 0.0
            first = [c for c in p["costs"][:batch] if c is not None]
            row[f"first:{lab}"] = (min(first) / best_all) if first and best_all > 0 else math.inf
        row["gap_ms"] = w * (row[f"best_ms:{other}"] - row[f"best_ms:{ref}"])
        rows.append(row)
    rows.sort(key=lambda r: -abs(r["gap_ms"]) if math.isfinite(r["gap_ms"]) else 0)
    totals = {}
    for lab in labels:
        finite = [r for r in rows if math.isfinite(r[f"best_ms:{lab}"])]
        totals[lab] = {
            "sum_ms": sum(r["weight"] * r[f"best_ms:{lab}"] for r in finite),
            "trials": sum(r[f"trials:{lab}"] for r in rows),
            "near": statistics.mean(r[f"near:{lab}"] for r in rows) if rows else math.nan,
            "first": statistics.median(r[f"first:{lab}"] for r in rows) if rows else math.nan,
            "local": local_share(runs[lab], batch),
        }
    return rows, totals


def op_class(task: str) -> str:
    """``depthwise_conv2d_16x16_144x144_k3s1`` -> ``depthwise_conv2d``; ``mean`` -> ``mean``."""
    parts = task.split("_")
    keep = [p for p in parts if not (p[:1].isdigit() or p[:1] in "mnk" and p[1:2].isdigit())]
    return "_".join(keep) or task


def pooled(pairs: list[tuple[dict, dict]], test_class: str = "depthwise_conv2d") -> str:
    """Per operator class over several (reference, other) runs: geomean ratio, wins, and
    the tests of ``test_class`` against the rest."""
    from scipy.stats import binomtest, mannwhitneyu

    by: dict = {}
    for ref, other in pairs:
        for name in set(ref) & set(other):
            a, b = _best(ref[name]["costs"]), _best(other[name]["costs"])
            if math.isfinite(a) and math.isfinite(b) and a > 0 and b > 0:
                by.setdefault(op_class(name), []).append(math.log(b / a))
    out = ["| class | tasks x runs | geomean other/ref | other faster | slower |",
           "|---|---|---|---|---|"]
    for c, xs in sorted(by.items(), key=lambda kv: -len(kv[1])):
        out.append(f"| {c} | {len(xs)} | {math.exp(statistics.mean(xs)):.3f} | "
                   f"{sum(x < 0 for x in xs)} | {sum(x > 0 for x in xs)} |")
    inside = by.get(test_class, [])
    rest = [x for c, xs in by.items() if c != test_class for x in xs]
    if inside and rest:
        mw = mannwhitneyu(inside, rest, alternative="two-sided")
        n = sum(x != 0 for x in inside)
        bt = binomtest(sum(x > 0 for x in inside), n, 0.5) if n else None
        out.append("")
        out.append(f"{test_class} vs the other tasks: geomean {math.exp(statistics.mean(inside)):.3f}"
                   f" vs {math.exp(statistics.mean(rest)):.3f}, Mann-Whitney p = {mw.pvalue:.3g}; "
                   f"other slower on {sum(x > 0 for x in inside)} of {n} {test_class} tasks"
                   + (f", exact binomial p = {bt.pvalue:.3g}" if bt else ""))
    return "\n".join(out)


def sums(pairs: list[tuple[str, str]]) -> str:
    """Per (reference, other) pair of work dirs: summed weighted best kernels and ratio;
    then the geomean ratio, other better / worse and the paired Wilcoxon test."""
    from dcoc.stats import fmt_p, ratio_test

    out = ["| reference | other | sum ms ref | sum ms other | other/ref |", "|---|---|---|---|---|"]
    sums_a, sums_b = [], []
    for da, db in pairs:
        _, t = gap_table({"a": load_run(da), "b": load_run(db)})
        a, b = t["a"]["sum_ms"], t["b"]["sum_ms"]
        sums_a.append(a)
        sums_b.append(b)
        out.append(f"| {dir_name(da)} | {dir_name(db)} | {a:.4f} | {b:.4f} | {b / a:.3f} |")
    gm, pt = ratio_test(sums_a, sums_b)
    out += ["", f"{len(pairs)} pairs: geomean other/ref {gm:.3f}, other better {pt.better} / "
                f"worse {pt.worse}, exact two-sided paired Wilcoxon on the logs p = {fmt_p(pt.p)}"]
    return "\n".join(out)


def model_over_kernels(times_files, work_dirs) -> str:
    """Per work dir: summed weighted best kernels, the compiled model's re-timed median
    (from ``ms_retime --out`` raw times, dir matched by path or name) and their ratio."""
    from scripts.ms_retime import _resolve, load_times

    times = load_times(times_files)
    out = ["| run | summed kernels ms | model ms (median) | model / kernels |", "|---|---|---|---|"]
    for d in work_dirs:
        key = _resolve(times, d, what=f"--model-times {' '.join(times_files)}")
        _, t = gap_table({"run": load_run(d)})
        k, m = t["run"]["sum_ms"], statistics.median(times[key])
        out.append(f"| {dir_name(d)} | {k:.4f} | {m:.4f} | {m / k:.3f} |")
    return "\n".join(out)


def render(rows: list[dict], totals: dict, labels: list[str]) -> str:
    ref, other = labels[0], labels[-1]
    total_gap = sum(r["gap_ms"] for r in rows if math.isfinite(r["gap_ms"]))
    head = ["task", "w"] + [f"trials {lab}" for lab in labels] + \
        [f"best ms {lab}" for lab in labels] + [f"{other}/{ref}", "w x diff ms", "cum share"] + \
        [f"near {lab}" for lab in labels] + [f"first {lab}" for lab in labels]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    cum = 0.0
    for r in rows:
        g = r["gap_ms"] if math.isfinite(r["gap_ms"]) else 0.0
        cum += g
        ratio = r[f"best_ms:{other}"] / r[f"best_ms:{ref}"] if r[f"best_ms:{ref}"] > 0 else math.nan
        cells = [r["task"], f"{r['weight']:g}"] + [str(r[f"trials:{lab}"]) for lab in labels] + \
            [f"{r[f'best_ms:{lab}']:.4f}" for lab in labels] + \
            [f"{ratio:.3f}", f"{g:+.4f}",
             f"{cum / total_gap:.2f}" if total_gap else "-"] + \
            [f"{r[f'near:{lab}']:.2f}" for lab in labels] + \
            [f"{r[f'first:{lab}']:.2f}" for lab in labels]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    for lab in labels:
        t = totals[lab]
        out.append(f"{lab}: sum of weighted best kernels {t['sum_ms']:.4f} ms, {t['trials']} "
                   f"trials, mean near-best fraction {t['near']:.2f}, median first-batch "
                   f"best / best known {t['first']:.2f}, later trials 1-2 decisions from "
                   f"the best-so-far {t['local']:.2f}")
    out.append(f"total weighted gap ({other} - {ref}): {total_gap:+.4f} ms")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.ms_task_gap", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("work_dirs", nargs="+",
                    help="two or more kept work dirs; the first is the reference, the gap is "
                         "last minus first")
    ap.add_argument("--labels", nargs="+", default=None,
                    help="names for the runs (default: the directory names)")
    ap.add_argument("--batch", type=int, default=3,
                    help="trials that count as a task's first batch (default 3: MetaSchedule's "
                         "num_trials_per_iter for 256 trials over 33 tasks)")
    ap.add_argument("--near", type=float, default=1.25,
                    help="'near-best' threshold as a factor of the best known (default 1.25)")
    ap.add_argument("--pooled", action="store_true",
                    help="the work dirs are (reference, other) pairs; pool them by operator class")
    ap.add_argument("--sums", action="store_true",
                    help="the work dirs are (reference, other) pairs, one per group of an A/B: "
                         "summed weighted best kernels per pair, geomean ratio, paired Wilcoxon")
    ap.add_argument("--model-times", action="append", metavar="F.json",
                    help="raw times of ms_retime --out (repeat for several files): per work "
                         "dir the compiled model's re-timed median over its summed weighted "
                         "best kernels")
    ap.add_argument("--test-class", default="depthwise_conv2d",
                    help="with --pooled: the operator class tested against the rest")
    a = ap.parse_args(argv)
    from dcoc.errors import DcocError
    from scripts.ms_retime import check_work_dirs

    try:
        check_work_dirs(a.work_dirs)  # every mode reads each dir's result.json
        if a.model_times:
            print(model_over_kernels(a.model_times, a.work_dirs))
            return 0
    except DcocError as e:
        print(f"ms_task_gap: {e}", file=sys.stderr)
        return 2
    if a.pooled or a.sums:
        if len(a.work_dirs) < 2 or len(a.work_dirs) % 2:
            print(f"ms_task_gap: {'--sums' if a.sums else '--pooled'} takes (reference, other) "
                  "pairs of work dirs", file=sys.stderr)
            return 2
        if a.sums:
            print(sums(list(zip(a.work_dirs[::2], a.work_dirs[1::2]))))
            return 0
        runs = [load_run(d) for d in a.work_dirs]
        print(pooled(list(zip(runs[::2], runs[1::2])), a.test_class))
        return 0
    labels = a.labels or [dir_name(d) for d in a.work_dirs]
    if len(labels) != len(a.work_dirs) or len(labels) < 2:
        print("ms_task_gap: give two or more work dirs and as many labels", file=sys.stderr)
        return 2
    runs = {lab: load_run(d) for lab, d in zip(labels, a.work_dirs)}
    rows, totals = gap_table(runs, batch=a.batch, near=a.near)
    print(render(rows, totals, labels))
    return 0


if __name__ == "__main__":
    sys.exit(main())
