"""``dcoc.tune_task``: one VTA layer's schedule with each tuner, records and resume.

Costs are recomputed with :func:`dcoc.targets.vta.simulate`; the exhaustive optimum of a small
space is enumerated here, not taken from the library's tables.
"""
from __future__ import annotations

import math
import os

import pytest
from api_util import TUNERS, duplicates, read_records, truncate_records

import dcoc
from dcoc.errors import ConfigError, DcocError
from dcoc.results.result import TaskResult
from dcoc.search.measure import Measurer
from dcoc.targets.vta import HWConfig, VTASimMeasurer, simulate
from dcoc.targets.vta.catalogue import resnet18_layer
from dcoc.targets.vta.spaces import sw_space, workload_key
from dcoc.targets.vta.target import parse_workload

PYNQ = HWConfig.preset("pynq")
C11 = resnet18_layer("C11")           # 7x7, 512 -> 512, 3x3: 576 schedules on pynq
TRIALS = 30


class CountingMeasurer(Measurer):
    """In-process simulator that counts what it is asked to measure."""

    def __init__(self):
        self.inner = VTASimMeasurer(n_workers=0)
        self.n_parallel = 1
        self.measured: list = []

    def measure(self, task, configs):
        self.measured += [dict(c) for c in configs]
        return self.inner.measure(task, configs)


def _sim(wl, hw, knobs) -> float:
    r = simulate(wl, hw, knobs)
    return r.seconds if r.valid else math.inf


def _costs(res: TaskResult):
    return [c for _, c, _ in res.history]


def check_task_result(r: TaskResult, wl, hw, tuner, trials, seed, records=None):
    assert isinstance(r, TaskResult)
    assert (r.tuner, r.seed, r.trials, r.hw_name) == (tuner, seed, trials, hw.name)
    assert [t for t, _, _ in r.history] == list(range(trials))
    walls = [w for _, _, w in r.history]
    assert all(b >= a for a, b in zip(walls, walls[1:]))
    costs = _costs(r)
    assert r.best_cost == min(costs) and math.isfinite(r.best_cost)
    assert _sim(wl, hw, r.best_knobs) == r.best_cost
    assert r.trials_to_reach(r.best_cost) == costs.index(r.best_cost) + 1
    assert r.best_gops == pytest.approx(2 * wl.macs / r.best_cost / 1e9, rel=1e-9)
    if records is None:
        return
    rows = sorted(read_records(records), key=lambda x: x["trial"])
    assert [x["trial"] for x in rows] == list(range(trials))
    assert duplicates(rows) == []
    assert {(x["task"], x["hw"], x["tuner"], x["seed"], x["target"]) for x in rows} == \
        {(workload_key(wl), hw.name, tuner, seed, "vta")}
    for x, c in zip(rows, costs):
        # the record is the trial's real simulated cost
        assert (x["cost"] if x["valid"] else math.inf) == c == _sim(wl, hw, x["knobs"])


@pytest.mark.parametrize("tuner", TUNERS)
def test_tune_task_each_tuner(tmp_path, tuner):
    rec = str(tmp_path / "c11.jsonl")
    r = dcoc.tune_task(C11, hw="pynq", tuner=tuner, trials=TRIALS, seed=0, records=rec, n_workers=0)
    check_task_result(r, C11, PYNQ, tuner, TRIALS, 0, rec)
    assert r.task_name == "conv2d_7x7_512x512_k3s1"
    js = r.to_json()
    assert js["best_knobs"] == r.best_knobs and js["trials"] == TRIALS and len(js["history"]) == TRIALS


