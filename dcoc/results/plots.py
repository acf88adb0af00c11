"""Tuning-curve plots (PNG) from records files, and a text curve for terminals.

Used by ``dcoc plot``, ``dcoc tune`` (writes ``curve.png`` into the work dir) and the
benchmark scripts.  matplotlib runs headless (Agg).
"""
from __future__ import annotations

import math
import os
from collections import defaultdict

import numpy as np

from dcoc.errors import DcocError
from dcoc.readfile import read_json


def best_so_far(values) -> np.ndarray:
    v = np.array([x if x is not None and math.isfinite(x) else np.inf for x in values], dtype=float)
    return np.minimum.accumulate(v) if len(v) else v


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


#: figure size (inches) and font sizes that read on a laptop screen at 100% zoom
FIGSIZE = (8, 5)
DPI = 120
FONT = {"title": 13, "label": 12, "tick": 11, "legend": 11}


def figure_legend(fig, axes, ncol: int | None = None) -> None:
    """One legend for a multi-panel figure, below the panels (labels de-duplicated)."""
    handles, labels = {}, []
    for ax in getattr(axes, "flat", axes):
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in handles:
                handles[lab] = h
                labels.append(lab)
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    if labels:
        fig.legend([handles[lab] for lab in labels], labels, loc="lower center",
                   ncol=ncol or min(len(labels), 7), fontsize=FONT["legend"], frameon=False)
        fig.tight_layout(rect=(0, 0.07, 1, 1))


def baseline_label(res: dict) -> str:
    """What the baseline of a ``result.json`` is, per target and board."""
    from dcoc.targets import get, is_accelerator

    target = str(res.get("target") or "")
    if is_accelerator(target):
        tg = get(target)
        return tg.baseline_label(res.get("board") or tg.default_board)
    return "untuned model (TVM default schedules), measured"


