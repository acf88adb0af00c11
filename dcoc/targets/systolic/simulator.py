"""Systolic layers as GEMMs, their tiling and the tile-stream event simulator (see the
package docstring)."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import lru_cache

from dcoc.errors import DcocError
from dcoc.targets.systolic.hardware import DMA_SETUP_CYCLES, LAUNCH_CYCLES, SystolicConfig
from dcoc.targets.timing import compute_seconds


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
    compute = compute_seconds(wl.macs, hw.pes, hw.freq_mhz)
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


def _load(s: list, D: int, cycles: int, older: int, newer: int, ready: int, db: bool) -> int:
    """A tile load on the DMA port (free from ``D``): it waits for its buffer slot -- with
    double buffering the older of two (``s[older]``), else the one slot (``s[newer]``) --
    and makes the data ready at ``s[ready]``; returns when the port is free again."""
    start = max(D, s[older] if db else s[newer])
    if db:
        s[older] = s[newer]
    s[ready] = start + cycles
    return s[ready]


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
            D = _load(s, D, in_cyc, _I0, _I1, _RI, db)
        if w_cyc:
            D = _load(s, D, w_cyc, _W0, _W1, _RW, db)
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
