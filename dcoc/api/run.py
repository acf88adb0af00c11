"""``dcoc.run``: execute a whole quantized model on the tuned accelerator.

Pipeline (``docs/run.md``)::

    ONNX model --tvm_plugin.frontend.load--> Relax (float)
      --tvm_plugin.relax_quantize.find_layers--> the layers VTA runs (+ absorbed epilogues)
      --calibrate (float TVM run, calibration inputs)--> ranges
      --dcoc.runtime.quantize.quantize_layers--> power-of-two int8 parameters
      --tvm_plugin.relax_quantize.rewrite--> integer Relax module
      --tvm_plugin.byoc.build--> FuseOpsByPattern + offload to packed functions + tvm.compile
      => one executable: CPU operators on llvm, each VTA layer on the dcoc simulator

This module is the API floor's side of ``dcoc run``: it drives :mod:`tvm_plugin` and hands
it plain data (a task lookup, the layer record type, :class:`~tvm_plugin.relax_quantize.IntLayer`
parameters, the kernel factory of :class:`dcoc.runtime.offload.Offload`); everything it
reports comes from :mod:`dcoc.runtime` (numpy only).

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

:func:`vta_runner` is what ``TuneResult.run`` finds for VTA through
:data:`dcoc.targets.registry.RUNNERS`.
"""
from __future__ import annotations

import math
import sys
import time
import warnings

import numpy as np

from dcoc.api.checks import check_int, one_line_keywords
from dcoc.errors import ConfigError
from dcoc.runtime import report
from dcoc.runtime.compare import float_agreement, float_outputs, stack_samples
from dcoc.runtime.inputs import (
    InputError,
    int_input_high,
    load_inputs,
    load_schedules,
    resolve_hw,
    result_input_shapes,
    split_samples,
)
from dcoc.runtime.result import RunResult

__all__ = ["run", "RunResult", "RunSession", "vta_runner"]


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


class RunSession:
    """A model quantized and compiled for one hardware config and schedule set.

    ``RunSession(model, hw, schedules, calibration=..., ...)`` loads, calibrates, quantizes,
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

    def _calibration_samples(self) -> list[dict]:
        """The calibration samples: the given ones (validated), else random ones (noted)."""
        from dcoc.runtime.quantize import calibration_inputs, check_values

        calibration, calibration_samples, seed = self._cal
        if calibration is None:
            high = int_input_high(self.model.onnx, set(self.names))
            cal = calibration_inputs(self.shapes, self.dtypes, int(calibration_samples), seed,
                                     high, warn=True)
            self.notes.append(f"calibrated on {len(cal)} random input(s) (no --calibration)")
            return cal
        if isinstance(calibration, list):
            cal = []
            for c in calibration:
                cal.extend(split_samples(load_inputs(c, "calibration"), self.shapes,
                                         self.dtypes, "calibration"))
        else:
            cal = split_samples(load_inputs(calibration, "--calibration"), self.shapes,
                                self.dtypes, "--calibration")
        check_values(cal, "calibration", calibration=True)
        return cal

    def build(self) -> None:
        """Calibrate, quantize, partition, offload and compile (once)."""
        from dcoc.runtime.offload import Offload
        from dcoc.runtime.quantize import LayerSpec, quantize_layers
        from tvm_plugin import byoc
        from tvm_plugin import relax_quantize as tq

        if self.exe is not None:
            return
        t0 = time.perf_counter()
        self.graph = tq.find_layers(tq.prepare(self.model.mod), self._task_name, LayerSpec)
        ranges = tq.calibrate(self.graph, self._calibration_samples(), self.names)
        self.qlayers, self.exps = quantize_layers(self.graph.layers, ranges)
        qmod = tq.rewrite(self.graph, [_int_layer(q) for q in self.qlayers], self.exps)
        self.wall["quantize"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        self.offload = Offload(self.hw, self.schedules, self.tasks)
        self.exe = byoc.build(qmod, self.offload.kernel, self.names)
        self.wall["build"] = time.perf_counter() - t0

    def _task_name(self, kind: str, workload: dict) -> str | None:
        """The name of the model's VTA task of this kind and workload (None: none)."""
        from dcoc.runtime.offload import find_task

        task = find_task(self.tasks, kind, workload)
        return None if task is None else task.name

    def infer(self, sample: dict, backend: str = "sim") -> list:
        self.offload.backend = backend
        return self.exe.run(sample)

    # ------------------------------------------------------------------ reports
    def layer_rows(self, samples: int) -> list[dict]:
        """One row per offloaded call site (:func:`dcoc.runtime.report.layer_rows`)."""
        return report.layer_rows(self.offload, samples)

    def per_layer(self, rows: list[dict]) -> list[dict]:
        """The call-site rows grouped by layer (:func:`dcoc.runtime.report.per_layer`)."""
        return report.per_layer(self.offload, rows)

    def cpu_rows(self) -> list[dict]:
        return report.cpu_rows(self.tasks, {sp.name for sp in self.graph.layers}, self.offload)

    def quant_rows(self) -> list[dict]:
        return report.quant_rows(self.qlayers)


def _int_layer(q):
    """The integer parameters :func:`tvm_plugin.relax_quantize.rewrite` emits for one
    :class:`~dcoc.runtime.quantize.QLayer` (plain data)."""
    from tvm_plugin.relax_quantize import IntLayer

    return IntLayer(index=q.spec.index, qweight=q.qweight, qbias=q.qbias, shift=q.shift,
                    round=q.round, clip_lo=q.clip_lo, clip_hi=q.clip_hi, e_y=q.e_y,
                    res_shift=q.res_shift)


