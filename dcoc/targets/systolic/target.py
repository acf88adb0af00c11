"""The systolic array as a dcoc :class:`~dcoc.targets.base.Target`."""
from __future__ import annotations

from dcoc.errors import ConfigError, DcocError
from dcoc.search.space import Knob, Space
from dcoc.targets.base import Layer, Target
from dcoc.targets.catalogue import RESNET18_CONV, resnet18_spec
from dcoc.targets.systolic.hardware import (
    BOARDS,
    DMA_SETUP_CYCLES,
    HW_KNOBS,
    HW_RANGES,
    LUT_UTIL_LIMIT,
    SystolicConfig,
)
from dcoc.targets.systolic.simulator import (
    ConvGeom,
    GemmWorkload,
    _ceil,
    conv_workload,
    fit_reason,
    measure_systolic,
    roofline,
    sw_choices,
)
from dcoc.targets.timing import compute_seconds


# ------------------------------------------------------------------ the target
class SystolicTarget(Target):
    name = "systolic"
    label = "the systolic array"
    description = ("weight-stationary systolic array (rows x cols int8 PEs, three SRAMs), tile-stream "
                   "event simulator")
    default_board = "arty-a7"
    boards = BOARDS
    hw_knobs = HW_KNOBS
    hw_ranges = HW_RANGES
    core_knobs = ("rows", "cols", "weight_double_buffer")   # the PE array and its weight registers
    slots = ("tile_m", "tile_k", "tile_n", "order", "double_buffer")
    shrink_order = ("tile_m", "tile_k", "tile_n")
    frontend_target = "vta"   # the accelerator extraction: conv2d / dense on the array, rest on CPU

    # ---------------------------------------------------------------- hardware
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

    config_file_description = ("the array config (rows, cols, log2 SRAM bytes, clock, DRAM "
                               "bytes per cycle)")

    def hardware_report(self, hw):
        return {"core": {"rows": hw.rows, "cols": hw.cols, "pes": hw.pes}}

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
        return compute_seconds(layer.workload.macs, hw.pes, hw.freq_mhz)

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
    if s.upper() in RESNET18_CONV:
        s = resnet18_spec(s)
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
