"""VTA search spaces and tasks: the adapter between :mod:`dcoc.targets.vta` and the tuners.

* :func:`hw_space` -- the hardware knobs (GEMM core and buffer sizes) under a board's
  resource budget.
* :func:`sw_space` -- one workload's schedule knobs on one hardware config, with the
  buffer-fit constraints the compiler would reject, and VTA-aware cost-model features.
* :func:`vta_task` -- a software-only :class:`~dcoc.search.tuning_task.TuningTask`.
* :func:`simulate_config` -- measure one config on the timing simulator;
  :class:`VTASimMeasurer` -- the simulator as a :class:`dcoc.search.Measurer` (a process pool).

Features (for every model-based tuner alike): log2 knob values, the workload/hardware
descriptor, and derived quantities of the TOPI-VTA loop nest -- tiles, reduction steps,
per-tile buffer footprints and buffer occupancy, estimated DRAM traffic, and
compute-to-traffic ratio (the "itervar"-style features AutoTVM derived from the loop AST).
"""
from __future__ import annotations

import math

import numpy as np

from dcoc.search.measure import FunctionMeasurer
from dcoc.search.space import Knob, Space, hardware_space
from dcoc.search.tuning_task import TuningTask
from dcoc.targets.vta.hardware import BOARDS, HWConfig
from dcoc.targets.vta.layer import default_knobs, simulate
from dcoc.targets.vta.workloads import Conv2DWorkload, conv2d_space, dense_space

#: hardware knobs in the order the hardware agent sees them, with their default ranges
HW_RANGES = {
    "batch": (1, 2, 4),
    "block_in": (8, 16, 32),
    "block_out": (8, 16, 32),
    "log_uop_buff": (14, 15, 16),
    "log_inp_buff": (14, 15, 16, 17),
    "log_wgt_buff": (16, 17, 18, 19),
    "log_acc_buff": (15, 16, 17, 18),
}
HW_KNOBS = tuple(HW_RANGES)


def make_hw(values: dict, board) -> "object":
    """HWConfig from hardware-knob values at the board's bus width and the clock the board
    achieves for that core (:meth:`dcoc.targets.vta.hardware.Board.clock_mhz`)."""
    hw = HWConfig(**{k: int(values[k]) for k in HW_KNOBS},
                      freq_mhz=board.freq_mhz, bus_bytes=board.bus_bytes)
    # the achievable clock of this core on the board (tree depth, congestion)
    return board.realize(hw) if hasattr(board, "realize") else hw


def hw_space(board="pynq", ranges: dict | None = None, extended: bool = False) -> Space:
    """Hardware knobs constrained to configs that are valid and fit ``board``, and -- unless
    ``extended`` -- that stock tvm-vta's config flow builds (square cores, the standard
    instruction layout: :mod:`dcoc.targets.vta.buildflow`)."""
    from dcoc.targets.vta import buildflow

    bd = BOARDS[board] if isinstance(board, str) else board
    ranges = ranges or HW_RANGES

    def violations(cfg):
        hw = make_hw(cfg, bd)
        return bd.violations(hw) + ([] if extended else buildflow.problems(hw))

    return hardware_space({k: ranges[k] for k in HW_KNOBS}, violations, bd,
                          f"hw[{bd.name}]" + ("+extended" if extended else ""))


def feasible_hw(board="pynq", ranges: dict | None = None, extended: bool = False) -> list:
    """Every hardware config of :func:`hw_space` that fits the board."""
    s = hw_space(board, ranges, extended)
    bd = BOARDS[board] if isinstance(board, str) else board
    return [make_hw(c, bd) for c in s if s.is_valid(c)]


# --------------------------------------------------------------------------- software
def _descriptor(wl, hw) -> dict:
    if isinstance(wl, Conv2DWorkload):
        d = {"H": wl.height, "W": wl.width, "CI": wl.in_channels, "CO": wl.out_channels,
             "KH": wl.kernel[0], "KW": wl.kernel[1], "S": wl.stride[0], "OH": wl.out_height,
             "OW": wl.out_width}
    else:
        d = {"N": wl.batch, "K": wl.in_features, "M": wl.out_features}
    d.update({"batch": hw.batch, "block_in": hw.block_in, "block_out": hw.block_out,
              "inp_depth": hw.inp_depth, "wgt_depth": hw.wgt_depth, "acc_depth": hw.acc_depth,
              "uop_depth": hw.uop_depth, "bus": hw.bus_bytes})
    return d


