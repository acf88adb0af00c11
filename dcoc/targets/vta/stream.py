"""VTA instruction-stream building blocks: micro-op kernels and the UOP-SRAM cache, the
per-stage instruction queues with dependence tokens (:class:`InsnStream`, as the
runtime's ``InsnQueue``), and the DMA region helpers.  :mod:`dcoc.targets.vta.compiler` uses
them to lower one operator plan.  The conventions, as TVM's VTA flow has them:

* **Micro-op kernels.**  Like ``FoldUopLoop``: the two outermost non-unit loops of a
  kernel become the GEMM/ALU ``iter_out``/``iter_in`` loops, the remaining loops are
  unrolled into micro-ops.  ALU loops are flattened like ``InjectALUIntrin``.  Kernels are
  cached in the UOP SRAM as the runtime's ring (``UopQueue``): a LOAD UOP is emitted only
  the first time a kernel is used or after it was evicted.
* **DMA.**  Like ``InjectDMAIntrin``: loads of a padded conv input are 2-D (rows x cols)
  with the pad fields, without folding; unpadded transfers are folded to 2-D when the
  region is contiguous enough.  When a region cannot be expressed as one 2-D DMA (e.g.
  ``tile_ci > 1`` with padding, or a store with ``tile_co > 1`` and ``tile_w < OW``) TVM's
  pass rejects the schedule; dcoc instead emits one 2-D DMA per outer slice
  (documented deviation; the knob space stays the full AutoTVM space).
* **Dependency tokens.**  The push/pop placement of TVM's ``CoProcSync`` for this loop
  structure, turned into instruction flags and NOPs exactly as ``runtime.cc``'s
  ``InsnQueue`` does (``DepPush`` sets the flag on the stage's last instruction when it can,
  else emits a NOP; ``DepPop`` is deferred to the stage's next instruction; ``Synchronize``
  makes FINISH wait for the last load and store).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

from dcoc.targets.vta.hardware import LOOP_ITER_BITS, HWConfig
from dcoc.targets.vta.isa import (
    ALU_ADD,
    ALU_MAX,
    ALU_MIN,
    ALU_SHR,
    COMPUTE_STAGE,
    LOAD_STAGE,
    MEM_INP,
    MEM_OUT,
    MEM_UOP,
    MEM_WGT,
    OP_LOAD,
    OP_STORE,
    STORE_STAGE,
    AluInsn,
    FinishInsn,
    GemmInsn,
    MemInsn,
    Uop,
    stage_of,
)

__all__ = ["PlanError", "UopKernel", "UopCache", "InsnStream", "fold_gemm_loops",
           "flatten_alu_loops", "alu_kernel"]

L, C, S = LOAD_STAGE, COMPUTE_STAGE, STORE_STAGE

_ALU_OP = {"add": ALU_ADD, "shr": ALU_SHR, "min": ALU_MIN, "max": ALU_MAX}
_MAX_ITER = (1 << LOOP_ITER_BITS) - 1


class PlanError(Exception):
    """A knob setting that cannot be compiled for the config (reason in ``str(exc)``)."""


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


# ============================================================================ uop kernels
@dataclass(eq=False)
class UopKernel:
    """One micro-op kernel: up to two folded loops (extent, dst, src, wgt factors) + uops.

    ``key`` identifies the kernel (call site and thread) for the runtime's uop cache.
    """

    key: tuple
    loops: list            # [(extent, dst_factor, src_factor, wgt_factor)], outer first
    uops: list             # [Uop]
    kind: str = "gemm"     # "gemm" | "alu"
    reset: int = 0
    alu_opcode: int = 0
    use_imm: int = 0
    imm: int = 0

    @property
    def size(self) -> int:
        return len(self.uops)


def fold_gemm_loops(loops, base):
    """FoldUopLoop: drop unit loops, fold the two outermost into the uop loop, unroll the rest.

    ``loops``: [(extent, dst_coef, src_coef, wgt_coef)] outer -> inner.
    ``base``: (dst, src, wgt) offsets.  Returns (folded loops, [Uop]).
    """
    loops = [lp for lp in loops if lp[0] > 1]
    folded = loops[:2]
    rest = loops[2:]
    d0, s0, w0 = base
    uops = []
    if rest:
        for idx in itertools.product(*[range(lp[0]) for lp in rest]):
            d, s, w = d0, s0, w0
            for i, lp in zip(idx, rest):
                d += i * lp[1]
                s += i * lp[2]
                w += i * lp[3]
            uops.append(Uop(d, s, w))
    else:
        uops.append(Uop(d0, s0, w0))
    return folded, uops


def flatten_alu_loops(extents, dst_coef, src_coef):
    """InjectALUIntrin's ``_flatten_loop``: merge perfectly nested loops from the inside."""
    ext = [e for e in extents]
    dc = list(dst_coef)
    sc = list(src_coef)
    keep = [i for i, e in enumerate(ext) if e > 1]
    ext = [ext[i] for i in keep]
    dc = [dc[i] for i in keep]
    sc = [sc[i] for i in keep]
    if not ext:
        return []
    out = []
    vext, vdst, vsrc = ext[-1], dc[-1], sc[-1]
    for e, d, s in zip(reversed(ext[:-1]), reversed(dc[:-1]), reversed(sc[:-1])):
        if s == vsrc * vext and d == vdst * vext:
            vext *= e
        else:
            out.append((vext, vdst, vsrc))
            vext, vdst, vsrc = e, d, s
    out.append((vext, vdst, vsrc))
    out.reverse()
    return out


