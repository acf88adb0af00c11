"""dcoc's TVM side: ONNX import and task extraction (:mod:`tvm_plugin.frontend`).

``import tvm_plugin`` is cheap: TVM itself is imported on first use.
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
