"""The DRAM layout of a VTA layer and its instruction program: :func:`compile_program`
turns a plan of :mod:`dcoc.targets.vta.compiler` into the instruction stream, micro-op kernels and
DRAM regions the simulator executes."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dcoc.targets.vta import isa
from dcoc.targets.vta.compiler import ConvPlan
from dcoc.targets.vta.hardware import HWConfig
from dcoc.targets.vta.isa import COMPUTE_STAGE, LOAD_STAGE, STORE_STAGE
from dcoc.targets.vta.stream import (
    InsnStream,
    PlanError,
)

__all__ = ["DramLayout", "Program", "compile_program", "kernel_dram"]

L, C, S = LOAD_STAGE, COMPUTE_STAGE, STORE_STAGE


class DramLayout:
    """Byte placement of the DRAM regions (uop kernels, input, weight, bias, residual, output).

    Every region starts on a boundary that is a multiple of its element size, so the
    instructions' element-unit ``dram_base`` is exact.
    """

    def __init__(self, regions: dict[str, tuple[int, int]], uop_words: int):
        self.regions: dict[str, tuple[int, int, int]] = {}  # name -> (byte base, bytes, elem)
        align = 4096
        for _, eb in regions.values():
            align = max(align, eb)
        pos = align  # keep address 0 unused
        items = [("uop", (uop_words, 4))] + list(regions.items())
        for name, (n, eb) in items:
            pos = -(-pos // align) * align
            self.regions[name] = (pos, n * eb, eb)
            pos += n * eb
        self.size = -(-pos // align) * align

    def elem(self, name: str, index: int) -> int:
        base, _, eb = self.regions[name]
        return base // eb + int(index)

    def check_fields(self) -> None:
        """PlanError when a region's element addresses do not fit the 32-bit dram_base."""
        for name, (base, n, eb) in self.regions.items():
            if (base + n) // eb > 0xFFFFFFFF:
                raise PlanError(f"DRAM region {name} ({n} bytes) exceeds the 32-bit "
                                f"dram_base field")

    def byte_range(self, name: str) -> tuple[int, int]:
        base, n, _ = self.regions[name]
        return base, base + n


@dataclass
class Program:
    """A compiled instruction stream with its DRAM image description.

    ``insns``: instruction objects (see :mod:`dcoc.targets.vta.isa`); ``uop_words``: the micro-op
    kernels as 32-bit words, placed at the ``uop`` DRAM region; ``dram``: the region layout;
    ``plan``: the schedule it was compiled from; ``segments``: index of the first instruction
    of each segment (prologue, one per tile iteration, epilogue).
    """

    hw: HWConfig
    insns: list
    uop_words: np.ndarray
    dram: DramLayout
    plan: object = None
    segments: list = field(default_factory=list)

    def encode(self) -> list[int]:
        """All instructions as 128-bit integers (IsaError if a field does not fit)."""
        return [isa.encode(i, self.hw) for i in self.insns]

    def listing(self, limit: int | None = None) -> str:
        """A human-readable listing of the stream."""
        lines = [f"{n:6d}  {i}" for n, i in enumerate(self.insns[:limit])]
        if limit is not None and len(self.insns) > limit:
            lines.append(f"... ({len(self.insns) - limit} more)")
        return "\n".join(lines)

    def initial_dram(self, arrays: dict[str, np.ndarray] | None = None) -> np.ndarray:
        """The DRAM image (uint8) with uops and the given region contents placed."""
        mem = np.zeros(self.dram.size, np.uint8)
        b0, b1 = self.dram.byte_range("uop")
        mem[b0:b1] = self.uop_words.astype("<u4").view(np.uint8)
        for name, arr in (arrays or {}).items():
            a0, a1 = self.dram.byte_range(name)
            mem[a0:a0 + arr.size] = arr
        return mem


def kernel_dram(plan) -> tuple[dict, np.ndarray]:
    """Place every kernel's uops once in the uop DRAM region (element offsets)."""
    words = []
    offsets = {}
    kernels = []
    if isinstance(plan, ConvPlan):
        for slot in plan.k_reset:
            kernels += [plan.k_reset[slot], plan.k_gemm[slot]] + plan.k_alu[slot]
    else:
        for key in plan.k_reset:
            kernels += [plan.k_reset[key], plan.k_gemm[key]]
        for slot in plan.k_alu:
            kernels += plan.k_alu[slot]
    pos = 0
    for k in kernels:
        offsets[k.key] = pos
        for u in k.uops:
            words.append(isa.encode_uop(u, plan.hw))
        pos += k.size
    return offsets, np.array(words, dtype=np.uint32)


def compile_program(plan) -> Program:
    """Compile the whole instruction stream of a plan (the reference path)."""
    offsets, words = kernel_dram(plan)
    dram = DramLayout(plan.dram_regions(), len(words))
    dram.check_fields()
    base = dram.elem("uop", 0)
    kd = {k: base + v for k, v in offsets.items()}
    q = InsnStream(plan.hw, kd)
    segs = [0]
    plan.emit_prologue(q)
    for it in plan.iterations():
        segs.append(q.begin_segment())
        plan.emit_iteration(q, it, dram)
    segs.append(q.begin_segment())
    plan.emit_epilogue(q)
    return Program(plan.hw, q.insns, words, dram, plan, segs)
