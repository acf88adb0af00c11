"""``simulate`` and ``default_knobs``: the entry points other components call."""
from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Mapping

import numpy as np

from dcoc.errors import ConfigError, KnobError, WorkloadError
from dcoc.targets.vta.compiler import PlanError, make_plan
from dcoc.targets.vta.grouped import conv_groups
from dcoc.targets.vta.hardware import HWConfig
from dcoc.targets.vta.program import compile_program
from dcoc.targets.vta.simulator import DEFAULT_TIMING, SimResult, TimingParams, finish_result, run_program
from dcoc.targets.vta.workloads import DEFAULT_EPILOGUE, Conv2DWorkload, DenseWorkload, Epilogue, space_for

__all__ = ["simulate", "default_knobs", "compile_schedule"]

_DEFAULT = object()


def _hw(hw) -> HWConfig:
    if isinstance(hw, HWConfig):
        return hw
    if isinstance(hw, str):
        return HWConfig.parse(hw)
    raise ConfigError(f"expected an HWConfig or a preset/config name, got {type(hw).__name__}")


def _norm_knobs(knobs):
    if not isinstance(knobs, Mapping):
        return knobs
    out = {}
    for k, v in knobs.items():
        if isinstance(v, (np.integer,)):
            v = int(v)
        out[k] = v
    return out


def compile_schedule(wl, hw, knobs, epilogue: Epilogue | None = DEFAULT_EPILOGUE):
    """Compile the full instruction stream (a :class:`~dcoc.targets.vta.program.Program`).

    Raises :class:`~dcoc.errors.KnobError` when the knobs are invalid for the config.
    """
    hw = _hw(hw)
    try:
        plan = make_plan(wl, hw, _norm_knobs(knobs), epilogue)
        return compile_program(plan)
    except PlanError as exc:
        raise KnobError(str(exc)) from None


def simulate(wl, hw, knobs, data=None, weight=None, bias=None, residual=None,
             epilogue=_DEFAULT, *, timing: TimingParams | None = None,
             mode: str = "fast") -> SimResult:
    """Compile ``wl`` for ``hw`` with ``knobs`` and simulate it.

    * timing only (default): ``mode="fast"`` uses the exact template/steady-state engine
      (:mod:`dcoc.targets.vta.fastpath`); ``mode="reference"`` compiles and simulates every
      instruction.
    * functional: pass ``data`` (int8 NCHW, dense: int8 [N, K]) and ``weight`` (int8 OIHW,
      dense: int8 [M, K]); optional ``bias`` (int32 per output channel) and ``residual``
      (int32 or int8 of the output's shape) are fused into the epilogue.  ``r.output`` is
      the int8 result after the epilogue (int32 accumulators when ``epilogue=None``).

    ``epilogue`` defaults to VTA's requantization (shift 8, clip [0, 127]); passing
    ``bias``/``residual`` adds them to it.  Invalid knobs never raise: the result has
    ``valid=False`` and a ``reason``.  Invalid configs raise ConfigError; malformed data
    raises WorkloadError.
    """
    hw = _hw(hw)
    tp = timing or DEFAULT_TIMING
    if not isinstance(tp, TimingParams):
        raise WorkloadError(f"timing must be a TimingParams or None, got {type(tp).__name__}")
    if not isinstance(wl, (Conv2DWorkload, DenseWorkload)):
        raise WorkloadError(f"simulate expects a Conv2DWorkload or DenseWorkload, got "
                            f"{type(wl).__name__}")
    ep = DEFAULT_EPILOGUE if epilogue is _DEFAULT else epilogue
    if ep is not None and not isinstance(ep, Epilogue):
        raise WorkloadError(f"epilogue must be an Epilogue or None, got {ep!r}")
    if bias is not None:
        if ep is None:
            raise WorkloadError("bias given but epilogue=None")
        ep = replace(ep, bias=True)
    if residual is not None:
        if ep is None:
            raise WorkloadError("residual given but epilogue=None")
        ep = replace(ep, residual=True)
    knobs = _norm_knobs(knobs)
    functional = data is not None or weight is not None
    if functional:
        if data is None or weight is None:
            raise WorkloadError("functional simulation needs both data and weight")
        data = check_data(data, wl.data_shape, "i", "data")
        weight = check_data(weight, wl.weight_shape, "i", "weight")
        co = wl.out_channels if isinstance(wl, Conv2DWorkload) else wl.out_features
        bias = check_data(bias, (co,), "i", "bias", dtypes=(np.int32,))
        residual = check_data(residual, wl.output_shape, "i", "residual",
                              dtypes=(np.int32, np.int8))
    try:
        plan = make_plan(wl, hw, knobs, ep)
    except PlanError as exc:
        return SimResult.invalid(str(exc), wl, hw, knobs)
    if mode not in ("fast", "reference"):
        raise ValueError(f"mode must be 'fast' or 'reference', got {mode!r}")
    try:
        if functional or mode == "reference":
            prog = compile_program(plan)
            arrays = plan.pack(data, weight, bias, residual) if functional else None
            cycles, counters, mach = run_program(prog, tp, arrays, functional=functional)
            output = None
            if functional:
                if ep is None:
                    output = plan.unpack_output(mach.out32)
                else:
                    b0, b1 = prog.dram.byte_range("out")
                    output = plan.unpack_output(mach.dram[b0:b1].view(np.int8))
            return finish_result(wl, hw, knobs, cycles, counters, len(prog.insns),
                                 "functional" if functional else "reference", output, prog)
        from dcoc.targets.vta.fastpath import fast_timing

        cycles, counters, n, _ = fast_timing(plan, tp)
        return finish_result(wl, hw, knobs, cycles, counters, n, "fast")
    except PlanError as exc:
        return SimResult.invalid(str(exc), wl, hw, knobs)


