"""Tuning-curve plots (PNG) from records files, and a text curve for terminals.

Used by ``dcoc plot``, ``dcoc tune`` (writes ``curve.png`` into the work dir) and the
benchmark scripts.  matplotlib runs headless (Agg).
"""
from __future__ import annotations

import math
import os
from collections import defaultdict

import numpy as np


def best_so_far(values) -> np.ndarray:
    v = np.array([x if x is not None and math.isfinite(x) else np.inf for x in values], dtype=float)
    return np.minimum.accumulate(v) if len(v) else v


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_curves(curves: dict, path: str, title: str, ylabel: str = "best latency (ms)",
                xlabel: str = "trials") -> str:
    """``curves``: {label: [(x, y), ...]} or {label: [[(x, y)...], [(x, y)...]] (seeds: mean + band)}."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for label, data in curves.items():
        if data and isinstance(data[0], (list, tuple)) and data and isinstance(data[0][0], (list, tuple)):
            # several runs: align on x, mean and min/max band
            n = max(len(r) for r in data)
            ys = np.full((len(data), n), np.nan)
            xs = None
            for i, r in enumerate(data):
                x, y = zip(*r) if r else ((), ())
                ys[i, : len(y)] = y
                if xs is None or len(x) > len(xs):
                    xs = np.array(x)
            ys = np.where(np.isfinite(ys), ys, np.nan)
            mean = np.nanmean(ys, axis=0)
            ax.plot(xs, mean, label=f"{label} (n={len(data)})")
            ax.fill_between(xs, np.nanmin(ys, axis=0), np.nanmax(ys, axis=0), alpha=0.2)
        elif data:
            x, y = zip(*data)
            y = np.where(np.isfinite(y), y, np.nan)
            ax.plot(x, y, label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def curves_from_records(rows: list[dict]) -> dict:
    """Per (tuner, seed, task) best-cost-so-far curves in ms, in trial order."""
    by = defaultdict(list)
    for r in rows:
        by[(r.get("tuner"), r.get("seed"), r["task"])].append(r)
    out = {}
    for key, rs in by.items():
        rs.sort(key=lambda r: r.get("trial", 0))
        best = best_so_far([(r["cost"] * 1e3 if r.get("valid") else None) for r in rs])
        out[key] = [(i + 1, float(b)) for i, b in enumerate(best)]
    return out


def plot_run_dir(run_dir: str, out_dir: str | None = None) -> list[str]:
    """PNG plots for a ``dcoc tune`` / ``dcoc tune-task`` directory (or a records file)."""
    import json

    from dcoc.search.records import Records

    out_dir = out_dir or (run_dir if os.path.isdir(run_dir) else os.path.dirname(run_dir) or ".")
    rec_path = os.path.join(run_dir, "records.jsonl") if os.path.isdir(run_dir) else run_dir
    result_path = os.path.join(run_dir, "result.json") if os.path.isdir(run_dir) else None
    written = []
    if result_path and os.path.exists(result_path):
        with open(result_path) as f:
            res = json.load(f)
        hist = res.get("history") or []
        if hist:
            label = f"{res.get('tuner')} (seed {res.get('seed')})"
            curves = {label: [(t + 1, v) for t, v in hist]}
            if res.get("baseline_latency_ms"):
                curves["pynq preset + default schedules"] = [(1, res["baseline_latency_ms"]),
                                                             (hist[-1][0] + 1, res["baseline_latency_ms"])]
            written.append(plot_curves(curves, os.path.join(out_dir, "curve.png"),
                                       f"{res.get('model')} on {res.get('target')} "
                                       f"{res.get('board') or ''}: best end-to-end latency",
                                       ylabel="latency (ms)"))
        if res.get("target") == "vta" and res.get("board") and res.get("pareto") is not None:
            # a --pareto run: the throughput/area front with the board's budget lines
            from dcoc.pareto import front_from_run, plot_front

            front, pts = res["pareto"], None
            try:
                pts = front_from_run(run_dir)[1]
            except Exception:  # noqa: BLE001 - records gone: draw the stored front alone
                pass
            if front:
                written.append(plot_front(front, res["board"], os.path.join(out_dir, "pareto.png"),
                                          points=pts, title=f"{res.get('model')} on {res.get('board')}: "
                                                            "throughput / area Pareto front"))
    if os.path.exists(rec_path) and not written:  # per-task plots for plain records files
        rows = Records.load(rec_path).rows
        curves = curves_from_records(rows)
        tasks = sorted({k[2] for k in curves})
        if rows and len(tasks) <= 24:
            for task in tasks:
                cs = {f"{k[0]} s{k[1]}": v for k, v in curves.items() if k[2] == task}
                name = task.split(":", 1)[-1]
                written.append(plot_curves(cs, os.path.join(out_dir, f"task_{_safe(name)}.png"),
                                           f"{name}: best schedule", ylabel="best cost (ms)"))
    return written


def _safe(s: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in s)[:80]


def ascii_curve(points: list[tuple[int, float]], width: int = 60, height: int = 10) -> str:
    """A small text plot of a best-so-far curve (for terminals)."""
    pts = [(x, y) for x, y in points if math.isfinite(y)]
    if len(pts) < 2:
        return ""
    xs, ys = zip(*pts)
    lo, hi = min(ys), max(ys)
    span = (hi - lo) or 1.0
    grid = [[" "] * width for _ in range(height)]
    for x, y in pts:
        c = int((x - xs[0]) / max(xs[-1] - xs[0], 1) * (width - 1))
        r = int((hi - y) / span * (height - 1))
        grid[r][c] = "*"
    lines = [f"{hi:10.4f} |" + "".join(grid[0])]
    lines += ["           |" + "".join(g) for g in grid[1:-1]]
    lines.append(f"{lo:10.4f} |" + "".join(grid[-1]))
    lines.append("           +" + "-" * width)
    lines.append(f"            trial {xs[0]}" + " " * max(1, width - 18 - len(str(xs[-1]))) + f"trial {xs[-1]}")
    return "\n".join(lines)
