"""The functional VTA machine: SRAM buffers, DRAM and the semantics of LOAD/STORE, GEMM
and ALU instructions (int8 inputs/weights, int32 accumulators, int8 OUT), executed in
the timing engine's issue order by :func:`dcoc.targets.vta.simulator.run_program`.  Broken
streams raise :class:`~dcoc.errors.SimulationError` (SRAM overflow, DRAM out of
bounds, micro-op out of range).
"""
from __future__ import annotations

import numpy as np

from dcoc.errors import SimulationError
from dcoc.targets.vta import isa
from dcoc.targets.vta.hardware import HWConfig
from dcoc.targets.vta.isa import (
    ALU_ADD,
    ALU_MAX,
    ALU_MIN,
    ALU_MUL,
    ALU_SHR,
    MEM_ACC,
    MEM_ACC_8BIT,
    MEM_INP,
    MEM_OUT,
    MEM_UOP,
    MEM_WGT,
    OP_ALU,
    OP_FINISH,
    OP_GEMM,
    OP_LOAD,
    OP_STORE,
)

__all__ = ["Machine"]


# ============================================================================ functional machine
def _wrap32(x: np.ndarray) -> np.ndarray:
    return ((x.astype(np.int64) + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)


class Machine:
    """The on-chip state (SRAMs) and DRAM of one accelerator, executing instructions.

    With ``dram=None`` the machine only tracks micro-ops and checks every access (the
    timing-only reference path); with a DRAM image (uint8 array) it computes.
    """

    def __init__(self, hw: HWConfig, dram_size: int, uop_dram: tuple[int, np.ndarray],
                 dram: np.ndarray | None = None, shadow: tuple[int, int] | None = None):
        self.hw = hw
        self.dram_size = int(dram_size)
        self.uop_base, self.uop_words = uop_dram  # byte base of uop region, words
        self.dram = dram
        self.compute = dram is not None
        B, BI, BO = hw.batch, hw.block_in, hw.block_out
        self.uop = np.zeros((hw.uop_depth, 3), dtype=np.int64)
        self.uop_valid = np.zeros(hw.uop_depth, dtype=bool)
        self.acc_log: list = []
        if self.compute:
            self.inp = np.zeros((hw.inp_depth, B, BI), np.int8)
            self.wgt = np.zeros((hw.wgt_depth, BO, BI), np.int8)
            self.acc = np.zeros((hw.acc_depth, B, BO), np.int32)
            self.out = np.zeros((hw.acc_depth, B, BO), np.int8)
            self.shadow = shadow  # (first OUT element index, count) for int32 capture
            self.out32 = np.zeros((shadow[1], B, BO), np.int32) if shadow else None

    # -- helpers --------------------------------------------------------------------
    def _dram_rows(self, insn, eb: int) -> np.ndarray:
        """Byte offsets (y_size, x_size*eb) of a 2-D DRAM access; bounds-checked."""
        base = insn.dram_base * eb
        last = base + ((insn.y_size - 1) * insn.x_stride + insn.x_size) * eb
        if insn.x_size > 0 and insn.y_size > 0:
            if insn.x_stride < insn.x_size and insn.y_size > 1:
                raise SimulationError(f"x_stride {insn.x_stride} < x_size {insn.x_size}: {insn}")
            if base < 0 or last > self.dram_size:
                raise SimulationError(f"DRAM access out of bounds ({base}..{last} of "
                                      f"{self.dram_size} bytes): {insn}")
        return base

    def _uops(self, insn):
        b, e = insn.uop_bgn, insn.uop_end
        if not 0 <= b <= e <= self.hw.uop_depth:
            raise SimulationError(f"micro-op range [{b}, {e}) outside the uop buffer "
                                  f"({self.hw.uop_depth}): {insn}")
        if e > b and not self.uop_valid[b:e].all():
            raise SimulationError(f"micro-ops [{b}, {e}) used before being loaded: {insn}")
        return self.uop[b:e]

    @staticmethod
    def _idx(base: np.ndarray, insn, fo: int, fi: int) -> np.ndarray:
        i = np.arange(insn.iter_out, dtype=np.int64)[:, None, None] * fo
        j = np.arange(insn.iter_in, dtype=np.int64)[None, :, None] * fi
        return (base[None, None, :] + i + j).reshape(-1)

    def _check_range(self, idx: np.ndarray, depth: int, what: str, insn):
        if idx.size and (idx.min() < 0 or idx.max() >= depth):
            raise SimulationError(f"{what} index {int(idx.max())} outside the buffer "
                                  f"(depth {depth}): {insn}")

    # -- execution ------------------------------------------------------------------
    def execute(self, insn) -> None:
        self.acc_log = []
        op = insn.opcode
        if op == OP_LOAD:
            self._load(insn)
        elif op == OP_STORE:
            self._store(insn)
        elif op == OP_GEMM:
            self._gemm(insn)
        elif op == OP_ALU:
            self._alu(insn)
        elif op == OP_FINISH:
            pass
        else:
            raise SimulationError(f"unknown opcode {op}")

    def _load(self, insn):
        hw = self.hw
        mt = insn.memory_type
        if mt not in (MEM_UOP, MEM_WGT, MEM_INP, MEM_ACC, MEM_ACC_8BIT):
            raise SimulationError(f"LOAD of memory type {mt} is not supported: {insn}")
        if insn.is_nop():
            return
        if mt == MEM_UOP and (insn.y_pad_0 or insn.y_pad_1 or insn.x_pad_0 or insn.x_pad_1):
            raise SimulationError(f"UOP load with padding: {insn}")
        eb = 1 if mt == MEM_ACC_8BIT else hw.elem_bytes(mt)
        if mt == MEM_ACC_8BIT:
            eb = hw.batch * hw.block_out
        depth = hw.depth(mt)
        width = insn.x_pad_0 + insn.x_size + insn.x_pad_1
        rows = insn.y_pad_0 + insn.y_size + insn.y_pad_1
        if insn.sram_base + width * rows > depth:
            raise SimulationError(f"SRAM overflow: {isa.MEM_NAMES[mt]} load writes "
                                  f"[{insn.sram_base}, {insn.sram_base + width * rows}) > depth "
                                  f"{depth}: {insn}")
        base = self._dram_rows(insn, eb)
        ys, xs = insn.y_size, insn.x_size
        if mt != MEM_UOP:
            bname = {MEM_INP: "INP", MEM_WGT: "WGT"}.get(mt, "ACC")
            self.acc_log.append((bname, insn.sram_base, insn.sram_base + width * rows, 1))
        if mt == MEM_UOP:
            # uop words come from the program's uop image
            w0 = (base - self.uop_base) // 4
            if w0 < 0 or w0 + xs * ys > len(self.uop_words) or insn.x_stride != xs and ys > 1:
                raise SimulationError(f"UOP load outside the micro-op region: {insn}")
            words = self.uop_words[w0:w0 + xs * ys].astype(np.int64)
            lay = hw.layout
            a, s = lay.uop_dst_bits, lay.uop_src_bits
            dec = np.stack([words & ((1 << a) - 1), (words >> a) & ((1 << s) - 1),
                            (words >> (a + s)) & ((1 << lay.uop_wgt_bits) - 1)], axis=1)
            sb = insn.sram_base
            self.uop[sb:sb + len(dec)] = dec
            self.uop_valid[sb:sb + len(dec)] = True
            return
        if not self.compute:
            return
        rowoff = base + np.arange(ys, dtype=np.int64)[:, None] * (insn.x_stride * eb)
        byteidx = (rowoff + np.arange(xs * eb, dtype=np.int64)[None, :]).reshape(-1)
        raw = self.dram[byteidx] if byteidx.size else np.zeros(0, np.uint8)
        if mt == MEM_INP:
            buf, shape, dt = self.inp, (hw.batch, hw.block_in), np.int8
        elif mt == MEM_WGT:
            buf, shape, dt = self.wgt, (hw.block_out, hw.block_in), np.int8
        elif mt == MEM_ACC:
            buf, shape, dt = self.acc, (hw.batch, hw.block_out), np.int32
        else:  # ACC_8BIT: sign-extend int8 into ACC
            buf, shape, dt = self.acc, (hw.batch, hw.block_out), np.int8
        data = raw.view(dt).reshape(ys, xs, *shape)
        blk = np.zeros((rows, width) + shape, dtype=buf.dtype)
        blk[insn.y_pad_0:insn.y_pad_0 + ys, insn.x_pad_0:insn.x_pad_0 + xs] = data
        sb = insn.sram_base
        buf[sb:sb + rows * width] = blk.reshape(rows * width, *shape)
        if buf is self.acc:
            self.out[sb:sb + rows * width] = buf[sb:sb + rows * width].astype(np.int8)

    def _store(self, insn):
        hw = self.hw
        if insn.y_pad_0 or insn.y_pad_1 or insn.x_pad_0 or insn.x_pad_1:
            raise SimulationError(f"STORE with padding is not allowed: {insn}")
        if insn.memory_type != MEM_OUT and not insn.is_nop():
            raise SimulationError(f"STORE must use memory type OUT: {insn}")
        if insn.is_nop():
            return
        ys, xs = insn.y_size, insn.x_size
        if insn.sram_base + ys * xs > hw.out_depth:
            raise SimulationError(f"SRAM overflow: STORE reads [{insn.sram_base}, "
                                  f"{insn.sram_base + ys * xs}) > OUT depth {hw.out_depth}: {insn}")
        eb = hw.out_elem_bytes
        base = self._dram_rows(insn, eb)
        self.acc_log.append(("ACC", insn.sram_base, insn.sram_base + ys * xs, 0))
        if not self.compute:
            return
        sb = insn.sram_base
        vals = self.out[sb:sb + ys * xs].reshape(ys, xs * eb).view(np.uint8)
        rowoff = base + np.arange(ys, dtype=np.int64)[:, None] * (insn.x_stride * eb)
        byteidx = rowoff + np.arange(xs * eb, dtype=np.int64)[None, :]
        self.dram[byteidx.reshape(-1)] = vals.reshape(-1)
        if self.out32 is not None:
            first, count = self.shadow
            e0 = insn.dram_base - first
            eidx = (e0 + np.arange(ys)[:, None] * insn.x_stride + np.arange(xs)[None, :]).reshape(-1)
            ok = (eidx >= 0) & (eidx < count)
            self.out32[eidx[ok]] = self.acc[sb:sb + ys * xs][ok]

    def _gemm(self, insn):
        hw = self.hw
        u = self._uops(insn)
        if len(u) == 0:
            return
        dst = self._idx(u[:, 0], insn, insn.dst_factor_out, insn.dst_factor_in)
        self._check_range(dst, hw.acc_depth, "GEMM ACC", insn)
        self.acc_log.append(("ACC", int(dst.min()), int(dst.max()) + 1, 1))
        if insn.reset_reg:
            if self.compute:
                self.acc[dst] = 0
                self.out[dst] = 0
            return
        src = self._idx(u[:, 1], insn, insn.src_factor_out, insn.src_factor_in)
        wgt = self._idx(u[:, 2], insn, insn.wgt_factor_out, insn.wgt_factor_in)
        self._check_range(src, hw.inp_depth, "GEMM INP", insn)
        self._check_range(wgt, hw.wgt_depth, "GEMM WGT", insn)
        self.acc_log.append(("INP", int(src.min()), int(src.max()) + 1, 0))
        self.acc_log.append(("WGT", int(wgt.min()), int(wgt.max()) + 1, 0))
        if not self.compute:
            return
        chunk = 4096
        for c0 in range(0, len(dst), chunk):
            d, s_, w_ = dst[c0:c0 + chunk], src[c0:c0 + chunk], wgt[c0:c0 + chunk]
            x = self.inp[s_].astype(np.int32)           # (n, B, BI)
            wt = self.wgt[w_].astype(np.int32)          # (n, BO, BI)
            prod = np.einsum("nbk,nok->nbo", x, wt)     # exact in int32 (|.| < 2^23)
            np.add.at(self.acc, d, prod)                # int32 wrap-around accumulation
        ud = np.unique(dst)
        self.out[ud] = self.acc[ud].astype(np.int8)

    def _alu(self, insn):
        hw = self.hw
        u = self._uops(insn)
        if len(u) == 0:
            return
        dst = self._idx(u[:, 0], insn, insn.dst_factor_out, insn.dst_factor_in)
        src = self._idx(u[:, 1], insn, insn.src_factor_out, insn.src_factor_in)
        self._check_range(dst, hw.acc_depth, "ALU dst", insn)
        if not insn.use_imm:
            self._check_range(src, hw.acc_depth, "ALU src", insn)
        self.acc_log.append(("ACC", int(dst.min()), int(dst.max()) + 1, 1))
        op = insn.alu_opcode
        if op not in (ALU_MIN, ALU_MAX, ALU_ADD, ALU_SHR, ALU_MUL):
            raise SimulationError(f"unknown ALU opcode {op}: {insn}")
        if not self.compute:
            return
        uniq = len(np.unique(dst)) == len(dst)
        safe = uniq and (insn.use_imm or not np.isin(src[src != dst], dst).any())
        if safe:
            a = self.acc[dst]
            b = np.int32(insn.imm) if insn.use_imm else self.acc[src]
            r = self._alu_op(op, a, b)
            self.acc[dst] = r
            self.out[dst] = r.astype(np.int8)
        else:  # sequential semantics when iterations alias
            for d, s_ in zip(dst, src):
                a = self.acc[d]
                b = np.int32(insn.imm) if insn.use_imm else self.acc[s_].copy()
                r = self._alu_op(op, a, b)
                self.acc[d] = r
                self.out[d] = r.astype(np.int8)

    @staticmethod
    def _alu_op(op, a, b):
        a64 = np.asarray(a, dtype=np.int64)
        b64 = np.asarray(b, dtype=np.int64)
        if op == ALU_MIN:
            return np.minimum(a64, b64).astype(np.int32)
        if op == ALU_MAX:
            return np.maximum(a64, b64).astype(np.int32)
        if op == ALU_ADD:
            return _wrap32(a64 + b64)
        if op == ALU_SHR:
            sh = b64 & 31
            sh = np.where(sh >= 16, sh - 32, sh)       # 5-bit signed shift argument
            right = a64 >> np.maximum(sh, 0)
            left = a64 << np.maximum(-sh, 0)
            return _wrap32(np.where(sh >= 0, right, left))
        # MUL: 8-bit signed multiplier
        m = ((b64 + 128) & 255) - 128
        return _wrap32(a64 * m)
