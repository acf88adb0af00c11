"""Tune a whole model for an llvm/cuda target with MetaSchedule and a dcoc search strategy.

:func:`tune_model` is what ``dcoc.tune(model, target="llvm")`` and ``dcoc tune MODEL
--target llvm`` call::

    from tvm_plugin.metaschedule.tuning import tune_model
    r = tune_model("light_resnet", "llvm", trials=256, tuner="dcoc", seed=0, work_dir="wd")
    r.latency_ms, r.baseline_latency_ms, r.run({"input": x})

The settings are one frozen :class:`~tvm_plugin.metaschedule.options.MetaScheduleOptions`;
the result is plain data (:class:`~tvm_plugin.metaschedule.options.ModelTuning`), which
the API floor (:mod:`dcoc.api.cpu`) turns into a ``TuneResult`` and saves.

Steps, one function each: **extract** (import with ``tvm_plugin.frontend.load``, legalize
+ fuse, the MetaSchedule tasks and their tune contexts) -> **tune** (``ms.tune_tasks``
with a :class:`~tvm_plugin.metaschedule.strategy.TunerStrategy`, or MetaSchedule's own
``"evolutionary"`` / ``"replay-trace"`` strategies for comparisons, a persistent fast
builder and a low-overhead runner, into a JSON database in ``work_dir``; then each task's
best record) -> **compile** (:func:`tvm_plugin.metaschedule.build.compile_model` on the
unfused module) -> **measure** (the tuned and the untuned model, ONNX Runtime) ->
**compare** (the console's speed-up line).

Resume: the database is MetaSchedule's JSONDatabase in ``work_dir``
(``database_workload.json``, ``database_tuning_record.json``).  Rerunning with the same
``work_dir`` replays its records into the dcoc strategy and counts them against each task's
budget, so finished tasks are not measured again (a rerun of a finished run only compiles
and measures the model); an interrupted run continues with the trials that are left.
MetaSchedule's own strategies only use the records as their starting population and spend
the full budget again.

Logging: MetaSchedule's logs go to ``work_dir/logs/`` (one file per task plus the task
scheduler's); TVM's native (C++) warnings, which write straight to file descriptor 2, go
to ``work_dir/logs/tvm.log`` unless ``verbose=True`` (which also lets MetaSchedule's task
tables reach the console).  The console gets one progress line per measured batch and a
final per-task table on stderr (``progress=False`` silences both, a callable receives
them instead).

Work dir: like the VTA path it belongs to one model and target (``dcoc_run.json``, see
:mod:`dcoc.workdir`); the API floor saves the result to ``work_dir/result.json`` (the
tuning curve is its ``history``, which a resumed run continues), and
``work_dir/ms_tasks.json`` names the database's workloads so that ``dcoc records`` /
``dcoc plot`` can read the database without TVM.
"""
from __future__ import annotations

import math
import os
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from dcoc.errors import DcocError, TargetError
from dcoc.reference import speed_line, untuned_phrase
from tvm_plugin.metaschedule.database import (
    drop_slower_than_untuned,
    previous_history,
    recorded_bests,
    write_task_names,
)
from tvm_plugin.metaschedule.options import MetaScheduleOptions, ModelTuning
from tvm_plugin.metaschedule.progress import (
    TuningProgress,
    metaschedule_logging_guard,
    native_stderr_to,
    progress_callback,
    say,
    silence_metaschedule,
)
from tvm_plugin.metaschedule.strategy import MS_STRATEGIES, describe_method, make_strategy
from tvm_plugin.metaschedule.task_budget import (
    BudgetScheduler,
    batch_size,
    coverage_warning,
    first_round_order,
)
from tvm_plugin.metaschedule.timeline import TimeProfile, format_profile


def _py(x):
    """tvm containers (Array/Map/IntImm/String...) -> plain JSON-able Python."""
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    tn = type(x).__name__
    if hasattr(x, "items") and not isinstance(x, (str, bytes)):
        return {str(_py(k)): _py(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)) or tn in ("Array", "List", "Tuple"):
        return [_py(v) for v in x]
    if hasattr(x, "value"):
        return x.value
    return str(x)


