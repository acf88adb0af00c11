"""Where an llvm run spends its trials (tvm_plugin.metaschedule.task_budget) and what its
summary says: every task tuned once the budget allows one trial each, exactly --trials
trials, a wall-clock budget that stops the search, ONNX Runtime on the same threads, a
resumed run that says so, and MetaSchedule's own searches on the CLI."""
from __future__ import annotations

import json
import math
import os
import re

import pytest

from dcoc.errors import DcocError
from tests.tvm.conftest import three_task_onnx
from tvm_plugin.metaschedule.task_budget import batch_size, coverage_warning, first_round_order


def test_batch_size_reaches_every_task_when_trials_allow_one_each():
    for tasks in (1, 3, 13, 30):
        for trials in range(tasks, 6 * tasks):
            b = batch_size(trials, tasks)
            assert 1 <= b <= 16 and b * tasks <= trials  # the first round fits in the budget
    assert batch_size(32, 30) == 1 and batch_size(256, 30) == 4 and batch_size(10_000, 3) == 16


def test_coverage_warning_names_the_budget_needed():
    assert coverage_warning(60, 30) is None
    assert coverage_warning(17, 30) == ("30 tasks, trials < 2 x tasks: 13 tasks keep untuned code; "
                                        "use --trials >= 60")
    assert "most tasks get one trial" in coverage_warning(45, 30)


def test_first_round_order_is_share_of_model_time():
    # weight x FLOP: 2 x 10 = 20, 1 x 50 = 50, 3 x 0 = 0, 1 x 20 = 20 (ties keep their order)
    assert first_round_order([2, 1, 3, 1], [10, 50, 0, 20]) == [1, 0, 3, 2]


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """One run: 3 tasks, 4 trials, the random tuner, measured against ONNX Runtime."""
    from dcoc.api.cpu import tune_metaschedule as tune_model

    d = tmp_path_factory.mktemp("budget")
    path = three_task_onnx(str(d / "three.onnx"))
    lines: list = []
    res = tune_model(path, "llvm", trials=4, tuner="random", seed=0, work_dir=str(d / "wd"),
                     progress=lines.append, latency_repeat=2)
    return path, str(d / "wd"), res, lines


def test_every_task_gets_a_trial_and_the_run_spends_exactly_its_trials(tuned):
    _, wd, res, lines = tuned
    assert res.extra["n_tasks"] == 3
    assert res.trials == 4 and res.extra["new_trials"] == 4
    with open(os.path.join(wd, "database_tuning_record.json")) as f:
        assert sum(1 for line in f if line.strip()) == 4
    assert all(row["trials"] >= 1 and row["ms"] > 0 for row in res.layers)
    assert res.extra["unmeasured_tasks"] == []
    # every task measured: the estimate is finite from the third trial on, so a curve exists
    assert res.history and res.history[0][0] == 2 and all(math.isfinite(v) for _, v in res.history)
    assert any("trials < 2 x tasks" in ln and "use --trials >= 6" in ln for ln in lines)
    assert not any("inf" in ln.split() or "inf ms" in ln for ln in lines)


def test_summary_has_onnxruntime_on_the_same_threads(tuned):
    from dcoc.cli.cmd_tune import summary
    from tvm_plugin.metaschedule.build import pool_threads as runtime_threads

    _, wd, res, lines = tuned
    assert res.onnxruntime_ms > 0 and res.extra["runtime_threads"] == runtime_threads()
    with open(os.path.join(wd, "result.json")) as f:
        assert json.load(f)["onnxruntime_ms"] == res.onnxruntime_ms
    text = summary(res)
    line = next(ln for ln in text.splitlines() if ln.startswith("speed-up"))
    # the line states the measured latencies (printed with 3 significant digits or more)
    printed = re.search(r"^speed-up\s+tuned ([\d.]+) ms.*ONNX Runtime \(([\d.]+) ms", line)
    assert printed, line
    for shown, value in zip(printed.groups(), (res.latency_ms, res.onnxruntime_ms)):
        digits = len(shown.partition(".")[2])   # within half the last printed digit
        assert abs(float(shown) - value) <= 0.5 * 10 ** -digits + 1e-9, line
    assert "x untuned TVM" in line
    assert "ONNX Runtime" in line and f"{runtime_threads()} thread" in line
    assert "inf" not in text.split()