def _vals(space: Space, points: np.ndarray, name: str) -> np.ndarray:
    k = space.knob(name)
    return np.asarray(k.choices, dtype=np.float64)[points[:, space.names.index(name)]]


def _conv_features(wl, hw):
    """Derived TOPI-VTA loop-nest features of a conv2d schedule (vectorised)."""
    OH, OW = wl.out_height, wl.out_width
    CI_b = math.ceil(wl.in_channels / hw.block_in)
    CO_b = math.ceil(wl.out_channels / hw.block_out)
    KH, KW = wl.kernel
    SH, SW = wl.stride
    macs_ideal = wl.macs / (hw.batch * hw.block_in * hw.block_out)

    def fn(space, points):
        th, tw = _vals(space, points, "tile_h"), _vals(space, points, "tile_w")
        tci, tco = _vals(space, points, "tile_ci"), _vals(space, points, "tile_co")
        nctx = _vals(space, points, "oc_nthread") * _vals(space, points, "h_nthread")
        tiles = (OH / th) * (OW / tw) * (CO_b / tco)
        steps = CI_b / tci
        inp = tci * ((th - 1) * SH + KH) * ((tw - 1) * SW + KW)
        wgt = tco * tci * KH * KW
        acc = tco * th * tw
        traffic = tiles * steps * (inp * hw.inp_elem_bytes + wgt * hw.wgt_elem_bytes) \
            + tiles * acc * hw.out_elem_bytes
        gemm_insns = tiles * steps
        cols = [tiles, steps, inp, wgt, acc, nctx,
                inp * nctx / hw.inp_depth, wgt * nctx / hw.wgt_depth, acc * nctx / hw.acc_depth,
                traffic, macs_ideal / np.maximum(traffic, 1), gemm_insns, tw, th * tw]
        return np.log2(np.maximum(np.stack(cols, axis=1), 1e-6))

    return fn


def _dense_features(wl, hw):
    N_b = math.ceil(wl.batch / hw.batch)
    K_b = math.ceil(wl.in_features / hw.block_in)
    M_b = math.ceil(wl.out_features / hw.block_out)
    macs_ideal = wl.macs / (hw.batch * hw.block_in * hw.block_out)

    def fn(space, points):
        tb, tci = _vals(space, points, "tile_b"), _vals(space, points, "tile_ci")
        tco, nctx = _vals(space, points, "tile_co"), _vals(space, points, "oc_nthread")
        tiles = (N_b / tb) * (M_b / tco)
        steps = K_b / tci
        inp, wgt, acc = tb * tci, tco * tci, tb * tco
        traffic = tiles * steps * (inp * hw.inp_elem_bytes + wgt * hw.wgt_elem_bytes) \
            + tiles * acc * hw.out_elem_bytes
        cols = [tiles, steps, inp, wgt, acc, nctx, inp * nctx / hw.inp_depth,
                wgt * nctx / hw.wgt_depth, acc * nctx / hw.acc_depth, traffic,
                macs_ideal / np.maximum(traffic, 1), tiles * steps, tb, tco]
        return np.log2(np.maximum(np.stack(cols, axis=1), 1e-6))

    return fn


def _epilogue(epilogue):
    """``"default"``/None -> VTA's requantization (shift 8, clip); an Epilogue as is."""
    from dcoc.targets.vta.workloads import DEFAULT_EPILOGUE

    return DEFAULT_EPILOGUE if epilogue in (None, "default") else epilogue


def fit_reason(wl, hw, knobs: dict, epilogue="default") -> str | None:
    """Why the compiler rejects a schedule (SRAM/uop-cache/field overflow), or None.

    This plans the loop nest (no instruction stream, no simulation): ~0.5 ms.
    """
    from dcoc.targets.vta.compiler import PlanError, make_plan

    try:
        make_plan(wl, hw, knobs, _epilogue(epilogue))
    except PlanError as exc:
        return str(exc)
    return None