# ============================================================================ entry
def tune_model(model, target="llvm", options: MetaScheduleOptions | None = None, *,
               work_dir: str | None = None,
               input_shapes: Mapping[str, Sequence[int]] | None = None,
               **settings) -> ModelTuning:
    """Tune ``model`` for an llvm/cuda target; returns a
    :class:`~tvm_plugin.metaschedule.options.ModelTuning` (plain data).

    Parameters
    ----------
    model: ONNX path, zoo / ``light_*`` name, ``onnx.ModelProto`` or a loaded
        :class:`tvm_plugin.frontend.Model`.
    target: ``"llvm"`` (this machine: host ``mcpu``, physical cores), ``"cuda"``, a TVM
        target JSON dict (``num-cores`` is added when missing) or a ``tvm.target.Target``.
    options: a :class:`~tvm_plugin.metaschedule.options.MetaScheduleOptions`; ``settings``
        (its field names, e.g. ``trials=64, tuner="xgb"``) replace its fields.
    work_dir: database + logs (created; a temporary directory when None).  Reusing it
        resumes (see module docstring).
    input_shapes: ``{input: shape}`` for models with dynamic input dimensions.

    The settings:

    trials: total measurement budget over all tasks (``max_trials_global``); a run of a dcoc
        tuner measures exactly this many candidates unless a task's space runs out or
        ``time_budget`` ends it (MetaSchedule's own strategies cut a batch only at a task's
        cap, so their last batch may pass the total by less than one batch).
    tuner: a dcoc tuner name or spec (``"surrogate"`` default, ``"dcoc"``, ``"xgb"``, ...)
        driven through :class:`~tvm_plugin.metaschedule.strategy.TunerStrategy`, or
        MetaSchedule's ``"evolutionary"`` (EvolutionarySearch with its XGBoost cost model) /
        ``"replay-trace"`` (ReplayTrace), at their authors' defaults (for comparisons).
    seed: the one seed (strategy and MetaSchedule's design-space generation).
    runner: ``"local"`` or ``"rpc://HOST:PORT/KEY"`` (or a MetaSchedule Runner).
    trials_per_task: cap per task (default: ``trials``).
    num_trials_per_iter: candidates per measured batch (default:
        :func:`~tvm_plugin.metaschedule.task_budget.batch_size`, ``trials // (2 x tasks)``
        between 1 and 16, so that the first round, which gives every task one batch, reaches
        every task when ``trials >= tasks``).
    task_scheduler: ``"gradient"`` (default): :class:`~tvm_plugin.metaschedule.task_budget.
        BudgetScheduler` -- one batch per task first, largest share of the model's time
        first, then MetaSchedule's gradient rule, seeded; or a MetaSchedule name / object.
    population: EvolutionarySearch's population (default: its own, 512).
    builder: ``"persistent"`` (default) / ``"local"`` / a Builder.
    strategy, cost_model: override the MetaSchedule strategy object / cost model.
    measure: measure the tuned model's latency; baseline: also compile + measure untuned.
    progress: True (stderr), False, or a callable receiving each line.
    keep_untuned_if_faster: per task, time the best schedule against the task's untuned
        code (both built in this process, alternating rounds) and compile with the untuned
        code where it is more than 5% faster -- tiny operators (reshape, small elementwise
        ops) lose to MetaSchedule's always-parallel schedules by the thread-pool launch.
    verbose: TVM's native warnings and MetaSchedule's task tables on the console instead
        of ``work_dir/logs/tvm.log`` and the per-task log files.
    prior: a DCOC-family tuner's pre-trained start (:mod:`tvm_plugin.metaschedule.prior`):
        True (default) the shipped cost model ranks each task's warm-up, a path another
        model file, False none (the shared random warm-up).
    time_budget: wall-clock seconds for the search (from its start; compiling and timing the
        model come after): no new batch starts once they are spent; what was measured is
        kept and ``result.extra["stopped_on_time"]`` says so.
    onnxruntime: llvm: also time the ONNX model in ONNX Runtime on the thread count TVM's
        runtime uses (:func:`dcoc.reference.onnxruntime_latency_ms`): ``result.onnxruntime_ms``.
    flush_cache: llvm only: time every candidate cold -- one run per repeat, each after the
        CPU caches are flushed of its arguments (``number=1, repeat=10, min_repeat_ms=0``,
        :func:`tvm_plugin.metaschedule.build.evaluator_config`), as a kernel meets its weights inside a
        model whose weights do not fit in cache (ResNet-18: the compiled model is 1.14-1.59x
        its summed warm-timed kernels, 0.94-1.02x its cold-timed ones; docs/method.md,
        "MetaSchedule").  The work dir remembers it: a warm and a cold run never share a
        database.
    """
    opts = MetaScheduleOptions.of(options, **settings)
    from tvm_plugin.metaschedule.build import make_runner, preload_tensor_intrin

    preload_tensor_intrin()
    t_start = time.perf_counter()
    spec = _tuning_target(target)
    cold = _cold_evaluator(spec, opts)
    work_dir = os.path.abspath(work_dir or tempfile.mkdtemp(prefix="dcoc-ms-"))
    m, tasks = _load_tasks(model, spec, input_shapes)
    from dcoc.workdir import claim_work_dir, model_identity

    ident = model_identity(m.name if model is m else model, input_shapes)
    claim_work_dir(work_dir, {**ident, "target": _target_identity(spec.tvm),
                              "timing": "cold" if opts.flush_cache else None})
    runner = opts.runner
    if cold is not None:  # built after the checks: a refused run builds no runner
        runner = make_runner(runner, timeout_sec=opts.timeout_sec, evaluator=cold)
    os.makedirs(os.path.join(work_dir, "logs"), exist_ok=True)
    with native_stderr_to(os.path.join(work_dir, "logs", "tvm.log"), enabled=not opts.verbose):
        return _tune_model(m, spec, tasks, opts, runner, work_dir, t_start)


