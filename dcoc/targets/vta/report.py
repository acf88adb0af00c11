"""Model-level VTA timing: the model's layers, per-layer cycles and end-to-end time.

One timing model for ``dcoc tune``, ``dcoc simulate`` and ``dcoc run``:

* :func:`model_layers` turns a model's tasks (``dcoc.tasks.Task``: conv2d / dense /
  batch_matmul workloads marked ``device="vta"``) into the layers VTA runs.  A layer is a
  workload *with its fused epilogue* -- bias add (folded bias / BatchNorm), residual add
  (a second int32 accumulator tile DMA'd in), rounding, shift and clip
  (:func:`layer_epilogue`) -- because the epilogue takes ALU time and accumulator space:
  occurrences of one workload that differ in it (ResNet's residual and plain convs) are
  separate layers, tuned separately (names: the task's, plus ``_res`` / ``_nobias``).
* :func:`simulate_model` times every layer once (the tuned knobs, else
  :func:`dcoc.targets.vta.default_knobs`) and :func:`model_seconds` sums count x time: the
  whole-model latency ``dcoc tune`` reports and ``dcoc run`` measures (run times every
  call on the functional simulator, which gives the same cycles).
* :func:`layer_table` is the per-layer table all three print, with a ``roofline``
  column: the layer's bound -- max(compute bound, memory bound),
  :func:`roofline_seconds` -- over its simulated time.

Grouped and depthwise convs run on VTA as grouped conv2d (:mod:`dcoc.targets.vta.grouped`).
Tasks VTA cannot run (device ``cpu``: the fp32 stem conv, dilated convs; kind ``other``:
pooling, softmax ...) are listed as CPU layers with their counts;
their time is not modelled (the VTA runtime runs them on the ARM host).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from dcoc.errors import KnobError, WorkloadError
from dcoc.targets.timing import compute_seconds
from dcoc.targets.timing import model_seconds as _model_seconds
from dcoc.targets.vta.hardware import HWConfig
from dcoc.targets.vta.layer import default_knobs, simulate
from dcoc.targets.vta.simulator import TimingParams
from dcoc.targets.vta.workloads import Conv2DWorkload, Epilogue, workload_from_task
from dcoc.tasks import cpu_reason

__all__ = ["LayerReport", "ModelReport", "ModelLayer", "simulate_model", "model_layers",
           "model_seconds", "layer_epilogue", "layer_table", "roofline_seconds",
           "MODEL_EPILOGUE"]


def layer_epilogue(bias: bool = True, residual: bool = False) -> Epilogue:
    """The ALU epilogue of a quantized model layer (:mod:`dcoc.runtime.quantize`): the bias
    add, the residual add, the rounding add, the shift and the clip (min, max).  Shift and
    clip values do not change the timing; the quantizer's exact values are used by run."""
    return Epilogue(bias=bool(bias), residual=bool(residual), round=True)


#: epilogue of a model layer with a bias and no residual (the most common one)
MODEL_EPILOGUE = layer_epilogue()


@dataclass
class ModelLayer:
    """One layer VTA runs: a task's workload with one epilogue, and how often it runs."""

    name: str
    task: object
    workload: object
    kind: str             # "conv2d" | "dense"
    count: int            # occurrences with this epilogue x repeats (batch_matmul)
    repeats: int
    bias: bool
    residual: bool

    @property
    def epilogue(self) -> Epilogue:
        return layer_epilogue(self.bias, self.residual)


def _variants(task) -> list[tuple[bool, bool, int]]:
    eps = list(getattr(task, "epilogues", None) or [])
    if not eps:
        bias = getattr(task, "kind", "") != "batch_matmul"
        return [(bias, False, int(getattr(task, "weight", 1) or 1))]
    return [(bool(e["bias"]), bool(e["residual"]), int(e["count"])) for e in eps]


def variant_names(task) -> dict[tuple[bool, bool], str]:
    """``{(bias, residual): layer name}`` of a task's epilogue variants: the task's name
    for the bias-only variant (or the only one), ``_res`` / ``_nobias`` appended to the
    others."""
    vs = [(b, r) for b, r, _ in _variants(task)]
    primary = (True, False) if (True, False) in vs else vs[0]
    out = {}
    for b, r in vs:
        if (b, r) == primary:
            out[(b, r)] = task.name
        else:
            out[(b, r)] = task.name + ("_res" if r else "") + ("" if b else "_nobias")
    return out


