"""Tune a whole model for an llvm/cuda target with MetaSchedule and a dcoc search strategy.

:func:`tune_model` is what ``dcoc.tune(model, target="llvm")`` and ``dcoc tune MODEL
--target llvm`` call::

    from tvm_plugin.metaschedule.tuning import tune_model
    r = tune_model("light_resnet", "llvm", trials=256, tuner="dcoc", seed=0, work_dir="wd")
    r.latency_ms, r.baseline_latency_ms, r.run({"input": x})

Steps: import (``tvm_plugin.frontend.load``) -> legalize + fuse -> extract the MetaSchedule
tasks -> ``ms.tune_tasks`` with a :class:`~tvm_plugin.metaschedule.strategy.TunerStrategy` (or
MetaSchedule's own ``"evolutionary"`` / ``"replay-trace"`` strategies, for comparisons),
a persistent fast builder and a low-overhead runner, into a JSON database in ``work_dir``
-> :func:`tvm_plugin.metaschedule.build.compile_model` on the unfused module -> measure the tuned and
the untuned model.

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
:mod:`dcoc.workdir`); the result is saved to ``work_dir/result.json`` (the tuning curve is
its ``history``), and ``work_dir/ms_tasks.json`` names the database's workloads so that
``dcoc records`` / ``dcoc plot`` can read the database without TVM.
"""
from __future__ import annotations

import math
import os
import tempfile
import time
from typing import Any, Mapping, Sequence

from dcoc.baselines import speed_line, untuned_phrase
from dcoc.errors import DcocError, TargetError
from dcoc.results.result import TuneResult
from dcoc.tuners import DEFAULT as DEFAULT_TUNER
from tvm_plugin.metaschedule.database import (
    drop_slower_than_untuned,
    previous_history,
    recorded_bests,
    write_task_names,
)
from tvm_plugin.metaschedule.progress import (
    TuningProgress,
    metaschedule_logging_guard,
    native_stderr_to,
    progress_callback,
    say,
    silence_metaschedule,
)
from tvm_plugin.metaschedule.task_budget import (
    BudgetScheduler,
    batch_size,
    coverage_warning,
    first_round_order,
)

#: names of MetaSchedule's own strategies accepted as ``tuner``
MS_STRATEGIES = {"evolutionary": "evolutionary", "replay-trace": "replay-trace",
                 "replay_trace": "replay-trace", "replay-func": "replay-func"}


def make_strategy(tuner: str = DEFAULT_TUNER, seed: int = 0,
                  tuner_kwargs: Mapping | None = None, population: int | None = None):
    """The MetaSchedule strategy for a ``tuner`` name, and the cost model it wants.

    dcoc tuners (names or specs) -> (TunerStrategy, ``"random"``: the tuner owns its model).
    ``"evolutionary"`` -> (EvolutionarySearch at its defaults, ``population_size=population``
    if given; ``"xgb"``: MetaSchedule's XGBoost cost model).
    ``"replay-trace"`` -> (ReplayTrace, ``"random"``: it uses no cost model).
    """
    from tvm.s_tir import meta_schedule as ms

    name = str(tuner).lower()
    if name in MS_STRATEGIES:
        kind = MS_STRATEGIES[name]
        if kind == "evolutionary":
            kw = {"population_size": int(population)} if population else {}
            return ms.search_strategy.EvolutionarySearch(**kw), "xgb"
        if kind == "replay-trace":
            return ms.search_strategy.ReplayTrace(), "random"
        return ms.search_strategy.ReplayFunc(), "random"
    from tvm_plugin.metaschedule.strategy import TunerStrategy

    return TunerStrategy(tuner=str(tuner), seed=seed, tuner_kwargs=dict(tuner_kwargs or {})), "random"


#: what MetaSchedule's own strategies run, in words
MS_METHODS = {"evolutionary": "MetaSchedule EvolutionarySearch (its defaults) + XGBoost cost model",
              "replay-trace": "MetaSchedule ReplayTrace: random traces, no cost model",
              "replay-func": "MetaSchedule ReplayFunc: random schedules, no cost model"}