def _tuning_target(target):
    """The resolved llvm/cuda target (a one-line error for VTA)."""
    from tvm_plugin import frontend as F

    spec = F.resolve_target(target)
    if spec.is_vta:
        raise TargetError("tune_model tunes llvm/cuda targets; use dcoc.tune(model, "
                          "target='vta') for the VTA accelerator")
    return spec


def _cold_evaluator(spec, opts: MetaScheduleOptions):
    """The cold-cache EvaluatorConfig with ``flush_cache`` (None without), after its checks."""
    if not opts.flush_cache:
        return None
    from tvm_plugin.metaschedule.build import evaluator_config

    if spec.kind != "llvm":
        raise TargetError(f"flush_cache flushes CPU caches: it times llvm targets, not "
                          f"{spec.kind}")
    if not isinstance(opts.runner, str):
        raise DcocError("flush_cache needs the runner as 'local' or 'rpc://HOST:PORT/KEY' "
                        "(a Runner object carries its own EvaluatorConfig)")
    return evaluator_config(flush_cache=True)


def _load_tasks(model, spec, input_shapes):
    """(the loaded model, its MetaSchedule tasks); a model without any is a one-line error."""
    from tvm_plugin import frontend as F

    m = model if isinstance(model, F.Model) else F.load(model, input_shapes)
    tasks = m.tasks(spec)
    if not tasks:
        raise DcocError(f"model '{m.name}' has no tunable operators for {spec.kind}")
    return m, tasks


def _target_identity(tgt) -> str:
    """The target as a stable string for the work dir's identity (kind + options)."""
    import json

    try:
        return json.dumps(_py(tgt.export()), sort_keys=True)
    except Exception:  # noqa: BLE001
        return str(tgt)


