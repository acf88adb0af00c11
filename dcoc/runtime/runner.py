"""``dcoc.run``: execute a whole quantized model on the tuned accelerator.

Pipeline (``docs/run.md``)::

    ONNX model --tvm_plugin.frontend.load--> Relax (float)
      --tvm_plugin.relax_quantize.find_layers--> the layers VTA runs (+ absorbed epilogues)
      --calibrate (float TVM run, calibration inputs)--> ranges
      --dcoc.runtime.quantize.quantize_layers--> power-of-two int8 parameters
      --tvm_plugin.relax_quantize.rewrite--> integer Relax module
      --tvm_plugin.byoc.build--> FuseOpsByPattern + offload to packed functions + tvm.compile
      => one executable: CPU operators on llvm, each VTA layer on the dcoc simulator

Every input sample runs twice through that executable: with the offloaded layers on the
simulator (functional + timed), and with them computed by the independent integer
reference (:mod:`dcoc.runtime.intref`); the outputs must agree bit for bit.  In the
simulator pass every offloaded call is also computed by the reference on the same inputs
and compared, so the run names the first layer whose integer output differs (a one-LSB
error that pooling hides downstream still fails the run).  The float model runs under
ONNX Runtime for the accuracy comparison (cosine similarity, top-1).

The accelerator time is :func:`dcoc.targets.vta.report.model_seconds` over the layers (count x
time per run), the function behind the latency ``dcoc tune`` reports; every layer runs the
schedule tuned for it with the same epilogue, so the two agree.
"""
from __future__ import annotations

import math
import sys
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from dcoc.errors import ConfigError
from dcoc.runtime.inputs import (
    InputError,
    int_input_high,
    load_inputs,
    load_schedules,
    resolve_hw,
    result_input_shapes,
    split_samples,
)

__all__ = ["run", "RunResult", "Session", "InputError", "load_schedules", "load_inputs"]


# ============================================================================ result
@dataclass
class RunResult:
    """What :func:`run` returns (``to_json`` is what ``--json`` writes)."""

    model: str
    hardware: str
    outputs: list
    reference_outputs: list
    float_outputs: list | None
    bit_exact: bool
    mismatches: int
    cosine: float | None
    top1_agreement: float | None
    latency_ms: float
    layers: list
    cpu_layers: list
    samples: int
    quantization: list = field(default_factory=list)
    wall_seconds: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    per_layer: list = field(default_factory=list)
    first_mismatch: dict | None = None
    adapted: list = field(default_factory=list)

    @property
    def layers_bit_exact(self) -> bool:
        """Every offloaded call's output equals the reference's on the same inputs."""
        return all(ly.get("bit_exact", True) for ly in self.layers)

    def to_json(self) -> dict:
        return {"model": self.model, "hardware": self.hardware, "bit_exact": self.bit_exact,
                "mismatches": self.mismatches, "first_mismatch": self.first_mismatch,
                "cosine": self.cosine,
                "top1_agreement": self.top1_agreement, "latency_ms": self.latency_ms,
                "samples": self.samples, "layers": self.layers, "per_layer": self.per_layer,
                "adapted": self.adapted, "cpu_layers": self.cpu_layers,
                "quantization": self.quantization,
                "wall_seconds": {k: round(v, 3) for k, v in self.wall_seconds.items()},
                "notes": self.notes}

    def summary(self) -> str:
        from dcoc.results.text import render_table
        from dcoc.targets.vta.report import layer_table

        out = [f"{self.model} on VTA {self.hardware}: {len(self.layers)} layer call(s) on the "
               f"simulator, {self.samples} input sample(s)", layer_table(self.per_layer)]
        if self.cpu_layers:
            out.append("")
            out.append("on the CPU (TVM llvm):")
            out.append(render_table(["layer", "kind", "count", "why"],
                                    [[c["layer"], c["kind"], c["count"], c["reason"]]
                                     for c in self.cpu_layers], {2}))
        out.append("")
        out.append(f"accelerator time  {self.latency_ms:.3f} ms per inference (simulated)")
        n_calls = len(self.layers)
        if self.bit_exact:
            out.append(f"bit-exact         yes vs the independent integer reference (model "
                       f"outputs, and each of the {n_calls} layer calls on its own inputs)")
        else:
            what = []
            fm = self.first_mismatch
            if fm is not None:
                what.append(f"layer {fm['layer']} (call #{fm['call']}) differs first: "
                            f"{fm['mismatches']} value(s), up to {fm['max_diff']} LSB")
            if self.mismatches:
                what.append(f"{self.mismatches} model output value(s) differ")
            else:
                what.append("the model outputs agree")
            out.append("bit-exact         NO vs the independent integer reference: "
                       + "; ".join(what))
        if self.cosine is not None:
            t1 = "" if self.top1_agreement is None else \
                f", top-1 agreement {self.top1_agreement * 100:.1f}%"
            out.append(f"vs float (ORT)    cosine {self.cosine:.4f}{t1}")
        w = self.wall_seconds
        out.append("wall              " + ", ".join(f"{k} {v:.1f} s" for k, v in w.items()))
        if self.adapted:
            out.append(f"WARNING: {len(self.adapted)} layer(s) re-tiled because their schedule "
                       f"does not fit the accumulator with their epilogue: "
                       f"{', '.join(self.adapted)}; their time is not the tuned one (see "
                       "--json layers[].note)")
        for n in self.notes:
            out.append(f"note: {n}")
        return "\n".join(out)


