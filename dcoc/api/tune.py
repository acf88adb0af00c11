"""Public Python API: :func:`tune` (a whole model) and :func:`tune_task` (one accelerator
workload).

Both read like a table of contents: check the arguments once (:mod:`dcoc.api.checks`),
resolve the target and board once, take the work dir's (or records file's) lock, then hand
over to :func:`dcoc.api.accelerator._tune_accelerator` (co-design, :mod:`dcoc.codesign`)
or :func:`dcoc.api.cpu._tune_cpu` (MetaSchedule, :mod:`tvm_plugin.metaschedule.tuning`).
Algorithms live in :mod:`dcoc.tuners` and :mod:`dcoc.method`.
"""
from __future__ import annotations

import os
import re

from dcoc.api.checks import (
    MAX_TRIALS,
    check_int,
    check_model_inputs,
    check_pareto,
    check_tune,
    check_types,
    check_warm_start,
    check_workers,
    one_line_keywords,
)
from dcoc.errors import ConfigError, DcocError
from dcoc.results.result import TaskResult, TuneResult
from dcoc.targets import DEFAULT_TARGET
from dcoc.tuners import DEFAULT as DEFAULT_TUNER

#: the trials of a run that names none (llvm/cuda with a time budget: no limit)
DEFAULT_TRIALS = 2000

__all__ = ["tune", "tune_task", "TuneResult", "TaskResult", "default_work_dir"]


# ------------------------------------------------------------------------- helpers
def _hw(hardware, board=None, target=DEFAULT_TARGET):
    """A hardware config of ``target`` from a config, a preset or config name (VTA: a name
    without ``_<F>MHz_bus<B>`` takes ``board``'s clock and bus), or a dict of its fields."""
    from dcoc.targets import get

    return get(target).parse_hw(hardware, board)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", str(text)).strip("-") or "model"


def default_work_dir(model, target: str, board: str | None, tuner: str, seed: int,
                     hardware: str | None = None, input_shapes: dict | None = None,
                     options: dict | None = None) -> str:
    """``dcoc_runs/<model>[_in-<shapes>]_<target>[_<board>][_<option>...][_hw-<hardware>]_<tuner>_s<seed>``:
    rerunning the same command finds the same directory and resumes; a software-only run on
    fixed ``hardware`` (its name), a run with target ``options`` (e.g. VTA's
    ``extended_cores``) and a run at other ``input_shapes`` get their own directories."""
    name = os.path.splitext(os.path.basename(str(model)))[0] if not hasattr(model, "graph") else "model"
    parts = [_slug(name)]
    if input_shapes:
        parts.append("in-" + "-".join(_slug("x".join(str(int(d)) for d in shape))
                                      for _, shape in sorted(input_shapes.items())))
    parts.append(_slug(target))
    if board:
        parts.append(board)
    parts += [_slug(k.replace("_", "-")) for k, v in sorted((options or {}).items()) if v]
    if hardware:
        parts.append("hw-" + _slug(hardware))
    parts.append(_slug(tuner))
    parts.append(f"s{seed}")
    return os.path.join("dcoc_runs", "_".join(parts))


