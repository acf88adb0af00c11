"""VTA hardware configuration, presets, derived buffer depths, FPGA boards and resource model.

The parameter space follows ``vta_config.json`` / ``pkg_config.py`` (vta-reference §1):
BATCH, BLOCK_IN, BLOCK_OUT (powers of two; BLOCK_IN != BLOCK_OUT is allowed, as VTA++
does), the four log2 buffer sizes in bytes (UOP, INP, WGT, ACC), int8 inputs/weights and
int32 accumulators, the fabric clock and the AXI data-bus width.

Derived depths (elements of one tensor-intrinsic operand) are exactly the reference's::

    inp_depth = 2**LOG_INP_BUFF / (BATCH * BLOCK_IN * 1 B)
    wgt_depth = 2**LOG_WGT_BUFF / (BLOCK_OUT * BLOCK_IN * 1 B)
    acc_depth = 2**LOG_ACC_BUFF / (BATCH * BLOCK_OUT * 4 B)      (out_depth == acc_depth)
    uop_depth = 2**LOG_UOP_BUFF / 4 B

Resource model (documented in ``docs/vta.md``):

* BRAM36 -- the sweep rule of ``compile_designs.py`` (vta-reference §6.3): one BRAM36 is
  32 b x 1024; INP, WGT, ACC and OUT each take a power-of-two number of BRAMs, at least
  ``ceil(elem_bits / 32)`` columns times ``ceil(depth / 1024)`` rows; the UOP buffer takes
  ``bytes * 8 / 32768``.  The shipped 1x16x16 (15,15,18,17) config uses 120 BRAM36.
* DSP -- one DSP48 per int8 multiplier up to the board's DSP count; multipliers beyond
  it are built from LUTs (``LUT_PER_MULT`` each), vta-reference §6.4 modelling proposal.
* LUT -- a fixed shell (fetch/load/store/DMA/AXI SmartConnect/control) plus per-lane
  adder trees and ALU lanes.  These LUT numbers are coarse estimates (no published VTA
  utilization table exists, §8); only the BRAM rule is sourced.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from functools import cached_property

from dcoc.errors import ConfigError

__all__ = ["HWConfig", "Board", "BOARDS", "PRESETS", "IsaLayout", "estimate_scale",
           "RESOURCE_SOURCES"]

# ----------------------------------------------------------------------------- constants
#: ISA field widths that do not depend on the config (hw_spec_const.h, vta-reference §2.1)
OPCODE_BITS = 3
DEP_BITS = 4  # pop_prev, pop_next, push_prev, push_next
MEMTYPE_BITS = 3
SRAM_ADDR_BITS = 16
DRAM_ADDR_BITS = 32
SIZE_BITS = 16
STRIDE_BITS = 16
PAD_BITS = 4
LOOP_ITER_BITS = 14
ALU_OPCODE_BITS = 3
ALU_IMM_BITS = 16
UOP_BITS = 32
INSN_BITS = 128

#: resource-model constants (see module docstring / docs/vta.md)
BRAM36_BITS = 32 * 1024        # one BRAM36 as 32 b x 1024 (compile_designs.py)
BRAM_RESERVED = 16             # fetch / command + dependency FIFOs / SmartConnect (140 - 124)
LUT_SHELL = 14000              # fetch, load, store, DMA engines, AXI interconnect, control
LUT_PER_MULT = 60              # one int8 x int8 multiplier mapped to LUT6s
LUT_PER_ADDER_INPUT = 18       # ~18-bit adder per input of each BLOCK_IN-wide adder tree
LUT_PER_ALU_LANE = 150         # 32-bit MIN/MAX/ADD/SHR lane
LUT_UTIL_LIMIT = 0.85          # above this fraction of LUTs we assume routing fails
#: ``HW_VER`` of VTA's current config files (vta-reference §1.1)
VTA_HW_VER = "0.0.2"

#: int8 multipliers one DSP slice implements: DSP48E2 (UltraScale+, 27x18 multiplier) packs
#: two int8 products that share an operand (Xilinx WP486 "Deep Learning with INT8
#: Optimization on Xilinx Devices"); DSP48E1 (7-series, 25x18) is counted as one.
MULTS_PER_DSP = {"7series": 1, "ultrascale+": 2}
#: reference adder-tree depth of the shipped 1x16x16 core (log2 BLOCK_IN = 4) whose clock
#: pkg_config.py gives per target (pynq 100 MHz, ultra96/zcu104 333 MHz).
REF_TREE_DEPTH = 4
#: critical-path growth per extra adder-tree level.  HLS keeps the GEMM at II = 1 and adds
#: pipeline registers, so a level costs far less than a full adder delay (~1 ns on 7-series);
#: estimate 6 % of the period per level, uncertainty +-50 % (no published VTA timing report).
TREE_LEVEL_DERATE = 0.06
#: routing congestion: above this LUT utilisation timing closure degrades (UG949
#: "UltraFast Design Methodology": keep LUT utilisation under ~70 % for timing closure) ...
CONGESTION_KNEE = 0.70
#: ... by this fraction of the period per unit of utilisation above the knee
#: (85 % LUT -> +7.5 % period).  Estimate, uncertainty +-50 %.
CONGESTION_SLOPE = 0.5

#: each resource estimate, its source and its relative uncertainty (1 sigma-ish, stated
#: so the sensitivity benchmark ``scripts/bench_sensitivity.py`` can probe it).
RESOURCE_SOURCES = {
    "bram36": ("compile_designs.py sweep rule (vta-reference §6.3)", 0.05),
    "dsp": ("one DSP48 per multiplier (E1) / two per DSP48E2 (WP486), capped by the board", 0.10),
    "lut_shell": ("estimate: fetch/load/store/DMA/SmartConnect/control, ~14k LUT", 0.30),
    "lut_per_mult": ("estimate: int8x8 LUT multiplier ~60 LUT6 (LogiCORE Multiplier PG108 range 40-70)", 0.30),
    "lut_adder": ("estimate: ~18 LUT per adder-tree input", 0.30),
    "lut_alu": ("estimate: ~150 LUT per 32-bit ALU lane", 0.30),
    "clock": ("pkg_config.py clock for the 1x16x16 core, derated by tree depth and congestion", 0.20),
}

#: multiplicative factors applied to the LUT and clock estimates (1.0 = nominal); only the
#: sensitivity benchmark changes them, through :func:`estimate_scale`.
_SCALE = {"lut": 1.0, "clock": 1.0, "clock_other": 1.0}


class estimate_scale:
    """Context manager scaling the LUT and clock estimates, e.g. ``estimate_scale(lut=1.2)``
    makes every LUT estimate 20 % larger (sensitivity studies); ``clock_other`` scales the
    clock of every GEMM core other than the shipped 1x16x16 only (the one whose clock is
    published), i.e. how wrong the derating of new cores may be."""

    def __init__(self, lut: float = 1.0, clock: float = 1.0, clock_other: float = 1.0):
        self.new = {"lut": float(lut), "clock": float(clock), "clock_other": float(clock_other)}

    def __enter__(self):
        self.old = dict(_SCALE)
        _SCALE.update(self.new)
        return self

    def __exit__(self, *exc):
        _SCALE.update(self.old)
        return False


def _is_pow2(x: int) -> bool:
    return isinstance(x, int) and x > 0 and (x & (x - 1)) == 0


def _log2(x: int) -> int:
    return x.bit_length() - 1


def _next_pow2(x: int) -> int:
    return 1 if x <= 1 else 1 << (int(x) - 1).bit_length()


# ----------------------------------------------------------------------------- ISA layout
@dataclass(frozen=True)
class IsaLayout:
    """Bit widths of the config-dependent instruction and micro-op fields.

    ``relaxed`` is True when a standard 64-bit word would overflow (large scratchpads):
    the fields are then packed contiguously over all 128 bits, as VTA++'s "relaxed ISA
    encoding for larger scratchpads" does.  ``uop`` fields must always fit 32 bits.
    """

    log_uop_depth: int
    log_inp_depth: int
    log_wgt_depth: int
    log_acc_depth: int
    relaxed: bool

    @property
    def uop_dst_bits(self) -> int:
        return self.log_acc_depth

    @property
    def uop_src_bits(self) -> int:
        return max(self.log_acc_depth, self.log_inp_depth)

    @property
    def uop_wgt_bits(self) -> int:
        return self.log_wgt_depth

    def mem_fields(self) -> list[tuple[str, int]]:
        """(name, bits) of a LOAD/STORE instruction after the common head, in order."""
        return [("memory_type", MEMTYPE_BITS), ("sram_base", SRAM_ADDR_BITS),
                ("dram_base", DRAM_ADDR_BITS), ("_w0", None),
                ("y_size", SIZE_BITS), ("x_size", SIZE_BITS), ("x_stride", STRIDE_BITS),
                ("y_pad_0", PAD_BITS), ("y_pad_1", PAD_BITS), ("x_pad_0", PAD_BITS),
                ("x_pad_1", PAD_BITS)]

    def gemm_fields(self) -> list[tuple[str, int]]:
        u = self.log_uop_depth
        return [("reset_reg", 1), ("uop_bgn", u), ("uop_end", u + 1),
                ("iter_out", LOOP_ITER_BITS), ("iter_in", LOOP_ITER_BITS), ("_w0", None),
                ("dst_factor_out", self.log_acc_depth), ("dst_factor_in", self.log_acc_depth),
                ("src_factor_out", self.log_inp_depth), ("src_factor_in", self.log_inp_depth),
                ("wgt_factor_out", self.log_wgt_depth), ("wgt_factor_in", self.log_wgt_depth)]

    def alu_fields(self) -> list[tuple[str, int]]:
        u = self.log_uop_depth
        a = self.log_acc_depth
        return [("reset_reg", 1), ("uop_bgn", u), ("uop_end", u + 1),
                ("iter_out", LOOP_ITER_BITS), ("iter_in", LOOP_ITER_BITS), ("_w0", None),
                ("dst_factor_out", a), ("dst_factor_in", a),
                ("src_factor_out", a), ("src_factor_in", a),
                ("alu_opcode", ALU_OPCODE_BITS), ("use_imm", 1), ("imm", ALU_IMM_BITS)]


def _word_bits(fields) -> tuple[int, int]:
    head = OPCODE_BITS + DEP_BITS
    w0 = head
    w1 = 0
    second = False
    for name, bits in fields:
        if name == "_w0":
            second = True
            continue
        if second:
            w1 += bits
        else:
            w0 += bits
    return w0, w1


# ----------------------------------------------------------------------------- HWConfig
@dataclass(frozen=True)
class HWConfig:
    """One VTA hardware configuration (a "bitstream").

    Parameters mirror ``vta_config.json``: ``batch``, ``block_in``, ``block_out`` (powers
    of two), ``log_uop_buff``/``log_inp_buff``/``log_wgt_buff``/``log_acc_buff`` (log2 of the
    buffer sizes in bytes), ``freq_mhz`` (fabric clock) and ``bus_bytes`` (AXI data width in
    bytes: 8 on Zynq-7000, 16 on UltraScale+).  Only int8 inputs/weights and int32
    accumulators are supported (``inp_width``/``wgt_width``/``acc_width`` = 8/8/32).

    Invalid values raise :class:`~dcoc.errors.ConfigError` with a one-line message.
    """

    batch: int = 1
    block_in: int = 16
    block_out: int = 16
    log_uop_buff: int = 15
    log_inp_buff: int = 15
    log_wgt_buff: int = 18
    log_acc_buff: int = 17
    freq_mhz: float = 100.0
    bus_bytes: int = 8
    inp_width: int = 8
    wgt_width: int = 8
    acc_width: int = 32
    _layout: IsaLayout = field(init=False, repr=False, compare=False, hash=False)

    # -- validation -------------------------------------------------------------------
    def __post_init__(self):
        for name in ("batch", "block_in", "block_out"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not _is_pow2(v) or v > 256:
                raise ConfigError(f"HWConfig.{name} must be a power of two in [1, 256], got {v!r}")
        for name in ("log_uop_buff", "log_inp_buff", "log_wgt_buff", "log_acc_buff"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not 8 <= v <= 26:
                raise ConfigError(f"HWConfig.{name} must be an integer in [8, 26] (log2 bytes), "
                                  f"got {v!r}")
        if (self.inp_width, self.wgt_width, self.acc_width) != (8, 8, 32):
            raise ConfigError("only int8 inputs/weights with int32 accumulators (i8w8a32) are "
                              f"supported, got i{self.inp_width}w{self.wgt_width}a{self.acc_width}")
        try:
            f = float(self.freq_mhz)
        except (TypeError, ValueError):
            raise ConfigError(f"HWConfig.freq_mhz must be a number, got {self.freq_mhz!r}") from None
        if not (math.isfinite(f) and 1.0 <= f <= 2000.0):
            raise ConfigError(f"HWConfig.freq_mhz must be in [1, 2000] MHz, got {self.freq_mhz!r}")
        object.__setattr__(self, "freq_mhz", f)
        b = self.bus_bytes
        if isinstance(b, bool) or not isinstance(b, int) or not _is_pow2(b) or not 4 <= b <= 128:
            raise ConfigError(f"HWConfig.bus_bytes must be a power of two in [4, 128], got {b!r}")
        # depths
        for buf, log_bytes, elem in (("uop", self.log_uop_buff, 4),
                                     ("inp", self.log_inp_buff, self.inp_elem_bytes),
                                     ("wgt", self.log_wgt_buff, self.wgt_elem_bytes),
                                     ("acc", self.log_acc_buff, self.acc_elem_bytes)):
            depth = (1 << log_bytes) // elem
            if depth < 1:
                raise ConfigError(f"{buf} buffer of 2^{log_bytes} B cannot hold one "
                                  f"{elem}-byte element ({self.name})")
            if buf != "uop" and depth > (1 << SRAM_ADDR_BITS):
                raise ConfigError(f"{buf} buffer depth {depth} exceeds the 16-bit SRAM address "
                                  f"field ({self.name})")
        if self.uop_depth > (1 << 16):
            raise ConfigError(f"uop buffer depth {self.uop_depth} too large ({self.name})")
        lay = IsaLayout(_log2(self.uop_depth), _log2(self.inp_depth), _log2(self.wgt_depth),
                        _log2(self.acc_depth), False)
        uop_bits = lay.uop_dst_bits + lay.uop_src_bits + lay.uop_wgt_bits
        if uop_bits > UOP_BITS:
            raise ConfigError(f"micro-op fields need {uop_bits} bits (acc {lay.log_acc_depth} + src "
                              f"{lay.uop_src_bits} + wgt {lay.log_wgt_depth}) > 32 ({self.name})")
        relaxed = False
        for fields in (lay.gemm_fields(), lay.alu_fields(), lay.mem_fields()):
            w0, w1 = _word_bits(fields)
            if w0 + w1 > INSN_BITS:
                raise ConfigError(f"instruction fields need {w0 + w1} bits > 128 ({self.name})")
            if w0 > 64 or w1 > 64:
                relaxed = True
        object.__setattr__(self, "_layout", replace(lay, relaxed=relaxed))

    # -- presets / parsing ------------------------------------------------------------
    @classmethod
    def preset(cls, name: str) -> "HWConfig":
        """A named preset: ``pynq`` (1x16x16 default bitstream, 100 MHz, 8-byte bus),
        ``pynq_4x8`` (the shipped 4x8x8 15_16_16_18 bitstream), ``ultra96``, ``zcu104``
        (1x16x16 default at 333 MHz, 16-byte bus)."""
        key = str(name).strip().lower()
        if key not in PRESETS:
            raise ConfigError(f"unknown HW preset {name!r}; choose from {', '.join(PRESETS)}")
        return cls(**PRESETS[key])

    @classmethod
    def parse(cls, text: str, board: "str | None" = None) -> "HWConfig":
        """A preset name, or a config name such as ``1x16x16_i8w8a32_15_15_18_17`` (also the
        VTA form ``1x16_i8w8a32_15_15_18_17``) optionally followed by ``_<F>MHz_bus<B>``.
        When the name does not give them, the bus is ``board``'s (or pynq's) and the clock
        the one that board achieves for this core (:meth:`Board.clock_mhz`)."""
        s = str(text).strip()
        if s.lower() in PRESETS:
            return cls.preset(s)
        m = re.fullmatch(r"(\d+)x(\d+)(?:x(\d+))?_i8w8a32_(\d+)_(\d+)_(\d+)_(\d+)"
                         r"(?:_(\d+(?:\.\d+)?)MHz_bus(\d+))?", s)
        if not m:
            raise ConfigError(f"cannot parse HW config {text!r}: expected a preset "
                              f"({', '.join(PRESETS)}) or a name like 1x16x16_i8w8a32_15_15_18_17")
        b, bi, bo, u, i, w, a, f, bus = m.groups()
        bo = bo or bi
        bd = None
        if f is None:
            bd = BOARDS.get(board or "pynq")
            if bd is None:
                raise ConfigError(f"unknown board {board!r}; choose from {', '.join(BOARDS)}")
            f, bus = bd.freq_mhz, bd.bus_bytes
        hw = cls(batch=int(b), block_in=int(bi), block_out=int(bo), log_uop_buff=int(u),
                 log_inp_buff=int(i), log_wgt_buff=int(w), log_acc_buff=int(a),
                 freq_mhz=float(f), bus_bytes=int(bus))
        # no clock in the name: the clock the board achieves for this core (Board.clock_mhz)
        return bd.realize(hw) if bd is not None else hw

    def replace(self, **changes) -> "HWConfig":
        """A copy with some parameters changed (validated again)."""
        kw = {k: getattr(self, k) for k in ("batch", "block_in", "block_out", "log_uop_buff",
                                            "log_inp_buff", "log_wgt_buff", "log_acc_buff",
                                            "freq_mhz", "bus_bytes")}
        kw.update(changes)
        return HWConfig(**kw)

    # -- names ------------------------------------------------------------------------
    @cached_property
    def bitstream(self) -> str:
        """``{B}x{BI}x{BO}_i8w8a32_{uop}_{inp}_{wgt}_{acc}`` (the GEMM-core + buffer part)."""
        return (f"{self.batch}x{self.block_in}x{self.block_out}_i{self.inp_width}"
                f"w{self.wgt_width}a{self.acc_width}_{self.log_uop_buff}_{self.log_inp_buff}_"
                f"{self.log_wgt_buff}_{self.log_acc_buff}")

    @cached_property
    def name(self) -> str:
        """Unique name: the bitstream name, plus ``_<F>MHz_bus<B>`` unless 100 MHz / 8 B."""
        if self.freq_mhz == 100.0 and self.bus_bytes == 8:
            return self.bitstream
        f = int(self.freq_mhz) if float(self.freq_mhz).is_integer() else self.freq_mhz
        return f"{self.bitstream}_{f}MHz_bus{self.bus_bytes}"

    def __str__(self) -> str:
        return self.name

    # -- derived values ---------------------------------------------------------------
    @property
    def inp_elem_bytes(self) -> int:
        return self.batch * self.block_in * self.inp_width // 8

    @property
    def wgt_elem_bytes(self) -> int:
        return self.block_out * self.block_in * self.wgt_width // 8

    @property
    def acc_elem_bytes(self) -> int:
        return self.batch * self.block_out * self.acc_width // 8

    @property
    def out_elem_bytes(self) -> int:
        return self.batch * self.block_out * self.inp_width // 8

    @property
    def inp_depth(self) -> int:
        return (1 << self.log_inp_buff) // self.inp_elem_bytes

    @property
    def wgt_depth(self) -> int:
        return (1 << self.log_wgt_buff) // self.wgt_elem_bytes

    @property
    def acc_depth(self) -> int:
        return (1 << self.log_acc_buff) // self.acc_elem_bytes

    @property
    def out_depth(self) -> int:
        return self.acc_depth

    @property
    def uop_depth(self) -> int:
        return (1 << self.log_uop_buff) // 4

    @property
    def macs_per_cycle(self) -> int:
        """BATCH x BLOCK_IN x BLOCK_OUT multiply-accumulates per GEMM micro-op."""
        return self.batch * self.block_in * self.block_out

    @property
    def peak_gops(self) -> float:
        return 2.0 * self.macs_per_cycle * self.freq_mhz / 1000.0

    @property
    def layout(self) -> IsaLayout:
        """Bit widths of the config-dependent ISA fields."""
        return self._layout

    def elem_bytes(self, memory_type: int) -> int:
        """Bytes of one DRAM/SRAM element of a memory type (isa.MEM_* ids)."""
        return {0: 4, 1: self.wgt_elem_bytes, 2: self.inp_elem_bytes, 3: self.acc_elem_bytes,
                4: self.out_elem_bytes, 5: self.acc_elem_bytes}[memory_type]

    def depth(self, memory_type: int) -> int:
        """SRAM depth (elements) of a memory type."""
        return {0: self.uop_depth, 1: self.wgt_depth, 2: self.inp_depth, 3: self.acc_depth,
                4: self.out_depth, 5: self.acc_depth}[memory_type]

    # -- resources --------------------------------------------------------------------
    def bram36(self) -> dict[str, int]:
        """BRAM36 per buffer by the sweep rule (vta-reference §6.3)."""
        def buf(elem_bits: int, depth: int) -> int:
            cols = -(-elem_bits // 32)
            rows = -(-depth // 1024)
            return _next_pow2(cols * rows)

        uop = max(1, -(-(1 << self.log_uop_buff) * 8 // BRAM36_BITS))
        inp = buf(self.inp_elem_bytes * 8, self.inp_depth)
        wgt = buf(self.wgt_elem_bytes * 8, self.wgt_depth)
        acc = buf(self.acc_elem_bytes * 8, self.acc_depth)
        out = buf(self.out_elem_bytes * 8, self.out_depth)
        return {"uop": uop, "inp": inp, "wgt": wgt, "acc": acc, "out": out,
                "total": uop + inp + wgt + acc + out}

    def resources(self, dsp_budget: int | None = None, mults_per_dsp: int = 1) -> dict[str, int]:
        """Estimated FPGA resources: ``bram36``, ``dsp``, ``lut`` (+ ``multipliers``).

        With ``dsp_budget`` (a board's DSP count) multipliers beyond what the DSPs hold
        (``mults_per_dsp`` each: 2 for DSP48E2 packing) are mapped to LUTs; without it
        every multiplier is assumed to get a DSP.
        """
        mults = self.macs_per_cycle
        mpd = max(int(mults_per_dsp), 1)
        need = -(-mults // mpd)
        dsp = need if dsp_budget is None else min(need, int(dsp_budget))
        lut_mults = max(mults - dsp * mpd, 0)
        lanes = self.batch * self.block_out
        lut = (LUT_SHELL + lut_mults * LUT_PER_MULT
               + lanes * max(self.block_in - 1, 0) * LUT_PER_ADDER_INPUT
               + lanes * LUT_PER_ALU_LANE) * _SCALE["lut"]
        return {"bram36": self.bram36()["total"], "dsp": dsp, "lut": int(lut),
                "multipliers": mults}

    # -- VTA's own config file --------------------------------------------------------
    def to_vta_config(self, target: str = "pynq", hw_ver: str = VTA_HW_VER) -> dict:
        """This config as VTA's ``config/vta_config.json`` (vta-reference §1.1): the same
        keys and meaning, every key but ``TARGET``/``HW_VER`` a log2.  A square core
        (``block_in == block_out``) writes ``LOG_BLOCK`` as today's VTA does; a non-square
        one writes the older ``LOG_BLOCK_IN``/``LOG_BLOCK_OUT`` pair (VTA before the 2019
        refactor, and VTA++), which current VTA releases cannot build.  The clock and bus
        width are not in the file: VTA takes them per ``TARGET`` from ``pkg_config.py``."""
        cfg = {"TARGET": str(target), "HW_VER": str(hw_ver),
               "LOG_INP_WIDTH": _log2(self.inp_width), "LOG_WGT_WIDTH": _log2(self.wgt_width),
               "LOG_ACC_WIDTH": _log2(self.acc_width), "LOG_BATCH": _log2(self.batch)}
        if self.block_in == self.block_out:
            cfg["LOG_BLOCK"] = _log2(self.block_in)
        else:
            cfg["LOG_BLOCK_IN"] = _log2(self.block_in)
            cfg["LOG_BLOCK_OUT"] = _log2(self.block_out)
        cfg.update({"LOG_UOP_BUFF_SIZE": self.log_uop_buff, "LOG_INP_BUFF_SIZE": self.log_inp_buff,
                    "LOG_WGT_BUFF_SIZE": self.log_wgt_buff, "LOG_ACC_BUFF_SIZE": self.log_acc_buff})
        return cfg

    @classmethod
    def from_vta_config(cls, cfg: dict, freq_mhz: float = 100.0, bus_bytes: int = 8) -> "HWConfig":
        """The inverse of :meth:`to_vta_config` (clock and bus are not in VTA's file)."""
        try:
            bi = cfg["LOG_BLOCK_IN"] if "LOG_BLOCK_IN" in cfg else cfg["LOG_BLOCK"]
            bo = cfg["LOG_BLOCK_OUT"] if "LOG_BLOCK_OUT" in cfg else cfg["LOG_BLOCK"]
            return cls(batch=1 << int(cfg["LOG_BATCH"]), block_in=1 << int(bi), block_out=1 << int(bo),
                       log_uop_buff=int(cfg["LOG_UOP_BUFF_SIZE"]), log_inp_buff=int(cfg["LOG_INP_BUFF_SIZE"]),
                       log_wgt_buff=int(cfg["LOG_WGT_BUFF_SIZE"]), log_acc_buff=int(cfg["LOG_ACC_BUFF_SIZE"]),
                       freq_mhz=freq_mhz, bus_bytes=bus_bytes,
                       inp_width=1 << int(cfg["LOG_INP_WIDTH"]), wgt_width=1 << int(cfg["LOG_WGT_WIDTH"]),
                       acc_width=1 << int(cfg["LOG_ACC_WIDTH"]))
        except KeyError as exc:
            raise ConfigError(f"vta_config.json lacks {exc.args[0]}") from None


#: preset name -> HWConfig keyword arguments
PRESETS: dict[str, dict] = {
    "pynq": dict(batch=1, block_in=16, block_out=16, log_uop_buff=15, log_inp_buff=15,
                 log_wgt_buff=18, log_acc_buff=17, freq_mhz=100.0, bus_bytes=8),
    "pynq_4x8": dict(batch=4, block_in=8, block_out=8, log_uop_buff=15, log_inp_buff=16,
                     log_wgt_buff=16, log_acc_buff=18, freq_mhz=100.0, bus_bytes=8),
    "ultra96": dict(batch=1, block_in=16, block_out=16, log_uop_buff=15, log_inp_buff=15,
                    log_wgt_buff=18, log_acc_buff=17, freq_mhz=333.0, bus_bytes=16),
    "zcu104": dict(batch=1, block_in=16, block_out=16, log_uop_buff=15, log_inp_buff=15,
                   log_wgt_buff=18, log_acc_buff=17, freq_mhz=333.0, bus_bytes=16),
}


# ----------------------------------------------------------------------------- boards
@dataclass(frozen=True)
class Board:
    """An FPGA board's resource budget and default clock / bus width."""

    name: str
    part: str
    bram36: int
    dsp: int
    lut: int
    freq_mhz: float
    bus_bytes: int
    bram_reserved: int = BRAM_RESERVED
    family: str = "7series"

    @property
    def bram_usable(self) -> int:
        return self.bram36 - self.bram_reserved

    def usage(self, hw: HWConfig) -> dict[str, int]:
        """The resource estimate of ``hw`` on this board (DSP-limited multipliers spill to LUTs)."""
        return hw.resources(dsp_budget=self.dsp, mults_per_dsp=MULTS_PER_DSP.get(self.family, 1))

    def clock_mhz(self, hw: HWConfig) -> float:
        """Achievable fabric clock of ``hw`` on this board (MHz, whole numbers).

        The shipped clock of ``pkg_config.py`` (``freq_mhz``) is what the 1x16x16 core
        (adder-tree depth log2(16) = 4) closes at; a deeper tree lengthens the GEMM's
        critical path by :data:`TREE_LEVEL_DERATE` per level, and LUT utilisation above
        :data:`CONGESTION_KNEE` adds routing delay (:data:`CONGESTION_SLOPE`).  A shallower
        tree does not raise the clock above the shipped one (the shell, DMA and AXI paths
        limit it too).  Scaled by ``estimate_scale(clock=...)``.
        """
        depth = max(int(math.log2(hw.block_in)), 0)
        period = 1.0 + TREE_LEVEL_DERATE * max(depth - REF_TREE_DEPTH, 0)
        util = self.usage(hw)["lut"] / self.lut
        period *= 1.0 + CONGESTION_SLOPE * max(util - CONGESTION_KNEE, 0.0)
        scale = _SCALE["clock"]
        if (hw.batch, hw.block_in, hw.block_out) != (1, 16, 16):
            scale *= _SCALE["clock_other"]
        return float(max(1, math.floor(self.freq_mhz * scale / period)))

    def realize(self, hw: HWConfig) -> HWConfig:
        """``hw`` at this board's bus width and its achievable clock (:meth:`clock_mhz`)."""
        if hw.bus_bytes != self.bus_bytes:
            hw = hw.replace(bus_bytes=self.bus_bytes)
        f = self.clock_mhz(hw)
        return hw if hw.freq_mhz == f else hw.replace(freq_mhz=f)

    def violations(self, hw: HWConfig) -> list[str]:
        """Human-readable reasons why ``hw`` does not fit (empty when it fits)."""
        u = self.usage(hw)
        out = []
        if u["bram36"] > self.bram_usable:
            out.append(f"BRAM36 {u['bram36']} > {self.bram_usable} usable on {self.name}")
        if u["lut"] > LUT_UTIL_LIMIT * self.lut:
            out.append(f"LUT {u['lut']} > {int(LUT_UTIL_LIMIT * 100)}% of {self.lut} on {self.name}")
        return out

    def fits(self, hw: HWConfig) -> bool:
        """True when ``hw``'s BRAM, DSP and LUT estimates fit this board's budget."""
        return not self.violations(hw)

    def default_hw(self) -> HWConfig:
        """The shipped 1x16x16 default config at this board's clock and bus width."""
        return HWConfig(freq_mhz=self.freq_mhz, bus_bytes=self.bus_bytes)


#: FPGA boards: PYNQ-Z1 (Zynq-7020), Ultra96 (ZU3EG), ZCU104 (ZU7EV)
BOARDS: dict[str, Board] = {
    "pynq": Board("pynq", "xc7z020clg484-1", bram36=140, dsp=220, lut=53200,
                  freq_mhz=100.0, bus_bytes=8),
    "ultra96": Board("ultra96", "xczu3eg-sbva484-1-e", bram36=216, dsp=360, lut=70560,
                     freq_mhz=333.0, bus_bytes=16, family="ultrascale+"),
    "zcu104": Board("zcu104", "xczu7ev-ffvc1156-2-e", bram36=312, dsp=1728, lut=230400,
                    freq_mhz=333.0, bus_bytes=16, family="ultrascale+"),
}


def get_board(name: str) -> Board:
    """The :class:`Board` called ``name`` (ConfigError if unknown)."""
    key = str(name).strip().lower()
    if key not in BOARDS:
        raise ConfigError(f"unknown board {name!r}; choose from {', '.join(BOARDS)}")
    return BOARDS[key]