# ============================================================================ default knobs
def default_knobs(wl, hw, epilogue: Epilogue | None = DEFAULT_EPILOGUE) -> dict[str, int]:
    """A valid, good schedule from a cheap heuristic (no simulation).

    Valid means it compiles with ``epilogue`` (the default: VTA's requantization): a
    bias vector and a residual tile take accumulator entries too, so a model layer's
    default must be asked for with its epilogue
    (:func:`dcoc.targets.vta.report.layer_epilogue`).

    conv2d: ``tile_ci`` = 1 for padded convs (one input-channel block per load, as in
    every TopHub schedule; any ``tile_ci`` for unpadded ones) and every (tile_h, tile_w,
    tile_co) and thread setting that fits the SRAMs (each thread must have work), ranked
    by a closed-form cycle estimate that mirrors the simulator: per tile, GEMMs
    overlapped with the input/weight DMAs when virtual threads double-buffer, plus the
    exposed epilogue (ALU at II=2, a store, the next tile's first load) and instruction
    overheads.  dense: the fitting setting with the least estimated weight traffic +
    instruction overhead.  Falls back to any fitting setting.
    """
    hw = _hw(hw)
    space = space_for(wl, hw)
    if epilogue is not None and not isinstance(epilogue, Epilogue):
        raise WorkloadError(f"epilogue must be an Epilogue or None, got {epilogue!r}")
    if isinstance(wl, DenseWorkload):
        return _default_dense(wl, hw, space, epilogue)
    return _default_conv(wl, hw, space, epilogue)


def _fits(wl, hw, knobs, epilogue=DEFAULT_EPILOGUE) -> bool:
    try:
        make_plan(wl, hw, knobs, epilogue)
        return True
    except PlanError:
        return False


