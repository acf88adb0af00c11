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

    python -m scripts.ms_task_gap D/mobilenetv2_256_46_dcoc D/mobilenetv2_256_46_evolutionary

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


def load_run(work_dir: str) -> dict:
    """{task name: {"weight", "flop", "costs" (seconds, measurement order, None = failed)}}."""
    from dcoc.search.msdb import load_ms_rows

    with open(os.path.join(work_dir, "result.json"), encoding="utf-8") as f:
        res = json.load(f)
    tasks = {r["task"]: {"weight": float(r.get("weight", 1.0)), "flop": float(r.get("flop", 0.0)),
                         "costs": []} for r in res.get("layers", [])}
    for row in load_ms_rows(work_dir):
        t = tasks.setdefault(row["task_name"], {"weight": 1.0, "flop": 0.0, "costs": []})
        t["costs"].append(row["cost"] if row["valid"] else None)
    return tasks


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
        }
    return rows, totals


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
                   f"best / best known {t['first']:.2f}")
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
    a = ap.parse_args(argv)
    labels = a.labels or [os.path.basename(os.path.normpath(d)) for d in a.work_dirs]
    if len(labels) != len(a.work_dirs) or len(labels) < 2:
        print("ms_task_gap: give two or more work dirs and as many labels", file=sys.stderr)
        return 2
    runs = {lab: load_run(d) for lab, d in zip(labels, a.work_dirs)}
    rows, totals = gap_table(runs, batch=a.batch, near=a.near)
    print(render(rows, totals, labels))
    return 0


if __name__ == "__main__":
    sys.exit(main())
