"""dcoc: hardware/software co-optimizing autotuner for Apache TVM.

Public entry points (imported lazily so ``import dcoc`` stays cheap and never loads TVM):

* :func:`dcoc.tune` -- tune a whole model (ONNX path or zoo name) for ``vta`` or ``llvm``, or
  co-design one accelerator for a list of models (a :class:`dcoc.results.mix.MixResult`)
* :func:`dcoc.tune_task` -- tune one VTA workload
* :func:`dcoc.run` -- run the int8-quantized model on the (tuned) VTA simulator
* :mod:`dcoc.targets.vta` -- the VTA-style accelerator model and simulator
* :class:`dcoc.DcocError` -- the exception for bad input
"""
from dcoc.errors import DcocError

__version__ = "0.1.0"

__all__ = ["DcocError", "tune", "tune_task", "run", "__version__"]


def __getattr__(name):  # PEP 562 lazy attributes
    if name in ("tune", "tune_task", "TuneResult", "TaskResult"):
        from dcoc import api

        return getattr(api, name)
    if name == "run":  # dcoc.run: the quantized model on the VTA simulator
        from dcoc import api

        return api.run
    if name == "MixResult":
        from dcoc.results.mix import MixResult

        return MixResult
    if name == "RunResult":
        from dcoc.runtime.result import RunResult

        return RunResult
    raise AttributeError(f"module 'dcoc' has no attribute {name!r}")