def _method(tuner, tasks: dict) -> str:
    """What ran, in words: the tuner's algorithm, whether its model ever chose what to
    measure, on how many tasks program features ranked, and the tasks with nothing to
    tune (one fixed schedule)."""
    name = str(tuner).lower()
    if name in MS_STRATEGIES:
        return MS_METHODS[MS_STRATEGIES[name]]
    from dcoc.tuners import describe

    text = describe(tuner)
    searched = [t for t in tasks.values() if t.get("ran", t.get("tuner")) != "grid"
                and t.get("trials", 0) + t.get("recorded", 0) > 0]
    fixed = sum(1 for t in tasks.values() if t.get("ran") == "grid" and t.get("trials", 0)
                + t.get("recorded", 0) > 0)
    parts = []
    rounds = [t.get("model_rounds") for t in searched]
    if searched and all(r is not None for r in rounds):
        guided = sum(1 for r in rounds if r)
        parts.append("its model never chose a trial (every trial was the initial sample)"
                     if not guided else f"model-guided on {guided} of {len(searched)} searched tasks")
    n = sum(1 for t in tasks.values() if t.get("program_features"))
    if n:
        parts.append(f"program features on {n} of {len(tasks)} tasks")
    if fixed:
        parts.append(f"{fixed} task{'s' if fixed > 1 else ''} with one fixed schedule")
    return text + ("; " + ", ".join(parts) if parts else "")


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


def tune_model(model, target="llvm", trials: int = 256, tuner: str = DEFAULT_TUNER, seed: int = 0,
               work_dir: str | None = None, runner: Any = "local",
               input_shapes: Mapping[str, Sequence[int]] | None = None, *,
               trials_per_task: int | None = None,
               num_trials_per_iter: int | None = None, builder: Any = "persistent",
               strategy: Any = None, cost_model: Any = None, tuner_kwargs: Mapping | None = None,
               task_scheduler: Any = "gradient", population: int | None = None,
               measure: bool = True, baseline: bool = True, progress: Any = True,
               timeout_sec: float = 30.0, latency_repeat: int = 5,
               keep_untuned_if_faster: bool = True, verbose: bool = False,
               flush_cache: bool = False, time_budget: float | None = None,
               onnxruntime: bool = True) -> TuneResult:
    """Tune ``model`` for an llvm/cuda target; returns a :class:`dcoc.results.result.TuneResult`.

    Parameters
    ----------
    model: ONNX path, zoo / ``light_*`` name, ``onnx.ModelProto`` or a loaded
        :class:`tvm_plugin.frontend.Model`.
    target: ``"llvm"`` (this machine: host ``mcpu``, physical cores), ``"cuda"``, a TVM
        target JSON dict (``num-cores`` is added when missing) or a ``tvm.target.Target``.
    trials: total measurement budget over all tasks (``max_trials_global``); a run of a dcoc
        tuner measures exactly this many candidates unless a task's space runs out or
        ``time_budget`` ends it (MetaSchedule's own strategies cut a batch only at a task's
        cap, so their last batch may pass the total by less than one batch).
    tuner: a dcoc tuner name or spec (``"surrogate"`` default, ``"dcoc"``, ``"xgb"``, ...)
        driven through :class:`~tvm_plugin.metaschedule.strategy.TunerStrategy`, or
        MetaSchedule's ``"evolutionary"`` (EvolutionarySearch with its XGBoost cost model) /
        ``"replay-trace"`` (ReplayTrace), at their authors' defaults (for comparisons).
    seed: the one seed (strategy and MetaSchedule's design-space generation).
    work_dir: database + logs (created; a temporary directory when None).  Reusing it
        resumes (see module docstring).
    runner: ``"local"`` or ``"rpc://HOST:PORT/KEY"`` (or a MetaSchedule Runner).
    input_shapes: ``{input: shape}`` for models with dynamic input dimensions.
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
    time_budget: wall-clock seconds for the search (from its start; compiling and timing the
        model come after): no new batch starts once they are spent; what was measured is
        kept and ``result.extra["stopped_on_time"]`` says so.
    onnxruntime: llvm: also time the ONNX model in ONNX Runtime on the thread count TVM's
        runtime uses (:func:`dcoc.baselines.onnxruntime_latency_ms`): ``result.onnxruntime_ms``.
    flush_cache: llvm only: time every candidate cold -- one run per repeat, each after the
        CPU caches are flushed of its arguments (``number=1, repeat=10, min_repeat_ms=0``,
        :func:`tvm_plugin.metaschedule.build.evaluator_config`), as a kernel meets its weights inside a
        model whose weights do not fit in cache (ResNet-18: the compiled model is 1.14-1.59x
        its summed warm-timed kernels, 0.94-1.02x its cold-timed ones; docs/method.md,
        "MetaSchedule").  The work dir remembers it: a warm and a cold run never share a
        database.
    """
    from tvm_plugin import frontend as F
    from tvm_plugin.metaschedule.build import preload_tensor_intrin

    preload_tensor_intrin()

    t_start = time.perf_counter()
    spec = F.resolve_target(target)
    if spec.is_vta:
        raise TargetError("tune_model tunes llvm/cuda targets; use dcoc.tune(model, "
                          "target='vta') for the VTA accelerator")
    tgt = spec.tvm
    if int(trials) < 1:
        raise DcocError(f"trials must be >= 1, got {trials}")
    if time_budget is not None and not float(time_budget) > 0:
        raise DcocError(f"time_budget must be > 0 seconds, got {time_budget}")
    if flush_cache:
        from tvm_plugin.metaschedule.build import evaluator_config, make_runner

        if spec.kind != "llvm":
            raise TargetError(f"flush_cache flushes CPU caches: it times llvm targets, not "
                              f"{spec.kind}")
        if not isinstance(runner, str):
            raise DcocError("flush_cache needs the runner as 'local' or 'rpc://HOST:PORT/KEY' "
                            "(a Runner object carries its own EvaluatorConfig)")
        cold = evaluator_config(flush_cache=True)
    work_dir = os.path.abspath(work_dir or tempfile.mkdtemp(prefix="dcoc-ms-"))
    from dcoc.workdir import claim_work_dir, model_identity

    m = model if isinstance(model, F.Model) else F.load(model, input_shapes)
    tasks = m.tasks(spec)
    if not tasks:
        raise DcocError(f"model '{m.name}' has no tunable operators for {spec.kind}")
    ident = model_identity(model if not isinstance(model, F.Model) else m.name, input_shapes)
    claim_work_dir(work_dir, {**ident, "target": _target_identity(tgt),
                              "timing": "cold" if flush_cache else None})
    if flush_cache:  # built after the checks: a refused run builds no runner
        runner = make_runner(runner, timeout_sec=timeout_sec, evaluator=cold)
    os.makedirs(os.path.join(work_dir, "logs"), exist_ok=True)
    with native_stderr_to(os.path.join(work_dir, "logs", "tvm.log"), enabled=not verbose):
        return _tune_model(m, spec, tgt, tasks, trials, tuner, seed, work_dir, runner,
                           trials_per_task, num_trials_per_iter, builder, strategy, cost_model,
                           tuner_kwargs, task_scheduler, population, measure, baseline,
                           progress, timeout_sec, latency_repeat, keep_untuned_if_faster,
                           verbose, t_start, time_budget, onnxruntime)


