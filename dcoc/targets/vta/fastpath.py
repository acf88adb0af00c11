"""Fast timing path: the same event simulation, without materializing the whole stream.

The tile iterations of a schedule repeat: every iteration with the same *key* (the DMA
shapes of its tiles, which threads are active) and the same runtime state at its start
(pending dependency pops, last instruction, micro-op cache) produces the same
instructions up to DRAM addresses, which do not affect timing.  So:

1. the instructions of each distinct (key, state) iteration are emitted once by the real
   compiler (:meth:`ConvPlan.emit_iteration`) and turned into a timing *template*;
2. the program is the sequence of template ids (prologue, one per iteration, epilogue);
3. :class:`dcoc.targets.vta.simulator.Engine` runs it with periodic steady-state skipping, which
   is exact: a period is skipped only when the complete machine state (module clocks,
   DRAM port, token queues, queue positions) repeats relative to the current time.

Counters are summed from the templates.  ``tests/vta/test_fastpath.py`` and
``scripts/bench_vta_sim.py --check`` compare against the reference (every instruction
compiled and simulated); they agree exactly (the contract is 0.5 %).
"""
from __future__ import annotations

import numpy as np

from dcoc.targets.vta.isa import COMPUTE_STAGE, LOAD_STAGE, OP_LOAD, OP_STORE, GemmInsn, MemInsn
from dcoc.targets.vta.program import DramLayout, kernel_dram
from dcoc.targets.vta.simulator import COUNTER_KEYS, Engine, TimingParams, insn_counters, insn_timing
from dcoc.targets.vta.stream import InsnStream

__all__ = ["fast_timing"]


def _stream_from_state(hw, kd, state) -> InsnStream:
    pend_prev, pend_next, last, ucache = state
    q = InsnStream(hw, kd)
    q.pend_prev = list(pend_prev)
    q.pend_next = list(pend_next)
    if last is not None:
        stage, up, un = last
        if stage == LOAD_STAGE:
            d = MemInsn(opcode=OP_LOAD)
        elif stage == COMPUTE_STAGE:
            d = GemmInsn()
        else:
            d = MemInsn(opcode=OP_STORE)
        d.push_prev, d.push_next = up, un
        q.insns.append(d)
    q.uop_cache.set_state(ucache)
    q.begin_segment()
    return q


def _template(insns, hw, tp, lat):
    per = ([], [], [])
    cnt = dict.fromkeys(COUNTER_KEYS, 0)
    for n, insn in enumerate(insns):
        t = insn_timing(insn, hw, tp, lat)
        per[t[0]].append((t[1], t[2], t[3], t[4], t[5], t[6], t[7], n, t[8]))
        insn_counters(insn, hw, cnt)
    return per, cnt, len(insns)


def fast_timing(plan, tp: TimingParams, skip: bool = True):
    """``(cycles, counters, n_instructions, info)`` of a plan via templates + skipping."""
    from dcoc.targets.vta.memsys import dma_timing

    hw = plan.hw
    lat = dma_timing(plan, tp)
    offsets, words = kernel_dram(plan)
    dram = DramLayout(plan.dram_regions(), len(words))
    dram.check_fields()
    base = dram.elem("uop", 0)
    kd = {k: base + v for k, v in offsets.items()}
    templates, tcounts, tlen = [], [], []

    def add(insns):
        per, cnt, n = _template(insns, hw, tp, lat)
        templates.append(per)
        tcounts.append(cnt)
        tlen.append(n)
        return len(templates) - 1

    q = InsnStream(hw, kd)
    plan.emit_prologue(q)
    add(q.insns)
    states: dict = {}
    state_list: list = []

    def intern(st):
        sid = states.get(st)
        if sid is None:
            sid = states[st] = len(state_list)
            state_list.append(st)
        return sid

    sid = intern(q.state())
    keys = plan.iteration_keys().tolist()
    n_it = len(keys)
    parts = plan.n_parts
    pkeys = [plan.part_key(p) for p in range(parts)]
    n_seg = n_it * parts
    tids = [0] * (n_seg + 2)
    memo: dict = {}
    seg = 1
    for idx in range(n_it):
        key = keys[idx]
        for part in range(parts):
            mk = (key, pkeys[part], sid)
            r = memo.get(mk)
            if r is None:
                q2 = _stream_from_state(hw, kd, state_list[sid])
                plan.emit_part(q2, plan.iteration_at(idx), part, dram)
                tid = add(q2.insns[q2.seg_start:])
                r = memo[mk] = (tid, intern(q2.state()))
            tids[seg] = r[0]
            sid = r[1]
            seg += 1
    q3 = _stream_from_state(hw, kd, state_list[sid])
    plan.emit_epilogue(q3)
    tids[n_seg + 1] = add(q3.insns[q3.seg_start:])

    is_tile = [False] + [True] * n_seg + [False]
    periods = set()
    for s in plan.strides():
        for mult in (1, 2):
            p = s * mult
            if 1 <= p <= n_seg // 2:
                periods.add(p)
    eng = Engine(templates, tids, is_tile=is_tile, periods=sorted(periods), skip=skip)
    cycles = eng.run()
    mult = np.bincount(np.asarray(tids, dtype=np.int64), minlength=len(templates))
    counters = {k: int(sum(int(m) * c[k] for m, c in zip(mult, tcounts))) for k in COUNTER_KEYS}
    n_insns = int(sum(int(m) * n for m, n in zip(mult, tlen)))
    info = {"templates": len(templates), "segments": len(tids),
            "skipped_segments": eng.skipped_segments, "simulated_insns": eng.simulated_insns}
    return cycles, counters, n_insns, info