def model_layers(tasks: Iterable) -> tuple[list[ModelLayer], list]:
    """``(layers, cpu_tasks)``: the VTA layers of a model's tasks (one per task and
    epilogue, in task order) and the tasks that stay on the CPU (device not ``vta``, or a
    workload VTA cannot run: ``(task, reason)``)."""
    layers, cpu = [], []
    for t in tasks:
        if getattr(t, "device", "cpu") != "vta":
            cpu.append((t, None))
            continue
        try:
            wl, repeats = workload_from_task(t)
        except WorkloadError as exc:
            cpu.append((t, str(exc)))
            continue
        kind = "conv2d" if isinstance(wl, Conv2DWorkload) else "dense"
        names = variant_names(t)
        for b, r, n in _variants(t):
            layers.append(ModelLayer(names[(b, r)], t, wl, kind, n * int(repeats), int(repeats),
                                     b, r))
    return layers, cpu


def find_layer(layers: Iterable[ModelLayer], task_name: str, bias: bool, residual: bool):
    """The layer of task ``task_name`` with this epilogue (None if the model has none)."""
    for ly in layers:
        if ly.task.name == task_name and (ly.bias, ly.residual) == (bool(bias), bool(residual)):
            return ly
    return None


def roofline_seconds(wl, hw: HWConfig, epilogue: Epilogue | None = MODEL_EPILOGUE, *,
                     memory_only: bool = False) -> float:
    """The layer's roofline bound: max(compute bound, memory bound).

    Compute: MACs at the core's peak (BATCH x BLOCK_IN x BLOCK_OUT MACs per cycle) at the
    clock.  Memory: the bytes the layer must move at least -- int8 input, weights and
    output once each, the int32 bias vector and int32 residual tile if the epilogue has
    them -- at the accelerator's memory port (one ``bus_bytes`` beat per cycle, the
    board's AXI width at the clock).
    """
    f = hw.freq_mhz * 1e6
    compute = compute_seconds(wl.macs, hw.macs_per_cycle, hw.freq_mhz)
    if isinstance(wl, Conv2DWorkload):
        n_in = wl.batch * wl.in_channels * wl.height * wl.width
        n_w = math.prod(wl.weight_shape)
        n_out = wl.batch * wl.out_channels * wl.out_height * wl.out_width
        co = wl.out_channels
    else:
        n_in = wl.batch * wl.in_features
        n_w = wl.out_features * wl.in_features
        n_out = wl.batch * wl.out_features
        co = wl.out_features
    nbytes = (n_in * hw.inp_width + n_w * hw.wgt_width + n_out * hw.inp_width) / 8
    if epilogue is not None and epilogue.bias:
        nbytes += co * hw.acc_width / 8
    if epilogue is not None and epilogue.residual:
        nbytes += n_out * hw.acc_width / 8
    memory = nbytes / (hw.bus_bytes * f)
    return memory if memory_only else max(compute, memory)


def epilogue_label(ep: Epilogue | None) -> str:
    """``bias+residual+round+shift+clip`` (the ops an epilogue has)."""
    if ep is None:
        return "none"
    parts = [n for n, on in (("bias", ep.bias), ("residual", ep.residual), ("round", ep.round),
                             ("shift", ep.shift is not None), ("clip", ep.clip is not None)) if on]
    return "+".join(parts) or "none"


@dataclass
class LayerReport:
    """One VTA layer: its schedule and simulated timing (per occurrence and in total)."""

    name: str
    kind: str
    weight: int
    macs: int
    knobs: dict | None
    default: bool
    valid: bool
    reason: str | None = None
    cycles: int | None = None
    seconds: float = float("inf")
    gops: float = 0.0
    utilization: float = 0.0
    repeats: int = 1
    roofline: float = 0.0
    epilogue: str = ""
    task: str = ""

    @property
    def total_seconds(self) -> float:
        """weight x seconds (x batch for batch_matmul)."""
        return self.weight * self.seconds if self.valid else float("inf")

    @property
    def total_cycles(self) -> int:
        return self.weight * (self.cycles or 0)

    def row(self) -> dict:
        """The row of :func:`layer_table`."""
        return {"layer": self.name, "kind": self.kind, "count": self.weight,
                "cycles": self.cycles if self.valid else None,
                "ms": self.seconds * 1e3 if self.valid else None,
                "total_ms": self.total_seconds * 1e3 if self.valid else None,
                "gops": self.gops if self.valid else None,
                "roofline": self.roofline if self.valid else None, "epilogue": self.epilogue,
                "knobs": self.knobs, "default": self.default,
                "note": None if self.valid else f"invalid: {self.reason}"}