# ------------------------------------------------------------------------ tune_task
@one_line_keywords
def tune_task(workload, hw=None, tuner: str = DEFAULT_TUNER, trials: int = 200, seed: int = 0,
              records=None, measurer=None, n_workers: int | None = None,
              early_stopping: int | None = None, callbacks=(), resume: bool = True,
              target: str = DEFAULT_TARGET, board: str | None = None, *, wait: bool = False,
              config=None, tuner_kwargs: dict | None = None) -> TaskResult:
    """Tune one accelerator workload's schedule.

    Parameters
    ----------
    workload: the target's workload (VTA: a :class:`dcoc.targets.vta.Conv2DWorkload` /
        :class:`~dcoc.targets.vta.DenseWorkload`, a :class:`dcoc.tasks.Task` of kind conv2d / dense,
        or a spec such as ``"C2"`` / ``"conv:H,W,CI,CO,K,S,P"`` / ``"dense:N,K,M"``).
    hw: a hardware config of the target, a preset name (VTA: ``"pynq"``) or a config name;
        default: the default config of ``board`` (VTA on pynq: the ``pynq`` preset).
    tuner: a name of :func:`dcoc.tuners.names` (``surrogate``, the default; ``dcoc``, the
        paper's method; ``dcoc-frozen``; the baselines ``xgb``, ``rl``, ``chameleon``, ``ga``,
        ``random``, ``grid``, ``sweep``), a ``NAME:key=value`` spec or a Tuner subclass.
    trials: measurement budget.
    seed: the one seed.
    records: a JSONL path or :class:`dcoc.search.Records`; measurements are appended as they
        happen, and a rerun with the same tuner/seed resumes from them.
    measurer: default: the target's measurer (VTA: :class:`dcoc.targets.vta.VTASimMeasurer`)
        with ``n_workers`` processes.
    target: an accelerator target of :func:`dcoc.targets.available` (``vta``, ``systolic``).
    board: the board whose clock/bus a hardware name takes (default: the target's default).
    wait: another process appending to the ``records`` path holds its lock: wait for it
        instead of a :class:`dcoc.workdir.WorkDirBusy` error.
    config: a DCOC-family tuner's :class:`dcoc.method.config.DCOCConfig`.
    tuner_kwargs: other keyword arguments of the tuner's constructor.
    """
    from dcoc.targets import get as get_target

    check_types(board=board, records=records, callbacks=callbacks)
    tg = get_target(target)
    bd = tg.board(board or tg.default_board)
    hw = tg.default_hw(bd) if hw is None else tg.parse_hw(hw, bd.name)
    layer = tg.layer(workload)
    check_int("trials", trials, 1, MAX_TRIALS)
    check_int("seed", seed, 0)
    if early_stopping is not None:
        check_int("early_stopping", early_stopping, 1)
    check_workers(n_workers)
    task = tg.task(layer, hw)
    kw = {**(tuner_kwargs or {}), **({"config": config} if config is not None else {})}
    with _records_lock(records, wait):  # one run at a time per records file
        return _tune_one_task(task, tg, hw, tuner, trials, seed, records, measurer, n_workers,
                              early_stopping, callbacks, resume, kw)


def _records_lock(records, wait: bool):
    """The lock of a records path (none for a Records object, nor when this process holds it)."""
    import contextlib

    if isinstance(records, (str, os.PathLike)):
        from dcoc.workdir import held_here, lock_records

        if not held_here(records):
            return lock_records(records, bool(wait))
    return contextlib.nullcontext()


def _tune_one_task(task, tg, hw, tuner, trials, seed, records, measurer, n_workers,
                   early_stopping, callbacks, resume, tuner_kwargs: dict) -> TaskResult:
    from dcoc.api.accelerator import _measurer, _records
    from dcoc.tuners import create, get_tuner

    tuner_obj = create(tuner, task, seed=seed, **tuner_kwargs)
    m, own = _measurer(measurer, n_workers, tg.name)
    try:
        tuner_obj.tune(int(trials), m, early_stopping=early_stopping, callbacks=callbacks,
                       records=_records(records), resume=resume)
    finally:
        if own:
            m.close()
    name = tuner if isinstance(tuner, str) else get_tuner(tuner).name
    return TaskResult(task.name, name, seed, tuner_obj.best_config, tuner_obj.best_cost,
                      tuner_obj.trials, list(tuner_obj.history), hw.name, task.flop)