def test_resumed_run_says_so_and_measures_nothing_again(tuned):
    from dcoc.api.cpu import tune_metaschedule as tune_model

    path, wd, first, _ = tuned
    lines: list = []
    res = tune_model(path, "llvm", trials=4, tuner="random", seed=0, work_dir=wd,
                     progress=lines.append, measure=False, baseline=False, onnxruntime=False)
    assert any(ln.startswith("dcoc: resuming: 4 recorded trials") for ln in lines), lines
    assert res.extra["new_trials"] == 0 and res.trials == 4
    assert res.history[: len(first.history)] == first.history  # the curve continues


def test_time_budget_stops_the_search_and_keeps_its_records(tuned, tmp_path):
    from dcoc.api.cpu import tune_metaschedule as tune_model

    path = tuned[0]
    lines: list = []
    res = tune_model(path, "llvm", trials=64, tuner="random", seed=0, work_dir=str(tmp_path),
                     progress=lines.append, time_budget=1e-3, measure=False, baseline=False)
    assert res.extra["stopped_on_time"] and res.extra["new_trials"] < 64
    assert any("time budget of 0.001 s spent" in ln for ln in lines)
    with pytest.raises(DcocError, match="time_budget must be > 0"):
        tune_model(path, "llvm", trials=4, work_dir=str(tmp_path / "x"), time_budget=0)


def test_under_a_time_budget_the_first_round_is_one_trial_per_task(tuned, tmp_path):
    """trials=12 on 3 tasks makes batches of 2; with a time budget the first round runs
    first with one-trial batches, then the rest by gradient: still exactly 12 trials."""
    from dcoc.api.cpu import tune_metaschedule as tune_model

    res = tune_model(tuned[0], "llvm", trials=12, tuner="random", seed=0, work_dir=str(tmp_path),
                     progress=False, time_budget=600, measure=False, baseline=False)
    assert not res.extra["stopped_on_time"]
    assert res.trials == 12 and all(row["trials"] >= 1 for row in res.layers)


def test_replay_trace_runs_under_the_same_scheduler_and_names_itself(tuned, tmp_path):
    from dcoc.api.cpu import tune_metaschedule as tune_model

    res = tune_model(tuned[0], "llvm", trials=3, tuner="replay-trace", seed=0,
                     work_dir=str(tmp_path), progress=False, measure=False, baseline=False)
    assert res.trials == 3 and all(row["trials"] == 1 for row in res.layers)
    assert res.method.startswith("MetaSchedule ReplayTrace")


def test_metaschedule_tuners_on_the_cli_and_their_limits():
    from dcoc.tuners import check, describe

    check("evolutionary", accelerator=False)
    check("replay-trace", accelerator=False)
    with pytest.raises(DcocError, match="MetaSchedule's own search"):
        check("evolutionary", accelerator=True)
    with pytest.raises(DcocError, match="takes no settings"):
        check("evolutionary:population=8", accelerator=False)
    with pytest.raises(DcocError, match="unknown tuner"):
        check("evolution", accelerator=False)
    assert "EvolutionarySearch" in describe("evolutionary")


def test_per_task_plots_name_the_tuner_that_ran(tmp_path):
    from dcoc.results.plots import _ms_tuner

    assert _ms_tuner(str(tmp_path), {"tuner": "surrogate", "seed": 3}) == ("surrogate", 3)
    assert _ms_tuner(str(tmp_path), None) == ("metaschedule", None)


def test_trial_axis_has_whole_numbers(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    from dcoc.results import plots

    figs = []
    monkeypatch.setattr(plt, "close", figs.append)
    for pts in ([(1, 15.4)], [(1, 3.0), (2, 2.5), (3, 2.5)]):
        plots.plot_curves({"surrogate s0": pts}, str(tmp_path / "p.png"), "t", ylabel="ms")
        ticks = figs[-1].axes[0].get_xticks()
        assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks), ticks
