"""Where a compiled model's time goes, beside ONNX Runtime on the same threads.

:func:`profile_model` times, for one input:

* the TVM model per fused function, in place: the Relax VM's instrument hook records every
  call of a run (``vm.builtin.*`` calls -- allocation, shape checks, views -- count as
  glue) and the kernel calls are timed between the hook's before/after callbacks; each
  function's time is the median over ``runs`` runs of its summed calls;
* ONNX Runtime per node (``SessionOptions.enable_profiling``: the ``*_kernel_time``
  events), on the optimized graph ONNX Runtime really runs (its fused ``FusedConv``,
  ``NCHWc`` reorders, ...), with ``intra_op_num_threads`` = the TVM runtime's threads;
* in alternating blocks of back-to-back runs, a pause between blocks (a thread pool
  spinning after its runtime's run must not steal the other runtime's cores), so machine
  load hits both alike;
* and both models' end-to-end latency (no profiling), in alternating rounds.

Both sides are grouped by operator kind (:data:`KINDS`); the glue of a side is the median
over runs of a run's time minus its kernels' (TVM's includes the instrument hook's own
cost, ~1-2 us per call).  :func:`gap_rows` splits the gap (TVM - ONNX
Runtime) into tuned kernels, untuned kernels and glue: each TVM function is matched with
ONNX Runtime's time for its kind, shared among that kind's functions in proportion to
their FLOPs (by call count where a kind has no FLOPs) -- an attribution, since the two
graphs fuse differently; the per-kind table is exact.

ONNX Runtime is timed with :func:`dcoc.reference.onnxruntime_latency_ms`, as in the tuning summary.
"""
from __future__ import annotations

import json
import math
import os
import re
import statistics
import tempfile
import time
from typing import Any, Mapping, Sequence

import numpy as np

from dcoc.reference import onnxruntime_latency_ms, ort_session

#: operator kinds, in table order
KINDS = ("conv", "depthwise", "dense/matmul", "pooling/elementwise", "layout", "copies")

_LAYOUT_TOKENS = {"transpose", "reshape", "layout", "transform", "squeeze", "unsqueeze", "expand",
                  "dims", "concatenate", "concat", "split", "strided", "slice", "flatten",
                  "permute", "te", "reorder", "input", "output", "broadcast", "to"}
_ORT_DENSE = {"MatMul", "Gemm", "FusedMatMul", "FusedGemm", "MatMulInteger", "QLinearMatMul",
              "Attention", "MultiHeadAttention"}
_ORT_CONV = {"Conv", "FusedConv", "NhwcConv", "QLinearConv", "ConvTranspose"}
_ORT_LAYOUT = {"Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Concat", "Split",
               "Slice", "ReorderInput", "ReorderOutput", "Expand", "Tile"}
_ORT_COPY = {"Identity", "MemcpyToHost", "MemcpyFromHost", "Cast"}


# ============================================================================ kinds
def tvm_kind(name: str, func=None) -> str:
    """Operator kind of a fused TVM function (its anchor block, else its name)."""
    if func is not None:
        from tvm_plugin.frontend.classify import classify_primfunc

        try:
            kind = classify_primfunc(func)[0]
        except Exception:  # noqa: BLE001 - unusual TIR: fall back to the name
            kind = "other"
        if kind == "conv2d":
            return "conv"
        if kind in ("depthwise_conv2d", "grouped_conv2d"):
            return "depthwise"
        if kind in ("dense", "batch_matmul"):
            return "dense/matmul"
    low = name.lower()
    tokens = [t for t in re.findall(r"[a-z]+", low) if t != "fused"]
    if "copy" in tokens:
        return "copies"
    if func is None:
        if "conv" in low:
            return "depthwise" if "group" in low or "depthwise" in low else "conv"
        if "matmul" in low or "dense" in low:
            return "dense/matmul"
    if tokens and all(t in _LAYOUT_TOKENS for t in tokens):
        return "layout"
    return "pooling/elementwise"