def _tune_model(m, spec, tasks, opts: MetaScheduleOptions, runner, work_dir: str,
                t_start: float) -> ModelTuning:
    """The steps: extract, tune, compile, measure, compare; then the result."""
    ext = _extract(tasks, opts, work_dir)
    run = _tune(m, spec, ext, opts, runner, work_dir, t_start)
    schedules, layers, no_schedule = _task_results(ext, run, spec.kind)
    say(opts.progress, run.prog.table())
    ex, report, kept_untuned = _compile(m, spec.tvm, ext, run.db, opts)
    untuned_tasks = no_schedule + kept_untuned
    if untuned_tasks:
        say(opts.progress, f"dcoc: {untuned_phrase(len(untuned_tasks), len(ext.task_info), len(no_schedule))}: "
                           + ", ".join(untuned_tasks[:6]) + (" ..." if len(untuned_tasks) > 6 else ""))
    t = _measure(m, spec, ex, opts)
    if opts.measure:
        _compare(t, run.tune_seconds, opts.progress)
    from tvm_plugin.metaschedule.build import make_model_runner

    strat_results = run.strategy_results
    result = ModelTuning(
        target=str(spec.tvm), tuner=str(opts.tuner), seed=int(opts.seed),
        latency_ms=float(t.latency), baseline_latency_ms=float(t.baseline), trials=int(run.n_records),
        schedules=schedules, history=run.prog.history, layers=layers,
        method=describe_method(opts.tuner, strat_results), model=m.name, work_dir=work_dir,
        wall_seconds=time.perf_counter() - t_start, executable=ex,
        extra={"target_kind": spec.kind, "new_trials": run.prog.total,
               "recorded_trials": run.n_recorded,
               "timing": "cold" if run.cold else "warm",
               "tuning_seconds": round(run.tune_seconds, 2),
               "time_profile": run.time_profile,
               "time_budget_s": float(opts.time_budget) if opts.time_budget else None,
               "stopped_on_time": run.stopped_on_time,
               "n_tasks": len(ext.task_info),
               "untuned_tasks": untuned_tasks, "unmeasured_tasks": no_schedule,
               "tuned_functions": report["tuned"], "untuned_functions": report["untuned"],
               "kept_untuned": kept_untuned,
               "runtime_threads": t.threads,
               "tasks": [{k: v for k, v in s.items() if k != "history"}
                         for s in strat_results.values()]},
        onnxruntime_ms=float(t.ort) if math.isfinite(t.ort) else None,
    )
    result.run = make_model_runner(ex, spec.tvm, list(m.input_shapes), m.input_dtypes)
    write_task_names(run.db, ext.ctxs, ext.task_info, work_dir)
    return result


# ========================================================================= extract
@dataclass
class _Extracted:
    """The tune contexts of a model's tasks, with the strategy they search with."""

    ctxs: list
    weights: list
    task_info: list  # {"name", "ms_name", "flop", "weight"} per context
    strategy: Any
    cost_model: Any


def _extract(tasks, opts: MetaScheduleOptions, work_dir: str) -> _Extracted:
    """MetaSchedule's tune contexts for ``tasks``, searched by the strategy of ``opts``."""
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.analysis import estimate_tir_flops

    names = {t.ms_task.task_name: t.name for t in tasks}
    strategy = opts.strategy
    if strategy is None:
        strategy, default_cm = make_strategy(opts.tuner, opts.seed, opts.tuner_kwargs, opts.population,
                                             opts.prior)
    else:
        default_cm = "random"
    lg, old_level = silence_metaschedule(opts.verbose)
    try:
        with metaschedule_logging_guard():
            ctxs, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
                [t.ms_task for t in tasks], work_dir, strategy=strategy, seed=opts.seed)
    finally:
        lg.setLevel(old_level)
    task_info = []
    for ctx, w in zip(ctxs, weights):
        try:
            flop = float(estimate_tir_flops(ctx.mod))
        except Exception:  # noqa: BLE001
            flop = 0.0
        task_info.append({"name": names.get(str(ctx.task_name), str(ctx.task_name)),
                          "ms_name": str(ctx.task_name), "flop": flop, "weight": float(w)})
    return _Extracted(ctxs, weights, task_info, strategy, opts.cost_model or default_cm)


