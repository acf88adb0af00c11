"""The API floor: the public entry points, and the only place below the command line where
dcoc's core and :mod:`tvm_plugin` meet.

* :func:`tune` -- a whole model: accelerator co-design, or MetaSchedule for llvm/cuda;
* :func:`tune_task` -- one accelerator workload's schedule;
* :func:`run` -- the int8-quantized model on the (tuned) VTA simulator (:mod:`dcoc.api.run`);
* :func:`export` -- a finished run as a TVM library or a hardware directory (:mod:`dcoc.api.export`);

:func:`tune` checks its arguments once (:mod:`dcoc.api.checks`) and hands over to
:mod:`dcoc.api.accelerator` (co-design) or :mod:`dcoc.api.cpu` (MetaSchedule).

Everything below this floor (targets, search, tuners, method, codesign, results, runtime)
imports neither this package nor :mod:`tvm_plugin`; :mod:`tvm_plugin` receives plain data
from here and never imports :mod:`dcoc.runtime` or :mod:`dcoc.results`.
"""
from dcoc.api.export import export
from dcoc.api.run import run
from dcoc.api.tune import TaskResult, TuneResult, default_work_dir, tune, tune_task

__all__ = ["tune", "tune_task", "TuneResult", "TaskResult", "default_work_dir", "run", "export"]