# ----------------------------------------------------------------------------- tune
@one_line_keywords
def tune(model, target=DEFAULT_TARGET, board: str | None = None, trials: int | None = None,
         tuner: str = DEFAULT_TUNER, seed: int = 0, work_dir: str | None = None, resume: bool = True,
         hardware=None, input_shapes: dict | None = None, measurer=None,
         n_workers: int | None = None, progress: bool = False, pareto: bool = False,
         example_inputs=None, *, wait: bool = False, verbose: bool = False, warm_start=None,
         baseline=None, config=None, time_budget: float | None = None, runner="local",
         flush_cache: bool = False, metaschedule=None, weights=None, objective: str = "weighted",
         singles: bool = True, extended_cores: bool = False, prior=True) -> TuneResult:
    """Tune a whole model, or co-design one accelerator for a list of models.

    Parameters
    ----------
    model: an ONNX path, an ``onnx.ModelProto``, a zoo name (``resnet18``, ``mobilenetv2``,
        ``vgg16``, ``transformer``), a ``light_*`` model name, or a PyTorch ``nn.Module``
        (with ``example_inputs``; exported to ONNX in the work dir,
        :mod:`tvm_plugin.frontend.pytorch`).
    example_inputs: a PyTorch module's example input tensor(s) (a tensor or a tuple): their
        shapes are the model's input shapes.
    target: an accelerator target of :func:`dcoc.targets.available` (``"vta"``: co-design on
        the VTA simulator; ``"systolic"``: a weight-stationary systolic array, tile-stream
        simulator), or ``"llvm"`` / ``"cuda"`` / a TVM Target / a JSON dict (MetaSchedule with
        the DCOC search strategy).
    board: accelerator targets: the FPGA budget (vta: ``pynq`` (default), ``ultra96``,
        ``zcu104``; systolic: ``arty-a7`` (default), ``kv260``).
    trials: measurement budget (one trial = one simulated or measured schedule); default
        :data:`DEFAULT_TRIALS` (2000), except on llvm/cuda with a ``time_budget``, where
        the clock alone ends the run.
    tuner: a name of :func:`dcoc.tuners.names` -- ``surrogate`` (the default: the XGBoost
        ensemble's own search, top-k), ``dcoc`` (the paper's agents + confidence sampling),
        ``dcoc-frozen``, or a baseline (``xgb``, ``rl``, ``chameleon``, ``ga``, ``random``,
        ``grid``, ``sweep``) -- or a ``NAME:key=value`` spec (``surrogate:select=confidence``).
        Each name runs the same algorithm per layer, in co-design and in MetaSchedule;
        accelerator co-design of the baselines is joint (``baseline="nested"`` for the
        hardware-outer/software-inner search).
    seed: the one seed.
    work_dir: records (``records.jsonl``) and results go here; default
        :func:`default_work_dir` (the same command resumes the same run).
    resume: reuse the records in ``work_dir`` (nothing recorded is measured again).
    hardware: accelerator targets: a fixed hardware config (or preset/name, e.g. VTA ``pynq``,
        systolic ``ws16x16_i15w15o15``): tune software only.
    input_shapes: ``{input name: shape}`` for models with dynamic input dimensions.
    progress: show progress on stderr (a bar on a terminal, a line every N trials otherwise).
    verbose (llvm/cuda): TVM's own logs and native warnings on the console instead
        of ``work_dir/logs/tvm.log``.
    wait: another process tuning in ``work_dir`` holds its lock
        (:func:`dcoc.workdir.lock_work_dir`): wait for it instead of a
        :class:`dcoc.workdir.WorkDirBusy` error.
    pareto: accelerator co-design: also return the throughput/area Pareto front over the
        board's whole feasible hardware space (``result.pareto``; each design ``measured``
        by the search or ``estimated`` with transferred/default schedules;
        :func:`dcoc.results.pareto.estimate_points`).
    warm_start (DCOC co-design): run directories or ``records.jsonl`` files of
        earlier co-design runs of *other* models on the same target/board: their measurements
        pre-fit DCOC's cost models and their best hardware configs are scored first
        (:mod:`dcoc.codesign.prior`).  Not counted as trials, never written to this run's
        records.
    baseline: accelerator co-design of a baseline tuner: ``"joint"`` (default) or
        ``"nested"``; llvm/cuda: False skips timing the untuned model.
    config: a DCOC-family tuner's :class:`dcoc.method.config.DCOCConfig`.
    time_budget (llvm/cuda): wall-clock seconds for the search; no new batch starts once
        they are spent.
    runner (llvm/cuda): ``"local"`` or ``"rpc://HOST:PORT/KEY"``.
    flush_cache (llvm): time every candidate cold (CPU caches flushed).
    metaschedule (llvm/cuda): a :class:`tvm_plugin.metaschedule.options.MetaScheduleOptions`
        for the other MetaSchedule settings (the arguments above replace its fields).
    prior (llvm/cuda): the pre-trained start of a DCOC-family tuner -- True (default) the
        cost model shipped with dcoc (learned from the zoo's tuning records) ranks each
        task's warm-up; a path: another model file; False: the random warm-up
        (:mod:`tvm_plugin.metaschedule.prior`).
    extended_cores (vta): also search cores stock tvm-vta cannot build (non-square,
        relaxed instruction layout); default: only what tvm-vta's config flow builds.

    A list of models (accelerator targets; :mod:`dcoc.api.mix`) co-designs ONE hardware
    config for all of them and returns a :class:`dcoc.results.mix.MixResult` (one
    TuneResult per model in ``.models``): ``trials`` is the budget of the whole mix, a layer
    several models share is measured once, and the objective is the ``weights``-weighted sum
    of the models' accelerator latencies (``weights``: one positive number per model, e.g.
    the inferences per second each must serve; default 1 each), or with
    ``objective="max"`` the largest weight x latency.  ``singles`` (default True) also
    co-designs every model alone with ``trials / len(model)`` trials and tunes every other
    model's schedules on that design's hardware with as many: what designing for one model
    costs the others.
    """
    if isinstance(model, (list, tuple)):
        return _tune_mix(list(model), target=target, board=board, trials=trials, tuner=tuner,
                         seed=seed, work_dir=work_dir, resume=resume, hardware=hardware,
                         input_shapes=input_shapes, measurer=measurer, n_workers=n_workers,
                         progress=progress, pareto=pareto, example_inputs=example_inputs, wait=wait,
                         warm_start=warm_start, config=config, baseline=baseline, weights=weights,
                         objective=objective, singles=singles, extended_cores=extended_cores)
    if weights is not None or objective != "weighted":
        raise DcocError("weights and objective are for a list of models (a model mix)")
    accelerator = check_tune(target=target, tuner=tuner, trials=trials, seed=seed, board=board,
                             work_dir=work_dir, input_shapes=input_shapes, n_workers=n_workers,
                             time_budget=time_budget, flush_cache=flush_cache, runner=runner)
    tg = bd = None
    if accelerator:
        from dcoc.targets import get as get_target

        tg = get_target(target)
        if extended_cores:
            tg = tg.with_options(extended_cores=True)
        bd = tg.board(board if board is not None else tg.default_board)
    elif extended_cores:
        raise ConfigError("extended_cores is an option of the vta target (accelerator co-design)")
    if accelerator and prior is not True:
        raise ConfigError("prior (the pre-trained start) is for llvm/cuda targets")
    check_pareto(pareto, accelerator, hardware)
    module = _is_torch_module(model)
    check_model_inputs(module, example_inputs, input_shapes)
    check_warm_start(warm_start, accelerator, tuner, hardware)
    label = type(model).__name__ if module else (getattr(model, "name", None) or model)
    if work_dir is None:
        hw_name = tg.parse_hw(hardware, bd.name).name if accelerator and hardware is not None else None
        work_dir = default_work_dir(label, tg.name if accelerator else _target_label(target),
                                    (board or tg.default_board) if accelerator else None, tuner,
                                    seed, hw_name, input_shapes, tg.options if accelerator else None)
    with _work_dir_lock(work_dir, wait):  # one run at a time per work dir (wait=True: queue up)
        if module:  # to an ONNX file in the work dir: the model every later step loads
            from tvm_plugin.frontend.pytorch import module_to_onnx

            model = module_to_onnx(model, example_inputs, os.path.join(work_dir, _slug(label) + ".onnx"))
        if not accelerator:
            from dcoc.api.cpu import _tune_cpu

            if trials is None and time_budget is None:
                trials = DEFAULT_TRIALS
            return _tune_cpu(model, target, trials=trials, tuner=tuner, seed=seed,
                             work_dir=work_dir, resume=resume, input_shapes=input_shapes,
                             progress=progress, model_path=_model_path(model), runner=runner,
                             verbose=verbose, flush_cache=flush_cache, time_budget=time_budget,
                             baseline=baseline, options=metaschedule, prior=prior)
        from dcoc.api.accelerator import _add_pareto, _tune_accelerator

        res = _tune_accelerator(tg, bd, model, trials=int(trials or DEFAULT_TRIALS), tuner=tuner,
                                seed=seed,
                                work_dir=work_dir, resume=resume, hardware=hardware,
                                input_shapes=input_shapes, measurer=measurer, n_workers=n_workers,
                                progress=progress, model_path=_model_path(model),
                                warm_start=warm_start, baseline=baseline, config=config)
        if pareto:
            _add_pareto(res, measurer, n_workers, tg.name)
        return res