# ============================================================================ tune
@dataclass
class _TuningRun:
    """What the search left: the database, the progress (trials per task, the curve)."""

    db: Any
    prog: TuningProgress
    n_recorded: int
    cold: bool
    stopped_on_time: bool
    tune_seconds: float
    strategy_results: dict
    n_records: int = 0
    time_profile: dict | None = None


def _tune(m, spec, ext: _Extracted, opts: MetaScheduleOptions, runner, work_dir: str,
          t_start: float) -> _TuningRun:
    """Measure the trials (or what a time budget leaves time for) into the database."""
    from tvm.s_tir import meta_schedule as ms

    from tvm_plugin.metaschedule.build import close_builder, make_builder, make_runner

    trials = opts.trial_limit
    db = ms.database.JSONDatabase(work_dir=work_dir)
    recorded = recorded_bests(db, ext.ctxs)
    n_recorded = sum(n for n, _ in recorded.values())
    history = previous_history(work_dir) if n_recorded else []
    b = make_builder(opts.builder)
    r = make_runner(runner, timeout_sec=opts.timeout_sec)
    cold = bool(getattr(getattr(r, "evaluator_config", None), "enable_cpu_cache_flush", False))
    tp = TimeProfile()
    prog = TuningProgress(ext.task_info, opts.trials, opts.progress, t_start, recorded, history)
    limit = "no trial limit" if opts.trials is None else f"{trials} trials"
    say(opts.progress, f"dcoc: tuning {m.name} for {spec.kind} ({len(ext.ctxs)} tasks, {limit}"
                       + (f", time budget {opts.time_budget:g} s" if opts.time_budget else "")
                       + f", tuner {opts.tuner}, seed {opts.seed}); MetaSchedule logs in {work_dir}/logs")
    if n_recorded:
        name = str(opts.tuner).lower()
        counted = ("counted against the budget" if hasattr(ext.strategy, "limit_total")
                   else f"the starting population of {name if name in MS_STRATEGIES else opts.tuner}, "
                        "which spends the full budget again")
        say(opts.progress, f"dcoc: resuming: {n_recorded} recorded trials in {work_dir} ({counted})")
    warn = coverage_warning(int(trials), len(ext.ctxs)) if opts.trials is not None else None
    if warn:
        say(opts.progress, "dcoc: warning: " + warn)
    try:
        stopped_on_time, t_tune = _run_phases(ext, opts, db, tp.builder(b), tp.runner(r), prog,
                                              work_dir, n_recorded, tp)
    finally:
        if isinstance(opts.builder, str):
            close_builder(b)
    tune_seconds = time.perf_counter() - t_tune
    results = dict(getattr(ext.strategy, "results", {}) or {})
    profile = tp.report(tune_seconds, results)
    say(opts.progress, "dcoc: " + format_profile(profile))
    if stopped_on_time:
        of = "" if opts.trials is None else f" of {trials}"
        say(opts.progress, f"dcoc: time budget of {opts.time_budget:g} s spent: stopped after "
                           f"{prog.total}{of} trials (every measured trial is recorded)")
    return _TuningRun(db, prog, n_recorded, cold, stopped_on_time, tune_seconds, results,
                      time_profile=profile)


