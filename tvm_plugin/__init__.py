"""dcoc's TVM side: ONNX import and task extraction (:mod:`tvm_plugin.frontend`), and the
MetaSchedule integration (:mod:`tvm_plugin.metaschedule.strategy`, :mod:`tvm_plugin.metaschedule.trace_space`,
:mod:`tvm_plugin.metaschedule.build`, :mod:`tvm_plugin.metaschedule.tuning`, :mod:`tvm_plugin.rpc`).

``import tvm_plugin`` is cheap: TVM itself is imported on first use (the MetaSchedule
names below are resolved lazily, on first attribute access).
"""
from tvm_plugin.frontend import (
    Model,
    TargetSpec,
    extract_tasks,
    load,
    load_model,
    lower_for_tuning,
    model_tasks,
    preflight,
    resolve_target,
    unsupported_ops,
)

__all__ = [
    "Model",
    "TargetSpec",
    "extract_tasks",
    "load",
    "load_model",
    "lower_for_tuning",
    "model_tasks",
    "preflight",
    "resolve_target",
    "unsupported_ops",
]

#: MetaSchedule integration, resolved lazily: name -> module
_LAZY = {
    "TunerStrategy": "tvm_plugin.metaschedule.strategy",
    "MetaScheduleMeasurer": "tvm_plugin.metaschedule.adapter",
    "ms_tuning_task": "tvm_plugin.metaschedule.adapter",
    "TraceSpace": "tvm_plugin.metaschedule.trace_space",
    "ProgramConfig": "tvm_plugin.metaschedule.program",
    "PersistentBuilder": "tvm_plugin.metaschedule.build",
    "fast_build": "tvm_plugin.metaschedule.build",
    "make_builder": "tvm_plugin.metaschedule.build",
    "make_runner": "tvm_plugin.metaschedule.build",
    "compile_model": "tvm_plugin.metaschedule.build",
    "measure_latency": "tvm_plugin.metaschedule.build",
    "tune_model": "tvm_plugin.metaschedule.tuning",
    "RPCSimMeasurer": "tvm_plugin.rpc",
}
__all__ += list(_LAZY)


def __getattr__(name):  # PEP 562: keep `import tvm_plugin` free of tvm
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'tvm_plugin' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(mod), name)
