"""Functional and event-driven timing simulation of a VTA instruction stream.

**Timing model** (every constant lives in :class:`TimingParams`; justification in
``docs/vta.md``).  Three modules -- load, compute, store -- execute their instruction
queues in order and concurrently.  An instruction starts when its module is free and the
tokens it pops are available (the four dependency queues l2g, g2l, g2s, s2g of
vta-reference §2.4; pops are consumed before it starts, pushes happen when it ends).  DMA
instructions (LOAD/STORE, including the compute module's UOP/ACC loads) share **one DRAM
port**: requests are granted first-come-first-served by request time (ties: program order)
and the port is held for the whole data phase of the instruction.  Durations:

* LOAD/STORE: ``insn_overhead`` + top pad rows (SRAM writes) + per data row
  (``dram_latency`` + ceil(row bytes / bus bytes) beats + the row's x-pad writes)
  + bottom pad rows.  NOPs (x_size = 0) cost the instruction overhead only.
  Reads through the coherent L2 of the Zynq-7000 ACP port (INP/WGT and the ACC loads of
  bias/residual) add the expected cost of L2 misses -- more latency per row and more
  cycles per burst, times the tensor's miss fraction from its reads' reuse distances
  (:mod:`dcoc.targets.vta.memsys`).
* GEMM: ``insn_overhead + iter_out*iter_in*(n_uops*gemm_ii + gemm_loop_overhead)``
  (HLS: the micro-op loop is pipelined with II=1 and re-entered for every
  (iter_out, iter_in) pair, paying its pipeline fill each time).
* ALU: the same with ``alu_ii`` (II=2 on the HLS design: one ACC read port).
* FINISH: ``insn_overhead``; the run ends when FINISH completes.

Instruction fetch is not modelled as a separate module (the 512-deep command queues keep
the modules fed); its bandwidth is folded into the per-instruction overhead.

**Functional model.**  The SRAMs are numpy arrays sized by the config depths; LOAD
zero-fills padding, GEMM accumulates int8 x int8 products into int32 (wrapping), ALU does
signed MIN/MAX, wrapping ADD, arithmetic SHR (negative amounts shift left), MUL; every
GEMM/ALU result is also written to the OUT buffer truncated to int8 and STORE copies OUT
to DRAM.  Instructions are executed in the timing engine's issue order.

Broken streams raise :class:`~dcoc.errors.SimulationError` (SRAM overflow, DRAM out of
bounds, micro-op out of range, bad dependency flag, token deadlock, missing FINISH).
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable

import numpy as np

from dcoc.errors import ConfigError, SimulationError
from dcoc.targets.vta import isa
from dcoc.targets.vta.hardware import HWConfig
from dcoc.targets.vta.isa import (
    MEM_ACC,
    MEM_ACC_8BIT,
    MEM_INP,
    MEM_UOP,
    MEM_WGT,
    OP_ALU,
    OP_FINISH,
    OP_GEMM,
    OP_LOAD,
    OP_STORE,
)
from dcoc.targets.vta.machine import Machine
from dcoc.targets.vta.races import check_races as check_races_of

__all__ = ["TimingParams", "DEFAULT_TIMING", "SimResult", "run_program", "insn_timing",
           "Engine", "Machine", "COUNTER_KEYS"]

COUNTER_KEYS = ("inp_load_nbytes", "wgt_load_nbytes", "acc_load_nbytes", "uop_load_nbytes",
                "out_store_nbytes", "gemm_counter", "alu_counter")

# token queues
L2G, G2L, G2S, S2G = 0, 1, 2, 3
QUEUE_NAMES = ("l2g", "g2l", "g2s", "s2g")
MODULE_NAMES = ("load", "compute", "store")


# ============================================================================ parameters
@dataclass(frozen=True)
class TimingParams:
    """Every timing constant of the model, in one place (see ``docs/vta.md``).

    Cycle counts are fabric-clock cycles; ``dram_latency_ns`` is converted with the
    config's clock (so a 333 MHz design sees ~3.3x more latency cycles).
    """

    #: read latency per DMA row (each row is one HLS memcpy, vta.cc): request to first beat
    #: through the SmartConnect, S_AXI_ACP, SCU and L2 (a hit).  Fitted on the calibration
    #: rows of ``scripts/calibrate_vta.py`` (held-out rows validate it).
    dram_latency_ns: float = 650.0
    #: per-row latency of a DMA write (STORE) row: writes are posted (the next row's
    #: address/data can go out before the previous write response returns), so a row does
    #: not pay the read round trip.  Fitted on the calibration rows.
    write_latency_ns: float = 0.0
    #: STORE: time the store module waits per stored output vector for its write
    #: response (non-posted single-vector writes; the DRAM port is free meanwhile).
    #: 0: posted bursts.  A property of the measurement setup (see calibrate_vta).
    write_response_ns: float = 0.0
    #: cycles to dequeue, decode and check dependencies of one instruction (all modules).
    insn_overhead: int = 8
    #: GEMM micro-ops per cycle: II = 1 (``READ_GEMM_UOP`` pipeline, vta.cc / hardware.rst).
    gemm_ii: int = 1
    #: GEMM pipeline fill/drain per instruction (uop read, index, SRAM read, multiply,
    #: adder tree, ACC write; ~5 cycles, vta-reference §3.3 modelling proposal).
    gemm_depth: int = 5
    #: extra cycles per (iter_out, iter_in) iteration of the GEMM micro-op loop (0: the
    #: loop nest runs as one flattened II=1 pipeline; >0 models a non-flattened nest that
    #: re-fills the pipeline for every inner iteration).
    gemm_loop_overhead: int = 0
    #: ALU II = 2 (``READ_ALU_UOP``; one ACC read port, hardware.rst) for imm and tensor ops.
    alu_ii: int = 2
    #: ALU pipeline fill/drain per instruction (~4 cycles, §3.3 modelling proposal).
    alu_depth: int = 4
    #: extra cycles per (iter_out, iter_in) iteration of the ALU micro-op loop (see GEMM).
    alu_loop_overhead: int = 0
    #: SRAM write cycles per zero-padding element of a load (``reset_mem`` loops).
    pad_cycles: int = 1
    #: longest AXI burst the DMA engines issue (Vivado HLS m_axi default
    #: ``max_read_burst_length`` / ``max_write_burst_length`` = 16 beats).
    max_burst_beats: int = 16
    #: idle bus cycles between consecutive bursts of one row (address phase, interconnect
    #: arbitration), i.e. the DMA efficiency.  Fitted (0: bursts of a row stream back to
    #: back).
    burst_overhead: int = 0
    #: L2 cache (KiB) in front of the coherent ACP port of the 64-bit Zynq-7000 design
    #: (Cortex-A9 PL310: 512 KB, UG585 §3.4).  DMA reads are hits or misses by their reuse
    #: distance (:mod:`dcoc.targets.vta.memsys`).  0 disables the distinction.
    coherent_cache_kib: int = 512
    #: L2 associativity and line size (PL310 on the Zynq-7000: 8 ways, 32-byte lines;
    #: UG585 §3.4 "L2 Cache").
    l2_ways: int = 8
    l2_line_bytes: int = 32
    #: bus width (bytes) of the designs that use the cached ACP port: 8 = the Zynq-7000
    #: targets of ``pkg_config.py``; the 16-byte UltraScale+ targets use HPC0 (no allocation).
    coherent_cache_bus_bytes: int = 8
    #: what the L2 holds when a layer starts: ``"cold"`` (a layer of a whole-model
    #: inference, as ``dcoc run`` executes it: parameters come from DDR; the default, so
    #: tune, simulate, co-design and run time layers alike) or ``"warm"`` (the layer ran
    #: just before, as in TopHub's repeated single-layer measurements; the calibration
    #: uses it).  See :mod:`dcoc.targets.vta.memsys`.
    l2_start: str = "cold"
    #: extra first-beat latency of a DMA row that misses the L2 (line fill from DDR through
    #: the L2 controller).  Estimate (not identifiable from the measured rows).
    ddr_miss_latency_ns: float = 100.0
    #: extra time per 16-beat burst (128 B = four 32-byte line fills) of a read that misses
    #: the L2.  Fitted on the calibration rows (``scripts/calibrate_vta.py``).
    ddr_miss_burst_ns: float = 160.0

    def dram_latency_cycles(self, hw: HWConfig) -> int:
        return int(math.ceil(self.dram_latency_ns * hw.freq_mhz / 1000.0 - 1e-9))

    def write_latency_cycles(self, hw: HWConfig) -> int:
        return int(math.ceil(self.write_latency_ns * hw.freq_mhz / 1000.0 - 1e-9))

    def coherent_cache_bytes(self, hw: HWConfig) -> int:
        """Bytes of coherent cache in front of ``hw``'s DMA port (0: none)."""
        if self.coherent_cache_kib <= 0 or hw.bus_bytes != self.coherent_cache_bus_bytes:
            return 0
        return int(self.coherent_cache_kib) * 1024

    def ddr_miss_latency_cycles(self, hw: HWConfig) -> int:
        return int(math.ceil(self.ddr_miss_latency_ns * hw.freq_mhz / 1000.0 - 1e-9))

    def ddr_miss_burst_cycles(self, hw: HWConfig) -> int:
        return int(math.ceil(self.ddr_miss_burst_ns * hw.freq_mhz / 1000.0 - 1e-9))

    def __post_init__(self):
        if self.l2_start not in ("warm", "cold"):
            raise ConfigError(f"l2_start must be 'warm' or 'cold', got {self.l2_start!r}")

    def with_(self, **kw) -> "TimingParams":
        return replace(self, **kw)

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