def model_seconds(layers: Iterable) -> float:
    """Whole-model accelerator time: the sum over layers of count x seconds per run (inf
    when a layer has no valid schedule).  ``layers``: :class:`LayerReport` objects or
    ``(count, seconds)`` pairs (:func:`dcoc.targets.timing.model_seconds`).  What ``dcoc
    tune`` reports and ``dcoc run`` measures."""
    return _model_seconds((ly.weight, ly.seconds if ly.valid else float("inf"))
                          if isinstance(ly, LayerReport) else ly for ly in layers)


def layer_table(rows: list[dict]) -> str:
    """The per-layer table of ``dcoc simulate``, ``dcoc tune`` and ``dcoc run``: layer,
    kind, count, cycles and ms per run, total ms, GOPS, roofline (fraction of the layer's
    compute/bandwidth bound reached), epilogue, schedule.  ``rows``: dicts with those keys
    (``cycles``/``ms`` None: invalid; ``note`` is appended to the schedule)."""
    headers = ["layer", "kind", "count", "cycles", "ms", "total ms", "GOPS", "roofline",
               "epilogue", "schedule"]
    out = []
    for r in rows:
        sched = " ".join(f"{k}={v}" for k, v in (r.get("knobs") or {}).items())
        if r.get("default"):
            sched += " (default)"
        if r.get("note"):
            sched = (sched + " " if sched and r["cycles"] is not None else "") + \
                (f"({r['note']})" if r["cycles"] is not None else r["note"])
        if r.get("cycles") is None:
            out.append([r["layer"], r["kind"], r["count"], "-", "-", "-", "-", "-",
                        r.get("epilogue", ""), sched])
            continue
        out.append([r["layer"], r["kind"], r["count"], f"{r['cycles']:,}", f"{r['ms']:.3f}",
                    f"{r['total_ms']:.3f}", f"{r['gops']:.1f}", f"{r['roofline'] * 100:.0f}%",
                    r.get("epilogue", ""), sched])
    return _table(headers, out, {2, 3, 4, 5, 6, 7})


@dataclass
class CpuLayer:
    """A layer that stays on the CPU (not modelled): name, kind and occurrence count."""

    name: str
    kind: str
    count: int
    reason: str = ""


@dataclass
class ModelReport:
    """Per-layer VTA timing, CPU layers, and end-to-end accelerator time."""

    hw: HWConfig
    layers: list = field(default_factory=list)
    cpu_layers: list = field(default_factory=list)
    model: str = ""

    @property
    def valid(self) -> bool:
        return all(layer.valid for layer in self.layers)

    @property
    def total_seconds(self) -> float:
        """End-to-end accelerator time (:func:`model_seconds`; inf if any layer's schedule
        is invalid)."""
        return model_seconds(self.layers) if self.valid else float("inf")

    @property
    def total_cycles(self) -> int:
        return sum(layer.total_cycles for layer in self.layers)

    @property
    def total_macs(self) -> int:
        return sum(layer.weight * layer.macs for layer in self.layers)

    @property
    def gops(self) -> float:
        t = self.total_seconds
        return 2.0 * self.total_macs / t / 1e9 if t and math.isfinite(t) else 0.0

    @property
    def cpu_count(self) -> int:
        return sum(c.count for c in self.cpu_layers)

    def table(self) -> str:
        """The per-layer table printed by ``dcoc simulate`` (:func:`layer_table`)."""
        out = [f"VTA {self.hw.name} @ {self.hw.freq_mhz:g} MHz, {self.hw.bus_bytes}-byte bus"
               + (f" -- {self.model}" if self.model else ""),
               layer_table([ly.row() for ly in self.layers])]
        tot = self.total_seconds
        out.append("")
        if math.isfinite(tot):
            out.append(f"accelerator total: {self.total_cycles:,} cycles = {tot * 1e3:.3f} ms "
                       f"({sum(ly.weight for ly in self.layers)} layer runs, {self.gops:.1f} GOPS)")
        else:
            out.append("accelerator total: n/a (some schedules are invalid)")
        if self.cpu_layers:
            out.append("")
            out.append(f"CPU layers (not on VTA, time not modelled): {self.cpu_count} in total")
            out.append(_table(["layer", "kind", "count", "why"],
                              [[c.name, c.kind, c.count, c.reason] for c in self.cpu_layers],
                              {2}))
        return "\n".join(out)

    def as_dict(self) -> dict:
        return {
            "hw": self.hw.name, "model": self.model,
            "total_seconds": self.total_seconds if math.isfinite(self.total_seconds) else None,
            "total_cycles": self.total_cycles,
            "layers": [{"name": ly.name, "task": ly.task, "kind": ly.kind, "weight": ly.weight,
                        "macs": ly.macs, "epilogue": ly.epilogue, "knobs": ly.knobs,
                        "default": ly.default, "valid": ly.valid, "reason": ly.reason,
                        "cycles": ly.cycles, "seconds": ly.seconds if ly.valid else None,
                        "gops": ly.gops, "utilization": ly.utilization,
                        "roofline": ly.roofline} for ly in self.layers],
            "cpu_layers": [{"name": c.name, "kind": c.kind, "count": c.count, "reason": c.reason}
                           for c in self.cpu_layers],
        }