@pytest.mark.parametrize("tuner", TUNERS)
def test_tune_task_resume(tmp_path, tuner):
    """Killed after 12 records (plus half a line): the rerun measures only the rest and
    ends exactly where an uninterrupted run ends."""
    full_rec = str(tmp_path / "full" / "records.jsonl")
    os.makedirs(os.path.dirname(full_rec))
    full = dcoc.tune_task(C11, tuner=tuner, trials=TRIALS, seed=3, records=full_rec, n_workers=0)
    truncate_records(tmp_path / "full", tmp_path / "cut", 12, partial='{"task": "vta:conv')
    rec = str(tmp_path / "cut" / "records.jsonl")
    m = CountingMeasurer()
    r = dcoc.tune_task(C11, tuner=tuner, trials=TRIALS, seed=3, records=rec, measurer=m)
    assert len(m.measured) == TRIALS - 12
    assert _costs(r) == _costs(full)
    assert (r.best_knobs, r.best_cost) == (full.best_knobs, full.best_cost)
    check_task_result(r, C11, PYNQ, tuner, TRIALS, 3, rec)
    strip = lambda rows: [{k: v for k, v in x.items() if k not in ("ts", "wall")} for x in rows]  # noqa: E731
    assert strip(read_records(rec)) == strip(read_records(full_rec))
    # a rerun of the finished run measures nothing; a bigger budget continues
    m = CountingMeasurer()
    again = dcoc.tune_task(C11, tuner=tuner, trials=TRIALS, seed=3, records=rec, measurer=m)
    assert m.measured == [] and _costs(again) == _costs(full)
    more = dcoc.tune_task(C11, tuner=tuner, trials=TRIALS + 6, seed=3, records=rec, n_workers=0)
    assert _costs(more)[:TRIALS] == _costs(full)
    check_task_result(more, C11, PYNQ, tuner, TRIALS + 6, 3, rec)


def test_tune_task_deterministic_and_seeded():
    a = dcoc.tune_task(C11, tuner="chameleon", trials=20, seed=5, n_workers=0)
    b = dcoc.tune_task(C11, tuner="chameleon", trials=20, seed=5, n_workers=0)
    c = dcoc.tune_task(C11, tuner="chameleon", trials=20, seed=6, n_workers=0)
    assert _costs(a) == _costs(b) and a.best_knobs == b.best_knobs
    assert _costs(a) != _costs(c)


@pytest.mark.parametrize("tuner", TUNERS)
def test_small_space_exhaustive_optimum(tuner):
    """A 40-schedule dense layer and a budget of 60: every tuner measures each schedule
    exactly once, stops when the space is exhausted, and so finds the optimum enumerated here."""
    wl = parse_workload("dense:1,256,128")
    space = list(sw_space(wl, PYNQ))
    assert len(space) == 40
    best = min(_sim(wl, PYNQ, k) for k in space)
    r = dcoc.tune_task(wl, tuner=tuner, trials=60, seed=0, n_workers=0)
    assert r.trials == len(space)
    assert r.best_cost == best


def test_tune_task_other_hardware_and_task_objects(tmp_path):
    hw = HWConfig.preset("pynq_4x8")
    r = dcoc.tune_task(resnet18_layer("C9"), hw="pynq_4x8", tuner="xgb", trials=20, n_workers=0)
    check_task_result(r, resnet18_layer("C9"), hw, "xgb", 20, 0)
    # a frontend Task (dense) and a dict config name
    from api_util import vta_layers

    from tvm_plugin.frontend import model_tasks

    task = next(t for t in model_tasks("resnet18", "vta") if t.kind == "dense")
    wl = next(w for n, w, _, _ in vta_layers("resnet18") if n == task.name)
    r = dcoc.tune_task(task, hw=hw.name, tuner="random", trials=12, n_workers=0)
    check_task_result(r, wl, hw, "random", 12, 0)


def test_tune_task_in_a_process_pool(tmp_path):
    a = dcoc.tune_task(C11, tuner="ga", trials=16, seed=1, n_workers=0)
    b = dcoc.tune_task(C11, tuner="ga", trials=16, seed=1, n_workers=2)
    assert _costs(a) == _costs(b)


@pytest.mark.parametrize("kw,exc,fragment", [
    (dict(tuner="autotvm"), DcocError, "unknown tuner 'autotvm'"),
    (dict(trials=0), DcocError, "trials must be in 1..1000000"),
    (dict(hw="pynq_16x16"), ConfigError, "cannot parse HW config 'pynq_16x16'"),
    (dict(hw="1x16x16_i8w8a32_15_15_18"), ConfigError, "cannot parse HW config"),
])
def test_tune_task_bad_arguments(kw, exc, fragment):
    args = dict(tuner="random", trials=10, n_workers=0)
    args.update(kw)
    with pytest.raises(exc) as ei:
        dcoc.tune_task(C11, **args)
    assert fragment in str(ei.value) and "\n" not in str(ei.value)
