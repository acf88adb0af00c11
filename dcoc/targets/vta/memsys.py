"""Where a DMA read is served from: the coherent L2 cache or DDR (the ACP effect).

**Mechanism.**  On the PYNQ (Zynq-7000) bitstream every VTA master reaches memory through
one SmartConnect into the PS port ``S_AXI_ACP`` with coherent transactions
(``vivado.tcl``: ``PCW_USE_S_AXI_ACP 1``, ``PCW_USE_DEFAULT_ACP_USER_VAL 1``;
``pkg_config.py``: ``coherent = True``), and the runtime allocates its buffers as
*cached* memory (``runtime.cc``: ``kAlwaysCache = true``, ``VTAMemAlloc(size, 1)``).  ACP
reads are looked up in the Cortex-A9 L1/L2 through the SCU and only go to DDR on a miss
(UG585 §3.5 "ACP", Table 3-7).  The L2 of the Zynq-7000 is a PL310: 512 KB, 8-way set
associative, 32-byte lines (UG585 §3.4 "L2 Cache").

**Reuse distance per access.**  A read hits when the bytes touched since the last touch
of the same bytes (its LRU stack distance) fit the cache.  The schedule's loop nest (outer
to inner: batch, row tiles, output-channel tiles, column tiles, the reduction over input
channels, the virtual threads) fixes, for every read, which loop carries its reuse: a
weight block is re-read by the second h-thread in the same reduction step (distance: one
step's tiles), by the next column tile when ``tile_w < W`` (one tile iteration's
footprint), by the next row of tiles (a pass over every output-channel tile: all the
weights), by the next batch block; the first read of the run has no reuse inside it.  For
each tensor the reads are split into these classes by count, each class gets its
distance (the distinct bytes that one iteration of the carrying loop touches, summed over
all tensors: inputs, weights, outputs, bias, residual) and a hit probability under
set-associative LRU, and the tensor's DMAs are charged the resulting expected miss cost
per row and per burst.  The expectation is taken per tensor, not per instruction, so
identical instructions keep identical timing (the fast path's templates and steady-state
skipping stay exact).

Hit probability of an access at stack distance ``d`` lines in an ``A``-way cache of
``S`` sets: the ``d`` distinct lines fall into the access's set as a Poisson count with
mean ``d / S`` (random placement), and the access hits when fewer than ``A`` of them land
there: ``P(hit) = sum_{k<A} e^-m m^k / k!``, ``m = d / S``.  A fully associative LRU would
hit exactly when ``d < S * A``; the 8-way cache starts to miss a little earlier and still
hits some reads slightly beyond its size.

**Warm and cold start** (``TimingParams.l2_start``).  The first read of each tensor in a
run depends on what ran before it:

* ``warm``: the layer is run repeatedly, as TopHub measured it (``time_evaluator``); the
  first read's distance is the layer's whole footprint (everything the previous run
  touched after it).  The calibration uses it.
* ``cold`` (the default: a layer of a whole-model inference, as ``dcoc run`` executes it
  once; tuning, ``simulate_model`` and co-design time layers the same way): parameters
  (weights, bias) have not been touched in this inference -- their first reads come from
  DDR (a model's weights are read once per inference and ResNet-18's 11 MB exceed the L2
  many times over, so nothing survives from the previous inference).  Activations
  (input, residual) were written by the layers just before, through the same coherent
  port: their first read's distance is the previous layer's activation traffic, which
  this model approximates by the current layer's input + output bytes.  Within the layer
  every later read follows the loop-nest rule above.

The state carried from layer to layer is this declared approximation (no per-line state
across layers): it depends only on the layer itself, so a tuner that times layers one by
one and a whole-model run that times them in sequence get the same numbers.
:func:`cold_start` turns any ``TimingParams`` into the whole-model one.

Writes (stores) are posted and keep the base timing; they occupy cache lines (ACP
coherent writes allocate in the L2), so they count in the distances.  Micro-op loads keep
the base timing (a few hundred bytes per layer).

The 128-bit UltraScale+ targets (ultra96, zcu104) use ``S_AXI_HPC0_FPD``: I/O-coherent
reads snoop the APU caches but PL reads do not allocate in them, so there is no reuse to
exploit and every DMA keeps the base (calibrated) timing.  ``TimingParams`` selects the
cached path by bus width (64-bit = the Zynq-7000/ACP design of ``pkg_config.py``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from dcoc.targets.vta.isa import MEM_ACC, MEM_ACC_8BIT, MEM_INP, MEM_WGT

__all__ = ["DmaTiming", "dma_timing", "reuse_profile", "hit_probability",
           "miss_fractions", "cold_start", "L2_STARTS"]

#: first-read assumptions (see the module docstring)
L2_STARTS = ("warm", "cold")

_NAMES = {MEM_INP: "inp", MEM_WGT: "wgt", MEM_ACC: "acc", MEM_ACC_8BIT: "acc"}


def hit_probability(distance_bytes: float, cache_bytes: int, ways: int = 8,
                    line_bytes: int = 32) -> float:
    """P(hit) of a read whose LRU stack distance is ``distance_bytes`` in a ``ways``-way
    set-associative LRU cache of ``cache_bytes`` (random-placement Poisson model)."""
    if distance_bytes is None or math.isinf(distance_bytes):
        return 0.0
    if cache_bytes <= 0:
        return 0.0
    sets = max(cache_bytes // (line_bytes * ways), 1)
    m = max(float(distance_bytes), 0.0) / line_bytes / sets
    term = math.exp(-m)
    total = term
    for k in range(1, ways):
        term *= m / k
        total += term
    return min(total, 1.0)


@dataclass(frozen=True)
class DmaTiming:
    """Per-row latency and expected DDR-miss cycles of the DMAs of one program.

    ``base``: latency cycles per row of every DMA (the L2-hit path, or a port without a
    cache); ``miss``: ``((memory_type, miss fraction), ...)`` for the reads that can miss;
    ``miss_latency`` / ``miss_burst``: extra cycles per row / per burst of a row that
    misses.
    """

    base: int
    miss: tuple = ()
    miss_latency: int = 0
    miss_burst: int = 0
    write: int | None = None

    def fraction(self, memory_type: int | None) -> float:
        if memory_type is not None:
            for mt, f in self.miss:
                if mt == memory_type:
                    return f
        return 0.0

    def row(self, memory_type: int | None, bursts: int = 1) -> tuple[int, int]:
        """``(latency, expected extra miss cycles)`` of one row of ``bursts`` bursts of a
        LOAD of ``memory_type`` (None: a store)."""
        if memory_type is None:
            return (self.base if self.write is None else self.write), 0
        f = self.fraction(memory_type)
        if f <= 0.0:
            return self.base, 0
        return self.base, int(round(f * (self.miss_latency + bursts * self.miss_burst)))

    @property
    def missing(self) -> tuple[str, ...]:
        """Names of the tensors of which at least half the reads miss."""
        return tuple(_NAMES.get(mt, str(mt)) for mt, f in self.miss if f >= 0.5)


# ============================================================================ loop nests
def _conv_nest(plan):
    """(levels, tiles, reads): the loop nest outer -> inner as ``(name, extent)``, each
    tensor's bytes per tile, and for each read tensor the names of the loops that enclose
    its read and the names among them that index it."""
    hw = plan.hw
    rows = min(plan.in_rows, plan.H)
    cols = min(plan.in_cols, plan.W)
    tiles = {
        "inp": plan.tg * plan.tci * rows * cols * hw.inp_elem_bytes,
        "wgt": plan.tco * plan.tci * plan.KH * plan.KW * hw.wgt_elem_bytes,
        "out": plan.tco * plan.th * plan.tw * hw.out_elem_bytes,
    }
    if getattr(plan, "has_bias", False):
        tiles["bias"] = plan.tco * hw.acc_elem_bytes
    if getattr(plan, "has_res", False):
        tiles["res"] = plan.tco * plan.th * plan.tw * hw.acc_elem_bytes
    levels = [("b", plan.Nb), ("ho", plan.n_ho), ("coo", plan.n_coo), ("wo", plan.n_w),
              ("kc", plan.n_ci), ("h", min(plan.hn, plan.n_h)), ("oc", min(plan.ocn, plan.n_co))]
    # a grouped conv's input tile depends on the output channels' group (taken as a new
    # tile per output-channel tile: exact when a tile covers whole packed groups)
    grouped = {"coo", "oc"} if plan.gb.packed > 1 else set()
    index = {"inp": {"b", "ho", "wo", "kc", "h"} | grouped, "wgt": {"coo", "kc", "oc"},
             "out": {"b", "ho", "coo", "wo", "h", "oc"}, "bias": {"coo", "oc"},
             "res": {"b", "ho", "coo", "wo", "h", "oc"}}
    encl = {"inp": None, "wgt": None, "out": {"b", "ho", "coo", "wo", "h", "oc"},
            "bias": {"b", "ho", "coo", "wo", "h", "oc"}, "res": {"b", "ho", "coo", "wo", "h", "oc"}}
    return levels, tiles, index, encl


def _dense_nest(plan):
    hw = plan.hw
    tiles = {"inp": plan.tci * hw.inp_elem_bytes,
             "wgt": plan.tco * plan.tci * hw.wgt_elem_bytes,
             "out": plan.tb * plan.tco * hw.out_elem_bytes}
    if getattr(plan, "has_bias", False):
        tiles["bias"] = plan.tco * hw.acc_elem_bytes
    if getattr(plan, "has_res", False):
        tiles["res"] = plan.tb * plan.tco * hw.acc_elem_bytes
    levels = [("bo", plan.n_b), ("coo", plan.n_coo), ("bi", plan.tb), ("kc", plan.n_ci),
              ("oc", min(plan.ocn, plan.n_co))]
    index = {"inp": {"bo", "bi", "kc"}, "wgt": {"coo", "kc", "oc"},
             "out": {"bo", "coo", "oc"}, "bias": {"coo", "oc"}, "res": {"bo", "coo", "oc"}}
    tile_level = {"bo", "coo", "oc"}
    encl = {"inp": None, "wgt": None, "out": tile_level, "bias": tile_level, "res": tile_level}
    return levels, tiles, index, encl


def _nest(plan):
    return _conv_nest(plan) if getattr(plan, "kind", "") == "conv2d" else _dense_nest(plan)


def _footprint(levels, tiles, index, encl, j: int) -> int:
    """Distinct bytes one iteration of loop ``j`` touches (all tensors)."""
    total = 0
    for t, tb in tiles.items():
        n = tb
        for name, ext in levels[j + 1:]:
            if name in index[t] and (encl[t] is None or name in encl[t]):
                n *= ext
        total += n
    return total


def reuse_profile(plan) -> dict[str, list[tuple[float, float | None, str]]]:
    """Per read tensor: ``[(fraction of its reads, stack distance in bytes, carrying
    loop), ...]``; the distance of the class ``"first"`` (no reuse inside the run) is
    ``None`` and is decided by the warm/cold start."""
    levels, tiles, index, encl = _nest(plan)
    out: dict = {}
    for t in ("inp", "wgt", "bias", "res"):
        if t not in tiles:
            continue
        lv = [(j, name, ext) for j, (name, ext) in enumerate(levels)
              if encl[t] is None or name in encl[t]]
        classes = []
        inner = 1.0  # P(all non-indexing loops inner to the current one are at index 0)
        for j, name, ext in reversed(lv):
            if name in index[t] or ext <= 1:
                continue
            frac = inner * (ext - 1) / ext
            classes.append((frac, float(_footprint(levels, tiles, index, encl, j)), name))
            inner /= ext
        classes.append((inner, None, "first"))
        out[t] = classes
    return out


def _total_footprint(plan) -> int:
    levels, tiles, index, encl = _nest(plan)
    return _footprint(levels, tiles, index, encl, -1)


def _first_distance(plan, tensor: str, start: str) -> float:
    if start == "warm":
        return float(_total_footprint(plan))
    if tensor in ("wgt", "bias"):
        return math.inf
    regions = plan.dram_regions()
    act = 0
    for r in ("inp", "out"):
        n, eb = regions[r]
        act += n * eb
    return float(act)


def miss_fractions(plan, tp) -> dict[str, float]:
    """Expected fraction of each read tensor's bytes that misses the L2 (empty when
    ``plan``'s port has no cache)."""
    hw = plan.hw
    cache = tp.coherent_cache_bytes(hw)
    if cache <= 0:
        return {}
    start = getattr(tp, "l2_start", "warm")
    ways, line = int(tp.l2_ways), int(tp.l2_line_bytes)
    out = {}
    for t, classes in reuse_profile(plan).items():
        m = 0.0
        for frac, dist, _ in classes:
            d = _first_distance(plan, t, start) if dist is None else dist
            m += frac * (1.0 - hit_probability(d, cache, ways, line))
        out[t] = m
    return out


