"""MetaSchedule tuning of a whole model for llvm/cuda (``dcoc.tune(model, target="llvm")``):
:func:`tvm_plugin.metaschedule.tuning.tune_model` does the work and returns plain data;
this floor turns it into a :class:`dcoc.results.result.TuneResult` and saves it."""
from __future__ import annotations

import os

from dcoc.errors import DcocError
from dcoc.results.result import TuneResult


def _tune_cpu(model, target, *, trials: int | None, tuner, seed: int, work_dir: str, resume: bool,
              input_shapes, progress, model_path, runner, verbose: bool, flush_cache: bool,
              time_budget, baseline, options, prior=True) -> TuneResult:
    """Tune ``model`` for ``target`` into ``work_dir`` (already locked)."""
    from tvm_plugin.frontend.targets import require_device

    require_device(target)  # a GPU target without a GPU: one line, before any work
    # MetaSchedule's JSONDatabase in work_dir is always reused: refuse to silently resume
    if not resume and os.path.exists(os.path.join(work_dir, "database_tuning_record.json")):
        raise DcocError(f"resume=False: {work_dir} already holds a MetaSchedule database, "
                        "which llvm/cuda tuning always reuses; choose a new work_dir")
    settings = {"trials": None if trials is None else int(trials), "tuner": tuner, "seed": seed, "progress": progress,
                "runner": runner, "verbose": verbose, "flush_cache": flush_cache,
                "time_budget": time_budget}
    if prior is not True:  # else the options' own (default: the shipped prior)
        if not (prior is False or isinstance(prior, (str, os.PathLike))):
            raise DcocError(f"prior is True, False or a model file path, got {prior!r}")
        settings["prior"] = prior if prior is False else os.fspath(prior)
    if baseline is not None:
        if not isinstance(baseline, bool):
            raise DcocError(f"baseline on llvm/cuda is True/False (measure the untuned model too), "
                            f"got {baseline!r}")
        settings["baseline"] = baseline
    return tune_metaschedule(model, target, options, work_dir=work_dir, input_shapes=input_shapes,
                             model_path=model_path, **settings)


def tune_metaschedule(model, target="llvm", options=None, *, work_dir: str | None = None,
                      input_shapes=None, model_path: str | None = None, **settings) -> TuneResult:
    """:func:`tvm_plugin.metaschedule.tuning.tune_model` (same arguments), its result as a
    :class:`TuneResult` saved to ``work_dir/result.json``; ``model_path``: how to load the
    model again (what export and a later load need)."""
    from tvm_plugin.metaschedule.tuning import tune_model

    tuned = tune_model(model, target, options, work_dir=work_dir, input_shapes=input_shapes,
                       **settings)
    res = tune_result(tuned, model_path, input_shapes)
    res.save(os.path.join(res.work_dir, "result.json"))
    return res


def tune_result(tuned, model_path: str | None = None, input_shapes=None) -> TuneResult:
    """The :class:`TuneResult` of a :class:`tvm_plugin.metaschedule.options.ModelTuning`."""
    res = TuneResult(
        target=tuned.target, tuner=tuned.tuner, seed=tuned.seed, latency_ms=tuned.latency_ms,
        baseline_latency_ms=tuned.baseline_latency_ms, trials=tuned.trials,
        schedules=tuned.schedules, history=tuned.history, layers=tuned.layers,
        method=tuned.method, model=tuned.model, work_dir=tuned.work_dir,
        database_path=tuned.work_dir, wall_seconds=tuned.wall_seconds,
        executable=tuned.executable, extra=tuned.extra)
    if tuned.onnxruntime_ms is not None:
        res.onnxruntime_ms = tuned.onnxruntime_ms
    res._runner = tuned.run
    if model_path or input_shapes:  # what export / a later load need to find the model again
        res.model_path = model_path
        res.input_shapes = ({k: tuple(int(d) for d in v) for k, v in input_shapes.items()}
                            if input_shapes else None)
    return res


__all__ = ["tune_metaschedule", "tune_result"]
