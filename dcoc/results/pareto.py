"""The throughput / area Pareto front of a VTA co-design run.

DCOC returns one design point; a user with a smaller FPGA budget wants the trade-off
instead.  This module rebuilds it from what a run leaves behind -- the append-only
records (every measured schedule, tagged with its hardware config) and the resource
model of :mod:`dcoc.vta.config` -- so it does not depend on how a co-design driver keeps
its state:

* a hardware config is **complete** when every VTA layer of the model has at least one
  valid record on it; its latency is ``sum(count x best cost)`` over the layers, with the
  best schedule per layer;
* its resources are the board's estimate (:meth:`dcoc.vta.config.Board.usage`):
  ``bram36``, ``dsp``, ``lut``;
* the **front** is the set of complete configs that no other complete config dominates
  (at least as much throughput with no more BRAM36, DSP and LUT, and strictly better in
  one of them), sorted by throughput.

Every front entry is ``{hardware, latency_ms, throughput, resources: {bram36, dsp, lut},
schedules}`` with ``hardware`` the HWConfig fields plus ``name`` and ``schedules``
``{layer name: knobs}`` -- a design a user can pick and deploy without re-tuning.
"""
from __future__ import annotations

import json
import math
import os

__all__ = ["complete_points", "pareto_front", "dominates", "front_from_run", "plot_front",
           "RESOURCE_KEYS"]

RESOURCE_KEYS = ("bram36", "dsp", "lut")


def _layer_list(layers) -> list[tuple[str, int]]:
    out = []
    for la in layers:
        if isinstance(la, dict):
            out.append((str(la["layer"]), int(la.get("count", 1))))
        elif isinstance(la, (tuple, list)):
            out.append((str(la[0]), int(la[1])))
        else:  # dcoc.codesign.Layer-like
            out.append((str(la.name), int(la.count)))
    return out


def complete_points(rows, layers, board) -> list[dict]:
    """One point per hardware config on which every layer has a valid record.

    ``rows``: record dicts (``Records.load(path).rows``); ``layers``: ``(name, count)``
    pairs, ``{"layer", "count"}`` dicts (``result.json``'s ``layers``) or codesign layers;
    ``board``: a :class:`~dcoc.vta.config.Board` or its name.
    """
    from dcoc.results.result import _hw_dict
    from dcoc.vta import HWConfig, get_board

    bd = get_board(board) if isinstance(board, str) else board
    lay = _layer_list(layers)
    names = {n for n, _ in lay}
    best: dict = {}
    for r in rows:
        if not r.get("valid") or r.get("hw") is None or r.get("task_name") not in names:
            continue
        cost = r.get("cost")
        if cost is None or not math.isfinite(float(cost)) or float(cost) <= 0:
            continue
        key = (r["hw"], r["task_name"])
        if key not in best or float(cost) < best[key][0]:
            best[key] = (float(cost), dict(r.get("knobs") or {}))
    points = []
    for hw_name in sorted({k[0] for k in best}):
        if not all((hw_name, n) in best for n in names):
            continue
        lat = sum(c * best[(hw_name, n)][0] for n, c in lay)
        hw = HWConfig.parse(hw_name, board=bd.name)
        u = bd.usage(hw)
        points.append({
            "hardware": _hw_dict(hw),
            "latency_ms": lat * 1e3,
            "throughput": 1.0 / lat,
            "resources": {k: int(u[k]) for k in RESOURCE_KEYS},
            "schedules": {n: best[(hw_name, n)][1] for n, _ in lay},
        })
    return points


def dominates(a: dict, b: dict) -> bool:
    """True when ``a`` has at least ``b``'s throughput with no more of any resource and is
    strictly better in at least one of them."""
    ge = a["throughput"] >= b["throughput"] and all(
        a["resources"][k] <= b["resources"][k] for k in RESOURCE_KEYS)
    gt = a["throughput"] > b["throughput"] or any(
        a["resources"][k] < b["resources"][k] for k in RESOURCE_KEYS)
    return ge and gt


def pareto_front(points: list[dict]) -> list[dict]:
    """The non-dominated points (throughput up, BRAM36/DSP/LUT down), by throughput."""
    front = [p for p in points if not any(dominates(q, p) for q in points if q is not p)]
    # identical (throughput, resources) duplicates: keep the first by name
    seen, out = set(), []
    for p in sorted(front, key=lambda p: (-p["throughput"], p["hardware"]["name"])):
        key = (p["throughput"], tuple(p["resources"][k] for k in RESOURCE_KEYS))
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def front_from_run(work_dir: str) -> tuple[list[dict], list[dict], str]:
    """``(front, all complete points, board name)`` of a ``dcoc tune`` work dir (VTA)."""
    from dcoc.errors import DcocError
    from dcoc.search.records import Records

    res_path = os.path.join(work_dir, "result.json")
    rec_path = os.path.join(work_dir, "records.jsonl")
    if not (os.path.exists(res_path) and os.path.exists(rec_path)):
        raise DcocError(f"{work_dir} has no result.json + records.jsonl of a VTA tuning run")
    with open(res_path) as f:
        res = json.load(f)
    if res.get("target") != "vta" or not res.get("board"):
        raise DcocError(f"{work_dir} is not a VTA co-design run (target {res.get('target')!r})")
    pts = complete_points(Records.load(rec_path).rows, res.get("layers") or [], res["board"])
    return pareto_front(pts), pts, res["board"]


def plot_front(front: list[dict], board, path: str, points: list[dict] | None = None,
               title: str | None = None) -> str:
    """PNG: throughput vs BRAM36 / DSP / LUT (one panel each), every complete config in grey,
    the front in colour, the board's budget as a dashed line per resource."""
    from dcoc.results.plots import _plt
    from dcoc.vta import get_board
    from dcoc.vta.config import LUT_UTIL_LIMIT

    bd = get_board(board) if isinstance(board, str) else board
    budgets = {"bram36": (bd.bram_usable, f"usable BRAM36 ({bd.bram_usable})"),
               "dsp": (bd.dsp, f"DSP ({bd.dsp})"),
               "lut": (LUT_UTIL_LIMIT * bd.lut, f"{int(LUT_UTIL_LIMIT * 100)}% LUT "
                                                f"({int(LUT_UTIL_LIMIT * bd.lut)})")}
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2), sharey=True)
    for ax, key in zip(axes, RESOURCE_KEYS):
        if points:
            ax.scatter([p["resources"][key] for p in points], [p["throughput"] for p in points],
                       s=12, color="0.75", label="explored configs", zorder=1)
        fr = sorted(front, key=lambda p: p["resources"][key])
        ax.scatter([p["resources"][key] for p in fr], [p["throughput"] for p in fr], s=28,
                   color="C0", label="Pareto front", zorder=3)
        # the best throughput reachable within each amount of this resource
        xs, ys, best = [], [], 0.0
        for p in fr:
            best = max(best, p["throughput"])
            xs.append(p["resources"][key])
            ys.append(best)
        if xs:
            ax.step(xs, ys, where="post", color="C0", lw=1, zorder=2)
        lim, lab = budgets[key]
        ax.axvline(lim, color="C3", ls="--", lw=1, label=f"{bd.name} budget: {lab}")
        ax.set_xlabel(key.upper() if key != "bram36" else "BRAM36")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    axes[0].set_ylabel("throughput (inferences/s)")
    fig.suptitle(title or f"throughput / area Pareto front on {bd.name}")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