def _memo_fit(wl, hw, epilogue="default"):
    cache: dict = {}

    def check(cfg):
        key = tuple(sorted(cfg.items()))
        if key not in cache:
            cache[key] = fit_reason(wl, hw, cfg, epilogue)
        return cache[key]

    return check


def sw_space(wl, hw, epilogue="default") -> Space:
    """The schedule knobs of ``wl`` on ``hw`` (TOPI-VTA template), with buffer-fit checks
    for the fused ``epilogue`` (a bias or residual takes ACC space too)."""
    choices = conv2d_space(wl, hw) if isinstance(wl, Conv2DWorkload) else dense_space(wl, hw)
    group = {"tile_h": "tile", "tile_w": "tile", "tile_ci": "tile", "tile_co": "tile", "tile_b": "tile",
             "oc_nthread": "thread", "h_nthread": "thread"}
    knobs = [Knob(k, tuple(v), group.get(k, "schedule")) for k, v in choices.items()]
    cons = [_memo_fit(wl, hw, epilogue)]
    feat = _conv_features(wl, hw) if isinstance(wl, Conv2DWorkload) else _dense_features(wl, hw)
    return Space(knobs, cons, _descriptor(wl, hw), name=f"{wl.name}@{hw.name}", feature_fn=feat)


def workload_key(wl, epilogue="default") -> str:
    """Records key of a VTA workload (the epilogue is part of it unless it is the default)."""
    ep = _epilogue(epilogue)
    from dcoc.targets.vta.workloads import DEFAULT_EPILOGUE

    if ep == DEFAULT_EPILOGUE:
        return f"vta:{wl.name}"
    tag = "".join(t for t, on in (("b", ep.bias), ("r", ep.residual), ("n", ep.round)) if on)
    return f"vta:{wl.name}:ep{tag}s{ep.shift}c{'' if ep.clip is None else '%d_%d' % ep.clip}"


def vta_task(wl, hw, name: str | None = None, epilogue="default") -> TuningTask:
    """A software-only tuning task: ``wl``'s schedule on the fixed hardware ``hw``.

    ``epilogue``: the fused ALU epilogue simulated with every schedule ("default" = shift
    8 + clip; a model layer's own, :func:`dcoc.targets.vta.report.layer_epilogue`: bias, residual,
    rounding); the fit check and the default schedule count its accumulator use."""
    space = sw_space(wl, hw, epilogue)

    def defaults():
        from dcoc.errors import DcocError

        try:
            k = default_knobs(wl, hw, epilogue=_epilogue(epilogue))
        except DcocError:
            return []
        return [k] if k is not None and space.is_valid(k) else []

    return TuningTask(
        name=name or wl.name, space=space, target="vta",
        workload_key=workload_key(wl, epilogue),
        flop=float(wl.flops), hw_name=hw.name, payload={"workload": wl, "hw": hw, "epilogue": epilogue},
        defaults=defaults,
    )


def simulate_config(task: TuningTask, config: dict):
    """Simulate one config: ``(seconds, info)`` or ``(None, {"reason": ...})`` if invalid."""
    p = task.payload
    wl = p["workload"]
    if task.hw_knobs:
        hw = make_hw(config, p["board"])
        knobs = {k: v for k, v in config.items() if k not in task.hw_knobs}
    else:
        hw, knobs = p["hw"], config
    r = simulate(wl, hw, knobs, epilogue=_epilogue(p.get("epilogue")))
    if not r.valid:
        return None, {"reason": r.reason}
    return float(r.seconds), {"cycles": int(r.cycles), "gops": float(r.gops),
                              "utilization": float(r.utilization)}


def _simulate_in_worker(task: TuningTask, config: dict):
    """One config of a VTA task on the timing simulator (what a worker process runs)."""
    return simulate_config(task, config)


class VTASimMeasurer(FunctionMeasurer):
    """The VTA timing simulator as a measurer.

    ``n_workers`` defaults to the number of CPU cores; ``n_workers=0`` simulates in this
    process (fastest for small batches, no timeout enforcement).
    """

    def __init__(self, n_workers: int | None = None, timeout: float = 60.0):
        super().__init__(_simulate_in_worker, n_workers=n_workers, timeout=timeout)
