"""TunerStrategy inside MetaSchedule: contract, database, resume, program features."""
from __future__ import annotations

import importlib.util
import math

import pytest

from tests.tvm.conftest import count_records, relu_onnx, tune_context

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _recording_cls():
    """TunerStrategy that logs what every generate_measure_candidates call returned."""
    from tvm.ir.utils import derived_object

    from tvm_plugin.metaschedule.strategy import _TunerStrategy

    class _Recording(_TunerStrategy):
        def generate_measure_candidates(self):
            out = super().generate_measure_candidates()
            self.state.setdefault("returns", []).append(None if out is None else len(out))
            return out

    return derived_object(_Recording)


def _tune(ctx, work_dir, builder, runner, trials, per_iter):
    from tvm.s_tir import meta_schedule as ms

    db = ms.database.JSONDatabase(work_dir=str(work_dir))
    ms.tune_tasks(tasks=[ctx], task_weights=[1.0], work_dir=str(work_dir),
                  max_trials_global=trials, num_trials_per_iter=per_iter, builder=builder,
                  runner=runner, database=db, cost_model="random")
    return db


def test_contract_ga_through_tune_tasks(conv_task, builder, runner, tmp_path):
    """Batches <= num_trials_per_iter, never [], None at the end, max_trials respected,
    every measured candidate in the database (through the measure callbacks)."""
    strat = _recording_cls()(tuner="ga", seed=0)
    ctx = tune_context(conv_task, strat)
    db = _tune(ctx, tmp_path, builder, runner, trials=20, per_iter=8)
    ret = strat.state["returns"]
    assert 0 not in ret  # never an empty list
    sizes = [r for r in ret if r is not None]
    assert all(r <= 8 for r in sizes) and sum(sizes) == 20
    assert None not in ret[:-1]  # None only ends the task (the scheduler may stop first)
    summary = strat.results[str(ctx.task_name)]
    assert summary["trials"] == 20 and summary["done"]
    assert math.isfinite(summary["best_cost"]) and summary["best_config"]
    assert count_records(db, ctx.mod) == 20
    best = db.get_top_k(db.commit_workload(ctx.mod), 1)[0]
    best_db = sum(float(x) for x in best.run_secs) / len(best.run_secs)
    assert best_db == pytest.approx(summary["best_cost"], rel=1e-6)


def test_exhausted_tuner_returns_none_not_empty(llvm, builder, runner, tmp_path):
    from tvm_plugin.frontend import load

    task = load(relu_onnx(), name="relu").tasks(llvm)[0]
    strat = _recording_cls()(tuner="random", seed=0)
    ctx = tune_context(task, strat)
    db = _tune(ctx, tmp_path, builder, runner, trials=50, per_iter=16)
    ret = strat.state["returns"]
    summary = strat.results[str(ctx.task_name)]
    assert ret[-1] is None and 0 not in ret
    assert summary["space_size"] < 50 and summary["trials"] == sum(ret[:-1]) <= summary["space_size"]
    assert count_records(db, ctx.mod) == summary["trials"]


def test_invalid_configs_go_back_unbuilt(conv_task, builder, runner, tmp_path):
    from dcoc.search.measure import MeasureErrorNo
    from dcoc.tuners.random_tuner import RandomTuner

    seen = []

    class Mixed(RandomTuner):
        name = "mixed"

        def next_batch(self, batch_size):
            out = super().next_batch(batch_size)
            if self.trials == 0 and out:  # first batch: one config no design space has
                out[0] = dict(out[0], design_space=99)
            return out

        def update(self, inputs, results):
            seen.extend((dict(i.config), r) for i, r in zip(inputs, results))

    strat = _recording_cls()(tuner=Mixed, seed=0)
    ctx = tune_context(conv_task, strat)
    db = _tune(ctx, tmp_path, builder, runner, trials=8, per_iter=8)
    bad = [r for c, r in seen if c.get("design_space") == 99]
    assert len(bad) == 1 and bad[0].error_no == MeasureErrorNo.INSTANTIATION_ERROR
    # it came back first, before any measured result, and was never built or run
    assert seen[0][0].get("design_space") == 99
    summary = strat.results[str(ctx.task_name)]
    assert summary["invalid"] == 1 and summary["trials"] == 8
    assert count_records(db, ctx.mod) == 8