def dma_timing(plan, tp) -> DmaTiming:
    """The :class:`DmaTiming` of ``plan`` under ``tp`` (see the module docstring)."""
    hw = plan.hw
    base = tp.dram_latency_cycles(hw)
    write = tp.write_latency_cycles(hw)
    fr = miss_fractions(plan, tp)
    if not fr:
        return DmaTiming(base, write=write)
    miss = []
    for mt, key in ((MEM_INP, "inp"), (MEM_WGT, "wgt")):
        f = fr.get(key, 0.0)
        if f > 1e-4:
            miss.append((mt, round(f, 4)))
    # bias and residual share the ACC load path: their miss fractions weighted by bytes
    regions = plan.dram_regions()
    nbytes = {t: regions[t][0] * regions[t][1] for t in ("bias", "res") if t in fr}
    acc = (sum(fr[t] * n for t, n in nbytes.items()) / sum(nbytes.values())) if nbytes else 0.0
    if acc > 1e-4:
        miss.append((MEM_ACC, round(acc, 4)))
    return DmaTiming(base, tuple(miss), tp.ddr_miss_latency_cycles(hw), tp.ddr_miss_burst_cycles(hw),
                     write)


def cold_start(tp):
    """``tp`` for a layer of a whole-model inference: first reads start from a cold L2
    (parameters from DDR, activations at the distance of the neighbouring layers'
    traffic; see the module docstring).  Whole-model timings use this."""
    return tp.with_(l2_start="cold")