# ============================================================================ session
class _Progress:
    def __init__(self, total: int, enabled: bool):
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="layer", dynamic_ncols=True, leave=False,
                            file=sys.stderr, mininterval=0, miniters=1)

    def __call__(self, kernel, backend):
        if self.bar is not None:
            self.bar.set_description_str(f"{'simulator' if backend == 'sim' else 'reference'} "
                                         f"{kernel.name}", refresh=False)
            self.bar.update(1)

    def stage(self, text: str):
        if self.bar is not None:
            self.bar.write(f"dcoc: {text}", file=sys.stderr)

    def close(self):
        if self.bar is not None:
            self.bar.close()


class Session:
    """A model quantized and compiled for one hardware config and schedule set.

    ``Session(model, hw, schedules, calibration=..., ...)`` loads, calibrates, quantizes,
    partitions and compiles; :meth:`infer` runs one sample with ``backend="sim"`` or
    ``"ref"``.
    """

    def __init__(self, model, hardware=None, schedules=None, *, calibration=None,
                 calibration_samples: int = 4, board: str | None = "pynq",
                 input_shapes: dict | None = None, seed: int = 0, build: bool = True):
        from tvm_plugin.frontend import load

        self.wall: dict[str, float] = {}
        self.notes: list[str] = []
        t0 = time.perf_counter()
        scheds, hw_from = load_schedules(schedules)
        self.hw = resolve_hw(hardware if hardware is not None else hw_from, board)
        self.model = load(model, input_shapes)
        self.shapes = dict(self.model.input_shapes)
        self.dtypes = dict(self.model.input_dtypes)
        self.names = list(self.shapes)
        self.tasks = self.model.tasks("vta")
        from dcoc.targets.vta.report import model_layers

        known = {t.name for t in self.tasks} | {ly.name for ly in model_layers(self.tasks)[0]}
        unknown = sorted(set(scheds) - known)
        if unknown:
            raise ConfigError(f"--schedules names {len(unknown)} task(s) this model does not "
                              f"have ({', '.join(unknown[:3])}{', ...' if len(unknown) > 3 else ''}"
                              f"); tuned for another model or input size?")
        self.schedules = scheds
        self.wall["load"] = time.perf_counter() - t0
        self._cal = (calibration, calibration_samples, seed)
        self.exe = None
        if build:
            self.build()

    def samples(self, inputs, what: str = "--inputs") -> list[dict]:
        """Validated input samples (InputError on a wrong name, shape or dtype)."""
        return split_samples(load_inputs(inputs, what), self.shapes, self.dtypes, what)

    def build(self) -> None:
        """Calibrate, quantize, partition, offload and compile (once)."""
        from dcoc.runtime.offload import Offload
        from dcoc.runtime.quantize import calibration_inputs, quantize_layers
        from tvm_plugin import byoc
        from tvm_plugin import relax_quantize as tq

        if self.exe is not None:
            return
        calibration, calibration_samples, seed = self._cal
        t0 = time.perf_counter()
        self.graph = tq.find_layers(tq.prepare(self.model.mod), self.tasks)
        if calibration is None:
            high = int_input_high(self.model.onnx, set(self.names))
            cal = calibration_inputs(self.shapes, self.dtypes, int(calibration_samples), seed,
                                     high, warn=True)
            self.notes.append(f"calibrated on {len(cal)} random input(s) (no --calibration)")
        elif isinstance(calibration, list):
            cal = []
            for c in calibration:
                cal.extend(split_samples(load_inputs(c, "calibration"), self.shapes,
                                         self.dtypes, "calibration"))
        else:
            cal = split_samples(load_inputs(calibration, "--calibration"), self.shapes,
                                self.dtypes, "--calibration")
        if calibration is not None:
            from dcoc.runtime.quantize import check_values

            check_values(cal, "calibration", calibration=True)
        ranges = tq.calibrate(self.graph, cal, self.names)
        self.qlayers, self.exps = quantize_layers(self.graph.layers, ranges)
        qmod = tq.rewrite(self.graph, self.qlayers, self.exps)
        self.wall["quantize"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        self.offload = Offload(self.hw, self.schedules, self.tasks)
        self.exe = byoc.build(qmod, self.offload.kernel, self.names)
        self.wall["build"] = time.perf_counter() - t0

    def infer(self, sample: dict, backend: str = "sim") -> list:
        self.offload.backend = backend
        return self.exe.run(sample)

    # ------------------------------------------------------------------ reports
    def layer_rows(self, samples: int) -> list[dict]:
        """One row per offloaded call site, in model order: its layer, schedule, time per
        inference, and whether its output matched the reference on the same inputs."""
        from dcoc.targets.vta.report import roofline_seconds

        rows = []
        for k in self.offload.kernels:
            ep = k.epilogue
            parts = (["bias"] if ep.bias else []) + (["residual"] if ep.residual else []) + \
                [f"shift {ep.shift}{'r' if ep.round else ''}", f"clip[{ep.clip[0]},{ep.clip[1]}]"]
            n = max(samples, 1)
            sec = k.seconds / n
            rows.append({"call": k.site, "layer": k.name, "task": k.task, "kind": k.kind,
                         "knobs": k.knobs, "default": k.default, "cycles": k.cycles // n,
                         "ms": sec * 1e3, "epilogue": "+".join(parts),
                         "roofline": roofline_seconds(k.workload, self.hw, ep) / sec
                         if sec > 0 else 0.0,
                         "bit_exact": k.mismatches == 0, "mismatches": k.mismatches,
                         "max_diff": k.max_diff, "adapted": k.adapted,
                         "sim_wall_s": round(k.wall, 3), "note": k.note})
        return rows

    def per_layer(self, rows: list[dict]) -> list[dict]:
        """The call-site rows grouped by layer (first-call order): the per-layer table
        ``dcoc simulate`` and ``dcoc tune`` print (:func:`dcoc.targets.vta.report.layer_table`)."""
        from dcoc.targets.vta.report import epilogue_label, roofline_seconds

        kern = {k.site: k for k in self.offload.kernels}
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
            g["_bound"] += roofline_seconds(k.workload, self.hw, k.epilogue) * 1e3
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

    def cpu_rows(self) -> list[dict]:
        rows = []
        for t in self.tasks:
            if t.device != "vta":
                why = "first conv: kept in fp32 on the CPU" if t.kind == "conv2d" else \
                    "grouped/depthwise conv: no VTA schedule" if "conv" in t.kind else \
                    "not a VTA layer"
                rows.append({"layer": t.name, "kind": t.kind, "count": t.weight, "reason": why})
        found = {sp.name for sp in self.graph.layers}
        for t in self.tasks:
            if t.device == "vta" and t.name not in found:
                rows.append({"layer": t.name, "kind": t.kind, "count": t.weight,
                             "reason": "fell back: its graph pattern could not be quantized "
                                       "(float on the CPU)"})
        counts: dict = {}
        for name, kind, reason in self.offload.refused:
            key = (name, kind, reason)
            counts[key] = counts.get(key, 0) + 1
        for (name, kind, reason), c in counts.items():
            rows.append({"layer": name, "kind": kind, "count": c,
                         "reason": f"fell back to the CPU (int8 through TVM): {reason}"})
        for op in getattr(self.tasks, "cpu_ops", []) or []:
            rows.append({"layer": op.name, "kind": "other", "count": op.weight,
                         "reason": "host op"})
        return rows

    def quant_rows(self) -> list[dict]:
        return [{"layer": q.spec.name, "kind": q.spec.kind, "e_in": q.e_x, "e_weight": q.e_w,
                 "e_out": q.e_y, "shift": q.shift, "clip": [q.clip_lo, q.clip_hi],
                 "bias": q.qbias is not None, "residual_shift": q.res_shift
                 if q.spec.residual is not None else None,
                 "absorbed": q.spec.absorbed, "notes": q.notes} for q in self.qlayers]


# ============================================================================ comparison
def _float_outputs(model, samples: list[dict]) -> list[list] | None:
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    so = ort.SessionOptions()
    so.log_severity_level = 3
    src = _ort_source(model)
    sess = ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
    return [[np.asarray(o) for o in sess.run(None, s)] for s in samples]


def _ort_source(model):
    """The ONNX model for ONNX Runtime: the file itself, or (when ``input_shapes``
    changed a static input shape) a copy with those input dims and the inferred shapes
    cleared."""
    import onnx

    declared = {}
    for vi in model.onnx.graph.input:
        dims = vi.type.tensor_type.shape.dim
        declared[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else None for d in dims)
    if all(declared.get(n) == tuple(s) for n, s in model.input_shapes.items()):
        return model.path if model.path else model.onnx.SerializeToString()
    proto = onnx.load(model.path) if model.path else model.onnx
    m = onnx.ModelProto()
    m.CopyFrom(proto)
    for vi in m.graph.input:
        if vi.name in model.input_shapes:
            dims = vi.type.tensor_type.shape.dim
            for d, v in zip(dims, model.input_shapes[vi.name]):
                d.Clear()
                d.dim_value = int(v)
    del m.graph.value_info[:]
    for vo in m.graph.output:
        for d in vo.type.tensor_type.shape.dim:
            d.Clear()
            d.dim_param = "?"
    return m.SerializeToString()


def _cosine(a, b) -> float:
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        return 1.0 if na == nb else 0.0
    return float(a @ b / (na * nb))


def _top1(a, b) -> tuple[int, int]:
    a, b = np.asarray(a), np.asarray(b)
    while a.ndim > 1 and a.shape[-1] == 1:  # [N, C, 1, 1] class scores
        a, b = a[..., 0], b[..., 0]
    if a.ndim == 0 or a.shape[-1] < 2:
        return 0, 0
    x = a.reshape(-1, a.shape[-1]).argmax(-1)
    y = b.reshape(-1, b.shape[-1]).argmax(-1)
    return int((x == y).sum()), int(x.size)


# ============================================================================ run
def run(model, hardware=None, schedules=None, inputs=None, *, calibration=None,
        calibration_samples: int = 4, board: str | None = "pynq",
        input_shapes: dict | None = None, seed: int = 0, progress: bool = False,
        compare_float: bool = True) -> RunResult:
    """Run ``model`` quantized to int8 on the VTA simulator; see the module docstring.

    hardware: an HWConfig, a preset/config name, a hardware dict, or a TuneResult (then
        ``schedules`` defaults to its schedules); None: the schedules file's hardware, else
        the pynq preset.
    schedules: ``{task: knobs}``, a TuneResult, or a ``dcoc tune`` JSON file; layers
        without a schedule use the default heuristic.
    inputs: ``{input name: array}`` or an ``.npz`` path; each array is one sample of the
        model's input shape or ``N`` samples stacked on a new leading axis.  None: one
        random sample (with a warning).
    calibration: like ``inputs`` (or a list of them); None: ``calibration_samples`` random
        samples, with a :class:`dcoc.runtime.quantize.CalibrationWarning`.

    Returns a :class:`RunResult`: ``outputs`` (simulator run; one array per model
    output, samples stacked when several), ``bit_exact`` vs the integer reference,
    ``cosine`` / ``top1_agreement`` vs ONNX Runtime's float outputs, ``latency_ms`` (the
    simulated accelerator time of one inference), per-layer ``layers`` and
    ``cpu_layers``.
    """
    if hardware is not None and hasattr(hardware, "schedules") and hasattr(hardware, "hardware"):
        if schedules is None:
            schedules = hardware
        hardware = hardware.hardware
    if input_shapes is None:  # tuned at another input size: the task names depend on it
        input_shapes = result_input_shapes(schedules)
    t_all = time.perf_counter()
    if inputs is not None:  # a missing/corrupt file fails before the model is loaded
        inputs = load_inputs(inputs)
    if calibration is not None and not isinstance(calibration, (dict, list)):
        calibration = load_inputs(calibration, "--calibration")
    if isinstance(calibration, list) and not calibration:
        raise InputError("calibration is an empty list: give calibration inputs, or None for "
                         "random ones")
    if calibration is None:
        from dcoc.runtime.quantize import calibration_inputs

        calibration_inputs({}, {}, calibration_samples, 0, warn=False)  # checks the count
    if progress:
        print(f"dcoc: loading {model}", file=sys.stderr)
    s = Session(model, hardware, schedules, calibration=calibration,
                calibration_samples=calibration_samples, board=board,
                input_shapes=input_shapes, seed=seed, build=False)
    if inputs is not None:  # check them before the expensive part
        samples = s.samples(inputs)
        from dcoc.runtime.quantize import check_values

        check_values(samples, "--inputs")
        arrays = load_inputs(inputs)
        stacked = any(arrays[n].ndim == len(s.shapes[n]) + 1 for n in s.names)
    if progress:
        print("dcoc: calibrating, quantizing and compiling (partition + offload + tvm.compile)",
              file=sys.stderr)
    s.build()
    if inputs is None:
        from dcoc.runtime.quantize import calibration_inputs

        warnings.warn("no --inputs given: running one random input", UserWarning, stacklevel=2)
        samples = calibration_inputs(s.shapes, s.dtypes, 1, seed + 1,
                                     int_input_high(s.model.onnx, set(s.names)), warn=False)
        stacked = False
        s.notes.append("ran one random input (no --inputs)")
    n_k = len(s.offload.kernels)
    bar = _Progress(2 * n_k * len(samples), progress)
    s.offload.progress = bar
    sim_out, ref_out = [], []
    try:
        t0 = time.perf_counter()
        s.offload.reset()
        for smp in samples:
            sim_out.append(s.infer(smp, "sim"))
        s.wall["simulate"] = time.perf_counter() - t0
        rows = s.layer_rows(len(samples))
        t0 = time.perf_counter()
        for smp in samples:
            ref_out.append(s.infer(smp, "ref"))
        s.wall["reference"] = time.perf_counter() - t0
    finally:
        bar.close()
        s.offload.progress = None
    mism = sum(int(np.sum(a != b)) + (0 if a.shape == b.shape else 1)
               for so, ro in zip(sim_out, ref_out) for a, b in zip(so, ro))
    fk = s.offload.first_mismatch
    first = None if fk is None else {"layer": fk.name, "call": fk.site,
                                     "mismatches": fk.mismatches, "max_diff": fk.max_diff}
    flt = None
    cos = top1 = None
    if compare_float:
        t0 = time.perf_counter()
        flt = _float_outputs(s.model, samples)
        s.wall["onnxruntime"] = time.perf_counter() - t0
        if flt is None:
            s.notes.append("onnxruntime is not installed: no float comparison")
        else:
            cos = float(np.mean([_cosine(np.concatenate([o.ravel() for o in so]),
                                         np.concatenate([o.ravel() for o in fo]))
                                 for so, fo in zip(sim_out, flt)]))
            agree = total = 0
            for so, fo in zip(sim_out, flt):
                a, t = _top1(so[0], fo[0])
                agree, total = agree + a, total + t
            top1 = agree / total if total else None
    s.wall["total"] = time.perf_counter() - t_all

    def stack(outs):
        if not outs:
            return []
        if stacked:
            return [_stack_samples([o[i] for o in outs], i) for i in range(len(outs[0]))]
        return list(outs[0])

    from dcoc.targets.vta.report import model_seconds

    per_layer = s.per_layer(rows)
    latency = model_seconds((g["count"], g["ms"]) for g in per_layer)
    adapted = sorted({r["layer"] for r in rows if r["adapted"]})
    return RunResult(
        model=s.model.name, hardware=s.hw.name, outputs=stack(sim_out),
        reference_outputs=stack(ref_out), float_outputs=stack(flt) if flt else None,
        bit_exact=mism == 0 and first is None, mismatches=mism, cosine=cos,
        top1_agreement=top1,
        latency_ms=latency if math.isfinite(latency) else float("nan"), layers=rows,
        cpu_layers=s.cpu_rows(), samples=len(samples), quantization=s.quant_rows(),
        wall_seconds=dict(s.wall), notes=list(s.notes), per_layer=per_layer,
        first_mismatch=first, adapted=adapted)


def _stack_samples(arrays: list, index: int) -> np.ndarray:
    """One output of several samples stacked on a new leading axis; a one-line
    InputError when its shape depends on the data (e.g. after NonZero)."""
    shapes = {tuple(np.shape(a)) for a in arrays}
    if len(shapes) > 1:
        shown = ", ".join("x".join(map(str, s)) or "scalar" for s in sorted(shapes)[:3])
        raise InputError(f"output {index} of the model has a size that depends on the input data "
                         f"(shapes {shown} across the samples), so the samples cannot be stacked: "
                         "run them one at a time (one sample per --inputs file)")
    return np.stack(arrays)


def vta_runner(result, calibration=None, input_shapes: dict | None = None):
    """A callable ``inputs -> [outputs]`` for a VTA :class:`~dcoc.results.result.TuneResult`:
    the quantized model with the result's schedules on its hardware (simulator backend);
    what ``TuneResult.run`` uses."""
    if input_shapes is None:
        input_shapes = getattr(result, "input_shapes", None)
    s = Session(getattr(result, "model_path", None) or result.model, result.hardware, result,
                calibration=calibration, board=result.board or "pynq", input_shapes=input_shapes)

    def runner(inputs: dict) -> list:
        samples = split_samples(load_inputs(inputs), s.shapes, s.dtypes, "inputs")
        from dcoc.runtime.quantize import check_values

        check_values(samples, "inputs")
        outs = [s.infer(smp, "sim") for smp in samples]
        if len(samples) == 1 and all(np.asarray(inputs[n]).shape == tuple(s.shapes[n])
                                     for n in s.names):
            return outs[0]
        return [_stack_samples([o[i] for o in outs], i) for i in range(len(outs[0]))]

    runner.session = s
    return runner
