"""Operator compiler: workload + HWConfig + knobs -> a VTA instruction stream.

The stream is what TVM's VTA flow would produce for the TOPI-VTA templates
(``conv2d_packed.vta``, ``dense_packed.vta``), reconstructed from the sources
(vta-reference §2.4, §4.1; ``vta_conv2d.py``, ``transform.py``, ``runtime.cc``):

* **Loop structure (conv2d).**  Output tiles are visited in the order batch, h-outer,
  co-outer, w-outer.  Inside a tile: the GEMM reset ("init") over the tile, then the
  ci-outer reduction loop, whose body DMAs the (padded) input tile and the weight tile
  into INP/WGT SRAM and runs one GEMM over the loops tile_ci, tile_w, KW, KH, tile_co,
  tile_h; then the fused ALU epilogue over the tile and one STORE of the tile.
* **Virtual threads.**  ``cthread`` semantics of ``InjectVirtualThread``: every
  statement (each DMA, GEMM, ALU, dependence push/pop) is replicated per thread and the
  copies are emitted back to back (h-thread major, oc-thread minor) while the loops are
  shared; on-chip buffers are replicated per thread.  A thread whose tile index is out of
  range in an iteration (non-divisible outer extent) emits nothing for that iteration.
* **Groups** (``group_conv2d_packed.vta``, :mod:`dcoc.targets.vta.grouped`).  The same
  loop nest; the reduction runs over one packed group's input blocks, and a tile loads,
  for each packed group its output blocks belong to, that group's input blocks only.

Micro-op kernels, DMA and dependency tokens follow TVM's passes as :mod:`dcoc.targets.vta.stream`
describes; :mod:`dcoc.targets.vta.program` turns a plan into the program (DRAM layout,
instructions, micro-op kernels) the simulator runs.

Schedules that overflow a buffer, the micro-op cache or an ISA field raise
:class:`PlanError` (``simulate`` turns it into ``valid=False`` with the reason).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dcoc.targets.vta.grouped import block_diagonal, conv_groups
from dcoc.targets.vta.hardware import HWConfig
from dcoc.targets.vta.isa import COMPUTE_STAGE, LOAD_STAGE, MEM_ACC, MEM_INP, MEM_WGT, STORE_STAGE
from dcoc.targets.vta.stream import (
    InsnStream,
    PlanError,
    UopKernel,
    _ceil,
    _dma_2d,
    _span,
    alu_kernel,
    check_fits,
    check_kernel,
    check_mem,
    fold_gemm_loops,
)
from dcoc.targets.vta.workloads import DEFAULT_EPILOGUE, Conv2DWorkload, DenseWorkload, Epilogue, check_knobs

__all__ = ["PlanError", "ConvPlan", "DensePlan", "make_plan", "InsnStream", "UopKernel"]

L, C, S = LOAD_STAGE, COMPUTE_STAGE, STORE_STAGE


# ============================================================================ plans
@dataclass
class _Base:
    wl: object
    hw: HWConfig
    knobs: dict
    epilogue: Epilogue | None

    # filled by subclasses
    nctx: int = 0
    contexts: list = field(default_factory=list)

    def alu_list(self):
        return self.epilogue.alu_ops() if self.epilogue is not None else []

    # -- shared by ConvPlan and DensePlan -------------------------------------------------
    def _init_buffers(self, inp_sz: int, wgt_sz: int, acc_sz: int) -> None:
        """Per-thread SRAM footprints (elements) + the epilogue's bias/residual slots; checks
        that ``nctx`` replicas fit (PlanError otherwise)."""
        ops = self.alu_list()
        self.has_bias = any(o[0] == "bias" for o in ops)
        self.has_res = any(o[0] == "residual" for o in ops)
        self.inp_sz, self.wgt_sz, self.acc_sz = inp_sz, wgt_sz, acc_sz
        self.bias_sz = self.tco if self.has_bias else 0
        self.res_sz = self.acc_sz if self.has_res else 0
        n = self.nctx
        check_fits(self.hw, n * self.inp_sz, n * self.wgt_sz,
                    n * (self.acc_sz + self.bias_sz + self.res_sz), n)

    # SRAM bases per buffer slot (thread context)
    def inp_base(self, slot): return slot * self.inp_sz
    def wgt_base(self, slot): return slot * self.wgt_sz
    def acc_base(self, slot): return slot * self.acc_sz
    def bias_base(self, slot): return self.nctx * self.acc_sz + slot * self.bias_sz
    def res_base(self, slot): return self.nctx * (self.acc_sz + self.bias_sz) + slot * self.res_sz

    def _alu_kernels(self, slot: int, ext: list, dc: list, bias_coef: list) -> list:
        """The epilogue's ALU kernels of one context over the ACC tile ``ext`` (strides
        ``dc``); the bias operand is broadcast with ``bias_coef``."""
        a = self.acc_base(slot)
        alus = []
        for n, (op, imm) in enumerate(self.alu_list()):
            if op == "bias":
                sc, sb = bias_coef, self.bias_base(slot)
            elif op == "residual":
                sc, sb = dc, self.res_base(slot)
            else:
                sc, sb = dc, a
            alus.append(alu_kernel(("alu", n, slot), op, imm, ext, dc, sc, a, sb))
        return alus

    def _check_kernels(self) -> None:
        for k in list(self.k_reset.values()) + list(self.k_gemm.values()):
            check_kernel(k, self.hw)
        for ks in self.k_alu.values():
            for k in ks:
                check_kernel(k, self.hw)

    def emit_prologue(self, q: "InsnStream"):
        for _ in self.contexts:
            q.dep_push(S, C)

    def emit_epilogue(self, q: "InsnStream"):
        for _ in self.contexts:
            q.dep_pop(S, C)
        q.synchronize()

    def _emit_bias(self, q, dram, slot, co):
        q.load(MEM_ACC, self.bias_base(slot), dram.elem("bias", co * self.tco), 1, self.tco,
               self.tco)

    def _emit_residual(self, q, dram, slot, dims, base):
        for off, y, x, st, so in _dma_2d(dims, base, True):
            check_mem(y, x, st, what="residual load")
            q.load(MEM_ACC, self.res_base(slot) + so, off, y, x, st)

    def _emit_weights(self, q, dram, slot, dims, base):
        for off, y, x, st, so in _dma_2d(dims, base, True):
            check_mem(y, x, st, what="weight load")
            q.load(MEM_WGT, self.wgt_base(slot) + so, off, y, x, st)

    def _emit_alu(self, q, slot):
        for k in self.k_alu[slot]:
            q.run_kernel(k)

    def _emit_store(self, q, slot, dims, base):
        for off, y, x, st, so in _dma_2d(dims, base, True):
            check_mem(y, x, st, what="store")
            q.store(self.acc_base(slot) + so, off, y, x, st)

    def _pack_bias(self, bias, n_valid: int):
        """Bias DRAM region: int32 per output channel, broadcast over the BATCH rows."""
        B, BO = self.hw.batch, self.hw.block_out
        bb = np.zeros((self.COb * BO,), np.int32)
        if bias is not None:
            bb[:n_valid] = bias
        bb = np.broadcast_to(bb.reshape(self.COb, 1, BO), (self.COb, B, BO))
        return np.ascontiguousarray(bb).view(np.uint8).reshape(-1)


class ConvPlan(_Base):
    """A validated conv2d schedule: geometry, buffer layout, uop kernels, iteration space."""

    kind = "conv2d"

    def __init__(self, wl: Conv2DWorkload, hw: HWConfig, knobs: dict, epilogue: Epilogue | None):
        super().__init__(wl, hw, dict(knobs), epilogue)
        if wl.dilation != (1, 1):
            raise PlanError(f"dilation {wl.dilation} is not supported by VTA conv2d (only 1x1)")
        self.Nb = _ceil(wl.batch, hw.batch)
        self.gb = conv_groups(wl, hw.block_in, hw.block_out)
        # blocks of the layer; kpg / cpg: input / output blocks of one packed group
        self.CIb, self.COb = self.gb.in_blocks, self.gb.out_blocks
        self.kpg, self.cpg = self.gb.ci_blocks, self.gb.co_blocks
        self.H, self.W = wl.height, wl.width
        self.KH, self.KW = wl.kernel
        self.sh, self.sw = wl.stride
        self.pt, self.pl, self.pb, self.pr = wl.padding
        self.OH, self.OW = wl.out_height, wl.out_width
        k = knobs
        self.th, self.tw = int(k["tile_h"]), int(k["tile_w"])
        self.tci, self.tco = int(k["tile_ci"]), int(k["tile_co"])
        self.ocn, self.hn = int(k["oc_nthread"]), int(k["h_nthread"])
        self.in_rows = (self.th - 1) * self.sh + self.KH
        self.in_cols = (self.tw - 1) * self.sw + self.KW
        self.n_h, self.n_w = self.OH // self.th, self.OW // self.tw
        self.n_co, self.n_ci = self.COb // self.tco, self.kpg // self.tci
        self.tg = max(1, self.tco // self.cpg)  # packed groups per tile
        self.n_ho = _ceil(self.n_h, self.hn)
        self.n_coo = _ceil(self.n_co, self.ocn)
        self.nctx = self.hn * self.ocn
        # emission order: h-thread major, oc-thread minor; buffer slot = oc * hn + h
        self.contexts = [(h, oc, oc * self.hn + h) for h in range(self.hn) for oc in range(self.ocn)]
        self.padded = any(wl.padding)
        self._init_buffers(self.tg * self.tci * self.in_rows * self.in_cols,
                           self.tco * self.tci * self.KH * self.KW, self.tco * self.th * self.tw)
        self._build_kernels()

    def _build_kernels(self):
        th, tw, tci, tco = self.th, self.tw, self.tci, self.tco
        KH, KW, ir, ic = self.KH, self.KW, self.in_rows, self.in_cols
        self.k_reset, self.k_gemm, self.k_alu = {}, {}, {}
        for _, _, slot in self.contexts:
            a, i, w = self.acc_base(slot), self.inp_base(slot), self.wgt_base(slot)
            loops = [(tw, 1, 0, 0), (tco, th * tw, 0, 0), (th, tw, 0, 0)]
            f, u = fold_gemm_loops(loops, (a, 0, 0))
            self.k_reset[slot] = UopKernel(("reset", slot), f, u, "gemm", reset=1)
            # output blocks: packed groups of the tile (own input blocks) x blocks per group
            cpg = min(tco, self.cpg)
            loops = [(tci, 0, ir * ic, KH * KW), (tw, 1, self.sw, 0), (KW, 0, 1, 1), (KH, 0, ic, KW),
                     (self.tg, cpg * th * tw, tci * ir * ic, cpg * tci * KH * KW),
                     (cpg, th * tw, 0, tci * KH * KW), (th, tw, self.sh * ic, 0)]
            f, u = fold_gemm_loops(loops, (a, i, w))
            self.k_gemm[slot] = UopKernel(("gemm", slot), f, u, "gemm")
            self.k_alu[slot] = self._alu_kernels(slot, [tco, th, tw], [th * tw, tw, 1], [1, 0, 0])
        self._check_kernels()

    # -- iteration space -----------------------------------------------------------------
    def strides(self) -> list[int]:
        """Periods (in segments = iteration parts) of the loop nest: ci step, then the tile
        loops w, co-outer, h-outer."""
        p = self.n_parts
        return [1, p, p * self.n_w, p * self.n_w * self.n_coo, p * self.n_w * self.n_coo * self.n_ho]

    def row_geom(self, hi: int):
        return _span(hi * self.th * self.sh, self.in_rows, self.pt, self.H)

    def col_geom(self, wo: int):
        return _span(wo * self.tw * self.sw, self.in_cols, self.pl, self.W)

    def iteration_keys(self) -> np.ndarray:
        """A timing-equivalence key per tile iteration (same key -> same instruction shapes)."""
        hkeys = {}
        hk = np.empty(self.n_ho, dtype=np.int64)
        for ho in range(self.n_ho):
            t = tuple(self.row_geom(ho * self.hn + h)[:3] if ho * self.hn + h < self.n_h else None
                      for h in range(self.hn))
            hk[ho] = hkeys.setdefault(t, len(hkeys))
        ck = np.empty(self.n_coo, dtype=np.int64)
        ckeys = {}
        for coo in range(self.n_coo):
            t = tuple(coo * self.ocn + oc < self.n_co for oc in range(self.ocn))
            ck[coo] = ckeys.setdefault(t, len(ckeys))
        wk = np.empty(self.n_w, dtype=np.int64)
        wkeys = {}
        for wo in range(self.n_w):
            wk[wo] = wkeys.setdefault(self.col_geom(wo)[:3], len(wkeys))
        nc, nw = len(ckeys), len(wkeys)
        key = (hk[:, None, None] * nc + ck[None, :, None]) * nw + wk[None, None, :]
        return np.tile(key.reshape(-1), self.Nb)

    def iterations(self):
        """Yield the iteration indices (b, ho, coo, wo) in program order."""
        for b in range(self.Nb):
            for ho in range(self.n_ho):
                for coo in range(self.n_coo):
                    for wo in range(self.n_w):
                        yield (b, ho, coo, wo)

    def iteration_at(self, idx: int):
        wo = idx % self.n_w
        r = idx // self.n_w
        coo = r % self.n_coo
        r //= self.n_coo
        ho = r % self.n_ho
        b = r // self.n_ho
        return (b, ho, coo, wo)

    # -- emission (emit_prologue / emit_epilogue: _Base) ---------------------------------
    # a tile iteration is emitted in parts (0: tile start, 1..n_ci: reduction steps,
    # n_ci + 1: epilogue + store) so the fast path can also skip periods of the ci loop
    # (without ALU ops the end part would set a flag on the last GEMM of the previous
    # part, so it is merged into the last reduction step)
    @property
    def n_parts(self) -> int:
        return self.n_ci + (2 if self.alu_list() else 1)

    def part_key(self, part: int) -> int:
        if part == 0:
            return 0
        if part == self.n_ci + 1:
            return 2
        return 3 if (part == self.n_ci and not self.alu_list()) else 1

    def _ctx(self, it):
        b, ho, coo, wo = it
        # every thread context takes part in the dependency protocol; a context whose
        # tile is out of range (non-divisible outer extent) pushes/pops its tokens with
        # NOPs, so the FIFO token queues keep pairing each context with itself
        ctx = []
        for h, oc, slot in self.contexts:
            hi, co = ho * self.hn + h, coo * self.ocn + oc
            ctx.append((slot, hi, co, hi < self.n_h and co < self.n_co))
        return ctx

    def emit_iteration(self, q: InsnStream, it, dram):
        for part in range(self.n_parts):
            self.emit_part(q, it, part, dram)

    def emit_part(self, q: InsnStream, it, part: int, dram):
        """Emit one part of a tile iteration (see :attr:`n_parts`)."""
        ctx = self._ctx(it)
        if part == 0:
            self._emit_start(q, it, ctx, dram)
        elif part <= self.n_ci:
            self._emit_ci_step(q, it, ctx, part - 1, dram)
            if part == self.n_ci and not self.alu_list():
                self._emit_end(q, it, ctx, dram)
        else:
            self._emit_end(q, it, ctx, dram)

    def _emit_start(self, q, it, ctx, dram):
        """Tile start: bias / residual ACC loads + GEMM reset, one compute scope per thread."""
        b, ho, coo, wo = it
        th, tw, tco = self.th, self.tw, self.tco
        for slot, hi, co, on in ctx:
            q.dep_pop(S, C)
            if on:
                if self.has_bias:
                    self._emit_bias(q, dram, slot, co)
                if self.has_res:
                    dims = [(tco, self.OH * self.OW), (th, self.OW), (tw, 1)]
                    base = dram.elem("res", ((b * self.COb + co * tco) * self.OH + hi * th)
                                     * self.OW + wo * tw)
                    self._emit_residual(q, dram, slot, dims, base)
                q.run_kernel(self.k_reset[slot])
            q.dep_push(C, L)

    def _emit_ci_step(self, q, it, ctx, kc, dram):
        """One step of the ci-outer reduction loop: per thread the input/weight DMAs, then
        per thread the GEMM."""
        b, ho, coo, wo = it
        cpad0, csz, cpad1, c0 = self.col_geom(wo)
        for slot, hi, co, on in ctx:
            q.dep_pop(C, L)
            if on:
                self._emit_loads(q, dram, slot, b, hi, co, kc, cpad0, csz, cpad1, c0)
            q.dep_push(L, C)
        for slot, hi, co, on in ctx:
            q.dep_pop(L, C)
            if on:
                q.run_kernel(self.k_gemm[slot])
            q.dep_push(C, L)

    def _emit_end(self, q, it, ctx, dram):
        """Tile end: the fused ALU epilogue per thread, then the store per thread."""
        b, ho, coo, wo = it
        th, tw, tco = self.th, self.tw, self.tco
        if self.alu_list():
            for slot, hi, co, on in ctx:
                q.dep_pop(C, L)
            for slot, hi, co, on in ctx:
                if on:
                    self._emit_alu(q, slot)
                q.dep_push(C, S)
        else:
            for slot, hi, co, on in ctx:
                q.dep_push(C, S)
            for slot, hi, co, on in ctx:
                q.dep_pop(C, L)
        for slot, hi, co, on in ctx:
            q.dep_pop(C, S)
            if on:
                dims = [(tco, self.OH * self.OW), (th, self.OW), (tw, 1)]
                base = dram.elem("out", ((b * self.COb + co * tco) * self.OH + hi * th)
                                 * self.OW + wo * tw)
                self._emit_store(q, slot, dims, base)
            q.dep_push(S, C)

    def _emit_loads(self, q, dram, slot, b, hi, co, kc, cpad0, csz, cpad1, c0):
        """The input-tile and weight-tile DMAs of one ci-outer step of one context."""
        rpad0, rsz, rpad1, r0 = self.row_geom(hi)
        tco, tci = self.tco, self.tci
        ci0 = (co * tco) // self.cpg * self.kpg + kc * tci  # first input block of the tile
        if self.padded:
            for j in range(self.tg * tci):
                cib = ci0 + j // tci * self.kpg + j % tci
                sram = self.inp_base(slot) + j * self.in_rows * self.in_cols
                base = dram.elem("inp", ((b * self.CIb + cib) * self.H + r0) * self.W + c0)
                check_mem(rsz, csz, self.W, (rpad0, rpad1, cpad0, cpad1), "input load")
                q.load(MEM_INP, sram, base, rsz, csz, self.W, rpad0, rpad1, cpad0, cpad1)
        else:
            base = dram.elem("inp", ((b * self.CIb + ci0) * self.H + r0) * self.W + c0)
            dims = [(self.tg, self.kpg * self.H * self.W), (tci, self.H * self.W), (rsz, self.W),
                    (csz, 1)]
            for off, y, x, st, so in _dma_2d(dims, base, True):
                check_mem(y, x, st, what="input load")
                q.load(MEM_INP, self.inp_base(slot) + so, off, y, x, st)
        wdims = [(tco, self.kpg * self.KH * self.KW), (tci * self.KH * self.KW, 1)]
        wbase = dram.elem("wgt", ((co * tco) * self.kpg + kc * tci) * self.KH * self.KW)
        self._emit_weights(q, dram, slot, wdims, wbase)

    # -- DRAM image ------------------------------------------------------------------------
    def dram_regions(self) -> dict[str, tuple[int, int]]:
        """region -> (elements, element bytes)."""
        hw = self.hw
        reg = {
            "inp": (self.Nb * self.CIb * self.H * self.W, hw.inp_elem_bytes),
            "wgt": (self.COb * self.kpg * self.KH * self.KW, hw.wgt_elem_bytes),
            "out": (self.Nb * self.COb * self.OH * self.OW, hw.out_elem_bytes),
        }
        if self.has_bias:
            reg["bias"] = (self.COb, hw.acc_elem_bytes)
        if self.has_res:
            reg["res"] = (self.Nb * self.COb * self.OH * self.OW, hw.acc_elem_bytes)
        return reg

    def pack(self, data, weight, bias=None, residual=None) -> dict[str, np.ndarray]:
        """NCHW/OIHW arrays -> packed DRAM region contents (bytes as uint8 arrays)."""
        hw = self.hw
        B, BI, BO = hw.batch, hw.block_in, hw.block_out
        N, CI, H, W = self.wl.data_shape
        x = np.zeros((self.Nb * B, self.CIb * BI, H, W), np.int8)
        x[:N, :CI] = data
        x = x.reshape(self.Nb, B, self.CIb, BI, H, W).transpose(0, 2, 4, 5, 1, 3)
        CO = self.wl.out_channels
        w = block_diagonal(np.asarray(weight, np.int8), self.wl, self.gb, BI, BO)
        w = w.reshape(self.COb, BO, self.kpg, BI, self.KH, self.KW).transpose(0, 2, 4, 5, 1, 3)
        out = {"inp": np.ascontiguousarray(x).view(np.uint8).reshape(-1),
               "wgt": np.ascontiguousarray(w).view(np.uint8).reshape(-1)}
        if self.has_bias:
            out["bias"] = self._pack_bias(bias, CO)
        if self.has_res:
            rr = np.zeros((self.Nb * B, self.COb * BO, self.OH, self.OW), np.int32)
            if residual is not None:
                rr[:N, :CO] = residual
            rr = rr.reshape(self.Nb, B, self.COb, BO, self.OH, self.OW).transpose(0, 2, 4, 5, 1, 3)
            out["res"] = np.ascontiguousarray(rr).view(np.uint8).reshape(-1)
        return out

    def unpack_output(self, raw: np.ndarray, dtype=np.int8) -> np.ndarray:
        """Packed output region (elements of ``dtype``) -> NCHW."""
        hw = self.hw
        B, BO = hw.batch, hw.block_out
        N, CO, OH, OW = self.wl.output_shape
        y = raw.reshape(self.Nb, self.COb, OH, OW, B, BO).transpose(0, 4, 1, 5, 2, 3)
        y = y.reshape(self.Nb * B, self.COb * BO, OH, OW)
        return np.ascontiguousarray(y[:N, :CO])


class DensePlan(_Base):
    """A validated dense schedule (``dense_packed.vta``)."""

    kind = "dense"

    def __init__(self, wl: DenseWorkload, hw: HWConfig, knobs: dict, epilogue: Epilogue | None):
        super().__init__(wl, hw, dict(knobs), epilogue)
        self.Nb = _ceil(wl.batch, hw.batch)
        self.CIb = _ceil(wl.in_features, hw.block_in)
        self.COb = _ceil(wl.out_features, hw.block_out)
        k = knobs
        self.tb, self.tci, self.tco = int(k["tile_b"]), int(k["tile_ci"]), int(k["tile_co"])
        self.ocn = int(k["oc_nthread"])
        self.hn = 1
        self.n_b, self.n_co, self.n_ci = self.Nb // self.tb, self.COb // self.tco, self.CIb // self.tci
        self.n_coo = _ceil(self.n_co, self.ocn)
        self.nctx = self.ocn
        self.contexts = [(0, oc, oc) for oc in range(self.ocn)]
        self._init_buffers(self.tci, self.tco * self.tci, self.tb * self.tco)
        self._build_kernels()

    def _build_kernels(self):
        tb, tci, tco = self.tb, self.tci, self.tco
        self.k_reset, self.k_gemm, self.k_alu = {}, {}, {}
        for _, _, slot in self.contexts:
            for bi in range(tb):
                a = self.acc_base(slot) + bi * tco
                f, u = fold_gemm_loops([(tco, 1, 0, 0)], (a, 0, 0))
                self.k_reset[slot, bi] = UopKernel(("reset", slot, bi), f, u, "gemm", reset=1)
                f, u = fold_gemm_loops([(tci, 0, 1, 1), (tco, 1, 0, tci)],
                                       (a, self.inp_base(slot), self.wgt_base(slot)))
                self.k_gemm[slot, bi] = UopKernel(("gemm", slot, bi), f, u, "gemm")
            self.k_alu[slot] = self._alu_kernels(slot, [tb, tco], [tco, 1], [0, 1])
        self._check_kernels()

    n_parts = 1

    def part_key(self, part: int) -> int:
        return 0

    def emit_part(self, q: InsnStream, it, part: int, dram):
        self.emit_iteration(q, it, dram)

    def strides(self) -> list[int]:
        return [1, self.n_coo]

    def iteration_keys(self) -> np.ndarray:
        ck = np.array([sum((coo * self.ocn + oc < self.n_co) << oc for oc in range(self.ocn))
                       for coo in range(self.n_coo)], dtype=np.int64)
        return np.tile(ck, self.n_b)

    def iterations(self):
        for bo in range(self.n_b):
            for coo in range(self.n_coo):
                yield (bo, coo)

    def iteration_at(self, idx: int):
        return (idx // self.n_coo, idx % self.n_coo)

    def emit_iteration(self, q: InsnStream, it, dram):
        bo, coo = it
        ctx = [(slot, coo * self.ocn + oc, coo * self.ocn + oc < self.n_co)
               for _, oc, slot in self.contexts]
        tb, tci, tco = self.tb, self.tci, self.tco
        for slot, co, on in ctx:
            q.dep_pop(S, C)
            if on and self.has_bias:
                self._emit_bias(q, dram, slot, co)
            if on and self.has_res:
                base = dram.elem("res", (bo * tb) * self.COb + co * tco)
                self._emit_residual(q, dram, slot, [(tb, self.COb), (tco, 1)], base)
        for bi in range(tb):
            brow = bo * tb + bi
            for slot, co, on in ctx:
                if on:
                    q.run_kernel(self.k_reset[slot, bi])
                q.dep_push(C, L)
            for kc in range(self.n_ci):
                for slot, co, on in ctx:
                    q.dep_pop(C, L)
                    if on:
                        q.load(MEM_INP, self.inp_base(slot),
                               dram.elem("inp", brow * self.CIb + kc * tci), 1, tci, tci)
                        wbase = dram.elem("wgt", (co * tco) * self.CIb + kc * tci)
                        self._emit_weights(q, dram, slot, [(tco, self.CIb), (tci, 1)], wbase)
                    q.dep_push(L, C)
                for slot, co, on in ctx:
                    q.dep_pop(L, C)
                    if on:
                        q.run_kernel(self.k_gemm[slot, bi])
                    q.dep_push(C, L)
            for slot, co, on in ctx:
                q.dep_pop(C, L)
        for slot, co, on in ctx:
            if on:
                self._emit_alu(q, slot)
            q.dep_push(C, S)
        for slot, co, on in ctx:
            q.dep_pop(C, S)
            if on:
                base = dram.elem("out", (bo * tb) * self.COb + co * tco)
                self._emit_store(q, slot, [(tb, self.COb), (tco, 1)], base)
            q.dep_push(S, C)

    def dram_regions(self) -> dict[str, tuple[int, int]]:
        hw = self.hw
        reg = {"inp": (self.Nb * self.CIb, hw.inp_elem_bytes),
               "wgt": (self.COb * self.CIb, hw.wgt_elem_bytes),
               "out": (self.Nb * self.COb, hw.out_elem_bytes)}
        if self.has_bias:
            reg["bias"] = (self.COb, hw.acc_elem_bytes)
        if self.has_res:
            reg["res"] = (self.Nb * self.COb, hw.acc_elem_bytes)
        return reg

    def pack(self, data, weight, bias=None, residual=None) -> dict[str, np.ndarray]:
        hw = self.hw
        B, BI, BO = hw.batch, hw.block_in, hw.block_out
        N, K = self.wl.data_shape
        M = self.wl.out_features
        x = np.zeros((self.Nb * B, self.CIb * BI), np.int8)
        x[:N, :K] = data
        x = x.reshape(self.Nb, B, self.CIb, BI).transpose(0, 2, 1, 3)
        w = np.zeros((self.COb * BO, self.CIb * BI), np.int8)
        w[:M, :K] = weight
        w = w.reshape(self.COb, BO, self.CIb, BI).transpose(0, 2, 1, 3)
        out = {"inp": np.ascontiguousarray(x).view(np.uint8).reshape(-1),
               "wgt": np.ascontiguousarray(w).view(np.uint8).reshape(-1)}
        if self.has_bias:
            out["bias"] = self._pack_bias(bias, M)
        if self.has_res:
            rr = np.zeros((self.Nb * B, self.COb * BO), np.int32)
            if residual is not None:
                rr[:N, :M] = residual
            rr = rr.reshape(self.Nb, B, self.COb, BO).transpose(0, 2, 1, 3)
            out["res"] = np.ascontiguousarray(rr).view(np.uint8).reshape(-1)
        return out

    def unpack_output(self, raw: np.ndarray, dtype=np.int8) -> np.ndarray:
        hw = self.hw
        B, BO = hw.batch, hw.block_out
        N, M = self.wl.output_shape
        y = raw.reshape(self.Nb, self.COb, B, BO).transpose(0, 2, 1, 3).reshape(self.Nb * B, self.COb * BO)
        return np.ascontiguousarray(y[:N, :M])


def make_plan(wl, hw: HWConfig, knobs, epilogue: Epilogue | None = DEFAULT_EPILOGUE):
    """Validate knobs and build the plan; raises :class:`PlanError` with the reason."""
    reason = check_knobs(wl, hw, knobs)
    if reason:
        raise PlanError(reason)
    if isinstance(wl, Conv2DWorkload):
        return ConvPlan(wl, hw, knobs, epilogue)
    if isinstance(wl, DenseWorkload):
        return DensePlan(wl, hw, knobs, epilogue)
    raise PlanError(f"unsupported workload type {type(wl).__name__}")