def ort_kind(op_type: str, group: int = 1) -> str:
    """Operator kind of an ONNX Runtime node."""
    if op_type in _ORT_CONV:
        return "depthwise" if group > 1 else "conv"
    if op_type in _ORT_DENSE:
        return "dense/matmul"
    if op_type in _ORT_LAYOUT:
        return "layout"
    if op_type in _ORT_COPY:
        return "copies"
    return "pooling/elementwise"


def _flops(func) -> float:
    try:
        import tvm
        from tvm.s_tir.analysis import estimate_tir_flops

        return float(estimate_tir_flops(tvm.IRModule({"main": func})))
    except Exception:  # noqa: BLE001 - FLOPs only weight the attribution
        return 0.0


# ============================================================================ ONNX Runtime
def _ort_groups(path: str) -> dict:
    """{node name: (op type, group)} of the optimized graph ONNX Runtime saved."""
    import onnx

    if not os.path.exists(path):
        return {}
    return {n.name: (n.op_type, next((int(a.i) for a in n.attribute if a.name == "group"), 1))
            for n in onnx.load(path, load_external_data=False).graph.node}


def _ort_runs(events: list, keep: Sequence[bool]) -> tuple[list, list, dict]:
    """ONNX Runtime profile events -> (per run: {node: ms}, per run: run ms, {node: op}).
    A run's node events precede its ``model_run`` event; run ``i`` is kept where
    ``keep[i]`` (warm-up runs are not)."""
    runs, walls, ops, cur = [], [], {}, {}
    for e in events:
        if e.get("cat") == "Session" and e.get("name") == "model_run":
            runs.append(cur)
            walls.append(float(e.get("dur", 0)) / 1e3)
            cur = {}
            continue
        if e.get("cat") != "Node" or not str(e.get("name", "")).endswith("_kernel_time"):
            continue
        name = e["name"][: -len("_kernel_time")]
        ops[name] = e.get("args", {}).get("op_name") or "?"
        cur[name] = cur.get(name, 0.0) + float(e.get("dur", 0)) / 1e3
    sel = [i for i in range(len(runs)) if i < len(keep) and keep[i]]
    return [runs[i] for i in sel], [walls[i] for i in sel], ops


#: seconds between one runtime's timed block and the other's (:func:`profile_runs`,
#: :func:`interleaved_latency`)
SETTLE_S = 0.05


class _VMTimer:
    """One Relax VM whose ``main`` runs are timed per call through the instrument hook."""

    def __init__(self, executable, dev, args):
        from tvm import relax

        self.vm = relax.VirtualMachine(executable, dev)
        self.args = args
        self.events: list = []
        clock = time.perf_counter
        events = self.events

        def instrument(func, symbol, before, ret, *call_args):
            if before:
                events.append([str(symbol), clock(), 0.0])
            else:
                t = clock()
                if events and events[-1][2] == 0.0:
                    events[-1][2] = t
            return 0

        self.vm.set_instrument(instrument)

    def run(self) -> tuple[float, dict]:
        """(run ms, {function: [calls, ms]}); ``vm.builtin.*`` calls are not kernels."""
        self.events.clear()
        t0 = time.perf_counter()
        self.vm["main"](*self.args)
        wall = (time.perf_counter() - t0) * 1e3
        acc: dict[str, list] = {}
        for sym, a, b in self.events:
            if sym.startswith("vm.builtin.") or b == 0.0:
                continue
            x = acc.setdefault(sym, [0, 0.0])
            x[0] += 1
            x[1] += (b - a) * 1e3
        return wall, acc


