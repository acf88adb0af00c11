"""Model-level VTA timing: per-layer cycles and end-to-end accelerator time.

Given the tasks of a model (``dcoc.tasks.Task``: conv2d / dense / batch_matmul workloads
marked ``device="vta"`` plus the layers that stay on the CPU), an :class:`HWConfig` and
optional knobs per task (missing -> :func:`dcoc.vta.default_knobs`), every VTA task is
simulated once and weighted by its number of occurrences.  Tasks VTA cannot run (device
``cpu``: the fp32 stem conv, depthwise / grouped / dilated convs; kind ``other``:
pooling, softmax ...) are listed as CPU layers with their counts; their time is not
modelled (the VTA runtime runs them on the ARM host).

The epilogue of every VTA layer is the requantization (bias add, shift, clip) because the
frontend folds BatchNorm/bias and the activation into the conv task; ``batch_matmul``
runs as ``batch`` consecutive dense invocations.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from dcoc.errors import KnobError, WorkloadError
from dcoc.vta.hardware import HWConfig
from dcoc.vta.layer import default_knobs, simulate
from dcoc.vta.simulator import TimingParams
from dcoc.vta.workloads import Epilogue, workload_from_task

__all__ = ["LayerReport", "ModelReport", "simulate_model", "MODEL_EPILOGUE"]

#: epilogue assumed for model layers: folded-BN bias add, shift 8, clip [0, 127]
MODEL_EPILOGUE = Epilogue(bias=True)


@dataclass
class LayerReport:
    """One VTA task: its schedule and simulated timing (per occurrence and in total)."""

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

    @property
    def total_seconds(self) -> float:
        """weight x seconds (x batch for batch_matmul)."""
        return self.weight * self.seconds if self.valid else float("inf")

    @property
    def total_cycles(self) -> int:
        return self.weight * (self.cycles or 0)


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
        """End-to-end accelerator time: sum over VTA tasks of weight x time (inf if any
        layer's schedule is invalid)."""
        return sum(layer.total_seconds for layer in self.layers) if self.valid else float("inf")

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
        """The per-layer table printed by ``dcoc simulate``."""
        headers = ["layer", "kind", "count", "cycles", "ms", "total ms", "GOPS", "util",
                   "schedule"]
        rows = []
        for ly in self.layers:
            if ly.valid:
                sched = " ".join(f"{k}={v}" for k, v in (ly.knobs or {}).items())
                if ly.default:
                    sched += " (default)"
                rows.append([ly.name, ly.kind, ly.weight, f"{ly.cycles:,}",
                             f"{ly.seconds * 1e3:.3f}", f"{ly.total_seconds * 1e3:.3f}",
                             f"{ly.gops:.1f}", f"{ly.utilization * 100:.0f}%", sched])
            else:
                rows.append([ly.name, ly.kind, ly.weight, "-", "-", "-", "-", "-",
                             f"invalid: {ly.reason}"])
        out = [f"VTA {self.hw.name} @ {self.hw.freq_mhz:g} MHz, {self.hw.bus_bytes}-byte bus"
               + (f" -- {self.model}" if self.model else ""), _table(headers, rows, {2, 3, 4, 5, 6, 7})]
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
            "layers": [{"name": ly.name, "kind": ly.kind, "weight": ly.weight, "macs": ly.macs,
                        "knobs": ly.knobs, "default": ly.default, "valid": ly.valid,
                        "reason": ly.reason, "cycles": ly.cycles,
                        "seconds": ly.seconds if ly.valid else None, "gops": ly.gops,
                        "utilization": ly.utilization} for ly in self.layers],
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


def simulate_model(tasks: Iterable, hw: HWConfig, knobs: Mapping[str, dict] | None = None, *,
                   cpu_ops: Iterable | None = None, timing: TimingParams | None = None,
                   epilogue: Epilogue | None = MODEL_EPILOGUE) -> ModelReport:
    """Simulate every VTA task of a model; see the module docstring.

    ``tasks``: Task objects (a ``TaskList``'s ``cpu_ops`` are picked up automatically);
    ``knobs``: ``{task.name: knobs}`` -- missing tasks use :func:`default_knobs`.
    Invalid knobs do not raise: the layer is reported ``valid=False`` with the reason.
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
    for t in tasks:
        kind = getattr(t, "kind", "other")
        weight = int(getattr(t, "weight", 1) or 1)
        if getattr(t, "device", "cpu") != "vta":
            why = "fp32 stem / unsupported on VTA" if kind in ("conv2d", "depthwise_conv2d",
                                                              "grouped_conv2d") else "host op"
            if kind == "conv2d":
                why = "kept in fp32 on the CPU (first conv)"
            elif kind in ("depthwise_conv2d", "grouped_conv2d"):
                why = "grouped/depthwise conv: no VTA schedule"
            rep.cpu_layers.append(CpuLayer(t.name, kind, weight, why))
            continue
        try:
            wl, repeats = workload_from_task(t)
        except WorkloadError as exc:
            rep.cpu_layers.append(CpuLayer(t.name, kind, weight, str(exc)))
            continue
        k = knobs.get(t.name)
        is_default = k is None
        if k is None:
            try:
                k = default_knobs(wl, hw)
            except KnobError as exc:
                rep.layers.append(LayerReport(t.name, kind, weight * repeats, wl.macs, None, True,
                                              False, str(exc)))
                continue
        r = simulate(wl, hw, k, epilogue=epilogue, timing=timing)
        rep.layers.append(LayerReport(
            name=t.name, kind=kind, weight=weight * repeats, macs=wl.macs, knobs=dict(k),
            default=is_default, valid=r.valid, reason=r.reason, cycles=r.cycles,
            seconds=r.seconds, gops=r.gops, utilization=r.utilization, repeats=repeats))
    for op in extra_cpu:
        rep.cpu_layers.append(CpuLayer(getattr(op, "name", str(op)), getattr(op, "kind", "other"),
                                       int(getattr(op, "weight", 1) or 1), "host op"))
    return rep
