"""The throughput / area Pareto front of an accelerator co-design run.

DCOC returns one design point; a user with a smaller FPGA budget wants the trade-off
instead.  This module rebuilds it from what a run leaves behind -- the append-only
records (every measured schedule, tagged with its hardware config) and the target's
resource model (:meth:`dcoc.targets.Target.resources`) -- so it does not depend on how a
co-design driver keeps its state:

* a hardware config is **complete** when every VTA layer of the model has at least one
  valid record on it; its latency is ``sum(count x best cost)`` over the layers, with the
  best schedule per layer;
* its resources are the target's estimate on the board: ``bram36``, ``dsp``, ``lut``;
* the **front** is the set of complete configs that no other complete config dominates
  (at least as much throughput with no more BRAM36, DSP and LUT, and strictly better in
  one of them), sorted by throughput.

Every front entry is ``{hardware, latency_ms, throughput, resources: {bram36, dsp, lut},
schedules}`` with ``hardware`` the HWConfig fields plus ``name`` and ``schedules``
``{layer name: knobs}`` -- a design a user can pick and deploy without re-tuning.
:func:`dcoc.results.plots.plot_front` draws it against the board's budget.
"""
from __future__ import annotations

import json
import math
import os

__all__ = ["complete_points", "pareto_front", "dominates", "front_from_run", "RESOURCE_KEYS"]

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


def complete_points(rows, layers, board, target=None) -> list[dict]:
    """One point per hardware config on which every layer has a valid record.

    ``rows``: record dicts (``Records.load(path).rows``); ``layers``: ``(name, count)``
    pairs, ``{"layer", "count"}`` dicts (``result.json``'s ``layers``) or codesign layers;
    ``board``: a board of ``target`` (an accelerator target or its name; default: the
    default target) or its name.
    """
    from dcoc.results.result import _hw_dict
    from dcoc.targets import get

    tg = get(target)
    bd = tg.board(board)
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
        hw = tg.parse_hw(hw_name, bd.name)
        u = tg.resources(hw, bd)
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
    """``(front, all complete points, board name)`` of a ``dcoc tune`` work dir of an
    accelerator target."""
    from dcoc.errors import DcocError
    from dcoc.search.records import Records
    from dcoc.targets import is_accelerator

    res_path = os.path.join(work_dir, "result.json")
    rec_path = os.path.join(work_dir, "records.jsonl")
    if not (os.path.exists(res_path) and os.path.exists(rec_path)):
        raise DcocError(f"{work_dir} has no result.json + records.jsonl of an accelerator tuning run")
    with open(res_path) as f:
        res = json.load(f)
    if not is_accelerator(res.get("target")) or not res.get("board"):
        raise DcocError(f"{work_dir} is not an accelerator co-design run (target {res.get('target')!r})")
    pts = complete_points(Records.load(rec_path).rows, res.get("layers") or [], res["board"],
                          res["target"])
    return pareto_front(pts), pts, res["board"]
