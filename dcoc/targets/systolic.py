"""A weight-stationary systolic array: the second accelerator target (deliberately unlike VTA).

Hardware (knobs of :class:`SystolicConfig`): a ``rows`` x ``cols`` array of int8 MAC
processing elements (PEs), three on-chip SRAMs -- input feature map (``2**log_ifmap``
bytes, int8), weights (``2**log_wgt`` bytes, int8) and output accumulators
(``2**log_ofmap`` bytes, int32) -- and ``weight_double_buffer``: a shadow weight register
in every PE, so the next fold's weights shift in while the current fold computes (as in
the TPU v1, Jouppi et al., ISCA 2017, section 2).  The clock is the board's clock derated
by the array's size and the LUT use (:meth:`SystolicBoard.clock_mhz`, the rule of
:meth:`dcoc.vta.hardware.Board.clock_mhz`); the DRAM moves ``bus_bytes`` per cycle.

Dataflow: every layer is a GEMM ``out[M, N] = in[M, K] @ w[K, N]`` (conv2d: ``M =
out_h * out_w``, ``K = in_channels * kh * kw``, ``N = out_channels``).  A weight *fold*
(``rows`` reduction rows x ``cols`` output columns) is shifted into the array (``rows``
cycles) and stays there while input vectors stream through it (one per cycle; ``rows +
cols - 2`` fill/drain cycles).  Inputs reach the input SRAM one of two ways, per layer
and schedule:

* **window reuse** (conv2d, when it fits the input SRAM and moves fewer bytes): the input
  patch of a tile -- its output rows plus the kernel's halo, over the tile's input
  channels -- is loaded once and a window generator feeds the array the ``kh x kw`` taps;
  M tiles are whole output rows (``tile_m // out_w`` of them) or row segments of
  ``tile_m`` pixels, K tiles whole input channels (``tile_k * rows // (kh * kw)``);
* **im2col streaming** (dense layers, or when no patch fits): the ``M x K`` im2col matrix
  is read from DRAM tile by tile, ``tile_m`` rows by ``tile_k * rows`` columns.

Schedule knobs: ``tile_m``, ``tile_k`` (folds along K per tile), ``tile_n`` (folds along
N per tile), ``order`` (0: loops n, k, m -- weight reuse, partial sums of all M rows kept
on chip or spilled to DRAM when they do not fit; 1: loops m, n, k -- output stationary)
and ``double_buffer`` (1: two input and two weight tiles in the SRAMs, loads of the next
tile overlap compute).

Timing: :func:`simulate` runs the schedule's tile stream through an event model of the
DMA engine (one DRAM port: loads, then the previous tile's store, in program order; each
transfer costs a setup plus one bus beat per ``bus_bytes`` of every contiguous segment)
and the array (a tile computes when its input, weights and accumulators are ready;
buffer slots are released when the last tile using them finishes).  Runs of identical
tiles are not replayed one by one: once a tile (or a pair) shifts every event time by
the same amount, the rest of the run is extrapolated, which is exact for this max-plus
model.  :func:`roofline` is the layer's lower bound on a config: MACs over the PEs, or
the bytes it must move (each input pixel it reads, each weight and output once) over
the bandwidth, whichever is longer; no schedule simulates faster.

Resources: one DSP per PE up to the board's DSPs, LUT-built multipliers beyond; the
shadow weight registers and the window generator in LUTs; SRAMs in 36 Kb BRAMs, banked
per array row (inputs) and column (accumulators).  Boards: ``arty-a7`` (Artix-7 100T)
and ``kv260`` (Kria K26).
"""
from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from functools import lru_cache

from dcoc.errors import ConfigError, DcocError
from dcoc.search.space import Knob, Space
from dcoc.targets.base import Layer, Target

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

#: clock derating, the shape of :meth:`dcoc.vta.hardware.Board.clock_mhz`: a board's
#: ``freq_mhz`` is what the 16x16 array closes at; every doubling of the PEs beyond it
#: lengthens the period by :data:`PE_DOUBLING_DERATE` (the weight-load/valid enables and
#: the SRAM read buses fan out to twice the PEs, one more buffer level, and the array
#: spreads over more clock regions; estimate, uncertainty +-50 %), and LUT utilisation
#: above :data:`CONGESTION_KNEE` adds routing delay at :data:`CONGESTION_SLOPE` per unit
#: (the values of dcoc.vta.hardware, from UG949's ~70 % guideline).  A smaller array does
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
@dataclass(frozen=True)
class ConvGeom:
    """The geometry of a conv2d layer (NCHW input, OIHW weights): what window reuse needs."""

    batch: int
    height: int
    width: int
    in_channels: int
    kernel_h: int
    kernel_w: int
    stride_h: int = 1
    stride_w: int = 1
    pad_top: int = 0
    pad_left: int = 0
    pad_bottom: int = 0
    pad_right: int = 0
    dilation_h: int = 1
    dilation_w: int = 1

    @property
    def out_height(self) -> int:
        return (self.height + self.pad_top + self.pad_bottom - (self.kernel_h - 1) * self.dilation_h - 1) \
            // self.stride_h + 1

    @property
    def out_width(self) -> int:
        return (self.width + self.pad_left + self.pad_right - (self.kernel_w - 1) * self.dilation_w - 1) \
            // self.stride_w + 1

    @property
    def taps(self) -> int:
        return self.kernel_h * self.kernel_w

    def span(self, axis: str, o0: int, o1: int) -> int:
        """Input rows (``axis="h"``) or columns (``"w"``) in the contiguous range the outputs
        ``o0 .. o1 - 1`` read, the padding left out."""
        if axis == "h":
            s, p, k, d, n = self.stride_h, self.pad_top, self.kernel_h, self.dilation_h, self.height
        else:
            s, p, k, d, n = self.stride_w, self.pad_left, self.kernel_w, self.dilation_w, self.width
        lo, hi = o0 * s - p, (o1 - 1) * s - p + (k - 1) * d
        return max(0, min(hi, n - 1) - max(lo, 0) + 1)

    def touched(self, axis: str) -> int:
        """Input rows/columns at least one output reads (fewer than the span when the stride
        exceeds the kernel: a 1x1 stride-2 conv reads every other row)."""
        return _touched(self, axis)