def alu_kernel(key, opname, imm, extents, dst_coef, src_coef, dst_base, src_base) -> UopKernel:
    loops = flatten_alu_loops(extents, dst_coef, src_coef)
    if len(loops) > 2:
        raise PlanError("ALU loop nest cannot be folded into two loop levels")
    use_imm = opname not in ("bias", "residual")
    return UopKernel(key=key, loops=[(e, d, s, 0) for e, d, s in loops],
                     uops=[Uop(dst_base, dst_base if use_imm else src_base, 0)], kind="alu",
                     alu_opcode=ALU_ADD if not use_imm else _ALU_OP[opname],
                     use_imm=int(use_imm), imm=int(imm or 0))


# ============================================================================ runtime emulation
class UopCache:
    """The runtime's ``UopQueue`` ring cache of micro-op kernels in UOP SRAM."""

    def __init__(self, depth: int):
        self.depth = depth
        self.cache: list = []          # kernel keys in SRAM order
        self.pos: dict = {}            # key -> (begin, end); (0, 0) = invalid
        self.sram_begin = 0
        self.sram_end = 0
        self.cache_idx = 0

    def state(self) -> tuple:
        return (self.sram_begin, self.sram_end, self.cache_idx, tuple(self.cache),
                tuple(sorted((k, v) for k, v in self.pos.items() if v[0] != v[1])))

    def set_state(self, st: tuple) -> None:
        self.sram_begin, self.sram_end, self.cache_idx, cache, pos = st
        self.cache = list(cache)
        self.pos = dict(pos)

    def cached(self, key) -> bool:
        p = self.pos.get(key)
        return p is not None and p[0] != p[1]

    def push(self, key, n: int) -> tuple[int, int] | None:
        """Place a kernel; returns the SRAM range to load, or None when it is resident."""
        if self.cached(key):
            return None
        if n > self.depth:
            raise PlanError(f"micro-op kernel of {n} uops exceeds the uop buffer ({self.depth})")
        if self.sram_end + n > self.depth:
            self.cache_idx = 0
            self.sram_begin = 0
            self.sram_end = n
            begin = 0
        else:
            begin = self.sram_end
            self.sram_end += n
        evict_begin = self.cache_idx
        while self.cache_idx < len(self.cache):
            k = self.cache[self.cache_idx]
            if self.pos[k][0] >= self.sram_end:
                break
            self.pos[k] = (0, 0)
            self.cache_idx += 1
        self.pos[key] = (begin, self.sram_end)
        self.cache.insert(self.cache_idx, key)
        del self.cache[evict_begin:self.cache_idx]
        self.cache_idx = evict_begin + 1
        rng = (self.sram_begin, self.sram_end)
        self.sram_begin = self.sram_end
        return rng


