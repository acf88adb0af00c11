"""The task: one tunable operator workload extracted from a model.

This module is the contract between the TVM frontend (``tvm_plugin.frontend``, which
fills it) and everything downstream (spaces, tuners, the VTA model).  It never imports
tvm: the MetaSchedule task for llvm/cuda targets travels opaquely in ``ms_task``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: operator kinds a task can have
KINDS = ("conv2d", "depthwise_conv2d", "grouped_conv2d", "dense", "batch_matmul", "other")


@dataclass
class Task:
    """One distinct workload and how often it occurs in the model.

    Attributes
    ----------
    name: stable, human-readable name (unique within a model), e.g. ``conv2d_56x56_64x64_k3s1``.
    kind: one of :data:`KINDS`.
    workload: the full workload as plain ints.  conv2d kinds: ``batch, in_channels,
        out_channels, height, width, kernel_h, kernel_w, stride_h, stride_w, pad_top,
        pad_left, pad_bottom, pad_right, dilation_h, dilation_w, groups, out_height,
        out_width``.  dense/batch_matmul: ``batch`` (number of independent matmuls), ``m``,
        ``n``, ``k``.  other: whatever the frontend can tell (may be empty).
    weight: number of occurrences in the model.
    macs: multiply-accumulates of one occurrence (0 if unknown).
    device: ``"vta"`` / ``"cpu"`` for the VTA target, the target kind otherwise.
    epilogues: VTA tasks: the fused epilogue of each occurrence, grouped --
        ``[{"bias": bool, "residual": bool, "count": n}, ...]`` (counts sum to ``weight``);
        occurrences that differ in it are tuned as separate layers
        (:func:`dcoc.targets.vta.report.model_layers`).  Empty: unknown (a bias, no residual).
    ms_task: the MetaSchedule ``ExtractedTask`` (llvm/cuda targets only).
    """

    name: str
    kind: str
    workload: dict[str, int]
    weight: int = 1
    macs: int = 0
    device: str = "cpu"
    epilogues: list = field(default_factory=list, compare=False)
    ms_task: Any = field(default=None, repr=False, compare=False)

    @property
    def flops(self) -> int:
        """FLOPs of one occurrence (2 per MAC)."""
        return 2 * self.macs

    @property
    def key(self) -> str:
        """A workload key stable across runs and models (used by the records database)."""
        items = ",".join(f"{k}={self.workload[k]}" for k in sorted(self.workload))
        return f"{self.kind}({items})"


class TaskList(list):
    """The tasks of one model for one target: a ``list`` of :class:`Task` plus context.

    Attributes
    ----------
    cpu_ops: operators that stay on the CPU outside any task (VTA target only; empty for
        TVM targets, where every operator is a MetaSchedule task).  Each is a
        ``Task(kind="other", device="cpu", name=<op name>, weight=<count>)`` whose workload
        is ``{"elements": <mean output elements per occurrence>}``.
    model: the model's name (zoo name or file stem).
    target: the target it was extracted for (``"vta"``, or the TVM target's JSON).
    """

    def __init__(self, tasks=(), cpu_ops=(), model: str = "", target: str = ""):
        super().__init__(tasks)
        self.cpu_ops: list[Task] = list(cpu_ops)
        self.model = model
        self.target = target

    def by_name(self, name: str) -> Task:
        """The task called ``name`` (KeyError if none)."""
        for t in self:
            if t.name == name:
                return t
        raise KeyError(name)

    def on(self, device: str) -> "TaskList":
        """The tasks that run on ``device`` (e.g. ``"vta"``), same context."""
        return TaskList([t for t in self if t.device == device], self.cpu_ops, self.model,
                        self.target)

    @property
    def total_macs(self) -> int:
        """MACs of the whole model covered by the tasks (sum of ``weight * macs``)."""
        return sum(t.weight * t.macs for t in self)


def cpu_reason(task) -> str:
    """Why the accelerator extraction (``tvm_plugin.frontend``, target ``vta``) leaves
    ``task`` on the CPU (device ``"cpu"``): a conv is dilated (no accelerator schedule) or
    the network's first conv (kept in fp32, as VTA's quantizer does); anything else is a
    host op."""
    if "conv" in getattr(task, "kind", "other"):
        wl = getattr(task, "workload", None) or {}
        if wl.get("dilation_h", 1) != 1 or wl.get("dilation_w", 1) != 1:
            return "dilated conv: no accelerator schedule"
        return "first conv: kept in fp32 on the CPU"
    return "host op"