def plot_curves(curves: dict, path: str, title: str, ylabel: str = "best latency (ms)",
                xlabel: str = "trials", baseline: tuple[str, float] | None = None,
                refs: list | None = None) -> str:
    """``curves``: {label: [(x, y), ...]} or {label: [[(x, y)...], [(x, y)...]] (seeds: mean + band)}.

    ``baseline``: (label, y) drawn as a dashed horizontal line *under* the curves, so a
    curve equal to it stays visible; ``refs``: more (label, y) reference lines (dotted)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=FIGSIZE, dpi=DPI)
    for i, ref in enumerate([baseline] + list(refs or [])):
        if ref is not None and isinstance(ref[1], (int, float)) and math.isfinite(ref[1]):
            ax.axhline(ref[1], color="0.35" if i == 0 else ("tab:green", "tab:purple", "tab:red")[(i - 1) % 3],
                       ls="--" if i == 0 else ":",
                       lw=1.5, zorder=1, label=ref[0])
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
            ax.plot(xs, mean, label=f"{label} (n={len(data)})", lw=2, zorder=3)
            ax.fill_between(xs, np.nanmin(ys, axis=0), np.nanmax(ys, axis=0), alpha=0.2, zorder=2)
        elif data:
            x, y = zip(*data)
            y = np.where(np.isfinite(y), y, np.nan)
            ax.plot(x, y, label=label, lw=2, zorder=3, drawstyle="steps-post",
                    marker="o" if len(x) <= 30 else None, ms=4)
    ax.set_xlabel(xlabel, fontsize=FONT["label"])
    ax.set_ylabel(ylabel, fontsize=FONT["label"])
    ax.set_title(title, fontsize=FONT["title"])
    if xlabel == "trials":  # whole trials: no 2.5 ticks on a short run
        from matplotlib.ticker import MaxNLocator

        lo, hi = ax.get_xlim()
        if hi - lo < 2:  # one or two trials: widen to whole numbers around them
            ax.set_xlim(max(0, round(lo) - 1), round(hi) + 1)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.tick_params(labelsize=FONT["tick"])
    ax.grid(alpha=0.3)
    ax.legend(fontsize=FONT["legend"])
    fig.tight_layout()
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        fig.savefig(path)
    except OSError as exc:
        from dcoc.errors import DcocError

        raise DcocError(f"cannot write plot {path}: {exc.strerror or exc}") from None
    finally:
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

    from dcoc.search.records import Records

    out_dir = out_dir or (run_dir if os.path.isdir(run_dir) else os.path.dirname(run_dir) or ".")
    rec_path = os.path.join(run_dir, "records.jsonl") if os.path.isdir(run_dir) else run_dir
    result_path = os.path.join(run_dir, "result.json") if os.path.isdir(run_dir) else None
    written = []
    res = None
    if result_path and os.path.exists(result_path):
        res = read_json(result_path, "result file", expect=None)
        hist = res.get("history") or [] if isinstance(res, dict) else []
        if hist:
            label = f"{res.get('tuner')} (seed {res.get('seed')})"
            curves = {label: [(t + 1, v) for t, v in hist]}
            base = res.get("baseline_latency_ms")
            refs = []
            from dcoc.targets import is_accelerator

            if is_accelerator(str(res.get("target") or "")):
                where, ylabel = f"{res.get('target')} {res.get('board') or ''}".strip(), "latency (ms)"
            else:  # llvm/cuda: the curve is the estimate sum(weight x best kernel time)
                where = (res.get("extra") or {}).get("target_kind") or str(res.get("target"))
                ylabel = "latency (ms); curve: sum of best kernel times"
                lat = res.get("latency_ms")
                if isinstance(lat, (int, float)) and math.isfinite(lat):
                    refs.append((f"tuned model, measured: {lat:.3f} ms", lat))
                ort = res.get("onnxruntime_ms")
                if isinstance(ort, (int, float)) and math.isfinite(ort):
                    refs.append((f"ONNX Runtime, measured: {ort:.3f} ms", ort))
            written.append(plot_curves(curves, os.path.join(out_dir, "curve.png"),
                                       f"{res.get('model')} on {where}: best end-to-end latency",
                                       ylabel=ylabel, refs=refs,
                                       baseline=(f"{baseline_label(res)}: {base:.3f} ms", base)
                                       if isinstance(base, (int, float)) and math.isfinite(base) else None))
        if res.get("board") and res.get("pareto") is not None:
            # a --pareto run: the throughput/area front with the board's budget lines, over
            # every point evaluated (WORK_DIR/pareto_points.json; else the searched configs)
            from dcoc.results.pareto import POINTS_FILE, front_from_run

            front, pts = res["pareto"], None
            try:
                pts = read_json(os.path.join(run_dir, POINTS_FILE), "points file")["points"]
            except (DcocError, KeyError, TypeError):
                try:
                    pts = front_from_run(run_dir)[1]
                except Exception:  # noqa: BLE001 - records gone: draw the stored front alone
                    pass
            if front:
                written.append(plot_front(front, res["board"], os.path.join(out_dir, "pareto.png"),
                                          points=pts, title=f"{res.get('model')} on {res.get('board')}: "
                                                            "throughput / area Pareto front",
                                          target=res.get("target")))
    from dcoc.search.msdb import load_ms_rows, ms_database_dir

    ms_dir = ms_database_dir(run_dir)
    if ms_dir is not None and not written:  # a MetaSchedule database without result.json
        rec_path = None
    if (rec_path is None or os.path.exists(rec_path)) and not written:  # per-task plots
        rows = load_ms_rows(ms_dir) if rec_path is None else Records.load(rec_path).rows
        if rec_path is None:  # the database does not say who measured: result.json / run file
            who = _ms_tuner(run_dir, res)
            rows = [{**r, "tuner": who[0], "seed": who[1]} for r in rows]
        curves = curves_from_records(rows)
        tasks = sorted({k[2] for k in curves})
        if rows and len(tasks) <= 24:
            for task in tasks:
                cs = {(f"{k[0]} s{k[1]}" if k[1] is not None else str(k[0])): v
                      for k, v in curves.items() if k[2] == task}
                name = task.split(":", 1)[-1]
                written.append(plot_curves(cs, os.path.join(out_dir, f"task_{_safe(name)}.png"),
                                           f"{name}: best schedule", ylabel="best cost (ms)"))
    return written


def _ms_tuner(run_dir: str, res: dict | None) -> tuple:
    """(tuner, seed) of a MetaSchedule work dir: its result.json, else its dcoc_run.json,
    else ("metaschedule", None)."""
    for src in ([res] if isinstance(res, dict) else []) + [os.path.join(run_dir, "dcoc_run.json")]:
        if isinstance(src, str):
            try:
                src = read_json(src, "run identity file")
            except DcocError:
                continue
        if isinstance(src, dict) and src.get("tuner"):
            return str(src["tuner"]), src.get("seed")
    return "metaschedule", None


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


def plot_front(front: list[dict], board, path: str, points: list[dict] | None = None,
               title: str | None = None, target=None) -> str:
    """PNG: throughput vs BRAM36 / DSP / LUT (one panel each): every evaluated config in
    grey, the front's designs measured by the search as filled circles and the estimated
    ones as open triangles, the best throughput within each amount of the resource as a
    step line, and the board's budget (``Target.budgets``) as a dashed line."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    from dcoc.results.pareto import ESTIMATED, MEASURED, RESOURCE_KEYS
    from dcoc.targets import get

    tg = get(target)
    bd = tg.board(board)
    budgets = tg.budgets(bd)
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(14, 5), sharey=True)
    for ax, key in zip(axes, RESOURCE_KEYS):
        if points:
            ax.scatter([p["resources"][key] for p in points], [p["throughput"] for p in points],
                       s=10, color="0.78", label=f"evaluated configs ({len(points)})", zorder=1)
        fr = sorted(front, key=lambda p: (p["resources"][key], -p["throughput"]))
        # the best throughput reachable within each amount of this resource
        xs, ys, best = [], [], 0.0
        for p in fr:
            best = max(best, p["throughput"])
            xs.append(p["resources"][key])
            ys.append(best)
        if xs:
            ax.step(xs, ys, where="post", color="C0", lw=1, zorder=2,
                    label="best throughput within the resource")
        for src, style in ((MEASURED, dict(marker="o", color="C0", s=44, label="Pareto front: measured (searched)")),
                           (ESTIMATED, dict(marker="^", facecolors="none", edgecolors="C1", s=48, linewidths=1.4,
                                            label="Pareto front: estimated (not searched)"))):
            sel = [p for p in fr if p.get("source", MEASURED) == src]
            if sel:
                ax.scatter([p["resources"][key] for p in sel], [p["throughput"] for p in sel],
                           zorder=3, **style)
        lim, lab = budgets[key]
        ax.axvline(lim, color="C3", ls="--", lw=1, label=f"{bd.name} budget", zorder=1)
        ax.set_xlabel(f"{'BRAM36' if key == 'bram36' else key.upper()}   (dashed: {lab})", fontsize=FONT["label"])
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5, integer=True))
        if key == "lut":
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 1000:g}k"))
        ax.tick_params(labelsize=FONT["tick"] - 1)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("throughput (inferences/s)", fontsize=FONT["label"])
    fig.suptitle(title or f"throughput / area Pareto front on {bd.name}", fontsize=FONT["title"])
    figure_legend(fig, axes, ncol=3)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