class InsnStream:
    """Emulation of ``runtime.cc``'s ``InsnQueue`` (+ ``UopQueue``): builds the instruction
    list with dependency flags, NOPs and micro-op loads."""

    def __init__(self, hw: HWConfig, kernel_dram: dict | None = None):
        self.hw = hw
        self.insns: list = []
        self.pend_prev = [0, 0, 0, 0]
        self.pend_next = [0, 0, 0, 0]
        self.uop_cache = UopCache(hw.uop_depth)
        self.kernel_dram = kernel_dram if kernel_dram is not None else {}
        self.kernels: dict = {}
        self.seg_start = 0

    # -- state for segment templates (fast path) ---------------------------------------
    def state(self) -> tuple:
        last = None
        if self.insns:
            li = self.insns[-1]
            last = (stage_of(li), li.push_prev, li.push_next)
        return (tuple(self.pend_prev), tuple(self.pend_next), last, self.uop_cache.state())

    def begin_segment(self) -> int:
        self.seg_start = len(self.insns)
        return self.seg_start

    # -- runtime InsnQueue -------------------------------------------------------------
    def _create(self, insn, stage: int):
        insn.pop_prev = self.pend_prev[stage]
        insn.pop_next = self.pend_next[stage]
        insn.push_prev = 0
        insn.push_next = 0
        self.pend_prev[stage] = 0
        self.pend_next[stage] = 0
        self.insns.append(insn)
        return insn

    def push_noop(self, stage: int, push_prev=0, push_next=0, pop_prev=0, pop_next=0):
        insn = MemInsn(opcode=OP_STORE if stage == S else OP_LOAD,
                       memory_type=MEM_INP if stage == L else MEM_UOP,
                       pop_prev=pop_prev, pop_next=pop_next, push_prev=push_prev,
                       push_next=push_next)
        self.insns.append(insn)

    def commit_pending_pop(self, stage: int):
        if self.pend_prev[stage] or self.pend_next[stage]:
            self.push_noop(stage, pop_prev=self.pend_prev[stage], pop_next=self.pend_next[stage])
            self.pend_prev[stage] = 0
            self.pend_next[stage] = 0

    def dep_pop(self, frm: int, to: int):
        if frm < to:
            if self.pend_prev[to]:
                self.commit_pending_pop(to)
            self.pend_prev[to] = 1
        else:
            if self.pend_next[to]:
                self.commit_pending_pop(to)
            self.pend_next[to] = 1

    def dep_push(self, frm: int, to: int):
        self.commit_pending_pop(frm)
        if self.insns:
            last = self.insns[-1]
            if stage_of(last) == frm:
                if frm < to and not last.push_next:
                    self._check_local(len(self.insns) - 1)
                    last.push_next = 1
                    return
                if frm > to and not last.push_prev:
                    self._check_local(len(self.insns) - 1)
                    last.push_prev = 1
                    return
        if frm < to:
            self.push_noop(frm, push_next=1)
        else:
            self.push_noop(frm, push_prev=1)

    def _check_local(self, idx: int):
        if idx < self.seg_start:  # pragma: no cover - guards the fast path's templates
            raise RuntimeError("dependency flag set on an instruction of a previous segment")

    def synchronize(self):
        self.dep_push(S, C)
        self.dep_push(L, C)
        self.dep_pop(S, C)
        self.dep_pop(L, C)
        self.commit_pending_pop(C)
        self._create(FinishInsn(), C)

    # -- operations --------------------------------------------------------------------
    def load(self, memory_type, sram_base, dram_base, y_size, x_size, x_stride,
             y_pad_0=0, y_pad_1=0, x_pad_0=0, x_pad_1=0):
        insn = MemInsn(opcode=OP_LOAD, memory_type=memory_type, sram_base=sram_base,
                       dram_base=dram_base, y_size=y_size, x_size=x_size, x_stride=x_stride,
                       y_pad_0=y_pad_0, y_pad_1=y_pad_1, x_pad_0=x_pad_0, x_pad_1=x_pad_1)
        stage = L if memory_type in (MEM_INP, MEM_WGT) else C
        return self._create(insn, stage)

    def store(self, sram_base, dram_base, y_size, x_size, x_stride):
        insn = MemInsn(opcode=OP_STORE, memory_type=MEM_OUT, sram_base=sram_base,
                       dram_base=dram_base, y_size=y_size, x_size=x_size, x_stride=x_stride)
        return self._create(insn, S)

    def _uop_load(self, k: UopKernel):
        rng = self.uop_cache.push(k.key, k.size)
        if rng is not None:
            if k.key not in self.kernel_dram:
                raise PlanError("internal: kernel without DRAM placement")  # pragma: no cover
            begin, end = rng
            self.load(MEM_UOP, begin, self.kernel_dram[k.key], 1, end - begin, end - begin)
        return self.uop_cache.pos[k.key]

    def run_kernel(self, k: UopKernel):
        """Push a GEMM or ALU op (loading its micro-ops first if not resident)."""
        self.kernels.setdefault(k.key, k)
        begin, end = self._uop_load(k)
        lp = k.loops
        o = lp[0] if len(lp) > 0 else (1, 0, 0, 0)
        i = lp[1] if len(lp) > 1 else (1, 0, 0, 0)
        if k.kind == "gemm":
            insn = GemmInsn(reset_reg=k.reset, uop_bgn=begin, uop_end=end, iter_out=o[0],
                            iter_in=i[0], dst_factor_out=o[1], dst_factor_in=i[1],
                            src_factor_out=o[2], src_factor_in=i[2], wgt_factor_out=o[3],
                            wgt_factor_in=i[3])
        else:
            insn = AluInsn(uop_bgn=begin, uop_end=end, iter_out=o[0], iter_in=i[0],
                           dst_factor_out=o[1], dst_factor_in=i[1], src_factor_out=o[2],
                           src_factor_in=i[2], alu_opcode=k.alu_opcode, use_imm=k.use_imm,
                           imm=k.imm)
        return self._create(insn, C)