def _conv_estimate(wl, hw, k, nops: int = 4) -> float:
    """Closed-form cycle estimate of a conv schedule (mirrors the simulator's structure).

    Per tile iteration: the GEMMs of all thread contexts, overlapped with the input/weight
    DMAs when virtual threads double-buffer them, plus the exposed epilogue (ALU ops at
    II=2, the first loads of the next tile and one store).
    """
    sh, sw = wl.stride
    kh, kw = wl.kernel
    oh, ow = wl.out_height, wl.out_width
    gb = conv_groups(wl, hw.block_in, hw.block_out)
    cob = gb.out_blocks
    nb = -(-wl.batch // hw.batch)
    th, tw, tci, tco = k["tile_h"], k["tile_w"], k["tile_ci"], k["tile_co"]
    nctx = k["oc_nthread"] * k["h_nthread"]
    n_tiles = nb * (oh // th) * (ow // tw) * (cob // tco)
    n_ci = gb.ci_blocks // tci
    tg = max(1, tco // gb.co_blocks)  # packed groups per tile (each loads its own input)
    in_rows = (th - 1) * sh + kh
    in_cols = (tw - 1) * sw + kw
    acc = tco * th * tw
    bus = hw.bus_bytes
    tp = DEFAULT_TIMING
    lat = tp.dram_latency_cycles(hw)
    eff = 1.0 + tp.burst_overhead / max(tp.max_burst_beats, 1)  # DMA efficiency
    beats = -(-in_cols * hw.inp_elem_bytes // bus)
    ld_inp = tg * tci * in_rows * (lat + beats * eff)
    ld_wgt = tco * (lat + tci * kh * kw * hw.wgt_elem_bytes / bus * eff)
    load = ld_inp + ld_wgt + 2 * tp.insn_overhead
    gemm = th * tw * tco * kh * kw * tci + tp.insn_overhead + tp.gemm_depth
    alu = acc * 2 * nops + 12 * nops
    store = tco * (lat + th * tw * hw.out_elem_bytes / bus * eff)
    if nctx > 1:
        per_tile = n_ci * max(gemm, load) + alu + store / nctx + load
    else:
        per_tile = n_ci * (gemm + load) + alu + store
    return n_tiles * per_tile


def _default_conv(wl, hw, space, epilogue=DEFAULT_EPILOGUE):
    best = None
    cob = space["tile_co"][-1]
    # padded inputs need one DMA per input-channel block (TVM even rejects tile_ci > 1),
    # so only unpadded convs consider larger tile_ci
    cis = [1] if any(wl.padding) else space["tile_ci"]
    for th, tw, tco, tci in itertools.product(space["tile_h"], space["tile_w"],
                                              space["tile_co"], cis):
        for ocn, hn in ((2, 1), (1, 2), (2, 2), (1, 1)):
            if ocn == 2 and cob // tco < 2 or hn == 2 and wl.out_height // th < 2:
                continue  # a thread without work
            k = {"tile_h": th, "tile_w": tw, "tile_ci": tci, "tile_co": tco,
                 "oc_nthread": ocn, "h_nthread": hn}
            cost = _conv_estimate(wl, hw, k)
            if best is not None and cost >= best[0]:
                continue
            if _fits(wl, hw, k, epilogue):
                best = (cost, k)
    if best is None:
        for vals in _iter_space(space):
            if _fits(wl, hw, vals, epilogue):
                cost = _conv_estimate(wl, hw, vals)
                if best is None or cost < best[0]:
                    best = (cost, vals)
    if best is None:
        raise KnobError(f"no schedule of {wl.name} fits {hw.name}")
    return dict(best[1])


def _default_dense(wl, hw, space, epilogue=DEFAULT_EPILOGUE):
    best = None
    for vals in _iter_space(space):
        if not _fits(wl, hw, vals, epilogue):
            continue
        nb = (-(-wl.batch // hw.batch)) // vals["tile_b"]
        cob = -(-wl.out_features // hw.block_out)
        cib = -(-wl.in_features // hw.block_in)
        n_tiles = nb * (cob // vals["tile_co"])
        wbytes = n_tiles * vals["tile_b"] * vals["tile_co"] * cib * hw.wgt_elem_bytes
        insns = n_tiles * vals["tile_b"] * (cib // vals["tile_ci"]) * 3
        cost = wbytes / hw.bus_bytes + insns * 40
        if vals["oc_nthread"] == 1 and cob // vals["tile_co"] >= 2:
            cost *= 1.2
        if best is None or cost < best[0]:
            best = (cost, vals)
    if best is None:
        raise KnobError(f"no schedule of {wl.name} fits {hw.name}")
    return dict(best[1])


def _iter_space(space):
    names = list(space)
    for combo in itertools.product(*[space[n] for n in names]):
        yield dict(zip(names, combo))


def check_data(arr, shape, dtype_kind: str, name: str, dtypes=(np.int8,)):
    if arr is None:
        return None
    a = np.asarray(arr)
    if tuple(a.shape) != tuple(shape):
        raise WorkloadError(f"{name} has shape {tuple(a.shape)}, expected {tuple(shape)}")
    if a.dtype not in [np.dtype(d) for d in dtypes]:
        if not np.issubdtype(a.dtype, np.integer):
            raise WorkloadError(f"{name} must be an integer array, got {a.dtype}")
        info = np.iinfo(dtypes[0])
        if a.size and (a.min() < info.min or a.max() > info.max):
            raise WorkloadError(f"{name} values do not fit {np.dtype(dtypes[0]).name}")
    return a.astype(dtypes[0])
