"""dcoc's TVM side: ONNX import and task extraction (:mod:`tvm_plugin.frontend`), and the
MetaSchedule integration (:mod:`tvm_plugin.strategy`, :mod:`tvm_plugin.space`,
:mod:`tvm_plugin.build`, :mod:`tvm_plugin.tune`, :mod:`tvm_plugin.rpc`).

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
    "DCOCSearchStrategy": "tvm_plugin.strategy",
    "TunerStrategy": "tvm_plugin.strategy",
    "MetaScheduleMeasurer": "tvm_plugin.strategy",
    "ms_tuning_task": "tvm_plugin.strategy",
    "TraceSpace": "tvm_plugin.space",
    "PersistentBuilder": "tvm_plugin.build",
    "fast_build": "tvm_plugin.build",
    "make_builder": "tvm_plugin.build",
    "make_runner": "tvm_plugin.build",
    "compile_model": "tvm_plugin.build",
    "measure_latency": "tvm_plugin.build",
    "tune_model": "tvm_plugin.tune",
    "RPCSimMeasurer": "tvm_plugin.rpc",
}
__all__ += list(_LAZY)


def __getattr__(name):  # PEP 562: keep `import tvm_plugin` free of tvm
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'tvm_plugin' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(mod), name)