# ============================================================================ DMA helpers
def _fold_dims(dims):
    """Merge contiguous (extent, stride) dims (outer -> inner, stride in elements)."""
    dims = [d for d in dims if d[0] > 1] or [(1, 1)]
    out = [list(dims[-1])]
    for ext, stride in reversed(dims[:-1]):
        inner = out[0]
        if stride == inner[0] * inner[1]:
            inner[0] *= ext
        else:
            out.insert(0, [ext, stride])
    return [tuple(d) for d in out]


def _dma_2d(dims, base, fold: bool):
    """Split a region (dims outer->inner; innermost stride 1) into 2-D DMAs.

    Returns a list of (dram_offset, y_size, x_size, x_stride, sram_offset) with the SRAM
    side packed densely.
    """
    if fold:
        fd = _fold_dims(dims)
        if fd[-1][1] == 1 and len(fd) <= 2 and fd[-1][0] <= 0xFFFF:
            if len(fd) == 1:
                return [(base, 1, fd[0][0], fd[0][0], 0)]
            return [(base, fd[0][0], fd[1][0], fd[0][1], 0)]
    # no fold (or not 2-D): the two innermost dims per DMA, loop over the rest
    if len(dims) == 1:
        return [(base, 1, dims[0][0], dims[0][0], 0)]
    y, ys = dims[-2]
    x, _ = dims[-1]
    outer = dims[:-2]
    res = []
    per = y * x
    for n, idx in enumerate(itertools.product(*[range(d[0]) for d in outer])):
        off = base + sum(i * d[1] for i, d in zip(idx, outer))
        res.append((off, y, x, ys, n * per))
    return res


def _span(start: int, length: int, lo_pad: int, extent: int):
    """Window [start, start+length) in padded coordinates of an axis of ``extent`` with
    ``lo_pad`` leading pad -> (pad_before, size, pad_after, first DRAM index)."""
    a = start - lo_pad
    pad0 = min(length, max(0, -a))
    first = max(0, a)
    size = max(0, min(length - pad0, extent - first))
    pad1 = length - pad0 - size
    return pad0, size, pad1, (first if size > 0 else 0)


# ============================================================================ limits
def check_fits(hw: HWConfig, inp: int, wgt: int, acc: int, nctx: int):
    """PlanError unless the per-thread tiles (elements x threads) fit the SRAMs."""
    if inp > hw.inp_depth:
        raise PlanError(f"input buffer overflow: {inp} elements needed ({nctx} thread(s)) > "
                        f"INP depth {hw.inp_depth}")
    if wgt > hw.wgt_depth:
        raise PlanError(f"weight buffer overflow: {wgt} elements needed ({nctx} thread(s)) > "
                        f"WGT depth {hw.wgt_depth}")
    if acc > hw.acc_depth:
        raise PlanError(f"accumulator buffer overflow: {acc} elements needed ({nctx} thread(s)) "
                        f"> ACC depth {hw.acc_depth}")


def check_kernel(k: UopKernel, hw: HWConfig):
    """PlanError unless a micro-op kernel fits the uop cache and its ISA fields."""
    lay = hw.layout
    if k.size > hw.uop_depth:
        raise PlanError(f"micro-op cache overflow: kernel of {k.size} uops > uop buffer "
                        f"{hw.uop_depth}")
    for e, d, s, w in k.loops:
        if e > _MAX_ITER:
            raise PlanError(f"loop extent {e} exceeds the 14-bit iteration field")
        if d >= (1 << lay.log_acc_depth):
            raise PlanError(f"dst factor {d} exceeds its {lay.log_acc_depth}-bit field")
        sbits = lay.log_acc_depth if k.kind == "alu" else lay.log_inp_depth
        if s >= (1 << sbits):
            raise PlanError(f"src factor {s} exceeds its {sbits}-bit field")
        if w >= (1 << lay.log_wgt_depth):
            raise PlanError(f"wgt factor {w} exceeds its {lay.log_wgt_depth}-bit field")


def check_mem(y, x, stride, pads=(0, 0, 0, 0), what="DMA"):
    """PlanError unless a 2-D DMA fits its size, stride and pad fields."""
    if x > 0xFFFF or y > 0xFFFF:
        raise PlanError(f"{what} size {y}x{x} exceeds the 16-bit size field")
    if stride > 0xFFFF:
        raise PlanError(f"{what} stride {stride} exceeds the 16-bit stride field")
    if max(pads) > 15:
        raise PlanError(f"{what} padding {max(pads)} exceeds the 4-bit pad field (max 15)")
