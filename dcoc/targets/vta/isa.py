"""The VTA instruction set: 128-bit LOAD/STORE/GEMM/ALU/FINISH and 32-bit micro-ops.

Opcodes, memory ids, ALU opcodes and field layouts follow ``hw_spec_const.h`` and the
Chisel ``Decode.scala`` bundles (vta-reference §2): fields are listed from the least
significant bit; word-1 fields start at bit 64 and no field straddles the 64-bit boundary.
For configs whose fields would overflow a 64-bit word (large scratchpads) the fields are
packed contiguously over all 128 bits instead (VTA++'s "relaxed encoding"); see
:class:`dcoc.targets.vta.hardware.IsaLayout`.

Every field is range-checked on encode: a value that does not fit raises
:class:`~dcoc.errors.IsaError`.
"""
from __future__ import annotations

from dataclasses import dataclass

from dcoc.errors import IsaError
from dcoc.targets.vta.hardware import (
    ALU_IMM_BITS,
    DRAM_ADDR_BITS,
    OPCODE_BITS,
    PAD_BITS,
    SIZE_BITS,
    SRAM_ADDR_BITS,
    STRIDE_BITS,
    HWConfig,
)

__all__ = [
    "OP_LOAD", "OP_STORE", "OP_GEMM", "OP_FINISH", "OP_ALU",
    "MEM_UOP", "MEM_WGT", "MEM_INP", "MEM_ACC", "MEM_OUT", "MEM_ACC_8BIT",
    "ALU_MIN", "ALU_MAX", "ALU_ADD", "ALU_SHR", "ALU_MUL",
    "MemInsn", "GemmInsn", "AluInsn", "FinishInsn", "Uop",
    "encode", "decode", "encode_uop", "decode_uop", "stage_of", "LOAD_STAGE",
    "COMPUTE_STAGE", "STORE_STAGE",
]

# opcodes (3 bits)
OP_LOAD, OP_STORE, OP_GEMM, OP_FINISH, OP_ALU = 0, 1, 2, 3, 4
OPCODE_NAMES = {OP_LOAD: "LOAD", OP_STORE: "STORE", OP_GEMM: "GEMM", OP_FINISH: "FINISH",
                OP_ALU: "ALU"}
# memory ids (3 bits)
MEM_UOP, MEM_WGT, MEM_INP, MEM_ACC, MEM_OUT, MEM_ACC_8BIT = 0, 1, 2, 3, 4, 5
MEM_NAMES = {MEM_UOP: "UOP", MEM_WGT: "WGT", MEM_INP: "INP", MEM_ACC: "ACC", MEM_OUT: "OUT",
             MEM_ACC_8BIT: "ACC_8BIT"}
# ALU opcodes (3 bits)
ALU_MIN, ALU_MAX, ALU_ADD, ALU_SHR, ALU_MUL = 0, 1, 2, 3, 4
ALU_NAMES = {ALU_MIN: "MIN", ALU_MAX: "MAX", ALU_ADD: "ADD", ALU_SHR: "SHR", ALU_MUL: "MUL"}

# pipeline stages (runtime.cc numbering: 1 load, 2 compute, 3 store)
LOAD_STAGE, COMPUTE_STAGE, STORE_STAGE = 1, 2, 3


@dataclass(slots=True)
class MemInsn:
    """LOAD / STORE: a 2D strided DMA of ``y_size`` rows of ``x_size`` elements.

    ``sram_base`` and ``dram_base`` are in element units of ``memory_type``; consecutive
    DRAM rows are ``x_stride`` elements apart; loads zero-fill ``y_pad_*`` rows and
    ``x_pad_*`` columns around the data in SRAM.  x_size == 0 is a NOP (dependency carrier).
    """

    opcode: int = OP_LOAD
    memory_type: int = MEM_INP
    sram_base: int = 0
    dram_base: int = 0
    y_size: int = 0
    x_size: int = 0
    x_stride: int = 0
    y_pad_0: int = 0
    y_pad_1: int = 0
    x_pad_0: int = 0
    x_pad_1: int = 0
    pop_prev: int = 0
    pop_next: int = 0
    push_prev: int = 0
    push_next: int = 0

    def is_nop(self) -> bool:
        return (self.x_size == 0 or self.y_size == 0) and not (
            self.y_pad_0 or self.y_pad_1 or self.x_pad_0 or self.x_pad_1)

    def __str__(self) -> str:
        op = OPCODE_NAMES[self.opcode]
        if self.is_nop():
            return f"{op} NOP{_deps(self)}"
        pad = ""
        if self.y_pad_0 or self.y_pad_1 or self.x_pad_0 or self.x_pad_1:
            pad = f" pad(y {self.y_pad_0},{self.y_pad_1} x {self.x_pad_0},{self.x_pad_1})"
        return (f"{op} {MEM_NAMES.get(self.memory_type, self.memory_type)} sram={self.sram_base} "
                f"dram={self.dram_base} y={self.y_size} x={self.x_size} "
                f"stride={self.x_stride}{pad}{_deps(self)}")


