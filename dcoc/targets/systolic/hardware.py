"""The systolic array's hardware: boards, configs, clock and resource model (see the package
docstring)."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from dcoc.errors import ConfigError

# ------------------------------------------------------------------ constants
BRAM_BYTES = 4608            # one 36 Kb block RAM
LUT_SHELL = 9000             # control, DMA engines, AXI
LUT_PER_PE = 30              # operand/partial-sum registers and the adder of a PE
LUT_PER_LUT_MULT = 70        # an int8 multiplier built from LUTs
#: the shadow weight register of a PE: 8 flip-flops (free in the slice) and the 8-bit
#: 2:1 select of the active register (two bits per LUT6_2), plus its enable: ~6 LUTs
LUT_PER_PE_WDB = 6
#: the window generator of window reuse: tap counters and an SRAM address per array row
#: (~24 LUTs each: a 16-bit adder and a compare) plus the halo/padding control
LUT_WINDOW_BASE = 600
LUT_WINDOW_PER_ROW = 24
LUT_UTIL_LIMIT = 0.8
DMA_SETUP_CYCLES = 40        # per transfer (descriptor + DRAM latency)
LAUNCH_CYCLES = 1500         # per layer (instruction fetch, barrier)

#: clock derating, the shape of :meth:`dcoc.targets.vta.hardware.Board.clock_mhz`: a board's
#: ``freq_mhz`` is what the 16x16 array closes at; every doubling of the PEs beyond it
#: lengthens the period by :data:`PE_DOUBLING_DERATE` (the weight-load/valid enables and
#: the SRAM read buses fan out to twice the PEs, one more buffer level, and the array
#: spreads over more clock regions; estimate, uncertainty +-50 %), and LUT utilisation
#: above :data:`CONGESTION_KNEE` adds routing delay at :data:`CONGESTION_SLOPE` per unit
#: (the values of dcoc.targets.vta.hardware, from UG949's ~70 % guideline).  A smaller array does
#: not clock faster (the shell's DMA and AXI paths limit it).
REF_PES = 256
PE_DOUBLING_DERATE = 0.05
CONGESTION_KNEE = 0.70
CONGESTION_SLOPE = 0.5

HW_RANGES = {
    "rows": (8, 16, 32, 64),
    "cols": (8, 16, 32, 64),
    "log_ifmap": (14, 15, 16, 17),
    "log_wgt": (14, 15, 16, 17),
    "log_ofmap": (14, 15, 16, 17),
    "weight_double_buffer": (0, 1),
}
HW_KNOBS = tuple(HW_RANGES)


@dataclass(frozen=True)
class SystolicBoard:
    name: str
    part: str
    bram36: int
    dsp: int
    lut: int
    freq_mhz: float            # the clock a 16x16 array closes at
    bus_bytes: int             # DRAM bytes per cycle
    bram_reserved: int = 12

    def clock_mhz(self, hw: "SystolicConfig") -> float:
        """Achievable clock of ``hw``'s array on this board (MHz, whole numbers): the
        board's clock derated by the PE count and LUT congestion (module constants)."""
        period = 1.0 + PE_DOUBLING_DERATE * max(math.log2(hw.pes / REF_PES), 0.0)
        util = hw.resources(dsp_budget=self.dsp)["lut"] / self.lut
        period *= 1.0 + CONGESTION_SLOPE * max(util - CONGESTION_KNEE, 0.0)
        return float(max(1, math.floor(self.freq_mhz / period + 1e-9)))

    def realize(self, hw: "SystolicConfig") -> "SystolicConfig":
        """``hw`` at this board's bus width and the clock its array achieves."""
        from dataclasses import replace

        hw = replace(hw, bus_bytes=self.bus_bytes)
        return replace(hw, freq_mhz=self.clock_mhz(hw))

    def default_hw(self) -> "SystolicConfig":
        return self.realize(SystolicConfig(16, 16, 15, 15, 15, self.freq_mhz, self.bus_bytes, 1))


