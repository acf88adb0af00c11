"""A weight-stationary systolic array: the second accelerator target (deliberately unlike VTA).

Hardware (knobs of :class:`SystolicConfig`): a ``rows`` x ``cols`` array of int8 MAC
processing elements (PEs), three on-chip SRAMs -- input feature map (``2**log_ifmap``
bytes, int8), weights (``2**log_wgt`` bytes, int8) and output accumulators
(``2**log_ofmap`` bytes, int32) -- at the board's clock with the board's DRAM bandwidth
(bytes per cycle).

Dataflow: every layer is a GEMM ``out[M, N] = in[M, K] @ w[K, N]`` (conv2d through
im2col: ``M = out_h * out_w``, ``K = in_channels * kh * kw``, ``N = out_channels``).  A
weight *fold* (``rows`` reduction rows x ``cols`` output columns) is shifted into the
array (``rows`` cycles) and stays there while input vectors stream through it (one per
cycle, plus ``rows + cols - 2`` fill/drain cycles).  Schedule knobs:

* ``tile_m`` -- input rows (output pixels) streamed per fold;
* ``tile_k`` -- folds along K per tile (K tile = ``tile_k * rows``);
* ``tile_n`` -- folds along N per tile (N tile = ``tile_n * cols``);
* ``order`` -- 0: weight reuse (loops n, k, m: each weight tile loaded once, partial sums
  of all M rows kept on chip, spilled to DRAM when they do not fit); 1: output
  stationary (loops m, n, k: accumulators of one tile stay on chip, weights reloaded
  for every M tile);
* ``double_buffer`` -- 1: loads overlap compute (each tile's SRAM footprint doubles).

Timing (analytic): compute cycles = folds x (weight load + streamed rows + fill/drain);
DRAM cycles = bytes / bandwidth + a fixed cost per DMA transfer; a layer takes
``max(compute, dram)`` with double buffering, ``compute + dram`` without, plus a fixed
launch overhead.  Resources: one DSP per PE up to the board's DSPs, LUT-built
multipliers beyond; SRAMs in 36 Kb BRAMs, banked per array row (inputs) and column
(accumulators).  Boards: ``arty-a7`` (Artix-7 100T) and ``kv260`` (Kria K26).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from dcoc.errors import ConfigError, DcocError
from dcoc.search.space import Knob, Space
from dcoc.targets.base import Layer, Target

# ------------------------------------------------------------------ constants
BRAM_BYTES = 4608            # one 36 Kb block RAM
LUT_SHELL = 9000             # control, DMA engines, AXI
LUT_PER_PE = 30              # operand/partial-sum registers and the adder of a PE
LUT_PER_LUT_MULT = 70        # an int8 multiplier built from LUTs
LUT_UTIL_LIMIT = 0.8
DMA_SETUP_CYCLES = 40        # per transfer (descriptor + DRAM latency)
LAUNCH_CYCLES = 1500         # per layer (instruction fetch, barrier)

HW_RANGES = {
    "rows": (8, 16, 32, 64),
    "cols": (8, 16, 32, 64),
    "log_ifmap": (14, 15, 16, 17),
    "log_wgt": (14, 15, 16, 17),
    "log_ofmap": (14, 15, 16, 17),
}
HW_KNOBS = tuple(HW_RANGES)


@dataclass(frozen=True)
class SystolicBoard:
    name: str
    part: str
    bram36: int
    dsp: int
    lut: int
    freq_mhz: float
    bus_bytes: int             # DRAM bytes per cycle
    bram_reserved: int = 12

    def default_hw(self) -> "SystolicConfig":
        return SystolicConfig(16, 16, 15, 15, 15, self.freq_mhz, self.bus_bytes)


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

    @property
    def name(self) -> str:
        return (f"ws{self.rows}x{self.cols}_i{self.log_ifmap}w{self.log_wgt}o{self.log_ofmap}"
                f"_{self.freq_mhz:g}MHz_bus{self.bus_bytes}")

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
        lut = LUT_SHELL + self.pes * LUT_PER_PE + (self.pes - dsp) * LUT_PER_LUT_MULT
        return {"bram36": self.bram36(), "dsp": dsp, "lut": int(lut), "pes": self.pes}

    @classmethod
    def parse(cls, text: str, board: SystolicBoard | None = None) -> "SystolicConfig":
        m = re.fullmatch(r"ws(\d+)x(\d+)_i(\d+)w(\d+)o(\d+)(?:_([\d.]+)MHz_bus(\d+))?", text.strip())
        if not m:
            raise ConfigError(f"bad systolic hardware name '{text}': expected e.g. "
                              "ws16x16_i15w15o15 or ws16x16_i15w15o15_150MHz_bus8")
        r, c, i, w, o, f, b = m.groups()
        bd = board or BOARDS["arty-a7"]
        return cls(int(r), int(c), int(i), int(w), int(o),
                   float(f) if f else bd.freq_mhz, int(b) if b else bd.bus_bytes)


# ------------------------------------------------------------------ workloads
@dataclass(frozen=True)
class GemmWorkload:
    """A layer as the GEMM the array computes: ``M x K`` inputs times ``K x N`` weights."""

    name: str
    M: int
    K: int
    N: int

    @property
    def macs(self) -> int:
        return self.M * self.K * self.N

    @property
    def flops(self) -> int:
        return 2 * self.macs


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


def fit_reason(wl: GemmWorkload, hw: SystolicConfig, k: dict) -> str | None:
    """Why a schedule does not fit the SRAMs (None when it fits)."""
    db = 2 if k["double_buffer"] else 1
    tm = min(k["tile_m"], wl.M)
    kk = k["tile_k"] * hw.rows
    nn = k["tile_n"] * hw.cols
    if tm * kk * db > hw.ifmap_bytes:
        return f"input tile {tm}x{kk} ({db}x) > {hw.ifmap_bytes} B input SRAM"
    if kk * nn * db > hw.wgt_bytes:
        return f"weight tile {kk}x{nn} ({db}x) > {hw.wgt_bytes} B weight SRAM"
    if tm * nn * 4 > hw.ofmap_bytes:
        return f"accumulator tile {tm}x{nn} > {hw.ofmap_bytes} B accumulator SRAM"
    return None


def simulate(wl: GemmWorkload, hw: SystolicConfig, k: dict) -> tuple[float | None, dict]:
    """Analytic time of ``wl`` with schedule ``k`` on ``hw``: ``(seconds, info)`` or
    ``(None, {"reason": ...})`` when the schedule does not fit."""
    reason = fit_reason(wl, hw, k)
    if reason:
        return None, {"reason": reason}
    R, C = hw.rows, hw.cols
    tm = min(k["tile_m"], wl.M)
    kk, nn = k["tile_k"] * R, k["tile_n"] * C
    Mt, Kt, Nt = math.ceil(wl.M / tm), math.ceil(wl.K / kk), math.ceil(wl.N / nn)
    kf, nf = math.ceil(wl.K / R), math.ceil(wl.N / C)          # folds over the whole layer
    # compute: every fold of every M tile: weight shift-in + stream + fill/drain
    m_rows = [tm] * (wl.M // tm) + ([wl.M % tm] if wl.M % tm else [])
    per_fold = [R + m + R + C - 2 for m in m_rows]
    if k["order"] == 0:   # weight reuse: a weight fold stays while every M tile streams through
        compute = kf * nf * (R + sum(m + R + C - 2 for m in m_rows))
    else:                 # output stationary: weights reloaded per M tile
        compute = kf * nf * sum(per_fold)
    # DRAM traffic (bytes) and number of transfers
    w_tile, i_tile, o_tile = kk * nn, tm * kk, tm * nn
    out_bytes = wl.M * wl.N
    if k["order"] == 0:
        w_bytes, n_w = Kt * Nt * w_tile, Kt * Nt
        i_bytes, n_i = Nt * Kt * Mt * i_tile, Nt * Kt * Mt
        spill = 0
        if Kt > 1 and wl.M * nn * 4 > hw.ofmap_bytes:   # partial sums of all M rows do not fit
            spill = Nt * (Kt - 1) * Mt * o_tile * 4 * 2
        traffic = w_bytes + i_bytes + spill + out_bytes
        transfers = n_w + n_i + (2 * Nt * (Kt - 1) * Mt if spill else 0) + Nt * Mt
    else:
        w_bytes, n_w = Mt * Nt * Kt * w_tile, Mt * Nt * Kt
        i_bytes, n_i = Mt * Nt * Kt * i_tile, Mt * Nt * Kt
        traffic = w_bytes + i_bytes + out_bytes
        transfers = n_w + n_i + Mt * Nt
    dram = traffic / hw.bus_bytes + transfers * DMA_SETUP_CYCLES
    if k["double_buffer"]:
        first = (min(w_tile, wl.K * wl.N) + min(i_tile, wl.M * wl.K)) / hw.bus_bytes + 2 * DMA_SETUP_CYCLES
        cycles = max(compute, dram) + first
    else:
        cycles = compute + dram
    cycles = int(math.ceil(cycles + LAUNCH_CYCLES))
    secs = cycles / (hw.freq_mhz * 1e6)
    return secs, {"cycles": cycles, "gops": 2 * wl.macs / secs / 1e9,
                  "utilization": wl.macs / hw.pes / cycles, "dram_bytes": int(traffic)}


def measure_systolic(task, config):
    """Measurer function (runs anywhere: pure Python)."""
    p = task.payload
    return simulate(p["workload"], p["hw"], config)


# ------------------------------------------------------------------ the target
class SystolicTarget(Target):
    name = "systolic"
    label = "the systolic array"
    description = "weight-stationary systolic array (rows x cols int8 PEs, three SRAMs), analytic model"
    default_board = "arty-a7"
    boards = BOARDS
    hw_knobs = HW_KNOBS
    core_knobs = ("rows", "cols")
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
        return SystolicConfig(**{k: int(values[k]) for k in HW_KNOBS}, freq_mhz=bd.freq_mhz,
                              bus_bytes=bd.bus_bytes)

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
                    vals.setdefault("freq_mhz", bd.freq_mhz)
                    vals.setdefault("bus_bytes", bd.bus_bytes)
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
        if hw.freq_mhz > bd.freq_mhz:
            out.append(f"clock {hw.freq_mhz:g} MHz > {bd.freq_mhz:g} MHz of {bd.name}")
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
        return f"{self.board(board).name} default 16x16 array + default schedules"

    def describe_hw(self, hw, board):
        r = self.resources(hw, board)
        return (f"{hw.name}  ({hw.rows}x{hw.cols} weight-stationary array, {hw.freq_mhz:g} MHz, "
                f"{hw.bus_bytes} B/cycle DRAM; BRAM36 {r['bram36']}, DSP {r['dsp']}, LUT {r['lut']} "
                f"on {self.board(board).name})")

    # ---------------------------------------------------------------- workloads
    def _from_task(self, t) -> tuple[GemmWorkload, int]:
        w = t.workload
        if t.kind == "conv2d":
            if int(w.get("groups", 1)) != 1:
                raise DcocError(f"task {t.name}: grouped conv2d does not run on the systolic array")
            M = int(w["batch"]) * int(w["out_height"]) * int(w["out_width"])
            K = int(w["in_channels"]) * int(w["kernel_h"]) * int(w["kernel_w"])
            return GemmWorkload(t.name, M, K, int(w["out_channels"])), 1
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
            return GemmWorkload(spec.name, spec.batch * spec.out_height * spec.out_width,
                                spec.in_channels * spec.kernel[0] * spec.kernel[1], spec.out_channels)
        if hasattr(spec, "in_features"):                           # a dense workload object
            return GemmWorkload(spec.name, spec.batch, spec.in_features, spec.out_features)
        raise DcocError(f"cannot run {type(spec).__name__} on the systolic array")

    def layer(self, workload, name=None):
        wl = self.workload(workload)
        return Layer(name or wl.name, wl, 1, "conv2d" if wl.name.startswith("conv") else "dense",
                     epilogue=None, target=self.name)

    def workload_key(self, layer):
        wl = layer.workload
        return f"systolic:gemm_{wl.M}x{wl.K}x{wl.N}"

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
        """The heuristic: output stationary and double buffered; the widest N tile (each
        input row read once per N tile), then the deepest K tile, with an M tile of at least
        64 rows (or the largest that fits) -- the first that fits the SRAMs."""
        space = space if space is not None else self.sw_space(layer, hw)
        ch = {k.name: k.choices for k in space.knobs}
        want_m = min(64, max(ch["tile_m"]))
        for db in (1, 0):
            for min_m in (want_m, 1):
                for tn in reversed(ch["tile_n"]):
                    for tk in reversed(ch["tile_k"]):
                        for tm in [m for m in ch["tile_m"] if m >= min_m]:
                            k = {"tile_m": tm, "tile_k": tk, "tile_n": tn, "order": 1, "double_buffer": db}
                            if space.is_valid(k):
                                return k
        return None

    def ideal_seconds(self, layer, hw):
        return layer.workload.macs / hw.pes / (hw.freq_mhz * 1e6)

    def measurer(self, n_workers=None):
        from dcoc.search.measure import FunctionMeasurer

        # the analytic model takes microseconds: a process pool only adds overhead
        return FunctionMeasurer(measure_systolic, n_workers=0 if n_workers is None else n_workers)

    # ------------------------------------------------------- co-design helpers
    def sw_union(self, layer, hs):
        u = [set() for _ in self.slots]
        for r in hs.knob("rows").choices:
            for c in hs.knob("cols").choices:
                core = SystolicConfig(rows=r, cols=c)
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


def _features(wl: GemmWorkload, hw: SystolicConfig):
    """Derived features of the dataflow (vectorised): tiles, folds, footprints, traffic."""
    import numpy as np

    def fn(space, points):
        def vals(name):
            k = space.knob(name)
            return np.asarray(k.choices, dtype=np.float64)[points[:, space.names.index(name)]]

        tm = np.minimum(vals("tile_m"), wl.M)
        kk, nn = vals("tile_k") * hw.rows, vals("tile_n") * hw.cols
        order, db = vals("order"), vals("double_buffer")
        Mt, Kt, Nt = np.ceil(wl.M / tm), np.ceil(wl.K / kk), np.ceil(wl.N / nn)
        w_traffic = np.where(order == 0, Kt * Nt, Mt * Kt * Nt) * kk * nn
        i_traffic = Mt * Kt * Nt * tm * kk
        cols = [Mt, Kt, Nt, tm * kk * (1 + db), kk * nn * (1 + db), tm * nn * 4, w_traffic, i_traffic,
                w_traffic + i_traffic, wl.macs / np.maximum(w_traffic + i_traffic, 1), Mt * Kt * Nt]
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
            return GemmWorkload(f"conv2d_{h}x{w}_{ci}x{co}_k{k}s{st}", oh * ow, ci * k * k, co)
    if kind == "dense" and len(v) == 3 and min(v) > 0:
        return GemmWorkload(f"dense_m{v[0]}_n{v[2]}_k{v[1]}", v[0], v[1], v[2])
    raise DcocError(f"bad workload '{spec}': expected C2..C11, gemm:M,K,N, conv:H,W,CI,CO,K,S,P or dense:N,K,M")