def _target_identity(tgt) -> str:
    """The target as a stable string for the work dir's identity (kind + options)."""
    import json

    try:
        return json.dumps(_py(tgt.export()), sort_keys=True)
    except Exception:  # noqa: BLE001
        return str(tgt)


def _tune_model(m, spec, tgt, tasks, trials, tuner, seed, work_dir, runner,
                trials_per_task, num_trials_per_iter, builder, strategy, cost_model,
                tuner_kwargs, task_scheduler, population, measure, baseline, progress,
                timeout_sec, latency_repeat, keep_untuned_if_faster, verbose, t_start,
                time_budget=None, onnxruntime=True):
    from tvm.s_tir import meta_schedule as ms

    from tvm_plugin.metaschedule.build import (
        close_builder,
        compile_model,
        make_builder,
        make_model_runner,
        make_runner,
        measure_latency,
        random_inputs,
    )

    ms_tasks = [t.ms_task for t in tasks]
    names = {t.ms_task.task_name: t.name for t in tasks}

    if strategy is None:
        strategy, default_cm = make_strategy(tuner, seed, tuner_kwargs, population)
    else:
        default_cm = "random"
    cost_model = cost_model or default_cm
    lg, old_level = silence_metaschedule(verbose)
    try:
        with metaschedule_logging_guard():
            ctxs, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
                ms_tasks, work_dir, strategy=strategy, seed=seed)
    finally:
        lg.setLevel(old_level)
    task_info = []
    for ctx in ctxs:
        from tvm.s_tir.analysis import estimate_tir_flops

        try:
            flop = float(estimate_tir_flops(ctx.mod))
        except Exception:  # noqa: BLE001
            flop = 0.0
        task_info.append({"name": names.get(str(ctx.task_name), str(ctx.task_name)),
                          "ms_name": str(ctx.task_name), "flop": flop})
    for info, w in zip(task_info, weights):
        info["weight"] = float(w)

    auto_batch = num_trials_per_iter is None
    if auto_batch:
        num_trials_per_iter = batch_size(int(trials), len(ctxs))
    db = ms.database.JSONDatabase(work_dir=work_dir)
    recorded = recorded_bests(db, ctxs)
    n_recorded = sum(n for n, _ in recorded.values())
    history = previous_history(work_dir) if n_recorded else []
    b = make_builder(builder)
    r = make_runner(runner, timeout_sec=timeout_sec)
    cold = bool(getattr(getattr(r, "evaluator_config", None), "enable_cpu_cache_flush", False))
    prog = TuningProgress(task_info, int(trials), progress, t_start, recorded, history)
    say(progress, f"dcoc: tuning {m.name} for {spec.kind} ({len(ctxs)} tasks, {trials} trials"
                   + (f", time budget {time_budget:g} s" if time_budget else "")
                   + f", tuner {tuner}, seed {seed}); MetaSchedule logs in {work_dir}/logs")
    if n_recorded:
        counted = ("counted against the budget" if hasattr(strategy, "limit_total")
                   else f"the starting population of {MS_STRATEGIES.get(str(tuner).lower(), tuner)}, "
                        "which spends the full budget again")
        say(progress, f"dcoc: resuming: {n_recorded} recorded trials in {work_dir} ({counted})")
    warn = coverage_warning(int(trials), len(ctxs))
    if warn:
        say(progress, "dcoc: warning: " + warn)
    # Phases (global budget after the phase, batch size): one, unless a wall-clock budget
    # binds before the trials do -- then every task's first trial comes in a phase of
    # one-trial batches, so the first round reaches every task before the time is spent.
    phases = [(int(trials), int(num_trials_per_iter))]
    if (time_budget and auto_batch and task_scheduler == "gradient" and not n_recorded
            and num_trials_per_iter > 1):
        phases.insert(0, (min(int(trials), len(ctxs)), 1))
    order = first_round_order([t["weight"] for t in task_info], [t["flop"] for t in task_info])
    if isinstance(cost_model, str) and len(phases) > 1:  # one model over both phases
        cost_model = ms.cost_model.CostModel.create(cost_model, num_tuning_cores=ctxs[0].num_threads,
                                                    tree_method="auto")
    t_tune = time.perf_counter()
    deadline = t_tune + float(time_budget) if time_budget else None
    stopped_on_time, history = False, None
    lg, old_level = silence_metaschedule(verbose)
    try:
        for k, (upto, per_iter) in enumerate(phases):
            left = upto - prog.total
            if left <= 0:
                continue
            if deadline is not None and time.perf_counter() >= deadline:
                stopped_on_time = True
                break
            if task_scheduler == "gradient":
                sched = BudgetScheduler(order=order if k == 0 else [], seed=seed,
                                        deadline=deadline, history=history)
            else:
                sched = task_scheduler
            if hasattr(strategy, "limit_total"):  # dcoc strategies: no batch past `upto`
                strategy.limit_total(upto)
            callbacks = MEASURE_CALLBACKS() + [progress_callback(prog)]
            if hasattr(sched, "callback"):
                callbacks.append(sched.callback())
            ms.tune_tasks(tasks=ctxs, task_weights=weights, work_dir=work_dir,
                          max_trials_global=int(left),
                          max_trials_per_task=int(trials_per_task or trials),
                          num_trials_per_iter=int(per_iter), builder=b, runner=r,
                          database=db, cost_model=cost_model, measure_callbacks=callbacks,
                          task_scheduler=sched)
            history = getattr(sched, "history", None)
            if getattr(sched, "stopped_on_time", False):
                stopped_on_time = True
                break
    finally:
        lg.setLevel(old_level)
        if isinstance(builder, str):
            close_builder(b)
    if stopped_on_time:
        say(progress, f"dcoc: time budget of {time_budget:g} s spent: stopped after "
                       f"{prog.total} of {trials} trials (every measured trial is recorded)")
    tune_seconds = time.perf_counter() - t_tune

    # ------------------------------------------------------------- results per task
    strat_results = dict(getattr(strategy, "results", {}) or {})
    schedules, layers = {}, []
    n_records = 0
    no_schedule = []  # tasks without a valid record: they keep TVM's default code
    for i, (ctx, info) in enumerate(zip(ctxs, task_info)):
        best = None
        if db.has_workload(ctx.mod):
            wl = db.commit_workload(ctx.mod)
            top = db.get_top_k(wl, 1)
            best = top[0] if len(top) else None
        summary = strat_results.get(info["ms_name"], {})
        n_task = prog.recorded[i] + prog.trials[i]
        n_records += n_task
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
               "trials": n_task, "device": spec.kind}
        if math.isfinite(lat):
            row["ms"] = lat * 1e3
        layers.append(row)
    say(progress, prog.table())

    # ----------------------------------------------------------- compile + measure
    names_in = list(m.input_shapes)
    inputs = random_inputs(m.input_shapes, m.input_dtypes, seed=seed)
    kept_untuned: list = []
    apply_db = db
    if keep_untuned_if_faster:
        apply_db, kept_untuned = drop_slower_than_untuned(db, ctxs, task_info, tgt)
    ex, report = compile_model(apply_db, m.mod, tgt)
    untuned_tasks = no_schedule + kept_untuned
    if untuned_tasks:
        say(progress, f"dcoc: {untuned_phrase(len(untuned_tasks), len(task_info), len(no_schedule))}: "
                       + ", ".join(untuned_tasks[:6]) + (" ..." if len(untuned_tasks) > 6 else ""))
    latency = baseline_latency = ort_ms = math.nan
    arrays = [inputs[n] for n in names_in]
    threads = runtime_threads() if spec.kind == "llvm" else None
    if measure:
        latency = measure_latency(ex, tgt, arrays, repeat=latency_repeat)["median_ms"]
    if baseline:
        ex0, _ = compile_model(None, m.mod, tgt)
        baseline_latency = measure_latency(ex0, tgt, arrays, repeat=3)["median_ms"]
    if onnxruntime and measure and spec.kind == "llvm":
        ort_ms = _onnxruntime_ms(m, inputs, threads, progress)
    if measure:
        say(progress, "dcoc: " + speed_line(latency, baseline_latency, ort_ms, threads)
             + f"; tuning took {tune_seconds:.1f} s")

    result = TuneResult(
        target=str(tgt), tuner=str(tuner), seed=int(seed), latency_ms=float(latency),
        baseline_latency_ms=float(baseline_latency), trials=int(n_records),
        schedules=schedules, history=prog.history, layers=layers,
        method=_method(tuner, strat_results), model=m.name, work_dir=work_dir,
        database_path=work_dir, wall_seconds=time.perf_counter() - t_start, executable=ex,
        extra={"target_kind": spec.kind, "new_trials": prog.total, "recorded_trials": n_recorded,
               "timing": "cold" if cold else "warm",
               "tuning_seconds": round(tune_seconds, 2),
               "time_budget_s": float(time_budget) if time_budget else None,
               "stopped_on_time": stopped_on_time,
               "n_tasks": len(task_info),
               "untuned_tasks": untuned_tasks, "unmeasured_tasks": no_schedule,
               "tuned_functions": report["tuned"], "untuned_functions": report["untuned"],
               "kept_untuned": kept_untuned,
               "runtime_threads": threads,
               "tasks": [{k: v for k, v in s.items() if k != "history"}
                         for s in strat_results.values()]},
    )
    if math.isfinite(ort_ms):
        result.onnxruntime_ms = float(ort_ms)
    result._runner = make_model_runner(ex, tgt, names_in, m.input_dtypes)
    write_task_names(db, ctxs, task_info, work_dir)
    result.save(os.path.join(work_dir, "result.json"))
    return result