#: the boards of this target, declared once
BOARDS = {
    "arty-a7": SystolicBoard("arty-a7", "xc7a100tcsg324-1", bram36=135, dsp=240, lut=63400,
                             freq_mhz=150.0, bus_bytes=8),
    "kv260": SystolicBoard("kv260", "xck26-sfvc784-2lv-c", bram36=144, dsp=1248, lut=117120,
                           freq_mhz=250.0, bus_bytes=16),
}


@dataclass(frozen=True)
class SystolicConfig:
    """One weight-stationary array configuration."""

    rows: int = 16
    cols: int = 16
    log_ifmap: int = 15
    log_wgt: int = 15
    log_ofmap: int = 15
    freq_mhz: float = 150.0
    bus_bytes: int = 8
    weight_double_buffer: int = 0

    def __post_init__(self):
        for k in ("rows", "cols"):
            v = getattr(self, k)
            if v < 1 or v & (v - 1):
                raise ConfigError(f"systolic {k} must be a power of two >= 1, got {v}")
        for k in ("log_ifmap", "log_wgt", "log_ofmap"):
            if not 10 <= getattr(self, k) <= 22:
                raise ConfigError(f"systolic {k} must be in 10..22, got {getattr(self, k)}")
        if self.freq_mhz <= 0 or self.bus_bytes < 1:
            raise ConfigError("systolic clock and bus width must be positive")
        if self.weight_double_buffer not in (0, 1):
            raise ConfigError(f"systolic weight_double_buffer must be 0 or 1, got {self.weight_double_buffer}")

    @property
    def name(self) -> str:
        return (f"ws{self.rows}x{self.cols}_i{self.log_ifmap}w{self.log_wgt}o{self.log_ofmap}"
                f"{'_wdb' if self.weight_double_buffer else ''}_{self.freq_mhz:g}MHz_bus{self.bus_bytes}")

    @property
    def pes(self) -> int:
        return self.rows * self.cols

    @property
    def ifmap_bytes(self) -> int:
        return 1 << self.log_ifmap

    @property
    def wgt_bytes(self) -> int:
        return 1 << self.log_wgt

    @property
    def ofmap_bytes(self) -> int:
        return 1 << self.log_ofmap

    def bram36(self) -> int:
        def banked(total, banks):
            return banks * max(1, math.ceil(total / banks / BRAM_BYTES))
        return (banked(self.ifmap_bytes, self.rows) + banked(self.wgt_bytes, max(self.cols // 4, 1))
                + banked(self.ofmap_bytes, self.cols))

    def resources(self, dsp_budget: int | None = None) -> dict:
        dsp = self.pes if dsp_budget is None else min(self.pes, int(dsp_budget))
        lut = (LUT_SHELL + self.pes * LUT_PER_PE + (self.pes - dsp) * LUT_PER_LUT_MULT
               + self.pes * LUT_PER_PE_WDB * self.weight_double_buffer
               + LUT_WINDOW_BASE + LUT_WINDOW_PER_ROW * self.rows)
        return {"bram36": self.bram36(), "dsp": dsp, "lut": int(lut), "pes": self.pes}

    @classmethod
    def parse(cls, text: str, board: SystolicBoard | None = None) -> "SystolicConfig":
        m = re.fullmatch(r"ws(\d+)x(\d+)_i(\d+)w(\d+)o(\d+)(_wdb)?(?:_([\d.]+)MHz_bus(\d+))?", text.strip())
        if not m:
            raise ConfigError(f"bad systolic hardware name '{text}': expected e.g. "
                              "ws16x16_i15w15o15_wdb or ws16x16_i15w15o15_150MHz_bus8")
        r, c, i, w, o, wdb, f, b = m.groups()
        bd = board or BOARDS["arty-a7"]
        hw = cls(int(r), int(c), int(i), int(w), int(o), bd.freq_mhz, int(b) if b else bd.bus_bytes,
                 1 if wdb else 0)
        from dataclasses import replace

        return replace(hw, freq_mhz=float(f) if f else bd.clock_mhz(hw))


# ------------------------------------------------------------------ workloads