@dataclass(slots=True)
class GemmInsn:
    """GEMM: ``for i<iter_out, j<iter_in, k in [uop_bgn, uop_end)``: ACC[dst] += INP[src]·WGT[wgt]ᵀ
    (or ACC[dst] = 0 when ``reset_reg``), indices offset by the ``*_factor_*`` strides."""

    reset_reg: int = 0
    uop_bgn: int = 0
    uop_end: int = 0
    iter_out: int = 1
    iter_in: int = 1
    dst_factor_out: int = 0
    dst_factor_in: int = 0
    src_factor_out: int = 0
    src_factor_in: int = 0
    wgt_factor_out: int = 0
    wgt_factor_in: int = 0
    pop_prev: int = 0
    pop_next: int = 0
    push_prev: int = 0
    push_next: int = 0
    opcode: int = OP_GEMM

    def __str__(self) -> str:
        r = " RESET" if self.reset_reg else ""
        return (f"GEMM{r} uop[{self.uop_bgn}:{self.uop_end}] iter {self.iter_out}x{self.iter_in} "
                f"dst({self.dst_factor_out},{self.dst_factor_in}) "
                f"src({self.src_factor_out},{self.src_factor_in}) "
                f"wgt({self.wgt_factor_out},{self.wgt_factor_in}){_deps(self)}")


@dataclass(slots=True)
class AluInsn:
    """ALU: ``ACC[dst] = op(ACC[dst], imm if use_imm else ACC[src])`` over the uop loop."""

    reset_reg: int = 0
    uop_bgn: int = 0
    uop_end: int = 0
    iter_out: int = 1
    iter_in: int = 1
    dst_factor_out: int = 0
    dst_factor_in: int = 0
    src_factor_out: int = 0
    src_factor_in: int = 0
    alu_opcode: int = ALU_ADD
    use_imm: int = 0
    imm: int = 0
    pop_prev: int = 0
    pop_next: int = 0
    push_prev: int = 0
    push_next: int = 0
    opcode: int = OP_ALU

    def __str__(self) -> str:
        arg = f"imm={self.imm}" if self.use_imm else "tensor"
        return (f"ALU {ALU_NAMES.get(self.alu_opcode, self.alu_opcode)} {arg} "
                f"uop[{self.uop_bgn}:{self.uop_end}] iter {self.iter_out}x{self.iter_in} "
                f"dst({self.dst_factor_out},{self.dst_factor_in}) "
                f"src({self.src_factor_out},{self.src_factor_in}){_deps(self)}")


@dataclass(slots=True)
class FinishInsn:
    """FINISH: sets the done flag (executes on the compute module)."""

    pop_prev: int = 0
    pop_next: int = 0
    push_prev: int = 0
    push_next: int = 0
    opcode: int = OP_FINISH

    def __str__(self) -> str:
        return f"FINISH{_deps(self)}"


@dataclass(frozen=True, slots=True)
class Uop:
    """A 32-bit micro-op: ACC index ``dst``, INP (GEMM) / ACC (ALU) index ``src``, WGT index ``wgt``."""

    dst: int
    src: int
    wgt: int = 0


Insn = MemInsn | GemmInsn | AluInsn | FinishInsn


def _deps(insn) -> str:
    f = [n for n in ("pop_prev", "pop_next", "push_prev", "push_next") if getattr(insn, n)]
    return (" [" + " ".join(f) + "]") if f else ""


def stage_of(insn) -> int:
    """Pipeline stage (fetch routing, vta-reference §2.4): LOAD INP/WGT -> load (1);
    STORE -> store (3); everything else (GEMM, ALU, FINISH, LOAD UOP/ACC) -> compute (2)."""
    op = insn.opcode
    if op == OP_STORE:
        return STORE_STAGE
    if op == OP_LOAD and insn.memory_type in (MEM_INP, MEM_WGT):
        return LOAD_STAGE
    return COMPUTE_STAGE


# ----------------------------------------------------------------------------- encoding
_HEAD = (("opcode", OPCODE_BITS), ("pop_prev", 1), ("pop_next", 1), ("push_prev", 1),
         ("push_next", 1))