def _run_phases(ext: _Extracted, opts: MetaScheduleOptions, db, builder, runner,
                prog: TuningProgress, work_dir: str, n_recorded: int,
                tp: TimeProfile | None = None) -> tuple[bool, float]:
    """``ms.tune_tasks`` once per phase: (whether the time budget stopped it, the
    ``time.perf_counter()`` the search started at).

    Phases (global budget after the phase, batch size): one, unless a wall-clock budget
    binds before the trials do -- then every task's first trial comes in a phase of
    one-trial batches, so the first round reaches every task before the time is spent."""
    from tvm.s_tir import meta_schedule as ms

    trials, time_budget, strategy = opts.trial_limit, opts.time_budget, ext.strategy
    per_iter = opts.num_trials_per_iter
    if per_iter is None:
        per_iter = batch_size(trials, len(ext.ctxs))
    phases = [(trials, int(per_iter))]
    if (time_budget and opts.num_trials_per_iter is None and opts.task_scheduler == "gradient"
            and not n_recorded and per_iter > 1):
        phases.insert(0, (min(trials, len(ext.ctxs)), 1))
    order = first_round_order([t["weight"] for t in ext.task_info], [t["flop"] for t in ext.task_info])
    cost_model = ext.cost_model
    if isinstance(cost_model, str) and len(phases) > 1:  # one model over both phases
        cost_model = ms.cost_model.CostModel.create(cost_model, num_tuning_cores=ext.ctxs[0].num_threads,
                                                    tree_method="auto")
    t_tune = time.perf_counter()
    deadline = t_tune + float(time_budget) if time_budget else None
    history = None
    lg, old_level = silence_metaschedule(opts.verbose)
    try:
        for k, (upto, batch) in enumerate(phases):
            left = upto - prog.total
            if left <= 0:
                continue
            if deadline is not None and time.perf_counter() >= deadline:
                return True, t_tune
            if opts.task_scheduler == "gradient":
                sched = BudgetScheduler(order=order if k == 0 else [], seed=opts.seed,
                                        deadline=deadline, history=history)
            else:
                sched = opts.task_scheduler
            if hasattr(strategy, "limit_total"):  # dcoc strategies: no batch past `upto`
                strategy.limit_total(upto)
            callbacks = MEASURE_CALLBACKS()
            if tp is not None:
                callbacks = tp.bracket(callbacks)
            callbacks.append(progress_callback(prog))
            if hasattr(sched, "callback"):
                callbacks.append(sched.callback())
            ms.tune_tasks(tasks=ext.ctxs, task_weights=ext.weights, work_dir=work_dir,
                          max_trials_global=int(left),
                          max_trials_per_task=int(opts.trials_per_task or trials),
                          num_trials_per_iter=int(batch), builder=builder, runner=runner,
                          database=db, cost_model=cost_model, measure_callbacks=callbacks,
                          task_scheduler=sched)
            history = getattr(sched, "history", None)
            if getattr(sched, "stopped_on_time", False):
                return True, t_tune
    finally:
        lg.setLevel(old_level)
    return False, t_tune


def _task_results(ext: _Extracted, run: _TuningRun, kind: str) -> tuple[dict, list, list]:
    """Each task's best record: (schedules, layer rows, the tasks without a valid record,
    which keep TVM's default code); counts the run's records into ``run.n_records``."""
    db, prog = run.db, run.prog
    schedules, layers, no_schedule = {}, [], []
    for i, (ctx, info) in enumerate(zip(ext.ctxs, ext.task_info)):
        best = None
        if db.has_workload(ctx.mod):
            top = db.get_top_k(db.commit_workload(ctx.mod), 1)
            best = top[0] if len(top) else None
        summary = run.strategy_results.get(info["ms_name"], {})
        n_task = prog.recorded[i] + prog.trials[i]
        run.n_records += n_task
        lat = float(sum(float(x) for x in best.run_secs) / len(best.run_secs)) if best else math.inf
        if not math.isfinite(lat) or lat >= 1e9:
            lat = math.inf
            no_schedule.append(info["name"])
        entry = {"ms_task": info["ms_name"],
                 "trace": _py(best.trace.as_json(remove_postproc=True)) if best else None,
                 "latency_ms": lat * 1e3 if math.isfinite(lat) else None}
        if summary.get("best_config"):
            entry["knobs"] = summary["best_config"]
        schedules[info["name"]] = entry
        row = {"layer": info["name"], "task": info["name"], "count": info["weight"],
               "weight": info["weight"], "flop": info["flop"],
               "latency_ms": lat * 1e3 if math.isfinite(lat) else None,
               "gflops": info["flop"] / lat / 1e9 if math.isfinite(lat) and lat > 0 else 0.0,
               "trials": n_task, "device": kind}
        if math.isfinite(lat):
            row["ms"] = lat * 1e3
        layers.append(row)
    return schedules, layers, no_schedule