@lru_cache(maxsize=1024)
def _geom(fields: tuple) -> ConvGeom:
    return ConvGeom(*fields)


@lru_cache(maxsize=256)
def _touched(g: ConvGeom, axis: str) -> int:
    if axis == "h":
        s, p, k, d, n, o = g.stride_h, g.pad_top, g.kernel_h, g.dilation_h, g.height, g.out_height
    else:
        s, p, k, d, n, o = g.stride_w, g.pad_left, g.kernel_w, g.dilation_w, g.width, g.out_width
    return len({i * s - p + j * d for i in range(o) for j in range(k)} & set(range(n)))


@dataclass(frozen=True)
class GemmWorkload:
    """A layer as the GEMM the array computes: ``M x K`` inputs times ``K x N`` weights;
    ``conv`` holds a conv2d layer's geometry, the fields of :class:`ConvGeom` as a tuple
    (plain data: layer files store it), None for a plain GEMM (inputs streamed)."""

    name: str
    M: int
    K: int
    N: int
    conv: tuple | None = None

    def __post_init__(self):
        if isinstance(self.conv, ConvGeom):
            object.__setattr__(self, "conv", dataclasses.astuple(self.conv))
        elif self.conv is not None:
            object.__setattr__(self, "conv", tuple(int(x) for x in self.conv))
        g = self.geom
        if g is not None and (self.M != g.batch * g.out_height * g.out_width or self.K != g.in_channels * g.taps):
            raise DcocError(f"workload {self.name}: M={self.M}, K={self.K} do not match its conv geometry")

    @property
    def geom(self) -> ConvGeom | None:
        """The conv2d geometry (None: a plain GEMM)."""
        return None if self.conv is None else _geom(self.conv)

    @property
    def macs(self) -> int:
        return self.M * self.K * self.N

    @property
    def flops(self) -> int:
        return 2 * self.macs

    def min_bytes(self) -> int:
        """Bytes any schedule moves between DRAM and the chip: every input element it reads
        (conv2d: each input pixel at least one window touches), every weight and every
        int8 output, once."""
        g = self.geom
        inp = self.M * self.K if g is None else g.batch * g.in_channels * g.touched("h") * g.touched("w")
        return inp + self.K * self.N + self.M * self.N


def conv_workload(name: str, g: ConvGeom, out_channels: int) -> GemmWorkload:
    return GemmWorkload(name, g.batch * g.out_height * g.out_width, g.in_channels * g.taps, out_channels, g)


def _pow2_upto(n: int) -> tuple:
    out, v = [], 1
    while v < n:
        out.append(v)
        v *= 2
    out.append(v)
    return tuple(out)


def sw_choices(wl: GemmWorkload, hw) -> dict:
    """Every schedule knob's choices for ``wl`` on an array of ``hw.rows x hw.cols``."""
    return {
        "tile_m": tuple(v for v in _pow2_upto(wl.M) if v >= min(8, wl.M) or v == wl.M) or (1,),
        "tile_k": _pow2_upto(math.ceil(wl.K / hw.rows)),
        "tile_n": _pow2_upto(math.ceil(wl.N / hw.cols)),
        "order": (0, 1),
        "double_buffer": (0, 1),
    }


def roofline(wl: GemmWorkload, hw: SystolicConfig) -> dict:
    """The layer's lower bound on ``hw`` (seconds): ``compute`` = MACs / (PEs x clock),
    ``memory`` = :meth:`GemmWorkload.min_bytes` / (bus bytes per cycle x clock), ``bound``
    = the larger; ``bytes`` = the minimal traffic."""
    f = hw.freq_mhz * 1e6
    compute = wl.macs / hw.pes / f
    nbytes = wl.min_bytes()
    memory = nbytes / hw.bus_bytes / f
    return {"compute": compute, "memory": memory, "bound": max(compute, memory), "bytes": nbytes}