def _tune_mix(models: list, *, target, board, trials, tuner, seed, work_dir, resume, hardware,
              input_shapes, measurer, n_workers, progress, pareto, example_inputs, wait,
              warm_start, config, baseline, weights, objective, singles, extended_cores=False):
    """Check, resolve and lock a model mix, then :func:`dcoc.api.mix.tune_mix`."""
    from dcoc.api.mix import check_mix, model_names, tune_mix

    accelerator = check_tune(target=target, tuner=tuner, trials=trials, seed=seed, board=board,
                             work_dir=work_dir, input_shapes=None, n_workers=n_workers,
                             time_budget=None, flush_cache=False, runner="local")
    weights = check_mix(models, weights, objective, accelerator)
    for name, value in (("input_shapes", input_shapes), ("example_inputs", example_inputs),
                        ("warm_start", warm_start)):
        if value is not None:
            raise DcocError(f"{name} is not supported for a model mix")
    check_pareto(pareto, accelerator, hardware)
    from dcoc.targets import get as get_target

    tg = get_target(target)
    if extended_cores:
        tg = tg.with_options(extended_cores=True)
    bd = tg.board(board if board is not None else tg.default_board)
    names = model_names(models)
    if work_dir is None:
        hw_name = tg.parse_hw(hardware, bd.name).name if hardware is not None else None
        work_dir = default_work_dir("mix-" + "+".join(names), tg.name, bd.name, tuner, seed, hw_name,
                                    options=tg.options)
    with _work_dir_lock(work_dir, wait):
        return tune_mix(tg, bd, models, weights=weights, objective=objective, singles=bool(singles),
                        trials=int(trials or DEFAULT_TRIALS), tuner=tuner, seed=seed,
                        work_dir=work_dir, resume=resume,
                        hardware=hardware, measurer=measurer, n_workers=n_workers,
                        progress=progress, pareto=pareto, model_paths=[_model_path(m) for m in models],
                        config=config, baseline=baseline)


def _work_dir_lock(work_dir, wait: bool):
    """The work dir's lock (none when this process already holds it)."""
    import contextlib

    from dcoc.workdir import held_here, lock_work_dir

    if held_here(work_dir):
        return contextlib.nullcontext()
    return lock_work_dir(work_dir, wait=bool(wait))


def _is_torch_module(model) -> bool:
    """True for a PyTorch ``nn.Module`` (torch is only looked at when already imported)."""
    import sys

    torch = sys.modules.get("torch")
    return torch is not None and isinstance(model, torch.nn.Module)


def _model_path(model) -> str | None:
    """How to load ``model`` again: an existing file's absolute path, a name as given, or
    None (an in-memory ONNX model)."""
    if isinstance(model, (str, os.PathLike)):
        p = os.fspath(model)
        return os.path.abspath(p) if os.path.isfile(p) else p
    return None


def _target_label(target) -> str:
    if isinstance(target, str):
        return target.split()[0]
    if isinstance(target, dict):
        return str(target.get("kind", "target"))
    return str(getattr(getattr(target, "kind", None), "name", "target"))
