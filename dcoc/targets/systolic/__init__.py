"""A weight-stationary systolic array: the second accelerator target (deliberately unlike VTA).

Hardware (knobs of :class:`SystolicConfig`): a ``rows`` x ``cols`` array of int8 MAC
processing elements (PEs), three on-chip SRAMs -- input feature map (``2**log_ifmap``
bytes, int8), weights (``2**log_wgt`` bytes, int8) and output accumulators
(``2**log_ofmap`` bytes, int32) -- and ``weight_double_buffer``: a shadow weight register
in every PE, so the next fold's weights shift in while the current fold computes (as in
the TPU v1, Jouppi et al., ISCA 2017, section 2).  The clock is the board's clock derated
by the array's size and the LUT use (:meth:`SystolicBoard.clock_mhz`, the rule of
:meth:`dcoc.targets.vta.hardware.Board.clock_mhz`); the DRAM moves ``bus_bytes`` per cycle.

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

Modules: :mod:`~dcoc.targets.systolic.hardware` (boards, configs, clock and resources),
:mod:`~dcoc.targets.systolic.simulator` (GEMM workloads, tiling, the event simulator),
:mod:`~dcoc.targets.systolic.target` (the :class:`SystolicTarget` dcoc searches).
"""
from dcoc.targets.systolic.hardware import (
    BOARDS,
    HW_KNOBS,
    HW_RANGES,
    LUT_PER_PE_WDB,
    SystolicBoard,
    SystolicConfig,
)
from dcoc.targets.systolic.simulator import (
    ConvGeom,
    GemmWorkload,
    conv_workload,
    fit_reason,
    measure_systolic,
    roofline,
    simulate,
    sw_choices,
)
from dcoc.targets.systolic.target import SystolicTarget

__all__ = ["BOARDS", "HW_KNOBS", "HW_RANGES", "LUT_PER_PE_WDB", "ConvGeom", "GemmWorkload",
           "SystolicBoard", "SystolicConfig", "SystolicTarget", "conv_workload", "fit_reason",
           "measure_systolic", "roofline", "simulate", "sw_choices"]
