"""dcoc's VTA-style accelerator: configurable hardware, ISA, operator compiler, simulator.

TVM 0.27 has no VTA, so dcoc ships its own model of it (see ``docs/vta.md``)::

    from dcoc.targets.vta import HWConfig, Conv2DWorkload, simulate, conv2d_space, BOARDS
    hw = HWConfig.preset("pynq")
    wl = Conv2DWorkload(batch=1, height=56, width=56, in_channels=64, out_channels=64,
                        kernel=(3, 3), stride=(1, 1), padding=(1, 1))
    r = simulate(wl, hw, {"tile_h": 8, "tile_w": 56, "tile_ci": 1, "tile_co": 2,
                          "oc_nthread": 2, "h_nthread": 1})
    r.cycles, r.seconds, r.gops

Nothing here imports tvm.
"""
from dcoc.errors import ConfigError, IsaError, KnobError, SimulationError, WorkloadError
from dcoc.targets.vta.hardware import BOARDS, PRESETS, Board, HWConfig, get_board
from dcoc.targets.vta.layer import compile_schedule, default_knobs, simulate
from dcoc.targets.vta.simulator import DEFAULT_TIMING, SimResult, TimingParams
from dcoc.targets.vta.workloads import (
    DEFAULT_EPILOGUE,
    Conv2DWorkload,
    DenseWorkload,
    Epilogue,
    conv2d_space,
    dense_space,
    space_for,
    space_size,
    workload_from_task,
)

__all__ = [
    "HWConfig", "Conv2DWorkload", "DenseWorkload", "simulate", "conv2d_space", "dense_space",
    "BOARDS", "Board", "PRESETS", "get_board", "Epilogue", "DEFAULT_EPILOGUE", "SimResult",
    "TimingParams", "DEFAULT_TIMING", "default_knobs", "compile_schedule", "space_for",
    "space_size", "workload_from_task", "simulate_model", "ConfigError", "KnobError",
    "IsaError", "SimulationError", "WorkloadError", "VTASimMeasurer", "vta_task", "resnet18_layer",
]


def __getattr__(name):  # lazy: model-level helpers and the tuning side
    if name in ("simulate_model", "ModelReport"):
        from dcoc.targets.vta import report as model

        return getattr(model, name)
    if name in ("VTASimMeasurer", "vta_task", "sw_space", "hw_space"):
        from dcoc.targets.vta import spaces

        return getattr(spaces, name)
    if name in ("resnet18_layer", "RESNET18_CONV", "exhaustive"):
        from dcoc.targets.vta import catalogue

        return getattr(catalogue, name)
    raise AttributeError(f"module 'dcoc.targets.vta' has no attribute {name!r}")