# ------------------------------------------------------------------ tiling
def _ceil(a: int, b: int) -> int:
    return -(-a // b)


class _Tiling:
    """How a schedule cuts ``wl`` into tiles: per loop level, each iteration's parameters."""

    def __init__(self, wl: GemmWorkload, hw: SystolicConfig, k: dict):
        self.wl, self.hw = wl, hw
        R, C = hw.rows, hw.cols
        self.db = 2 if k["double_buffer"] else 1
        self.order = int(k["order"])
        tm = min(int(k["tile_m"]), wl.M)
        kk = int(k["tile_k"]) * R
        nn = int(k["tile_n"]) * C
        self.tm, self.kk, self.nn = tm, kk, nn
        n_sizes = [min(nn, wl.N - i) for i in range(0, wl.N, nn)]
        self.n_par = [(n,) for n in n_sizes]
        # im2col streaming
        s_m = [(min(tm, wl.M - i), 0, 0) for i in range(0, wl.M, tm)]
        s_k = [(min(kk, wl.K - i), 0) for i in range(0, wl.K, kk)]
        self.stream = (s_m, [(0, 0, 0)], s_k)
        self.reuse = self._reuse_tiling(wl.geom, tm, kk) if wl.conv is not None else None
        stream_in = tm * kk * self.db
        self.stream_fits = stream_in <= hw.ifmap_bytes
        if self.reuse is not None:
            r_m, r_c, r_k, patch_max, total = self.reuse
            self.reuse_fits = patch_max * self.db <= hw.ifmap_bytes
            self.use_reuse = self.reuse_fits and (total < wl.M * wl.K or not self.stream_fits)
        else:
            self.reuse_fits = self.use_reuse = False
        if self.use_reuse:
            self.m_par, self.c_par, self.k_par = self.reuse[:3]
        else:
            self.m_par, self.c_par, self.k_par = self.stream

    def _reuse_tiling(self, g: ConvGeom, tm: int, kk: int):
        oh, ow = g.out_height, g.out_width
        if tm >= ow:
            rows_t, cols_t = min(oh, tm // ow), ow
        else:
            rows_t, cols_t = 1, tm
        m_par = []
        for _ in range(g.batch):
            for r in range(0, oh, rows_t):
                r1 = min(oh, r + rows_t)
                m_par.append((r1 - r, g.span("h", r, r1), 1))
        c_par = []
        for c in range(0, ow, cols_t):
            c1 = min(ow, c + cols_t)
            c_par.append((c1 - c, g.span("w", c, c1), 1 if c1 - c == ow else 0))
        cs = max(1, kk // g.taps)
        k_par = [(min(cs, g.in_channels - c) * g.taps, min(cs, g.in_channels - c))
                 for c in range(0, g.in_channels, cs)]
        patch_max = cs * max(p[1] for p in m_par) * max(p[1] for p in c_par)
        total = g.in_channels * sum(p[1] for p in m_par) * sum(p[1] for p in c_par)
        return m_par, c_par, k_par, patch_max, total

    def fit_reason(self) -> str | None:
        hw, db = self.hw, self.db
        if not (self.stream_fits or self.reuse_fits):
            return f"input tile {self.tm}x{self.kk} ({db}x) > {hw.ifmap_bytes} B input SRAM"
        kk = max(p[0] for p in self.k_par)
        if kk * self.nn * db > hw.wgt_bytes:
            return f"weight tile {kk}x{self.nn} ({db}x) > {hw.wgt_bytes} B weight SRAM"
        if self.tm * self.nn * 4 > hw.ofmap_bytes:
            return f"accumulator tile {self.tm}x{self.nn} > {hw.ofmap_bytes} B accumulator SRAM"
        return None


def fit_reason(wl: GemmWorkload, hw: SystolicConfig, k: dict) -> str | None:
    """Why a schedule does not fit the SRAMs (None when it fits)."""
    return _Tiling(wl, hw, k).fit_reason()


# ------------------------------------------------------------------ the tile-stream simulator
# the event state: times in cycles (ints), clamped so that a run of identical tiles shifts
# every entry by the same amount once it is periodic
_D, _A, _I0, _I1, _W0, _W1, _RI, _RW, _RP, _AC0, _AC1, _PR = range(12)
_NSTATE = 12
# counters: dram bytes (input, weight, psum, output), transfers, busy cycles, stalls, tiles
_NCOUNT = 8


class _Sim:
    """Runs the tile stream of a :class:`_Tiling` through the DMA/array event model."""

    def __init__(self, t: _Tiling):
        self.t = t
        wl, hw = t.wl, t.hw
        self.R, self.C, self.bus = hw.rows, hw.cols, hw.bus_bytes
        self.wdb = bool(hw.weight_double_buffer)
        self.Kt, self.Nt = len(t.k_par), len(t.n_par)
        Mt = len(t.m_par) * len(t.c_par)
        # partial sums: order 0 keeps all M rows of an N tile on chip when they fit, else
        # spills them; accumulator regions double-buffered when two tiles fit
        self.spill = t.order == 0 and self.Kt > 1 and wl.M * t.nn * 4 > hw.ofmap_bytes
        self.acc_free = t.order == 0 and self.Kt > 1 and not self.spill and Mt > 1
        self.acc_db = t.tm * t.nn * 4 * 2 <= hw.ofmap_bytes
        # loop levels, outer first: (name, parameters per iteration)
        levels = {"m": t.m_par, "c": t.c_par, "n": t.n_par, "k": t.k_par}
        self.names = ("m", "c", "n", "k") if t.order == 1 else ("n", "k", "m", "c")
        self.pars = [levels[n] for n in self.names]
        self.trips = [len(p) for p in self.pars]
        self.lvl = {n: i for i, n in enumerate(self.names)}
        self.runs = []
        for lv, p in enumerate(self.pars):    # index -> end of its run of equal iterations
            T = len(p)                        # (the last K tile stores: a run of its own)
            keys = [(q, lv == self.lvl["k"] and i == T - 1) for i, q in enumerate(p)]
            end, out = T, [0] * T
            for i in range(T - 1, -1, -1):
                if i + 1 < T and keys[i + 1] != keys[i]:
                    end = i + 1
                out[i] = end
            self.runs.append(out)
        self.in_dims = {self.lvl["m"], self.lvl["c"], self.lvl["k"]}
        self.w_dims = {self.lvl["k"], self.lvl["n"]}
        self.idx = [0, 0, 0, 0]
        self.s = [0] * _NSTATE
        self.cnt = [0] * _NCOUNT
        self.primed = False
        self.pend = 0                # cycles of the store waiting for the DRAM port
        self.cache: dict = {}

    # -------------------------------------------------------------- one tile
    def _dma(self, segs: int, seg: int) -> int:
        return DMA_SETUP_CYCLES + segs * _ceil(seg, self.bus)

    def _describe(self, key):
        """Costs of the tile at the current indices: (input load, weight load, psum load,
        compute, fill, store, drain, new accumulation, counters)."""
        t, wl = self.t, self.t.wl
        (mrows, rin, _), (mcols, cin, full_w), (nt,), (kt, ch) = key[:4]
        d, kfirst, klast = key[4:]
        changed = set(range(4)) if d < 0 else {d} | {l for l in range(d + 1, 4) if self.trips[l] > 1}
        cnt = [0] * _NCOUNT
        if t.use_reuse:
            g = wl.geom
            mt = mrows * mcols
            in_b = ch * rin * cin
            in_cyc = self._dma(ch, rin * g.width) if full_w else self._dma(ch * rin, cin)
            o_segs, o_seg = (nt, mt) if full_w else (nt * mrows, mcols)
        else:
            mt = mrows
            in_b = mt * kt
            in_cyc = self._dma(1, in_b) if kt == wl.K else self._dma(mt, kt)
            o_segs, o_seg = (1, mt * nt) if mt == wl.M else (nt, mt)
        load_in = bool(changed & self.in_dims)
        load_w = bool(changed & self.w_dims)
        if load_in:
            cnt[0], cnt[4] = in_b, cnt[4] + 1
        else:
            in_cyc = 0
        w_cyc = 0
        if load_w:
            w_b = kt * nt
            w_cyc = self._dma(1, w_b) if kt == wl.K else self._dma(nt, kt)
            cnt[1], cnt[4] = w_b, cnt[4] + 1
        ps_cyc = st_cyc = 0
        if self.spill and not kfirst:
            ps_cyc = self._dma(o_segs, o_seg * 4)
            cnt[2] += mt * nt * 4
            cnt[4] += 1
        if klast:
            st_cyc = self._dma(o_segs, o_seg)
            cnt[3] += mt * nt
            cnt[4] += 1
        elif self.spill:
            st_cyc = self._dma(o_segs, o_seg * 4)
            cnt[2] += mt * nt * 4
            cnt[4] += 1
        R, C = self.R, self.C
        folds = _ceil(kt, R) * _ceil(nt, C)
        if self.wdb:     # the next fold's weights shift in behind the current one
            comp, fill, drain = folds * max(mt, R), R + R + C - 2, R + C - 2
        else:            # weights shift in, inputs stream, the array drains: per fold
            comp, fill, drain = folds * (R + mt + R + C - 2), 0, 0
        cnt[5] = comp
        cnt[7] = 1
        new_acc = kfirst or self.spill    # the tile starts on a free accumulator region
        return in_cyc, w_cyc, ps_cyc, comp, fill, st_cyc, drain, new_acc, cnt

    def _tile(self):
        idx, pars = self.idx, self.pars
        d = -1
        for lv in range(4):
            if idx[lv]:
                d = lv
        kl = self.lvl["k"]
        par = {n: pars[lv][idx[lv]] for lv, n in enumerate(self.names)}
        key = (par["m"], par["c"], par["n"], par["k"], d, idx[kl] == 0, idx[kl] == self.Kt - 1)
        desc = self.cache.get(key)
        if desc is None:
            desc = self.cache[key] = self._describe(key)
        in_cyc, w_cyc, ps_cyc, comp, fill, st_cyc, drain, new_acc, cnt = desc
        s, db = self.s, self.t.db == 2
        D = s[_D]
        if in_cyc:
            if db:
                start = max(D, s[_I0])
                s[_I0] = s[_I1]
            else:
                start = max(D, s[_I1])
            D = s[_RI] = start + in_cyc
        if w_cyc:
            if db:
                start = max(D, s[_W0])
                s[_W0] = s[_W1]
            else:
                start = max(D, s[_W1])
            D = s[_RW] = start + w_cyc
        if self.pend:                      # the previous tile's store
            D = max(D, s[_PR]) + self.pend
            s[_AC1] = D
            self.pend = 0
        ready = max(s[_A], s[_RI], s[_RW])
        if new_acc and not self.acc_free:  # wait for the region's last store
            if self.acc_db:
                free = s[_AC0]
                s[_AC0] = s[_AC1]
            else:
                free = s[_AC1]
            ready = max(ready, free)
            if ps_cyc:                     # partial sums read back into it
                D = s[_RP] = max(D, free) + ps_cyc
                ready = max(ready, D)
        if ready > s[_A] or not self.primed:
            comp += fill
            self.cnt[6] += 1
        self.primed = True
        end = ready + comp
        s[_A] = s[_I1] = s[_W1] = end
        if st_cyc:
            self.pend = st_cyc
            s[_PR] = end + drain
        s[_D] = D
        for i in (_I0, _W0, _PR):          # only ever compared with a later D
            if s[i] < D:
                s[i] = D
        for i in (_RI, _RW, _RP, _AC0, _AC1):   # only ever compared with a later A
            if s[i] < end:
                s[i] = end
        c = self.cnt
        for i in range(_NCOUNT):
            c[i] += cnt[i]

    # -------------------------------------------------------------- the loop nest
    def _snap(self):
        return (tuple(self.s), tuple(self.cnt), self.primed, self.pend)

    def _walk(self, lv: int):
        runs, T = self.runs[lv], self.trips[lv]
        hist = []                # snapshots after each simulated iteration: (index, snap)
        i = 0
        while i < T:
            jumped = False
            for p in (1, 2):     # a run whose last p iterations shifted every time by d
                if (i - p >= 1 and len(hist) > p and hist[-1][0] == i - 1 and hist[-1 - p][0] == i - 1 - p
                        and runs[i - p] == runs[i] and runs[i] - i >= p):
                    a, b = hist[-1 - p][1], hist[-1][1]
                    if a[2:] != b[2:]:
                        continue
                    d = b[0][0] - a[0][0]
                    if any(y - x != d for x, y in zip(a[0], b[0])):
                        continue
                    reps = (runs[i] - i) // p
                    dc = [y - x for x, y in zip(a[1], b[1])]
                    self.s = [x + reps * d for x in self.s]
                    self.cnt = [x + reps * y for x, y in zip(self.cnt, dc)]
                    i += reps * p
                    hist.append((i - 1, self._snap()))
                    jumped = True
                    break
            if jumped:
                continue
            self.idx[lv] = i
            if lv == 3:
                self._tile()
            else:
                for deeper in range(lv + 1, 4):
                    self.idx[deeper] = 0
                self._walk(lv + 1)
            hist.append((i, self._snap()))
            if len(hist) > 4:
                del hist[0]
            i += 1
        # leave the indices at the last iteration (the next tile's "previous")
        self.idx[lv] = T - 1

    def run(self) -> tuple[int, list]:
        self._walk(0)
        s = self.s
        D = s[_D]
        if self.pend:
            D = max(D, s[_PR]) + self.pend
        return max(D, s[_A]) + LAUNCH_CYCLES, self.cnt


def simulate(wl: GemmWorkload, hw: SystolicConfig, k: dict) -> tuple[float | None, dict]:
    """Time of ``wl`` with schedule ``k`` on ``hw``: ``(seconds, info)``, or ``(None,
    {"reason": ...})`` when the schedule does not fit."""
    t = _Tiling(wl, hw, k)
    reason = t.fit_reason()
    if reason:
        return None, {"reason": reason}
    cycles, cnt = _Sim(t).run()
    secs = cycles / (hw.freq_mhz * 1e6)
    bound = roofline(wl, hw)["bound"]
    return secs, {"cycles": int(cycles), "gops": 2 * wl.macs / secs / 1e9,
                  "utilization": wl.macs / hw.pes / cycles, "roofline": bound / secs,
                  "dram_bytes": int(sum(cnt[:4])), "input_bytes": int(cnt[0]), "weight_bytes": int(cnt[1]),
                  "psum_bytes": int(cnt[2]), "output_bytes": int(cnt[3]), "transfers": int(cnt[4]),
                  "busy_cycles": int(cnt[5]), "stalls": int(cnt[6]), "tiles": int(cnt[7]),
                  "input_mode": "window" if t.use_reuse else "im2col"}


def measure_systolic(task, config):
    """Measurer function (runs anywhere: pure Python)."""
    p = task.payload
    return simulate(p["workload"], p["hw"], config)


# ------------------------------------------------------------------ the target
class SystolicTarget(Target):
    name = "systolic"
    label = "the systolic array"
    description = ("weight-stationary systolic array (rows x cols int8 PEs, three SRAMs), tile-stream "
                   "event simulator")
    default_board = "arty-a7"
    boards = BOARDS
    hw_knobs = HW_KNOBS
    core_knobs = ("rows", "cols", "weight_double_buffer")   # the PE array and its weight registers
    slots = ("tile_m", "tile_k", "tile_n", "order", "double_buffer")
    shrink_order = ("tile_m", "tile_k", "tile_n")
    frontend_target = "vta"   # the accelerator extraction: conv2d / dense on the array, rest on CPU

    # ---------------------------------------------------------------- hardware
    def hw_space(self, board, ranges=None):
        bd = self.board(board)
        ranges = ranges or HW_RANGES
        knobs = [Knob(k, tuple(ranges[k]), "hw") for k in HW_KNOBS]
        cache: dict = {}

        def fits(cfg):
            key = tuple(cfg[k] for k in HW_KNOBS)
            if key not in cache:
                try:
                    v = self.violations(self.make_hw(cfg, bd), bd)
                    cache[key] = "; ".join(v) if v else None
                except DcocError as exc:
                    cache[key] = str(exc)
            return cache[key]

        return Space(knobs, [fits], {"board_bram": bd.bram36, "board_dsp": bd.dsp, "board_lut": bd.lut},
                     name=f"systolic[{bd.name}]")

    def make_hw(self, values, board):
        bd = self.board(board)
        vals = {k: int(values[k]) for k in HW_KNOBS if k in values}
        return bd.realize(SystolicConfig(**vals, freq_mhz=bd.freq_mhz, bus_bytes=bd.bus_bytes))

    def parse_hw(self, spec, board=None):
        bd = self.board(board) if board is not None else None
        if spec is None or isinstance(spec, SystolicConfig):
            return spec
        if isinstance(spec, str):
            return SystolicConfig.parse(spec, bd)
        if isinstance(spec, dict):
            vals = {k: v for k, v in spec.items() if k != "name"}
            try:
                if bd is not None:
                    vals.setdefault("bus_bytes", bd.bus_bytes)
                    if "freq_mhz" not in vals:
                        return bd.realize(SystolicConfig(**vals, freq_mhz=bd.freq_mhz))
                return SystolicConfig(**vals)
            except TypeError as exc:
                raise ConfigError(f"bad systolic hardware dict: {exc}") from None
        raise ConfigError(f"systolic hardware must be a SystolicConfig, a name or a dict, "
                          f"got {type(spec).__name__}")

    def violations(self, hw, board):
        bd = self.board(board)
        u = hw.resources(dsp_budget=bd.dsp)
        out = []
        if u["bram36"] > bd.bram36 - bd.bram_reserved:
            out.append(f"BRAM36 {u['bram36']} > {bd.bram36 - bd.bram_reserved} usable on {bd.name}")
        if u["lut"] > LUT_UTIL_LIMIT * bd.lut:
            out.append(f"LUT {u['lut']} > {int(LUT_UTIL_LIMIT * 100)}% of {bd.lut} on {bd.name}")
        if hw.freq_mhz > bd.clock_mhz(hw):
            out.append(f"clock {hw.freq_mhz:g} MHz > {bd.clock_mhz(hw):g} MHz a {hw.rows}x{hw.cols} array "
                       f"closes at on {bd.name}")
        if hw.bus_bytes > bd.bus_bytes:
            out.append(f"{hw.bus_bytes}-byte bus > {bd.bus_bytes}-byte bus of {bd.name}")
        return out

    def resources(self, hw, board):
        return hw.resources(dsp_budget=self.board(board).dsp)

    def budgets(self, board):
        bd = self.board(board)
        usable = bd.bram36 - bd.bram_reserved
        return {"bram36": (usable, f"usable BRAM36 ({usable})"), "dsp": (bd.dsp, f"DSP ({bd.dsp})"),
                "lut": (LUT_UTIL_LIMIT * bd.lut, f"{int(LUT_UTIL_LIMIT * 100)}% LUT ({int(LUT_UTIL_LIMIT * bd.lut)})")}

    def baseline_label(self, board) -> str:
        return f"{self.board(board).name} default 16x16 array (weights double-buffered) + default schedules"

    def describe_hw(self, hw, board):
        r = self.resources(hw, board)
        wdb = ", weights double-buffered" if hw.weight_double_buffer else ""
        return (f"{hw.name}  ({hw.rows}x{hw.cols} weight-stationary array{wdb}, {hw.freq_mhz:g} MHz, "
                f"{hw.bus_bytes} B/cycle DRAM; BRAM36 {r['bram36']}, DSP {r['dsp']}, LUT {r['lut']} "
                f"on {self.board(board).name})")

    # ---------------------------------------------------------------- workloads
    def _from_task(self, t) -> tuple[GemmWorkload, int]:
        w = t.workload
        if t.kind == "conv2d":
            if int(w.get("groups", 1)) != 1:
                raise DcocError(f"task {t.name}: grouped conv2d does not run on the systolic array")
            g = ConvGeom(*(int(w[f]) for f in ("batch", "height", "width", "in_channels", "kernel_h",
                                               "kernel_w", "stride_h", "stride_w", "pad_top", "pad_left",
                                               "pad_bottom", "pad_right", "dilation_h", "dilation_w")))
            if (g.out_height, g.out_width) != (int(w["out_height"]), int(w["out_width"])):
                raise DcocError(f"task {t.name}: output {w['out_height']}x{w['out_width']} does not match "
                                f"its input, kernel, stride and padding")
            return conv_workload(t.name, g, int(w["out_channels"])), 1
        if t.kind in ("dense", "batch_matmul"):
            reps = int(w.get("batch", 1)) if t.kind == "batch_matmul" else 1
            return GemmWorkload(t.name, int(w["m"]), int(w["k"]), int(w["n"])), reps
        raise DcocError(f"task {t.name} of kind {t.kind} cannot run on the systolic array")

    def layers(self, tasks):
        layers, cpu = [], []
        for t in tasks:
            if getattr(t, "device", "vta") != "vta":
                cpu.append((t.name, t.kind, int(t.weight)))
                continue
            wl, reps = self._from_task(t)
            layers.append(Layer(t.name, wl, int(t.weight) * reps, "conv2d" if t.kind == "conv2d" else "dense",
                                epilogue=None, target=self.name))
        for t in getattr(tasks, "cpu_ops", []) or []:
            cpu.append((t.name, t.kind, int(t.weight)))
        return layers, cpu

    def workload(self, spec):
        if isinstance(spec, GemmWorkload):
            return spec
        if isinstance(spec, str):
            return parse_workload(spec)
        if hasattr(spec, "kind") and hasattr(spec, "workload"):    # a dcoc.tasks.Task
            return self._from_task(spec)[0]
        if hasattr(spec, "out_height"):                            # a conv2d workload object
            g = ConvGeom(spec.batch, spec.height, spec.width, spec.in_channels, *spec.kernel, *spec.stride,
                         *spec.padding, *spec.dilation)
            return conv_workload(spec.name, g, spec.out_channels)
        if hasattr(spec, "in_features"):                           # a dense workload object
            return GemmWorkload(spec.name, spec.batch, spec.in_features, spec.out_features)
        raise DcocError(f"cannot run {type(spec).__name__} on the systolic array")

    def layer(self, workload, name=None):
        wl = self.workload(workload)
        return Layer(name or wl.name, wl, 1, "conv2d" if wl.name.startswith("conv") else "dense",
                     epilogue=None, target=self.name)

    def workload_key(self, layer):
        wl = layer.workload
        g = wl.geom
        if g is None:
            return f"systolic:gemm_{wl.M}x{wl.K}x{wl.N}"
        return (f"systolic:conv_b{g.batch}_{g.height}x{g.width}x{g.in_channels}_k{g.kernel_h}x{g.kernel_w}"
                f"_s{g.stride_h}x{g.stride_w}_p{g.pad_top},{g.pad_left},{g.pad_bottom},{g.pad_right}"
                f"_d{g.dilation_h}x{g.dilation_w}_n{wl.N}")

    def sw_space(self, layer, hw):
        wl = layer.workload
        ch = sw_choices(wl, hw)
        group = {"order": "thread", "double_buffer": "thread"}
        knobs = [Knob(k, v, group.get(k, "tile")) for k, v in ch.items()]
        cache: dict = {}

        def check(cfg):
            key = tuple(sorted(cfg.items()))
            if key not in cache:
                cache[key] = fit_reason(wl, hw, cfg)
            return cache[key]

        desc = {"M": wl.M, "K": wl.K, "N": wl.N, "rows": hw.rows, "cols": hw.cols,
                "ifmap": hw.ifmap_bytes, "wgt": hw.wgt_bytes, "ofmap": hw.ofmap_bytes, "bus": hw.bus_bytes}
        return Space(knobs, [check], desc, name=f"{wl.name}@{hw.name}", feature_fn=_features(wl, hw))

    def task(self, layer, hw):
        from dcoc.search.tuning_task import TuningTask

        space = self.sw_space(layer, hw)
        return TuningTask(name=layer.name, space=space, target=self.name,
                          workload_key=self.workload_key(layer), flop=float(layer.workload.flops),
                          hw_name=hw.name, payload={"workload": layer.workload, "hw": hw},
                          defaults=lambda: [d for d in [self.default_schedule(layer, hw, space)] if d])

    def default_schedule(self, layer, hw, space=None):
        """The heuristic: every schedule ranked by :func:`_estimate`'s closed-form time
        (the loop nest's traffic over the bandwidth against its folds, no simulation);
        the best-ranked one that fits the SRAMs (ties: the earlier point)."""
        import numpy as np

        space = space if space is not None else self.sw_space(layer, hw)
        grids = np.indices(space.dims).reshape(len(space.dims), -1).T
        v = {n: np.asarray(space.knob(n).choices, dtype=np.float64)[grids[:, i]]
             for i, n in enumerate(space.names)}
        est = _estimate(layer.workload, hw, v)["cycles"]
        for i in np.argsort(est, kind="stable"):
            k = space.config(grids[i])
            if space.is_valid(k):
                return k
        return None

    def ideal_seconds(self, layer, hw):
        return layer.workload.macs / hw.pes / (hw.freq_mhz * 1e6)

    def bound_seconds(self, layer, hw):
        """The compute bound counting what the array wastes on any schedule: K and N
        padded to whole folds, and per fold the M rows streamed once (with the shadow
        weight registers, at least ``rows`` cycles per fold: the next weights' shift-in;
        without them, plus the weight load and fill/drain of every fold)."""
        wl, R, C = layer.workload, hw.rows, hw.cols
        folds = _ceil(wl.K, R) * _ceil(wl.N, C)
        per = max(wl.M, R) if hw.weight_double_buffer else wl.M + 2 * R + C - 2
        return folds * per / (hw.freq_mhz * 1e6)

    def memory_seconds(self, layer, hw) -> float:
        """The layer's memory bound on ``hw``: its minimal bytes over the DRAM bandwidth
        (:func:`roofline`); with :meth:`ideal_seconds` it gives the roofline bound that no
        schedule simulates faster than."""
        return roofline(layer.workload, hw)["memory"]

    def measurer(self, n_workers=None):
        from dcoc.search.measure import FunctionMeasurer

        # a simulation takes about a millisecond: a process pool only adds overhead
        return FunctionMeasurer(measure_systolic, n_workers=0 if n_workers is None else n_workers)

    # ------------------------------------------------------- co-design helpers
    def sw_union(self, layer, hs):
        u = [set() for _ in self.slots]
        for r in hs.knob("rows").choices:
            for c in hs.knob("cols").choices:
                core = SystolicConfig(rows=r, cols=c)  # tile choices depend on the shape only
                for name, vals in sw_choices(layer.workload, core).items():
                    u[self.slot(layer, name)].update(vals)
        return [tuple(sorted(s)) for s in u]

    def descriptor(self, layer):
        wl = layer.workload
        return [wl.M, wl.K, wl.N]

    def scale_knob(self, name, value, src_hw, hw):
        if name == "tile_k":
            return value * src_hw.rows / hw.rows
        if name == "tile_n":
            return value * src_hw.cols / hw.cols
        return value

    def transfer(self, layer, src_hw, src_knobs, hw, space):
        out = super().transfer(layer, src_hw, src_knobs, hw, space) if src_knobs is not None else None
        return out if out is not None else self.default_schedule(layer, hw, space)


def _estimate(wl: GemmWorkload, hw: SystolicConfig, v: dict) -> dict:
    """First-order counts of the dataflow for arrays of knob values ``v`` (vectorised; the
    simulator's loop nest in closed form, ignoring edge tiles and the DMA queue): tiles,
    footprints, DRAM traffic, compute cycles and an estimated time in cycles."""
    import numpy as np

    R, C = hw.rows, hw.cols
    tm = np.minimum(v["tile_m"], wl.M)
    kk, nn = v["tile_k"] * R, v["tile_n"] * C
    order, db = v["order"], v["double_buffer"]
    Mt, Kt, Nt = np.ceil(wl.M / tm), np.ceil(wl.K / kk), np.ceil(wl.N / nn)
    # inputs: reloaded per N tile unless one K tile keeps them resident (order 1)
    i_passes = np.where((order == 1) & (Kt == 1), 1, Nt)
    i_traffic = i_passes * wl.M * wl.K
    per_fold = np.maximum(tm, R) if hw.weight_double_buffer else 2 * R + tm + C - 2
    m_cost = Mt * per_fold         # cycles one fold takes over all M tiles
    g = wl.geom
    if g is not None:    # window reuse: input bytes per output pixel and channel; M tiles in rows
        oh, ow = g.out_height, g.out_width
        ekh, ekw = (g.kernel_h - 1) * g.dilation_h + 1, (g.kernel_w - 1) * g.dilation_w + 1
        rows_t = np.clip(np.floor(tm / ow), 1, oh)
        per_px = np.where(tm >= ow, np.minimum((rows_t - 1) * g.stride_h + ekh, g.height) * g.width
                          / (rows_t * ow), ekh * np.minimum((tm - 1) * g.stride_w + ekw, g.width) / tm)
        reuse = i_passes * wl.M * g.in_channels * per_px
        seg, rest = np.minimum(tm, ow), np.mod(ow, np.minimum(tm, ow))
        if hw.weight_double_buffer:
            per_row = np.floor(ow / seg) * np.maximum(seg, R) + np.where(rest > 0, np.maximum(rest, R), 0)
            per_blk = np.maximum(rows_t * ow, R)
        else:
            per_row = np.ceil(ow / seg) * (2 * R + C - 2) + ow
            per_blk = 2 * R + C - 2 + rows_t * ow
        r_Mt = g.batch * np.where(tm >= ow, np.ceil(oh / rows_t), oh * np.ceil(ow / seg))
        r_cost = g.batch * np.where(tm >= ow, np.ceil(oh / rows_t) * per_blk, oh * per_row)
        use = reuse < i_traffic
        i_traffic = np.where(use, reuse, i_traffic)
        Mt = np.where(use, r_Mt, Mt)
        m_cost = np.where(use, r_cost, m_cost)
    # weights: once with weight reuse (order 0) or when one tile holds them all, else per M tile
    w_traffic = np.where((order == 0) | (Kt * Nt == 1), 1, Mt) * wl.K * wl.N
    spill = (order == 0) & (Kt > 1) & (wl.M * nn * 4 > hw.ofmap_bytes)
    p_traffic = np.where(spill, 2 * (Kt - 1) * wl.M * wl.N * 4, 0)
    traffic = i_traffic + w_traffic + p_traffic + wl.M * wl.N
    tiles = Mt * Kt * Nt
    dram = traffic / hw.bus_bytes + 2 * tiles * DMA_SETUP_CYCLES
    compute = np.ceil(wl.K / R) * np.ceil(wl.N / C) * m_cost
    # overlap is never perfect: a quarter of the shorter side shows (tiles wait on each other)
    cycles = np.where(db == 1, np.maximum(compute, dram) + 0.25 * np.minimum(compute, dram), compute + dram)
    return {"Mt": Mt, "Kt": Kt, "Nt": Nt, "inp": tm * kk * (1 + db), "wgt": kk * nn * (1 + db),
            "acc": tm * nn * 4, "w_traffic": w_traffic, "i_traffic": i_traffic, "traffic": traffic,
            "intensity": wl.macs / traffic, "tiles": tiles, "compute": compute, "cycles": cycles}


def _features(wl: GemmWorkload, hw: SystolicConfig):
    """Derived features of the dataflow (vectorised): :func:`_estimate`'s counts."""
    import numpy as np

    def fn(space, points):
        v = {n: np.asarray(space.knob(n).choices, dtype=np.float64)[points[:, space.names.index(n)]]
             for n in space.names}
        e = _estimate(wl, hw, v)
        cols = [e[c] for c in ("Mt", "Kt", "Nt", "inp", "wgt", "acc", "w_traffic", "i_traffic", "traffic",
                               "intensity", "tiles", "compute", "cycles")]
        return np.log2(np.maximum(np.stack(cols, axis=1), 1e-6))

    return fn


def parse_workload(spec: str) -> GemmWorkload:
    """``gemm:M,K,N``, ``conv:H,W,CI,CO,K,S,P``, ``dense:N,K,M`` or a ResNet-18 layer ``C2``..``C11``."""
    s = spec.strip()
    from dcoc.vta.catalogue import RESNET18_CONV

    if s.upper() in RESNET18_CONV:
        h, ci, co, k, st, _ = RESNET18_CONV[s.upper()]
        s = f"conv:{h},{h},{ci},{co},{k},{st},{k // 2}"
    kind, _, nums = s.partition(":")
    try:
        v = [int(x) for x in nums.replace("x", ",").split(",") if x.strip()]
    except ValueError:
        v = []
    if kind == "gemm" and len(v) == 3 and min(v) > 0:
        return GemmWorkload(f"gemm_{v[0]}x{v[1]}x{v[2]}", *v)
    if kind == "conv" and len(v) == 7 and min(v[:6]) > 0:
        h, w, ci, co, k, st, p = v
        oh, ow = (h + 2 * p - k) // st + 1, (w + 2 * p - k) // st + 1
        if oh > 0 and ow > 0:
            return conv_workload(f"conv2d_{h}x{w}_{ci}x{co}_k{k}s{st}", ConvGeom(1, h, w, ci, k, k, st, st, p, p, p, p),
                                 co)
    if kind == "dense" and len(v) == 3 and min(v) > 0:
        return GemmWorkload(f"dense_m{v[0]}_n{v[2]}_k{v[1]}", v[0], v[1], v[2])
    raise DcocError(f"bad workload '{spec}': expected C2..C11, gemm:M,K,N, conv:H,W,CI,CO,K,S,P or dense:N,K,M")
