"""The AutoTVM-style way round: a MetaSchedule task as a dcoc task, and a dcoc measurer
that builds and runs its configs with MetaSchedule's builder and runner.

:func:`ms_tuning_task` makes a :class:`dcoc.search.TuningTask` for one MetaSchedule task
(its knob view, :class:`~tvm_plugin.metaschedule.trace_space.TraceSpace`) and
:class:`MetaScheduleMeasurer` measures its configs, so
``dcoc.tuners.create("xgb", task).tune(n, measure_option(MetaScheduleMeasurer()))`` works
on llvm (the other way round, a dcoc tuner inside MetaSchedule, is
:class:`tvm_plugin.metaschedule.strategy.TunerStrategy`).
"""
from __future__ import annotations

import time
from typing import Any, Sequence

from tvm.s_tir.meta_schedule.arg_info import ArgInfo

from dcoc.search.measure import MeasureErrorNo, Measurer, MeasureResult
from dcoc.search.tuning_task import TuningTask
from tvm_plugin.metaschedule.strategy import _error_code, runner_result
from tvm_plugin.metaschedule.trace_space import TraceSpace, schedule_hash


def ms_tuning_task(task, target=None, name: str | None = None, seed: int = 0,
                   num_threads: int | None = None) -> TuningTask:
    """A :class:`dcoc.search.TuningTask` over one MetaSchedule task's knob view.

    ``task``: a :class:`dcoc.tasks.Task` with ``ms_task`` (from
    :func:`tvm_plugin.frontend.extract_tasks`), a MetaSchedule ``ExtractedTask``, or an
    IRModule / PrimFunc (then ``target`` is required).  ``payload`` is the
    :class:`~tvm_plugin.metaschedule.trace_space.TraceSpace`.
    """
    ms_task = getattr(task, "ms_task", None)
    if ms_task is not None:
        name = name or task.name
        task = ms_task
    if hasattr(task, "dispatched"):  # ExtractedTask
        mod, target, name = task.dispatched[0], target or task.target, name or task.task_name
    else:
        mod = task
    if target is None:
        raise ValueError("ms_tuning_task needs a target for a bare module")
    from tvm_plugin.metaschedule.build import resolve_tvm_target

    if not hasattr(target, "kind"):
        target = resolve_tvm_target(target)
    ts = TraceSpace.from_mod(mod, target, name or "task", seed=seed, num_threads=num_threads)
    return ts.tuning_task()


class MetaScheduleMeasurer(Measurer):
    """Build and run configs of a :func:`ms_tuning_task` with MetaSchedule's builder/runner.

    builder: ``"persistent"`` (default, :class:`tvm_plugin.metaschedule.build.PersistentBuilder` with
        ``fast_build``), ``"local"`` or a Builder.
    runner: ``"local"``, ``"rpc://HOST:PORT/KEY"`` or a Runner.
    database: optional MetaSchedule Database; every measurement is committed to it (so a
        run through this adapter compiles with ``compile_model`` like a tune_relax run).
    n_parallel: batch size the tuner's ``tune()`` uses (builds run in parallel).
    Identical schedules (structural hash) are measured once; repeats get the first result
    with ``info["cached"] = True``.
    """

    def __init__(self, builder: Any = "persistent", runner: Any = "local", database=None,
                 n_parallel: int = 16, timeout_sec: float = 30.0):
        from tvm_plugin.metaschedule.build import make_builder, make_runner

        self._own_builder = isinstance(builder, str)
        self.builder = make_builder(builder) if isinstance(builder, str) else builder
        self.runner = make_runner(runner, timeout_sec=timeout_sec)
        self.database = database
        self.n_parallel = int(n_parallel)
        self._cache: dict = {}

    def measure(self, task: TuningTask, configs: Sequence[dict]) -> list[MeasureResult]:
        from tvm.s_tir.meta_schedule.builder import BuilderInput
        from tvm.s_tir.meta_schedule.runner import RunnerInput

        from tvm_plugin.metaschedule.build import device_type, remove_artifact

        ts: TraceSpace = task.payload
        t0 = time.perf_counter()
        out: list = [None] * len(configs)
        todo = []  # (index, sch, hash, args_info)
        first: dict = {}
        for i, cfg in enumerate(configs):
            sch = ts.apply(cfg)
            if sch is None:
                out[i] = MeasureResult.error(MeasureErrorNo.INSTANTIATION_ERROR,
                                             "decisions cannot be applied to the design space")
                continue
            h = schedule_hash(sch)
            if h in self._cache:
                r = self._cache[h]
                out[i] = MeasureResult(r.costs, r.error_no, 0.0, None, r.error_msg,
                                       {**r.info, "cached": True})
                continue
            if h in first:
                todo.append((i, None, h, None))
                continue
            first[h] = i
            todo.append((i, sch, h, ArgInfo.from_entry_func(sch.mod, remove_preproc=True)))
        fresh = [t for t in todo if t[1] is not None]
        if fresh:
            built = self.builder.build([BuilderInput(s.mod, ts.target) for _, s, _, _ in fresh])
            run_idx, run_inputs = [], []
            for (i, s, h, args), b in zip(fresh, built):
                if b.error_msg is not None:
                    out[i] = MeasureResult.error(_error_code("builder " + b.error_msg),
                                                 b.error_msg)
                else:
                    run_idx.append((i, s, h, args, b.artifact_path))
                    run_inputs.append(RunnerInput(b.artifact_path, device_type(ts.target), args))
            if run_inputs:
                futures = self.runner.run(run_inputs)
                for (i, s, h, args, path), fut in zip(run_idx, futures):
                    out[i] = runner_result(fut.result())
                    remove_artifact(path)
            wall = (time.perf_counter() - t0) / max(1, len(fresh))
            for i, s, h, args in fresh:
                r = out[i]
                out[i] = r = MeasureResult(r.costs, r.error_no, wall, r.timestamp, r.error_msg,
                                           r.info)
                self._cache[h] = r
                if self.database is not None:
                    self._commit(ts, s, args, r)
        for i, s, h, args in todo:
            if s is None:
                r = self._cache[h]
                out[i] = MeasureResult(r.costs, r.error_no, 0.0, None, r.error_msg,
                                       {**r.info, "cached": True})
        return out

    def _commit(self, ts: TraceSpace, sch, args, r: MeasureResult) -> None:
        from tvm.s_tir import meta_schedule as ms

        wl = self.database.commit_workload(ts.mod)
        secs = list(r.costs) if r.valid else [1e10]
        self.database.commit_tuning_record(
            ms.database.TuningRecord(sch.trace, wl, secs, ts.target, args))

    def close(self) -> None:
        if self._own_builder:
            from tvm_plugin.metaschedule.build import close_builder

            close_builder(self.builder)


__all__ = ["MetaScheduleMeasurer", "ms_tuning_task"]