def profile_runs(executable, target, model_src, inputs: Mapping[str, np.ndarray],
                 input_names: Sequence[str], threads: int, runs: int = 20,
                 functions: Mapping[str, Any] | None = None, tuned: Sequence[str] = (),
                 warm: int = 2, blocks: int = 4, settle_s: float = SETTLE_S) -> tuple[dict, dict]:
    """Profile the TVM model and ONNX Runtime in alternating blocks (``blocks`` of each,
    ``runs`` profiled runs per runtime in all), so machine load hits both alike:
    ``(tvm, onnxruntime)`` with per-function / per-node medians over the runs, ``run_ms``
    (median run) and ``glue_ms`` (median over runs of the run minus its kernels).

    Each block starts ``settle_s`` after the other runtime's and with ``warm`` unprofiled
    runs: both thread pools keep their workers spinning for a while after a run, and a
    worker of one runtime spinning on a core the other needs stalls the other's parallel
    kernels for a scheduler time slice (about 4 ms each on 2 cores); a pool whose workers
    have gone to sleep pays their wake-up instead.  Within a block each runtime runs back
    to back, as in :func:`interleaved_latency`."""
    import tvm

    from tvm_plugin.metaschedule.build import device_of

    dev = device_of(target)
    timer = _VMTimer(executable, dev, [tvm.runtime.tensor(np.ascontiguousarray(inputs[n]), dev)
                                       for n in input_names])
    feed = dict(inputs)
    blocks = max(1, min(int(blocks), int(runs)))
    sizes = [runs // blocks + (1 if b < runs % blocks else 0) for b in range(blocks)]
    tvm_runs, keep = [], []
    with tempfile.TemporaryDirectory(prefix="dcoc-ort-") as tmp:
        opt = os.path.join(tmp, "optimized.onnx")
        sess = ort_session(model_src, threads, profile_prefix=os.path.join(tmp, "ort"),
                           optimized_path=opt)
        for n in sizes:
            time.sleep(settle_s)
            for i in range(warm + n):
                r = timer.run()
                if i >= warm:
                    tvm_runs.append(r)
            time.sleep(settle_s)
            for i in range(warm + n):
                sess.run(None, feed)
                keep.append(i >= warm)
        with open(sess.end_profiling()) as f:
            events = json.load(f)
        groups = _ort_groups(opt)
    funcs, tuned_set = dict(functions or {}), set(tuned)
    rows = []
    for name in tvm_runs[0][1]:
        # SplitLayoutRewritePreproc renames a prepacked kernel "<fused function>_prepacked"
        base = name[: -len("_prepacked")] if name.endswith("_prepacked") else name
        func = funcs.get(name) or funcs.get(base)
        rows.append({"name": name, "kind": tvm_kind(name, func),
                     "tuned": name in tuned_set or base in tuned_set,
                     "calls": tvm_runs[0][1][name][0],
                     "ms": float(statistics.median(r.get(name, [0, 0.0])[1] for _, r in tvm_runs)),
                     "flop": _flops(func) if func is not None else 0.0})
    rows.sort(key=lambda r: -r["ms"])
    t = {"functions": rows, "kernels_ms": float(sum(r["ms"] for r in rows)),
         "run_ms": float(statistics.median(w for w, _ in tvm_runs)),
         "glue_ms": float(statistics.median(w - sum(v[1] for v in r.values()) for w, r in tvm_runs))}
    ort_runs, walls, ops = _ort_runs(events, keep)
    nodes = []
    for name, op in ops.items():
        nodes.append({"name": name, "op": op, "kind": ort_kind(op, groups.get(name, (op, 1))[1]),
                      "ms": float(statistics.median(r.get(name, 0.0) for r in ort_runs))})
    nodes.sort(key=lambda n: -n["ms"])
    o = {"nodes": nodes, "kernels_ms": float(sum(n["ms"] for n in nodes)),
         "run_ms": float(statistics.median(walls)),
         "glue_ms": float(statistics.median(w - sum(r.values()) for w, r in zip(walls, ort_runs)))}
    return t, o


def interleaved_latency(executables: Mapping[str, Any], target, inputs: Mapping[str, np.ndarray],
                        input_names: Sequence[str], model_src, threads: int,
                        rounds: int = 3) -> dict:
    """End-to-end latency (ms) of compiled models and ONNX Runtime, timed in alternating
    rounds so machine load hits each alike: ``{key of executables: ms, "onnxruntime": ms}``.
    TVM: ``measure_latency`` (median of 3 timings of >= 100 ms); ONNX Runtime: the same
    shape of timing; the fastest round of each is kept."""
    from tvm_plugin.metaschedule.build import measure_latency

    arrays = [inputs[n] for n in input_names]
    sess = ort_session(model_src, threads)
    best = {k: math.inf for k in list(executables) + ["onnxruntime"]}
    for _ in range(rounds):
        for k, ex in executables.items():
            time.sleep(SETTLE_S)  # the other runtime's spinning workers park first
            best[k] = min(best[k], measure_latency(ex, target, arrays, repeat=3)["median_ms"])
        time.sleep(SETTLE_S)
        best["onnxruntime"] = min(best["onnxruntime"], onnxruntime_latency_ms(
            model_src, threads=threads, repeat=3, inputs=inputs, session=sess))
    return best


# ============================================================================ tables
def _attributed_ort(tvm_rows: list, ort_by_kind: Mapping[str, float]) -> list:
    """ONNX Runtime ms matched to each TVM function (module docstring)."""
    out = []
    for kind in KINDS:
        rows = [r for r in tvm_rows if r["kind"] == kind]
        flops = sum(r["flop"] for r in rows)
        for r in rows:
            share = (r["flop"] / flops) if flops > 0 else 1.0 / len(rows)
            out.append((r, ort_by_kind.get(kind, 0.0) * share))
    return out


def gap_rows(prof: Mapping) -> list[dict]:
    """The first table: the gap of a profiled run split into tuned kernels, untuned kernels
    and glue (kernels: medians over runs; glue: median of run - kernels)."""
    t, o = prof["tvm"], prof["onnxruntime"]
    ort_by_kind = kind_totals(o["nodes"])
    matched = _attributed_ort(t["functions"], ort_by_kind)
    tvm_kinds = {r["kind"] for r in t["functions"]}
    rows = []
    for label, want in (("tuned kernels", True), ("untuned kernels", False)):
        sel = [(r, om) for r, om in matched if r["tuned"] == want]
        rows.append({"part": label, "functions": len(sel),
                     "tvm_ms": sum(r["ms"] for r, _ in sel), "ort_ms": sum(om for _, om in sel)})
    only = sum(v for k, v in ort_by_kind.items() if k not in tvm_kinds)
    if only > 0:
        rows.append({"part": "kinds only ONNX Runtime has", "functions": 0, "tvm_ms": 0.0,
                     "ort_ms": only})
    rows.append({"part": "glue (VM calls, allocation, between kernels)", "functions": None,
                 "tvm_ms": t["glue_ms"], "ort_ms": o["glue_ms"]})
    tvm_total = sum(r["tvm_ms"] for r in rows)
    ort_total = sum(r["ort_ms"] for r in rows)
    gap = tvm_total - ort_total
    for r in rows:
        r["gap_ms"] = r["tvm_ms"] - r["ort_ms"]
        r["share"] = r["gap_ms"] / gap if gap else math.nan
    rows.append({"part": "total (profiled run)", "functions": len(t["functions"]),
                 "tvm_ms": tvm_total, "ort_ms": ort_total, "gap_ms": gap,
                 "share": 1.0 if gap else math.nan})
    return rows


def kind_totals(rows: Sequence[Mapping]) -> dict:
    out = {k: 0.0 for k in KINDS}
    for r in rows:
        out[r["kind"]] = out.get(r["kind"], 0.0) + r["ms"]
    return out


def kind_rows(prof: Mapping) -> list[dict]:
    t, o = prof["tvm"], prof["onnxruntime"]
    tk, ok = kind_totals(t["functions"]), kind_totals(o["nodes"])
    rows = []
    for k in KINDS:
        fs = [r for r in t["functions"] if r["kind"] == k]
        ns = [n for n in o["nodes"] if n["kind"] == k]
        if not fs and not ns:
            continue
        rows.append({"kind": k, "tvm_functions": len(fs), "tuned": sum(r["tuned"] for r in fs),
                     "tvm_ms": tk[k], "ort_nodes": len(ns), "ort_ms": ok[k],
                     "gap_ms": tk[k] - ok[k],
                     "ratio": tk[k] / ok[k] if ok[k] > 0 else math.inf})
    return rows


def _f(x, fmt="{:.3f}") -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else fmt.format(x)


def format_profile(prof: Mapping, top: int = 15) -> str:
    """The profile as markdown tables (gap split, per kind, top functions, ONNX Runtime ops)."""
    t, o = prof["tvm"], prof["onnxruntime"]
    lines = [f"{prof.get('model', 'model')}: TVM {t['latency_ms']:.3f} ms "
             f"({prof.get('label', 'compiled')}), ONNX Runtime {o['latency_ms']:.3f} ms, "
             f"ratio {t['latency_ms'] / o['latency_ms']:.2f} (end to end, timed in alternating "
             f"rounds); {prof['threads']} thread(s) each; target {prof.get('target', '')}", "",
             f"Profiled runs (TVM and ONNX Runtime in alternating blocks, medians of {prof.get('runs', '?')}): "
             f"TVM {t['run_ms']:.3f} ms per run, ONNX Runtime {o['run_ms']:.3f} ms.", ""]
    lines += ["| part | TVM functions | TVM ms | ONNX Runtime ms | gap ms | share of gap |",
              "|---|---:|---:|---:|---:|---:|"]
    for r in gap_rows(prof):
        lines.append(f"| {r['part']} | {_f(r['functions'], '{}')} | {_f(r['tvm_ms'])} | "
                     f"{_f(r['ort_ms'])} | {_f(r['gap_ms'])} | {_f(r['share'], '{:.0%}')} |")
    lines += ["", "| kind | TVM functions (tuned) | TVM ms | ONNX Runtime nodes | "
                  "ONNX Runtime ms | gap ms | TVM / ONNX Runtime |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for r in kind_rows(prof):
        lines.append(f"| {r['kind']} | {r['tvm_functions']} ({r['tuned']}) | {_f(r['tvm_ms'])} | "
                     f"{r['ort_nodes']} | {_f(r['ort_ms'])} | {_f(r['gap_ms'])} | "
                     f"{_f(r['ratio'], '{:.2f}')} |")
    tvm_total = t["kernels_ms"] + t["glue_ms"]
    lines += ["", f"TVM functions (top {top} of {len(t['functions'])}; share of the profiled run "
                  f"{tvm_total:.3f} ms):", "",
              "| function | kind | tuned | calls | ms | share of TVM |", "|---|---|---|---:|---:|---:|"]
    for r in t["functions"][:top]:
        lines.append(f"| {r['name'][:60]} | {r['kind']} | {'yes' if r['tuned'] else 'no'} | "
                     f"{r['calls']} | {r['ms']:.3f} | {r['ms'] / tvm_total:.0%} |")
    by_op: dict = {}
    for n in o["nodes"]:
        a = by_op.setdefault((n["op"], n["kind"]), [0, 0.0])
        a[0] += 1
        a[1] += n["ms"]
    lines += ["", "ONNX Runtime operators:", "", "| operator | kind | nodes | ms |",
              "|---|---|---:|---:|"]
    for (op, kind), (cnt, ms) in sorted(by_op.items(), key=lambda kv: -kv[1][1]):
        lines.append(f"| {op} | {kind} | {cnt} | {ms:.3f} |")
    return "\n".join(lines) + "\n"


# ============================================================================ driver
def profile_compiled(executable, report: Mapping, target, model, model_src, *,
                     threads: int | None = None, runs: int = 20, seed: int = 0,
                     label: str = "compiled") -> dict:
    """Profile a compiled model (``compile_model``'s executable and report) beside ONNX
    Runtime: ``{"tvm": {...}, "onnxruntime": {...}, "threads", ...}`` (JSON-able)."""
    from tvm_plugin.metaschedule.build import random_inputs, use_runtime_threads

    n = use_runtime_threads(target) if threads is None else int(threads)
    if threads is not None:
        os.environ["TVM_NUM_THREADS"] = str(n)
    inputs = random_inputs(model.input_shapes, model.input_dtypes, seed=seed)
    names = list(model.input_shapes)
    lat = interleaved_latency({"tvm": executable}, target, inputs, names, model_src, n)
    t, o = profile_runs(executable, target, model_src, inputs, names, n, runs=runs,
                        functions=report.get("functions"), tuned=report.get("tuned", ()))
    t["latency_ms"], o["latency_ms"] = lat["tvm"], lat["onnxruntime"]
    return {"model": model.name, "label": label, "target": str(target), "threads": n, "runs": runs,
            "tvm": t, "onnxruntime": o}


def profile_model(model, model_src, target="llvm", *, trials: int | None = None,
                  work_dir: str | None = None, tuner: str | None = None, seed: int = 0,
                  threads: int | None = None, prepack: bool | None = None, runs: int = 20,
                  progress: Any = True) -> dict:
    """Compile ``model`` (a loaded :class:`tvm_plugin.frontend.Model`) and profile it
    beside ONNX Runtime (``model_src``: the ONNX model as a path or bytes).

    ``trials``: tune first (:func:`~tvm_plugin.metaschedule.tuning.tune_model`, into
    ``work_dir`` if given); else ``work_dir``: compile with that work dir's tuning
    database; else the untuned model.  ``prepack``: weight prepacking on/off (default:
    the pipeline's, :func:`tvm_plugin.frontend.lowering.prepack_weights`); ``threads``:
    the TVM runtime's and ONNX Runtime's thread count (default: the target's cores).
    """
    from tvm.s_tir import meta_schedule as ms

    from dcoc.errors import DcocError
    from tvm_plugin.frontend import lowering
    from tvm_plugin.metaschedule.build import compile_model, resolve_tvm_target

    if threads is not None:
        os.environ["TVM_NUM_THREADS"] = str(int(threads))
    if prepack is not None:
        lowering.PREPACK_WEIGHTS = bool(prepack)
    tgt = resolve_tvm_target(target)
    if trials:
        from dcoc.tuners import DEFAULT
        from tvm_plugin.metaschedule.tuning import tune_model

        r = tune_model(model, tgt, trials=int(trials), tuner=tuner or DEFAULT, seed=seed,
                       work_dir=work_dir, baseline=False, progress=progress)
        _, report = compile_model(None, model.mod, tgt)
        report = {"functions": report["functions"], "tuned": r.extra["tuned_functions"]}
        ex, label = r.executable, f"tuned, {r.extra['new_trials']} trials, {r.tuner}"
        if r.extra.get("kept_untuned"):
            label += f", {len(r.extra['kept_untuned'])} task(s) kept untuned"
    elif work_dir:
        if not os.path.isfile(os.path.join(work_dir, "database_tuning_record.json")):
            raise DcocError(f"'{work_dir}' holds no MetaSchedule tuning database "
                            "(database_tuning_record.json)")
        db = ms.database.JSONDatabase(work_dir=work_dir)
        ex, report = compile_model(db, model.mod, tgt)
        label = f"tuned, database {work_dir}"
    else:
        ex, report = compile_model(None, model.mod, tgt)
        label = "untuned"
    label += ", weights prepacked" if lowering.prepack_weights(tgt) else ", weights not prepacked"
    return profile_compiled(ex, report, tgt, model, model_src, threads=threads, runs=runs,
                            seed=seed, label=label)


__all__ = ["profile_model", "KINDS", "tvm_kind", "ort_kind",
           "profile_runs", "interleaved_latency", "gap_rows",
           "kind_rows", "format_profile", "profile_compiled"]
