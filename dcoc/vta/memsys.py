"""Where a DMA read is served from: the coherent L2 cache or DDR (the ACP effect).

**Mechanism.**  On the PYNQ (Zynq-7000) bitstream every VTA master reaches memory through
one SmartConnect into the PS port ``S_AXI_ACP`` with coherent transactions
(``vivado.tcl``: ``PCW_USE_S_AXI_ACP 1``, ``PCW_USE_DEFAULT_ACP_USER_VAL 1``;
``pkg_config.py``: ``coherent = True``), and the runtime allocates its buffers as
*cached* memory (``runtime.cc``: ``kAlwaysCache = true``, ``VTAMemAlloc(size, 1)``).  ACP
reads are looked up in the Cortex-A9 L1/L2 through the SCU and only go to DDR on a miss
(UG585 §3.5 "ACP", Table 3-7: "access latency is small when cache hits occur").  The L2 of
the Zynq-7020 is 512 KB (PL310).

So a tensor whose **reuse distance** (bytes read between two reads of the same byte)
fits in the L2 is served from the cache at the calibrated DMA rate, and one whose reuse
distance does not fit streams from DDR: a longer first-beat latency per row and line-fill
limited bursts.  On ResNet-18 the early layers (C2-C6, weights <= 295 KB) are L2-resident
across the repeated runs of a measurement; the deep layers' weights (C8 590 KB, C9 1.2 MB,
C11 2.4 MB) are not.  Weights are re-read once per row of tiles, and a large output-channel
tile forces a small spatial tile (the ACC buffer holds ``tile_co x tile_h x tile_w``), so
those schedules re-read the weights most often and become bound by DDR-speed weight
streams -- which is why the old model's error on deep layers grew with ``tile_co``.

Reuse distances (reads only; stores are posted writes and are not cached here):

* conv2d weights: the whole weight tensor plus the input window of one pass over the
  output-channel tiles (all h-threads) is read before a weight byte comes back;
* conv2d inputs: an input window is re-read for every output-channel tile group, with that
  group's weight slice read in between;
* dense: the same with batch tiles in place of row tiles;
* micro-ops, biases/residuals (compute-module loads) and stores keep the base timing.

The 128-bit UltraScale+ targets (ultra96, zcu104) use ``S_AXI_HPC0_FPD``: I/O-coherent
reads snoop the APU caches but PL reads do not allocate in them, so there is no reuse to
exploit and every DMA keeps the base (calibrated) timing.  ``TimingParams`` selects the
cached path by bus width (64-bit = the Zynq-7000/ACP design of ``pkg_config.py``).
"""
from __future__ import annotations

from dataclasses import dataclass

from dcoc.vta.isa import MEM_INP, MEM_WGT

__all__ = ["DmaTiming", "dma_timing", "reuse_distances"]


@dataclass(frozen=True)
class DmaTiming:
    """Per-row latency and per-burst extra cycles of the DMAs of one program.

    ``base``: latency cycles per row of every DMA that hits (or has no cache in front);
    ``miss``: memory types whose reads stream from DDR, with their ``(latency, extra
    cycles per burst)``.
    """

    base: int
    miss: tuple = ()  # ((memory_type, latency_cycles, extra_cycles_per_burst), ...)

    def row(self, memory_type: int | None) -> tuple[int, int]:
        """``(latency, extra cycles per burst)`` for a LOAD of ``memory_type`` (None: store)."""
        if memory_type is not None:
            for mt, lat, extra in self.miss:
                if mt == memory_type:
                    return lat, extra
        return self.base, 0

    @property
    def missing(self) -> tuple[str, ...]:
        names = {MEM_INP: "inp", MEM_WGT: "wgt"}
        return tuple(names.get(m[0], str(m[0])) for m in self.miss)


def reuse_distances(plan) -> dict[str, int]:
    """Bytes read between two reads of the same byte of the weights / inputs of a plan."""
    hw = plan.hw
    w_bytes = plan.COb * plan.CIb * hw.wgt_elem_bytes
    if getattr(plan, "kind", "") == "conv2d":
        w_bytes *= plan.KH * plan.KW
        rows = min(plan.in_rows, plan.H)
        window = plan.CIb * rows * plan.W * hw.inp_elem_bytes * plan.hn
        total_in = plan.Nb * plan.CIb * plan.H * plan.W * hw.inp_elem_bytes
        window = min(window, total_in)
    else:  # dense: one batch tile of input rows
        window = plan.tb * plan.CIb * hw.inp_elem_bytes
    groups = max(plan.n_co // max(plan.ocn, 1), 1)
    w_slice = w_bytes // groups if plan.n_co > plan.ocn else w_bytes
    return {"wgt": w_bytes + window, "inp": window + w_slice}


def dma_timing(plan, tp) -> DmaTiming:
    """The :class:`DmaTiming` of ``plan`` under ``tp`` (see the module docstring)."""
    hw = plan.hw
    base = tp.dram_latency_cycles(hw)
    cache = tp.coherent_cache_bytes(hw)
    if cache <= 0:
        return DmaTiming(base)
    lat = base + tp.ddr_miss_latency_cycles(hw)
    extra = tp.ddr_miss_burst_cycles(hw)
    d = reuse_distances(plan)
    miss = []
    for mt, key in ((MEM_INP, "inp"), (MEM_WGT, "wgt")):
        if d[key] > cache:
            miss.append((mt, lat, extra))
    return DmaTiming(base, tuple(miss))