# ========================================================================= compile
def _compile(m, tgt, ext: _Extracted, db, opts: MetaScheduleOptions) -> tuple[Any, dict, list]:
    """The model compiled with each task's best record -- minus the tasks whose untuned
    code is faster (``keep_untuned_if_faster``): (executable, report, those tasks)."""
    from tvm_plugin.metaschedule.build import compile_model

    kept_untuned: list = []
    apply_db = db
    if opts.keep_untuned_if_faster:
        apply_db, kept_untuned = drop_slower_than_untuned(db, ext.ctxs, ext.task_info, tgt)
    ex, report = compile_model(apply_db, m.mod, tgt)
    return ex, report, kept_untuned


# ========================================================================= measure
@dataclass
class _Timing:
    """The tuned model's, the untuned model's and ONNX Runtime's latency (ms; nan: not
    measured) and the TVM runtime's threads (llvm; else None)."""

    latency: float = math.nan
    baseline: float = math.nan
    ort: float = math.nan
    threads: int | None = None


def _measure(m, spec, ex, opts: MetaScheduleOptions) -> _Timing:
    """Time the tuned model, the untuned one (``baseline``) and ONNX Runtime (llvm) on the
    same seeded inputs."""
    from tvm_plugin.metaschedule.build import compile_model, measure_latency, pool_threads, random_inputs

    tgt = spec.tvm
    inputs = random_inputs(m.input_shapes, m.input_dtypes, seed=opts.seed)
    arrays = [inputs[n] for n in m.input_shapes]
    t = _Timing(threads=pool_threads() if spec.kind == "llvm" else None)
    if opts.measure:
        t.latency = measure_latency(ex, tgt, arrays, repeat=opts.latency_repeat)["median_ms"]
    if opts.baseline:
        ex0, _ = compile_model(None, m.mod, tgt)
        t.baseline = measure_latency(ex0, tgt, arrays, repeat=3)["median_ms"]
    if opts.onnxruntime and opts.measure and spec.kind == "llvm":
        t.ort = _onnxruntime_ms(m, inputs, t.threads, opts.progress)
    return t


def _onnxruntime_ms(m, inputs: dict, threads: int | None, progress) -> float:
    """ONNX Runtime's latency of the model (same inputs, ``threads`` intra-op threads), or
    nan (with a console line) when it cannot run the model."""
    from dcoc.reference import onnxruntime_latency_ms

    src = m.path if m.path and os.path.exists(m.path) else getattr(m, "onnx", None)
    if src is None:
        return math.nan
    try:
        return float(onnxruntime_latency_ms(src, {k: tuple(v.shape) for k, v in inputs.items()},
                                            threads=threads or 1, inputs=inputs))
    except Exception as exc:  # noqa: BLE001 - a baseline must never lose the tuned result
        say(progress, f"dcoc: ONNX Runtime baseline skipped: {' '.join(str(exc).split())[:200]}")
        return math.nan


# ========================================================================= compare
def _compare(t: _Timing, tune_seconds: float, progress) -> None:
    """The console's speed-up line: tuned vs untuned TVM vs ONNX Runtime."""
    say(progress, "dcoc: " + speed_line(t.latency, t.baseline, t.ort, t.threads)
        + f"; tuning took {tune_seconds:.1f} s")


def MEASURE_CALLBACKS() -> list:  # noqa: N802
    """MetaSchedule's default callbacks (AddToDatabase, RemoveBuildArtifact, UpdateCostModel)."""
    from tvm.s_tir import meta_schedule as ms

    return list(ms.measure_callback.MeasureCallback.create("default"))


__all__ = ["tune_model", "MetaScheduleOptions", "ModelTuning"]