def runtime_threads() -> int:
    """The number of threads TVM's CPU runtime runs a model on (``TVM_NUM_THREADS``, else
    TVM's own default: on x86, half the logical CPUs)."""
    import tvm

    try:
        return int(tvm.get_global_func("runtime.NumThreads")())
    except Exception:  # noqa: BLE001
        return 1


def _onnxruntime_ms(m, inputs: dict, threads: int | None, progress) -> float:
    """ONNX Runtime's latency of the model (same inputs, ``threads`` intra-op threads), or
    nan (with a console line) when it cannot run the model."""
    from dcoc.baselines import onnxruntime_latency_ms

    src = m.path if m.path and os.path.exists(m.path) else getattr(m, "onnx", None)
    if src is None:
        return math.nan
    try:
        return float(onnxruntime_latency_ms(src, {k: tuple(v.shape) for k, v in inputs.items()},
                                            threads=threads or 1, inputs=inputs))
    except Exception as exc:  # noqa: BLE001 - a baseline must never lose the tuned result
        say(progress, f"dcoc: ONNX Runtime baseline skipped: {' '.join(str(exc).split())[:200]}")
        return math.nan


def MEASURE_CALLBACKS() -> list:  # noqa: N802
    """MetaSchedule's default callbacks (AddToDatabase, RemoveBuildArtifact, UpdateCostModel)."""
    from tvm.s_tir import meta_schedule as ms

    return list(ms.measure_callback.MeasureCallback.create("default"))


__all__ = ["tune_model", "make_strategy", "MS_STRATEGIES"]