@pytest.mark.skipif(importlib.util.find_spec("dcoc.tuners.dcoc_tuner") is None,
                    reason="the dcoc tuner is not available")
def test_dcoc_strategy_tune_relax_and_resume(conv_model, llvm, builder, runner, tmp_path):
    """The documented drop-in: tune_relax(..., strategy=TunerStrategy(...)); rerun with
    the same work_dir measures nothing again; the tuned PrimFunc is applied at compile."""
    from tvm.s_tir import meta_schedule as ms

    from tvm_plugin.metaschedule.build import compile_model
    from tvm_plugin.metaschedule.progress import metaschedule_logging_guard
    from tvm_plugin.metaschedule.strategy import TunerStrategy

    fused = conv_model.fused(llvm)
    strat = TunerStrategy(seed=0)
    with metaschedule_logging_guard():  # TVM 0.27 logger set-up vs pytest's log capture
        db = ms.relax_integration.tune_relax(fused, {}, llvm.tvm, str(tmp_path), 16,
                                             num_trials_per_iter=8, builder=builder,
                                             runner=runner, strategy=strat, cost_model="random",
                                             seed=0)
    (name, summary), = strat.results.items()
    assert summary["tuner"] == "surrogate" and summary["trials"] == 16
    n = len(db.get_all_tuning_records())
    assert n == 16
    ex, report = compile_model(db, conv_model.mod, llvm.tvm)
    assert len(report["tuned"]) == 1

    again = TunerStrategy(seed=0)
    with metaschedule_logging_guard():
        db2 = ms.relax_integration.tune_relax(fused, {}, llvm.tvm, str(tmp_path), 16,
                                              num_trials_per_iter=8, builder=builder,
                                              runner=runner, strategy=again,
                                              cost_model="random", seed=0)
    s2 = again.results[name]
    assert s2["trials"] == 0 and s2["recorded"] == 16
    assert len(db2.get_all_tuning_records()) == 16
    assert s2["best_cost"] == pytest.approx(summary["best_cost"], rel=1e-9)


@pytest.mark.parametrize("tuner", ["random", "surrogate", "dcoc"])
def test_same_seed_same_first_batch(conv_task, tuner):
    """Before any measurement a tuner's proposals depend only on the seed."""
    from tvm_plugin.metaschedule.strategy import TunerStrategy
    from tvm_plugin.metaschedule.trace_space import schedule_hash

    def first_batch(seed):
        strat = TunerStrategy(tuner=tuner, seed=seed)
        ctx = tune_context(conv_task, strat, seed=0)
        spaces = ctx.space_generator.generate_design_space(ctx.mod)
        strat._initialize_with_tune_context(ctx)
        strat.pre_tuning(16, 8, spaces, None, None)
        return [schedule_hash(c.sch) for c in strat.generate_measure_candidates()]

    a, b, c = first_batch(0), first_batch(0), first_batch(1)
    assert len(a) == 8 and a == b and a != c


@pytest.mark.parametrize("tuner", ["surrogate", "dcoc"])
def test_program_features_and_the_shared_pool(conv_task, builder, runner, tmp_path, tuner):
    """With few trials per task a DCOC-family tuner ranks on MetaSchedule's per-store
    features (sum and max), publishes its rows to the pool in the shared state, and a later
    task of the same run starts from that pool (no random warm-up)."""
    import numpy as np

    from tvm_plugin.metaschedule.program import ProgramConfig
    from tvm_plugin.metaschedule.strategy import TunerStrategy
    from tvm_plugin.metaschedule.trace_space import make_tune_context

    program = ProgramConfig(few_trials_below=100, pool_min=16)
    strat = TunerStrategy(tuner=tuner, seed=0, program=program)
    ctx = tune_context(conv_task, strat)
    _tune(ctx, tmp_path, builder, runner, trials=24, per_iter=8)
    name = str(ctx.task_name)
    summary = strat.results[name]
    assert summary["trials"] == 24 and summary["program_features"] and summary["feature_seconds"] > 0
    pool = strat.state["pool"]
    assert pool.tasks() == [name] and pool.n_rows() >= 16
    feats = strat.features
    assert feats.dim == 2 * 164
    X = feats(np.zeros((1, len(strat.tspace.space.knobs)), np.int64))
    assert X.shape == (1, feats.dim) and np.isfinite(X).all()

    # a second task of the same run (sharing the state, as clones do) skips the random warm-up
    other = TunerStrategy(tuner=tuner, seed=0, state=strat.state, program=program)
    et = conv_task.ms_task
    ctx2 = make_tune_context(et.dispatched[0], et.target, "other_task", strategy=other,
                             num_threads=2, seed=0)
    spaces = ctx2.space_generator.generate_design_space(ctx2.mod)
    other._initialize_with_tune_context(ctx2)
    other.pre_tuning(8, 8, spaces, None, None)
    assert len(other.generate_measure_candidates()) == 8
    ranker = other.tuner.problem.ranker
    assert other.tuner.problem.n_init() == 0
    assert ranker.model.fitted                        # fitted on the first task's rows only
    assert other.tuner.problem.n_measured() == 0


