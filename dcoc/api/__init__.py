"""The API floor: the public entry points, and the only place below the command line where
dcoc's core and :mod:`tvm_plugin` meet.

* :func:`tune` -- a whole model: accelerator co-design, or MetaSchedule for llvm/cuda;
* :func:`tune_task` -- one accelerator workload's schedule;

Everything below this floor (targets, search, tuners, method, codesign, results, runtime)
imports neither this package nor :mod:`tvm_plugin`; :mod:`tvm_plugin` receives plain data
from here and never imports :mod:`dcoc.runtime` or :mod:`dcoc.results`.
"""
from dcoc.api.tune import TaskResult, TuneResult, default_work_dir, tune, tune_task

__all__ = ["tune", "tune_task", "TuneResult", "TaskResult", "default_work_dir"]
