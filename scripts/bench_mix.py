"""Model-mix benchmark: one accelerator co-designed for several models at once vs the best
single-model design, on the mix's objective, at the same total budget.

For each (board, seed): ``dcoc.tune(MODELS, board=..., trials=per_model x len(MODELS),
singles=True)`` (:mod:`dcoc.api.mix`): the mix design gets the whole budget; each model's
own single-model design gets ``per_model`` trials, and every other model's schedules are
tuned on its hardware with ``per_model`` trials each, so every design evaluated on the mix
costs the same total budget.  The objective is the sum of the models' accelerator latencies
(equal weights).  Reported per board, median over seeds: the mix design's objective, the
best single-model design's (the lowest of the single designs in each seed), by how much
the mix design is lower, and per model the latency on the mix design vs on the best single
design.

Bounded for one core: the defaults (ResNet-18 + MobileNetV2 + ``mini_resnet``, the small
ResNet of :mod:`scripts.bench_tune_vs_run`, at 32x32; pynq and ultra96; seeds 0 1 2; 150
trials per model: 450 for the mix, 450 per single design) run in-process (``n_workers=0``).

Resumable: every finished (board, seed) row is appended to ``RUNS_DIR/rows.jsonl`` (its
work dir keeps the records), and a rerun skips the rows already there.  The rows hold
simulated latencies: after a change to a simulator or a target's timing, rerun with
``--fresh`` (deletes RUNS_DIR first).

    python -m scripts.bench_codesign --mix                      # = python -m scripts.bench_mix
    python -m scripts.bench_mix --boards pynq --seeds 0 --per-model 100
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time

MODELS = ("resnet18", "mobilenetv2", "mini_resnet")
BOARDS = ("pynq", "ultra96")
SEEDS = (0, 1, 2)
PER_MODEL = 150
RUNS_DIR = os.path.join("dcoc_runs", "bench_mix")
ROWS_FILE = "rows.jsonl"


def _source(name: str, runs_dir: str) -> str:
    """A zoo name as is; ``mini_resnet`` saved as an ONNX file in ``runs_dir``."""
    if name != "mini_resnet":
        return name
    import onnx

    from scripts.bench_tune_vs_run import mini_resnet

    path = os.path.join(runs_dir, "mini_resnet.onnx")
    if not os.path.exists(path):
        onnx.save(mini_resnet(), path)
    return path


def mix_row(models, board: str, seed: int, per_model: int, runs_dir: str) -> dict:
    """One (board, seed): the mix design and every single-model design on the mix."""
    import dcoc

    t0 = time.perf_counter()
    res = dcoc.tune([_source(m, runs_dir) for m in models], board=board, trials=per_model * len(models),
                    seed=seed, work_dir=os.path.join(runs_dir, f"{board}_s{seed}_p{per_model}"),
                    n_workers=0)
    best = res.best_single
    return {"board": board, "seed": seed, "per_model": per_model, "models": res.names,
            "trials": res.trials, "hardware": res.hardware.name, "objective_ms": res.objective_ms,
            "baseline_objective_ms": res.baseline_objective_ms,
            "latency_ms": {r.model: r.latency_ms for r in res.models},
            "singles": res.singles, "best_single": best["design"],
            "best_single_objective_ms": best["objective_ms"],
            "shared_layers": res.extra["shared"], "layers": res.extra["layers"],
            "wall_s": round(time.perf_counter() - t0, 1)}


def _read_rows(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def run(models=MODELS, boards=BOARDS, seeds=SEEDS, per_model: int = PER_MODEL,
        runs_dir: str = RUNS_DIR, fresh: bool = False, quiet: bool = False) -> list[dict]:
    """Every (board, seed) row, the ones in ``runs_dir`` reused; each new row appended as
    soon as it is done."""
    if fresh:
        shutil.rmtree(runs_dir, ignore_errors=True)
    os.makedirs(runs_dir, exist_ok=True)
    path = os.path.join(runs_dir, ROWS_FILE)
    done = {(r["board"], r["seed"], r["per_model"], tuple(r["models"])): r for r in _read_rows(path)}
    names = [os.path.splitext(os.path.basename(m))[0] for m in models]
    rows = []
    for board in boards:
        for seed in seeds:
            key = (board, seed, per_model, tuple(names))
            if key not in done:
                row = mix_row(models, board, seed, per_model, runs_dir)
                with open(path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(row) + "\n")
                    f.flush()
                    os.fsync(f.fileno())
                done[key] = row
                if not quiet:
                    print(f"{board} seed {seed}: mix {row['objective_ms']:.3f} ms, best single "
                          f"({row['best_single']}) {row['best_single_objective_ms']:.3f} ms, "
                          f"{row['wall_s']:.0f} s", flush=True)
            rows.append(done[key])
    return rows


def summarize(rows: list[dict]) -> list[dict]:
    """Per board, medians over seeds."""
    out = []
    for board in dict.fromkeys(r["board"] for r in rows):
        rs = [r for r in rows if r["board"] == board]
        med = statistics.median
        gains = [1 - r["objective_ms"] / r["best_single_objective_ms"] for r in rs]
        out.append({
            "board": board, "seeds": len(rs), "trials": rs[0]["trials"],
            "objective_ms": med(r["objective_ms"] for r in rs),
            "best_single_objective_ms": med(r["best_single_objective_ms"] for r in rs),
            "baseline_objective_ms": med(r["baseline_objective_ms"] for r in rs),
            "gain": med(gains), "wins": sum(g >= 0 for g in gains),
            "best_single": statistics.mode(r["best_single"] for r in rs),
            "hardware": statistics.mode(r["hardware"] for r in rs),
            "latency_ms": {m: med(r["latency_ms"][m] for r in rs) for m in rs[0]["models"]},
            "single_latency_ms": {m: med(_best(r)["latency_ms"][m] for r in rs) for m in rs[0]["models"]},
            "wall_s": sum(r["wall_s"] for r in rs)})
    return out


def _best(row: dict) -> dict:
    return min(row["singles"], key=lambda s: s["objective_ms"])


def render(rows: list[dict], md: bool = False) -> str:
    from dcoc.results.text import render_table

    summ = summarize(rows)
    if not summ:
        return "no rows"
    models = list(summ[0]["latency_ms"])
    head = ["board", "seeds", "trials", "preset ms", "mix ms", "best single ms", "mix lower by",
            "mix <= single"] + [f"{m} mix / single ms" for m in models] + ["mix hardware", "best single"]
    table = [[s["board"], s["seeds"], s["trials"], f"{s['baseline_objective_ms']:.3f}",
              f"{s['objective_ms']:.3f}", f"{s['best_single_objective_ms']:.3f}", f"{s['gain'] * 100:.1f}%",
              f"{s['wins']}/{s['seeds']}"]
             + [f"{s['latency_ms'][m]:.3f} / {s['single_latency_ms'][m]:.3f}" for m in models]
             + [s["hardware"], s["best_single"]] for s in summ]
    if md:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(lines + ["| " + " | ".join(str(c) for c in r) + " |" for r in table])
    return render_table(head, table, right=set(range(1, 8)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--boards", nargs="+", default=list(BOARDS))
    ap.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    ap.add_argument("--per-model", type=int, default=PER_MODEL,
                    help=f"trials per model (the mix gets this x the models; default {PER_MODEL})")
    ap.add_argument("--runs-dir", default=RUNS_DIR)
    ap.add_argument("--fresh", action="store_true", help="delete RUNS_DIR first (after a timing change)")
    ap.add_argument("--md", action="store_true", help="print the table as Markdown")
    ap.add_argument("--json", default=None, help="write the rows here too")
    a = ap.parse_args(argv)
    rows = run(a.models, a.boards, a.seeds, a.per_model, a.runs_dir, fresh=a.fresh)
    print(render(rows, md=a.md))
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"rows": rows, "summary": summarize(rows)}, f, indent=1)


if __name__ == "__main__":
    main()