DEFAULT_TIMING = TimingParams()


# ============================================================================ per-insn timing
def _mem_cycles(insn, hw: HWConfig, tp: TimingParams, lat):
    """(pre, hold, post) of a LOAD/STORE.  ``lat``: latency cycles per row, or a
    :class:`~dcoc.targets.vta.memsys.DmaTiming` (per-memory-type latency and burst cost)."""
    ovh = tp.insn_overhead
    if insn.is_nop():
        return ovh, 0, 0
    eb = hw.elem_bytes(insn.memory_type) if insn.opcode == OP_LOAD else hw.out_elem_bytes
    xs, ys = insn.x_size, insn.y_size
    if xs == 0 or ys == 0:
        xs_eff = 0
        ys_eff = 0
    else:
        xs_eff, ys_eff = xs, ys
    width = insn.x_pad_0 + xs + insn.x_pad_1
    pc = tp.pad_cycles
    beats = -(-(xs_eff * eb) // hw.bus_bytes)
    bursts = -(-beats // tp.max_burst_beats) if tp.max_burst_beats > 0 else 1
    extra = 0
    if not isinstance(lat, int):
        lat, extra = lat.row(insn.memory_type if insn.opcode == OP_LOAD else None, bursts)
    elif insn.opcode == OP_STORE:
        lat = tp.write_latency_cycles(hw)
    row = lat + beats + bursts * tp.burst_overhead + extra + (insn.x_pad_0 + insn.x_pad_1) * pc
    pre = ovh + insn.y_pad_0 * width * pc
    hold = ys_eff * row
    post = insn.y_pad_1 * width * pc
    if insn.opcode == OP_STORE and tp.write_response_ns > 0:
        post += int(math.ceil(xs_eff * ys_eff * tp.write_response_ns * hw.freq_mhz / 1000.0))
    if ys_eff == 0:  # padding-only load: no DRAM traffic
        post += ys * width * pc
    return pre, hold, post


def insn_timing(insn, hw: HWConfig, tp: TimingParams, lat=None):
    """The timing tuple of one instruction:
    ``(module, pre, hold, post, popA, popB, pushA, pushB, is_finish)``.

    ``module``: 0 load, 1 compute, 2 store; ``pre``: cycles before the DRAM-port request;
    ``hold``: cycles the port is held (0: no DMA); ``post``: cycles after; pops/pushes are
    token-queue ids (-1 = none).  Raises SimulationError for flags a module cannot use.
    """
    if lat is None:
        lat = tp.dram_latency_cycles(hw)
    op = insn.opcode
    stage = isa.stage_of(insn)
    m = stage - 1
    pp, pn, up, un = insn.pop_prev, insn.pop_next, insn.push_prev, insn.push_next
    if m == 0:
        if pp or up:
            raise SimulationError(f"load-module instruction uses pop_prev/push_prev: {insn}")
        pops = (G2L if pn else -1, -1)
        pushes = (L2G if un else -1, -1)
    elif m == 2:
        if pn or un:
            raise SimulationError(f"store-module instruction uses pop_next/push_next: {insn}")
        pops = (G2S if pp else -1, -1)
        pushes = (S2G if up else -1, -1)
    else:
        pops = (L2G if pp else -1, S2G if pn else -1)
        pushes = (G2L if up else -1, G2S if un else -1)
    fin = 0
    if op in (OP_LOAD, OP_STORE):
        pre, hold, post = _mem_cycles(insn, hw, tp, lat)
    elif op == OP_GEMM:
        nu = max(insn.uop_end - insn.uop_bgn, 0)
        it = insn.iter_out * insn.iter_in
        pre, hold, post = 0, 0, (tp.insn_overhead + tp.gemm_depth
                                 + it * (nu * tp.gemm_ii + tp.gemm_loop_overhead))
    elif op == OP_ALU:
        nu = max(insn.uop_end - insn.uop_bgn, 0)
        it = insn.iter_out * insn.iter_in
        pre, hold, post = 0, 0, (tp.insn_overhead + tp.alu_depth
                                 + it * (nu * tp.alu_ii + tp.alu_loop_overhead))
    elif op == OP_FINISH:
        pre, hold, post = 0, 0, tp.insn_overhead
        fin = 1
    else:
        raise SimulationError(f"unknown opcode {op}")
    return (m, pre, hold, post, pops[0], pops[1], pushes[0], pushes[1], fin)


def insn_counters(insn, hw: HWConfig, acc: dict) -> None:
    """Add one instruction's fsim profiler counters (vta-reference §3.1) to ``acc``."""
    op = insn.opcode
    if op == OP_LOAD:
        n = insn.x_size * insn.y_size
        mt = insn.memory_type
        if mt == MEM_INP:
            acc["inp_load_nbytes"] += n * hw.inp_elem_bytes
        elif mt == MEM_WGT:
            acc["wgt_load_nbytes"] += n * hw.wgt_elem_bytes
        elif mt in (MEM_ACC, MEM_ACC_8BIT):
            acc["acc_load_nbytes"] += n * hw.acc_elem_bytes
        elif mt == MEM_UOP:
            acc["uop_load_nbytes"] += n * 4
    elif op == OP_STORE:
        acc["out_store_nbytes"] += insn.x_size * insn.y_size * hw.out_elem_bytes
    elif op == OP_GEMM:
        if not insn.reset_reg:
            acc["gemm_counter"] += insn.iter_out * insn.iter_in * max(insn.uop_end - insn.uop_bgn, 0)
    elif op == OP_ALU:
        acc["alu_counter"] += insn.iter_out * insn.iter_in * max(insn.uop_end - insn.uop_bgn, 0)


# ============================================================================ engine
class Engine:
    """Event-driven timing of three modules gated by four token queues and one DRAM port.

    The stream is given as *segments* (contiguous pieces of the program): ``templates[t]``
    is a triple of per-module lists of timing tuples ``(pre, hold, post, popA, popB, pushA,
    pushB, pos, fin)`` (``pos`` = position in program order within the segment) and
    ``tids[s]`` is the template of segment ``s``.  The reference path uses one segment
    holding the whole stream.

    With ``skip=True`` (the fast path) the engine detects a periodic steady state: at the
    first compute instruction of each tile segment it takes a snapshot of the complete
    machine state relative to the current time; if it equals the snapshot ``p`` segments
    earlier (for a loop-nest period ``p``) and the template sequence is ``p``-periodic far
    enough ahead, the following periods are exact time-shifted repetitions and are
    skipped by shifting all clocks.  The result is identical to simulating every segment.
    """

    def __init__(self, templates, tids, *, is_tile=None, periods=(), skip=False,
                 on_exec: Callable[[int, int, int, int], None] | None = None):
        self.T = templates
        self.tids = list(tids)
        self.is_tile = is_tile
        self.periods = sorted(set(int(p) for p in periods if p >= 1))
        self.skip = bool(skip) and is_tile is not None and bool(self.periods)
        self.on_exec = on_exec
        self.skipped_segments = 0
        self.simulated_insns = 0

    def _runlen(self, p: int):
        cache = self.__dict__.setdefault("_rl", {})
        r = cache.get(p)
        if r is None:
            t = np.asarray(self.tids, dtype=np.int64)
            n = len(t)
            eq = np.zeros(n, dtype=bool)
            if p < n:
                eq[p:] = t[p:] == t[:-p]
            falses = np.flatnonzero(~eq)
            idx = np.arange(n)
            pos = np.searchsorted(falses, idx)
            nf = np.where(pos < len(falses), falses[np.minimum(pos, len(falses) - 1)], n)
            r = cache[p] = nf - idx
        return r

    def run(self) -> int:
        """Simulate; returns the cycle at which FINISH completes."""
        T, tids = self.T, self.tids
        nseg = len(tids)
        F = [0, 0, 0]
        port = 0
        qs = [deque(), deque(), deque(), deque()]
        s = [0, 0, 0]
        o = [0, 0, 0]
        cur: list = [None, None, None]
        for m in range(3):
            seg = 0
            while seg < nseg and not T[tids[seg]][m]:
                seg += 1
            s[m] = seg
            cur[m] = T[tids[seg]][m] if seg < nseg else None
        on_exec = self.on_exec
        skip = self.skip
        is_tile = self.is_tile
        snaps: dict = {}
        pmax = 0
        if skip:
            for tpl in T:
                for lst in tpl:
                    for ins in lst:
                        if ins[0] > pmax:
                            pmax = ins[0]
        finish = None
        n_exec = 0
        while True:
            bm = -1
            bk = bg = 0
            bins = None
            for m in (0, 1, 2):
                c = cur[m]
                if c is None:
                    continue
                ins = c[o[m]]
                t = F[m]
                a = ins[3]
                if a >= 0:
                    q = qs[a]
                    if not q:
                        continue
                    if q[0] > t:
                        t = q[0]
                a = ins[4]
                if a >= 0:
                    q = qs[a]
                    if not q:
                        continue
                    if q[0] > t:
                        t = q[0]
                k = t + ins[0]
                g = (s[m] << 32) | ins[7]
                if bm < 0 or k < bk or (k == bk and g < bg):
                    bm, bk, bg, bins = m, k, g, ins
            if bm < 0:
                break
            if skip and bm == 1 and o[1] == 0 and is_tile[s[1]]:
                j = s[1]
                R = bk
                lo_f = R - pmax
                snap = (s[0] - j, o[0], s[2] - j, o[2],
                        max(F[0], lo_f) - R, max(F[1], lo_f) - R, max(F[2], lo_f) - R,
                        max(port, R) - R,
                        tuple(max(x, lo_f) - R for x in qs[0]),
                        tuple(max(x, lo_f) - R for x in qs[1]),
                        tuple(max(x, lo_f) - R for x in qs[2]),
                        tuple(max(x, lo_f) - R for x in qs[3]))
                best = None
                for p in self.periods:
                    prev = snaps.get(j - p)
                    if prev is None or prev[1] != snap:
                        continue
                    rel_min = min(0, s[0] - j, s[2] - j)
                    rel_max = max(0, s[0] - j, s[2] - j)
                    lo = j + rel_min
                    if lo < 0:
                        continue
                    rl = int(self._runlen(p)[lo])
                    kk = (lo + rl - 1 - rel_max - j) // p
                    if kk >= 1 and (best is None or kk * p > best[0] * best[1]):
                        best = (kk, p, R - prev[0])
                if best is not None:
                    kk, p, delta = best
                    sh = kk * delta
                    F = [F[0] + sh, F[1] + sh, F[2] + sh]
                    port += sh
                    qs = [deque(x + sh for x in q) for q in qs]
                    for m in range(3):
                        if cur[m] is not None:
                            s[m] += kk * p
                            cur[m] = T[tids[s[m]]][m]
                    self.skipped_segments += kk * p
                    snaps[s[1]] = (R + sh, snap)
                    continue
                snaps[j] = (R, snap)
            ins = bins
            if ins[3] >= 0:
                qs[ins[3]].popleft()
            if ins[4] >= 0:
                qs[ins[4]].popleft()
            if ins[1]:
                g = bk if bk > port else port
                port = g + ins[1]
                E = port + ins[2]
            else:
                E = bk + ins[2]
            F[bm] = E
            if ins[5] >= 0:
                qs[ins[5]].append(E)
            if ins[6] >= 0:
                qs[ins[6]].append(E)
            n_exec += 1
            if on_exec is not None:
                on_exec(ins[7], bk - ins[0], E, bm)
            if ins[8]:
                finish = E
                o[bm] += 1
                left = [f"{MODULE_NAMES[m]}: {len(cur[m]) - o[m]}" for m in range(3)
                        if cur[m] is not None and o[m] < len(cur[m])]
                if left:
                    raise SimulationError("FINISH completed with instructions still queued ("
                                          + ", ".join(left) + "); it must wait for the last "
                                          "load and store through dependency tokens")
                break
            o[bm] += 1
            if o[bm] >= len(cur[bm]):
                seg = s[bm] + 1
                while seg < nseg and not T[tids[seg]][bm]:
                    seg += 1
                s[bm] = seg
                o[bm] = 0
                cur[bm] = T[tids[seg]][bm] if seg < nseg else None
        self.simulated_insns = n_exec
        if finish is None:
            blocked = []
            for m in range(3):
                if cur[m] is not None:
                    ins = cur[m][o[m]]
                    need = [QUEUE_NAMES[a] for a in (ins[3], ins[4]) if a >= 0 and not qs[a]]
                    blocked.append(f"{MODULE_NAMES[m]} waits on {'/'.join(need) or '?'}")
            if blocked:
                raise SimulationError("token deadlock: " + "; ".join(blocked))
            raise SimulationError("instruction stream ended without FINISH")
        self.final_state = (F, port, [list(q) for q in qs])
        return finish


# ============================================================================ results
@dataclass
class SimResult:
    """The outcome of one simulation.

    ``valid``/``reason``: whether the schedule compiles (``reason`` says why not);
    ``cycles``: accelerator cycles until FINISH completes; ``seconds``: cycles / clock
    (``inf`` when invalid); ``gops``: 2 * MACs / seconds / 1e9 (the workload's true MACs);
    ``utilization``: MACs / (cycles * BATCH * BLOCK_IN * BLOCK_OUT); ``counters``: the
    fsim profiler counters; ``instructions``: number of instructions in the stream;
    ``output``: the functional result (int8 after the epilogue, int32 accumulators when
    ``epilogue=None``) or None; ``program``: the compiled :class:`~dcoc.targets.vta.program.Program`
    when the full stream was built (reference / functional runs).
    """

    valid: bool
    reason: str | None = None
    cycles: int | None = None
    seconds: float = float("inf")
    gops: float = 0.0
    utilization: float = 0.0
    counters: dict = field(default_factory=dict)
    instructions: int = 0
    output: Any = None
    hw_name: str = ""
    workload: Any = None
    knobs: dict | None = None
    program: Any = field(default=None, repr=False)
    mode: str = ""

    @property
    def ms(self) -> float:
        return self.seconds * 1e3

    @classmethod
    def invalid(cls, reason: str, wl=None, hw=None, knobs=None) -> "SimResult":
        return cls(valid=False, reason=" ".join(str(reason).split()), cycles=None,
                   seconds=float("inf"), workload=wl, hw_name=getattr(hw, "name", ""),
                   knobs=dict(knobs) if isinstance(knobs, dict) else knobs)


def finish_result(wl, hw: HWConfig, knobs, cycles: int, counters: dict, n_insns: int,
                  mode: str, output=None, program=None) -> SimResult:
    seconds = cycles / (hw.freq_mhz * 1e6)
    macs = wl.macs
    return SimResult(valid=True, reason=None, cycles=int(cycles), seconds=seconds,
                     gops=2.0 * macs / seconds / 1e9 if seconds > 0 else 0.0,
                     utilization=macs / (cycles * hw.macs_per_cycle) if cycles else 0.0,
                     counters=dict(counters), instructions=int(n_insns), output=output,
                     hw_name=hw.name, workload=wl, knobs=dict(knobs), program=program, mode=mode)


# ============================================================================ reference run
def run_program(program, tp: TimingParams = DEFAULT_TIMING, arrays: dict | None = None,
                functional: bool = False, shadow_region: str | None = "out",
                check_races: bool = True):
    """Simulate a :class:`~dcoc.targets.vta.program.Program` instruction by instruction.

    Returns ``(cycles, counters, machine)``.  Every access is checked (SimulationError on a
    rule violation), including -- with ``check_races`` -- SRAM accesses of two modules that
    overlap in time without a dependency token ordering them.  With ``functional=True`` the
    machine computes on the DRAM image built from ``arrays`` (region name -> uint8 contents)
    and ``machine.dram`` holds the result.
    """
    from dcoc.targets.vta.memsys import dma_timing

    hw = program.hw
    insns = program.insns
    lat = dma_timing(program.plan, tp) if program.plan is not None else tp.dram_latency_cycles(hw)
    per = ([], [], [])
    counters = dict.fromkeys(COUNTER_KEYS, 0)
    for n, insn in enumerate(insns):
        t = insn_timing(insn, hw, tp, lat)
        per[t[0]].append(t[1:8] + (n,) + t[8:9])
        insn_counters(insn, hw, counters)
    tpl = per  # tuples (pre, hold, post, popA, popB, pushA, pushB, pos, fin)
    ub0, _ = program.dram.byte_range("uop")
    dram = program.initial_dram(arrays) if functional else None
    shadow = None
    if functional and shadow_region and shadow_region in program.dram.regions:
        base, nbytes, eb = program.dram.regions[shadow_region]
        shadow = (base // hw.out_elem_bytes, nbytes // eb)
    mach = Machine(hw, program.dram.size, (ub0, program.uop_words), dram, shadow)

    log: list = []

    def on_exec(pos, start, end, module):
        mach.execute(insns[pos])
        if check_races:
            for a in mach.acc_log:
                log.append((a[0], module, start, end, a[1], a[2], a[3], pos))

    eng = Engine([tpl], [0], on_exec=on_exec)
    cycles = eng.run()
    if check_races:
        check_races_of(log, insns, MODULE_NAMES)
    return cycles, counters, mach
