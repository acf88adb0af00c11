"""The per-layer rows of a ``dcoc run`` (:class:`~dcoc.runtime.result.RunResult`'s
``layers``, ``per_layer``, ``cpu_layers`` and ``quantization``), from plain data: the
:class:`~dcoc.runtime.offload.Offload` kernels, the model's tasks, the quantized layers."""
from __future__ import annotations

__all__ = ["layer_rows", "per_layer", "cpu_rows", "quant_rows"]


def layer_rows(offload, samples: int) -> list[dict]:
    """One row per offloaded call site, in model order: its layer, schedule, time per
    inference, and whether its output matched the reference on the same inputs."""
    from dcoc.targets.vta.report import roofline_seconds

    rows = []
    for k in offload.kernels:
        ep = k.epilogue
        parts = (["bias"] if ep.bias else []) + (["residual"] if ep.residual else []) + \
            [f"shift {ep.shift}{'r' if ep.round else ''}", f"clip[{ep.clip[0]},{ep.clip[1]}]"]
        n = max(samples, 1)
        sec = k.seconds / n
        rows.append({"call": k.site, "layer": k.name, "task": k.task, "kind": k.kind,
                     "knobs": k.knobs, "default": k.default, "cycles": k.cycles // n,
                     "ms": sec * 1e3, "epilogue": "+".join(parts),
                     "roofline": roofline_seconds(k.workload, offload.hw, ep) / sec
                     if sec > 0 else 0.0,
                     "bit_exact": k.mismatches == 0, "mismatches": k.mismatches,
                     "max_diff": k.max_diff, "adapted": k.adapted,
                     "sim_wall_s": round(k.wall, 3), "note": k.note})
    return rows


def per_layer(offload, rows: list[dict]) -> list[dict]:
    """The call-site rows grouped by layer (first-call order): the per-layer table
    ``dcoc simulate`` and ``dcoc tune`` print (:func:`dcoc.targets.vta.report.layer_table`)."""
    from dcoc.targets.vta.report import epilogue_label, roofline_seconds

    kern = {k.site: k for k in offload.kernels}
    out: dict = {}
    for r in rows:
        k = kern[r["call"]]
        g = out.get(r["layer"])
        if g is None:
            g = out[r["layer"]] = {
                "layer": r["layer"], "kind": r["kind"], "count": 0, "cycles": 0,
                "ms": 0.0, "total_ms": 0.0, "gops": 0.0, "roofline": 0.0,
                "epilogue": epilogue_label(k.epilogue), "knobs": r["knobs"],
                "default": r["default"], "note": None, "bit_exact": True,
                "_macs": k.workload.macs, "_bound": 0.0}
        g["count"] += 1
        g["cycles"] += r["cycles"]
        g["total_ms"] += r["ms"]
        g["_bound"] += roofline_seconds(k.workload, offload.hw, k.epilogue) * 1e3
        g["bit_exact"] = g["bit_exact"] and r["bit_exact"]
        if r["knobs"] != g["knobs"]:
            g["note"] = "call sites differ in schedule"
        if r["adapted"]:
            g["note"] = "adapted"
    res = []
    for g in out.values():
        c = g["count"]
        g["cycles"] = int(round(g["cycles"] / c))
        g["ms"] = g["total_ms"] / c
        g["gops"] = 2 * g["_macs"] * c / (g["total_ms"] * 1e-3) / 1e9 if g["total_ms"] else 0.0
        g["roofline"] = g["_bound"] / g["total_ms"] if g["total_ms"] else 0.0
        if not g["bit_exact"]:
            g["note"] = ((g["note"] + "; ") if g["note"] else "") + "NOT bit-exact"
        del g["_macs"], g["_bound"]
        res.append(g)
    return res


def cpu_rows(tasks, quantized: set, offload) -> list[dict]:
    """The layers left on the CPU and why: not VTA layers, VTA tasks whose graph pattern
    was not quantized (``quantized``: the names of the layers that were), layers the
    offload refused, host ops."""
    from dcoc.tasks import cpu_reason

    rows = []
    for t in tasks:
        if t.device != "vta":
            why = cpu_reason(t) if "conv" in t.kind else "not a VTA layer"
            rows.append({"layer": t.name, "kind": t.kind, "count": t.weight, "reason": why})
    for t in tasks:
        if t.device == "vta" and t.name not in quantized:
            rows.append({"layer": t.name, "kind": t.kind, "count": t.weight,
                         "reason": "fell back: its graph pattern could not be quantized "
                                   "(float on the CPU)"})
    counts: dict = {}
    for name, kind, reason in offload.refused:
        key = (name, kind, reason)
        counts[key] = counts.get(key, 0) + 1
    for (name, kind, reason), c in counts.items():
        rows.append({"layer": name, "kind": kind, "count": c,
                     "reason": f"fell back to the CPU (int8 through TVM): {reason}"})
    for op in getattr(tasks, "cpu_ops", []) or []:
        rows.append({"layer": op.name, "kind": "other", "count": op.weight,
                     "reason": "host op"})
    return rows


def quant_rows(qlayers) -> list[dict]:
    """One row per quantized layer: its exponents, shift, clip bounds and absorbed ops."""
    return [{"layer": q.spec.name, "kind": q.spec.kind, "e_in": q.e_x, "e_weight": q.e_w,
             "e_out": q.e_y, "shift": q.shift, "clip": [q.clip_lo, q.clip_hi],
             "bias": q.qbias is not None, "residual_shift": q.res_shift
             if q.spec.residual is not None else None,
             "absorbed": q.spec.absorbed, "notes": q.notes} for q in qlayers]