def _field_list(kind: int, hw: HWConfig):
    lay = hw.layout
    if kind in (OP_LOAD, OP_STORE):
        body = lay.mem_fields()
    elif kind in (OP_GEMM, OP_FINISH):
        body = lay.gemm_fields()
    elif kind == OP_ALU:
        body = lay.alu_fields()
    else:
        raise IsaError(f"unknown opcode {kind}")
    out = []
    pos = 0
    for name, bits in _HEAD:
        out.append((name, pos, bits))
        pos += bits
    for name, bits in body:
        if name == "_w0":
            if not lay.relaxed:
                pos = 64
            continue
        out.append((name, pos, bits))
        pos += bits
    return out


_SIGNED = {"imm"}
_CACHE: dict = {}


def _layout_for(kind: int, hw: HWConfig):
    key = (kind, hw.layout)
    lst = _CACHE.get(key)
    if lst is None:
        lst = _CACHE[key] = _field_list(kind, hw)
    return lst


def encode(insn, hw: HWConfig) -> int:
    """Encode an instruction as a 128-bit integer (IsaError if a field does not fit)."""
    op = insn.opcode
    if op not in OPCODE_NAMES:
        raise IsaError(f"unknown opcode {op!r}")
    word = 0
    for name, pos, bits in _layout_for(op, hw):
        if op == OP_FINISH and name not in dict(_HEAD):
            v = 0
        else:
            v = getattr(insn, name, 0)
        v = int(v)
        if name in _SIGNED:
            lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
            if not lo <= v <= hi:
                raise IsaError(f"{OPCODE_NAMES[op]}.{name}={v} does not fit {bits}-bit signed field")
            v &= (1 << bits) - 1
        elif not 0 <= v < (1 << bits):
            raise IsaError(f"{OPCODE_NAMES[op]}.{name}={v} does not fit {bits}-bit field")
        word |= v << pos
    return word


def decode(word: int, hw: HWConfig):
    """Decode a 128-bit integer into an instruction object."""
    word = int(word)
    if not 0 <= word < (1 << 128):
        raise IsaError("instruction word must be a 128-bit unsigned integer")
    op = word & ((1 << OPCODE_BITS) - 1)
    if op in (OP_LOAD, OP_STORE):
        insn = MemInsn(opcode=op)
    elif op == OP_GEMM:
        insn = GemmInsn()
    elif op == OP_ALU:
        insn = AluInsn()
    elif op == OP_FINISH:
        insn = FinishInsn()
    else:
        raise IsaError(f"unknown opcode {op} in instruction word {word:#034x}")
    for name, pos, bits in _layout_for(op, hw):
        v = (word >> pos) & ((1 << bits) - 1)
        if name in _SIGNED and v >= (1 << (bits - 1)):
            v -= 1 << bits
        if op == OP_FINISH and name not in dict(_HEAD):
            continue
        setattr(insn, name, v)
    return insn


def encode_uop(uop: Uop, hw: HWConfig) -> int:
    """Encode a micro-op as a 32-bit integer: dst | src << A | wgt << (A + S)."""
    lay = hw.layout
    a, s, w = lay.uop_dst_bits, lay.uop_src_bits, lay.uop_wgt_bits
    for name, v, bits in (("dst", uop.dst, a), ("src", uop.src, s), ("wgt", uop.wgt, w)):
        if not 0 <= int(v) < (1 << bits):
            raise IsaError(f"uop.{name}={v} does not fit {bits}-bit field")
    return int(uop.dst) | (int(uop.src) << a) | (int(uop.wgt) << (a + s))


def decode_uop(word: int, hw: HWConfig) -> Uop:
    lay = hw.layout
    a, s, w = lay.uop_dst_bits, lay.uop_src_bits, lay.uop_wgt_bits
    word = int(word)
    return Uop(word & ((1 << a) - 1), (word >> a) & ((1 << s) - 1),
               (word >> (a + s)) & ((1 << w) - 1))


# widths re-exported for the compiler's range checks
MEM_FIELD_MAX = {"sram_base": (1 << SRAM_ADDR_BITS) - 1, "dram_base": (1 << DRAM_ADDR_BITS) - 1,
                 "y_size": (1 << SIZE_BITS) - 1, "x_size": (1 << SIZE_BITS) - 1,
                 "x_stride": (1 << STRIDE_BITS) - 1, "pad": (1 << PAD_BITS) - 1}
ALU_IMM_RANGE = (-(1 << (ALU_IMM_BITS - 1)), (1 << (ALU_IMM_BITS - 1)) - 1)