def _table(headers, rows, right=None) -> str:
    right = right or set()
    cells = [[str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def line(vals):
        return "  ".join(v.rjust(w) if i in right else v.ljust(w)
                         for i, (v, w) in enumerate(zip(vals, widths))).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in cells])



def layer_report(ml: ModelLayer, hw: HWConfig, knobs: dict | None, *,
                 timing: TimingParams | None = None) -> LayerReport:
    """Simulate one model layer with ``knobs`` (None: :func:`default_knobs` for its
    epilogue)."""
    is_default = knobs is None
    ep = ml.epilogue
    if knobs is None:
        try:
            knobs = default_knobs(ml.workload, hw, epilogue=ep)
        except KnobError as exc:
            return LayerReport(ml.name, ml.kind, ml.count, ml.workload.macs, None, True, False,
                               str(exc), epilogue=epilogue_label(ep), task=ml.task.name)
    r = simulate(ml.workload, hw, knobs, epilogue=ep, timing=timing)
    roof = roofline_seconds(ml.workload, hw, ep) / r.seconds if r.valid and r.seconds else 0.0
    return LayerReport(
        name=ml.name, kind=ml.kind, weight=ml.count, macs=ml.workload.macs, knobs=dict(knobs),
        default=is_default, valid=r.valid, reason=r.reason, cycles=r.cycles,
        seconds=r.seconds, gops=r.gops, utilization=r.utilization, repeats=ml.repeats,
        roofline=roof, epilogue=epilogue_label(ep), task=ml.task.name)


def simulate_model(tasks: Iterable, hw: HWConfig, knobs: Mapping[str, dict] | None = None, *,
                   cpu_ops: Iterable | None = None,
                   timing: TimingParams | None = None) -> ModelReport:
    """Simulate every VTA layer of a model (:func:`model_layers`); see the module docstring.

    ``tasks``: Task objects (a ``TaskList``'s ``cpu_ops`` are picked up automatically);
    ``knobs``: ``{layer name: knobs}`` (a ``dcoc tune`` result's ``schedules``; a task's
    name also covers its variants that have no entry) -- missing layers use
    :func:`default_knobs`.  Invalid knobs do not raise: the layer is reported
    ``valid=False`` with the reason.
    """
    from dcoc.errors import ConfigError

    if not all(hasattr(hw, a) for a in ("batch", "block_in", "block_out", "freq_mhz")):
        raise ConfigError(f"simulate_model: hw must be an HWConfig, got {type(hw).__name__}")
    if isinstance(tasks, (str, bytes)) or not hasattr(tasks, "__iter__"):
        raise WorkloadError(f"simulate_model: tasks must be a list of tasks (e.g. from "
                            f"tvm_plugin.frontend.model_tasks), got {type(tasks).__name__}")
    if knobs is not None and not isinstance(knobs, Mapping):
        raise WorkloadError(f"simulate_model: knobs must map task names to knob dicts, got "
                            f"{type(knobs).__name__}")
    knobs = dict(knobs or {})
    rep = ModelReport(hw=hw, model=getattr(tasks, "model", "") or "")
    extra_cpu = list(cpu_ops if cpu_ops is not None else getattr(tasks, "cpu_ops", []) or [])
    layers, cpu = model_layers(tasks)
    for t, reason in cpu:
        rep.cpu_layers.append(CpuLayer(t.name, getattr(t, "kind", "other"),
                                       int(getattr(t, "weight", 1) or 1), reason or cpu_reason(t)))
    for ml in layers:
        k = knobs.get(ml.name, knobs.get(ml.task.name))
        rep.layers.append(layer_report(ml, hw, k, timing=timing))
    for op in extra_cpu:
        rep.cpu_layers.append(CpuLayer(getattr(op, "name", str(op)), getattr(op, "kind", "other"),
                                       int(getattr(op, "weight", 1) or 1), "host op"))
    return rep