@pytest.mark.parametrize("cap", [None, 10])
def test_batches_stop_at_the_global_budget(conv_task, builder, runner, tmp_path, cap):
    """MetaSchedule's task scheduler checks max_trials_global only between batches: two
    tasks in batches of 4 under a total of 10 end at 12 trials.  With the strategy's
    ``max_trials_global`` (tune_model sets it) the last batch is cut to end at 10."""
    from tvm.s_tir import meta_schedule as ms

    from tvm_plugin.metaschedule.trace_space import make_tune_context

    strat = _recording_cls()(tuner="random", seed=0, max_trials_global=cap)
    et = conv_task.ms_task
    ctxs = [make_tune_context(et.dispatched[0], et.target, name, strategy=s, num_threads=2,
                              seed=0)
            for name, s in (("task_a", strat), ("task_b", strat.clone()))]
    db = ms.database.JSONDatabase(work_dir=str(tmp_path))
    ms.tune_tasks(tasks=ctxs, task_weights=[1.0, 1.0], work_dir=str(tmp_path),
                  max_trials_global=10, num_trials_per_iter=4, builder=builder,
                  runner=runner, database=db, cost_model="random")
    measured = sum(s["trials"] for s in strat.results.values())
    assert len(db.get_all_tuning_records()) == measured
    assert measured == (12 if cap is None else 10)
    assert strat.state["used"] == measured


@pytest.mark.parametrize("below", [0, 32])
def test_few_trials_per_task_attach_a_program_ranker(conv_task, below):
    """Every task of a run is pre-tuned before the first batch, so a task's first batch
    knows the run's budget per task (10 trials over two tasks: 5).  Below
    ``ProgramConfig.few_trials_below`` a DCOC-family tuner gets a program-feature ranker;
    with 0 (the control) nothing changes.  A later run sharing the state counts its own
    tasks."""
    from tvm_plugin.metaschedule.program import ProgramConfig
    from tvm_plugin.metaschedule.strategy import TunerStrategy
    from tvm_plugin.metaschedule.trace_space import make_tune_context

    strat = TunerStrategy(seed=0, max_trials_global=10, program=ProgramConfig(few_trials_below=below))
    et = conv_task.ms_task

    def pre_tune(s, name):
        ctx = make_tune_context(et.dispatched[0], et.target, name, strategy=s, num_threads=2,
                                seed=0)
        s._initialize_with_tune_context(ctx)
        s.pre_tuning(10, 4, ctx.space_generator.generate_design_space(ctx.mod), None, None)

    clone = strat.clone()
    pre_tune(strat, "task_a")
    pre_tune(clone, "task_b")
    assert strat.tuner.problem.ranker is None and strat.features is None  # not yet decided
    assert len(strat.generate_measure_candidates()) == 4
    assert strat.per_task() == 5
    on = below > 0
    assert (strat.tuner.problem.ranker is not None) is on
    assert (strat.features is not None) is on
    assert strat.results["task_a"]["program_features"] is on
    assert strat.results["task_b"]["program_features"] is False   # decides at its first batch

    third = TunerStrategy(seed=0, state=strat.state)  # a second run: one task
    pre_tune(third, "task_c")
    assert third.per_task() == 10