# ============================================================================ run
@one_line_keywords
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
    check_int("seed", seed, 0)
    if hardware is not None and hasattr(hardware, "schedules") and hasattr(hardware, "hardware"):
        if schedules is None:
            schedules = hardware
        hardware = hardware.hardware
    if input_shapes is None:  # tuned at another input size: the task names depend on it
        input_shapes = result_input_shapes(schedules)
    t_all = time.perf_counter()
    inputs, calibration = _read_inputs(inputs, calibration, calibration_samples)
    if progress:
        print(f"dcoc: loading {model}", file=sys.stderr)
    s = RunSession(model, hardware, schedules, calibration=calibration,
                   calibration_samples=calibration_samples, board=board,
                   input_shapes=input_shapes, seed=seed, build=False)
    if inputs is not None:  # check them before the expensive part
        samples, stacked = _given_samples(s, inputs)
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
    sim_out, ref_out, rows = _execute(s, samples, progress)
    flt, cos, top1 = _compare_float(s, samples, sim_out) if compare_float else (None, None, None)
    s.wall["total"] = time.perf_counter() - t_all
    return _result(s, samples, stacked, rows, sim_out, ref_out, flt, cos, top1)


def _read_inputs(inputs, calibration, calibration_samples):
    """The inputs and calibration data read and checked before the model is loaded (a
    missing or corrupt file fails first)."""
    if inputs is not None:
        inputs = load_inputs(inputs)
    if calibration is not None and not isinstance(calibration, (dict, list)):
        calibration = load_inputs(calibration, "--calibration")
    if isinstance(calibration, list) and not calibration:
        raise InputError("calibration is an empty list: give calibration inputs, or None for "
                         "random ones")
    if calibration is None:
        from dcoc.runtime.quantize import calibration_inputs

        calibration_inputs({}, {}, calibration_samples, 0, warn=False)  # checks the count
    return inputs, calibration


def _given_samples(s: RunSession, inputs) -> tuple[list[dict], bool]:
    """The validated samples of ``inputs`` and whether they came stacked (N x shape)."""
    from dcoc.runtime.quantize import check_values

    samples = s.samples(inputs)
    check_values(samples, "--inputs")
    arrays = load_inputs(inputs)
    stacked = any(arrays[n].ndim == len(s.shapes[n]) + 1 for n in s.names)
    return samples, stacked


def _execute(s: RunSession, samples: list[dict], progress: bool):
    """Every sample on the simulator, then on the integer reference: ``(simulator outputs,
    reference outputs, the per-call layer rows of the simulator pass)``."""
    bar = _Progress(2 * len(s.offload.kernels) * len(samples), progress)
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
    return sim_out, ref_out, rows


def _compare_float(s: RunSession, samples: list[dict], sim_out: list):
    """``(float outputs, cosine, top-1 agreement)`` vs the float model under ONNX Runtime
    (all None, with a note, when onnxruntime is not installed)."""
    t0 = time.perf_counter()
    flt = float_outputs(s.model, samples)
    s.wall["onnxruntime"] = time.perf_counter() - t0
    if flt is None:
        s.notes.append("onnxruntime is not installed: no float comparison")
        return None, None, None
    cos, top1 = float_agreement(sim_out, flt)
    return flt, cos, top1


def _result(s: RunSession, samples, stacked, rows, sim_out, ref_out, flt, cos, top1) -> RunResult:
    from dcoc.targets.vta.report import model_seconds

    def stack(outs):
        if not outs:
            return []
        if stacked:
            return [stack_samples([o[i] for o in outs], i) for i in range(len(outs[0]))]
        return list(outs[0])

    mism = sum(int(np.sum(a != b)) + (0 if a.shape == b.shape else 1)
               for so, ro in zip(sim_out, ref_out) for a, b in zip(so, ro))
    fk = s.offload.first_mismatch
    first = None if fk is None else {"layer": fk.name, "call": fk.site,
                                     "mismatches": fk.mismatches, "max_diff": fk.max_diff}
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


# ============================================================================ runners
def vta_runner(result, calibration=None, input_shapes: dict | None = None):
    """A callable ``inputs -> [outputs]`` for a VTA :class:`~dcoc.results.result.TuneResult`:
    the quantized model with the result's schedules on its hardware (simulator backend);
    what ``TuneResult.run`` uses (through :data:`dcoc.targets.registry.RUNNERS`)."""
    if input_shapes is None:
        input_shapes = getattr(result, "input_shapes", None)
    s = RunSession(getattr(result, "model_path", None) or result.model, result.hardware, result,
                   calibration=calibration, board=result.board or "pynq",
                   input_shapes=input_shapes)

    def runner(inputs: dict) -> list:
        samples = split_samples(load_inputs(inputs), s.shapes, s.dtypes, "inputs")
        from dcoc.runtime.quantize import check_values

        check_values(samples, "inputs")
        outs = [s.infer(smp, "sim") for smp in samples]
        if len(samples) == 1 and all(np.asarray(inputs[n]).shape == tuple(s.shapes[n])
                                     for n in s.names):
            return outs[0]
        return [stack_samples([o[i] for o in outs], i) for i in range(len(outs[0]))]

    runner.session = s
    return runner

