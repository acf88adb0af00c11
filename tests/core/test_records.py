import subprocess
import sys
import textwrap

import pytest

from dcoc.errors import RecordsError
from dcoc.search import FunctionMeasurer, Records
from dcoc.search.synthetic import synthetic_cost, synthetic_task
from dcoc.tuners import create


def test_append_load_queries(tmp_path):
    p = tmp_path / "r.jsonl"
    db = Records(p)
    task = synthetic_task()
    t = create("random", task, seed=1)
    t.tune(40, FunctionMeasurer(synthetic_cost), records=db)
    assert len(Records.load(p)) == 40
    rows = Records.load(p).rows
    assert {r["tuner"] for r in rows} == {"random"} and rows[0]["trial"] == 0 and rows[-1]["trial"] == 39
    best = Records.load(p).best(task.workload_key, "synthetic", None)
    assert best["cost"] == pytest.approx(t.best_cost)
    top = Records.load(p).topk(task.workload_key, k=3)
    assert [r["cost"] for r in top] == sorted(r["cost"] for r in top)
    assert Records.load(p).best(task.workload_key, hw="other-hw") is None  # hw never mixes


def test_truncated_tail_is_tolerated_and_repaired(tmp_path):
    p = tmp_path / "r.jsonl"
    db = Records(p)
    db.append([{"task": "t", "hw": "h", "knobs": {}, "valid": True, "cost": 1.0}])
    with open(p, "a") as f:
        f.write('{"task": "t", "hw": "h", "kno')  # crash mid-write
    assert len(Records.load(p)) == 1
    Records(p).append([{"task": "t", "hw": "h", "knobs": {}, "valid": True, "cost": 0.5}])
    assert [r["cost"] for r in Records.load(p)] == [1.0, 0.5]
    with open(p, "a") as f:
        f.write("garbage\n")
    with pytest.raises(RecordsError, match=r"r.jsonl:3: not a JSON record"):
        Records.load(p)


def test_merge(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    Records(a).append([{"task": "t", "hw": "h1", "knobs": {"x": 1}, "valid": True, "cost": 2.0}])
    Records(b).append([{"task": "t", "hw": "h2", "knobs": {"x": 1}, "valid": True, "cost": 1.0},
                       {"task": "t", "hw": "h1", "knobs": {"x": 1}, "valid": True, "cost": 2.0}])
    m = Records.merge([a, b], tmp_path / "m.jsonl")
    assert len(m) == 2 and len(Records.load(tmp_path / "m.jsonl")) == 2
    assert set(m.best_per_task()) == {("t", "h1"), ("t", "h2")}
    with pytest.raises(RecordsError):
        Records.merge([a], tmp_path / "m.jsonl")
    with pytest.raises(RecordsError, match="not found"):
        Records.load(tmp_path / "missing.jsonl")


def test_killed_run_resumes_without_remeasuring(tmp_path):
    """Kill a tuning process mid-run; the rerun replays the recorded trials and finishes."""
    p = tmp_path / "r.jsonl"
    script = textwrap.dedent(f"""
        import os, sys, time
        from dcoc.search import FunctionMeasurer, Records
        from dcoc.search.synthetic import synthetic_cost, synthetic_task
        from dcoc.tuners import create
        def slow_cost(task, cfg):
            time.sleep(0.02)
            return synthetic_cost(task, cfg)
        def killer(tuner, inputs, results):
            if tuner.trials >= 30:
                os.kill(os.getpid(), 9)
        t = create("ga", synthetic_task(), seed=5, pop_size=16)
        t.tune(60, FunctionMeasurer(slow_cost), records=Records({str(p)!r}), callbacks=[killer])
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert proc.returncode == -9
    measured_before = len(Records.load(p))
    assert 30 <= measured_before < 60

    calls = []

    def counting(task, cfg):
        calls.append(cfg)
        return synthetic_cost(task, cfg)

    t = create("ga", synthetic_task(), seed=5, pop_size=16)
    t.tune(60, FunctionMeasurer(counting), records=Records(p))
    assert t.trials == 60
    assert len(calls) == 60 - measured_before  # nothing recorded was measured again
    rows = Records.load(p).rows
    assert len(rows) == 60 and sorted(r["trial"] for r in rows) == list(range(60))

    # the resumed run followed exactly the trajectory of an uninterrupted run
    ref = create("ga", synthetic_task(), seed=5, pop_size=16)
    ref_db = Records(tmp_path / "ref.jsonl")
    ref.tune(60, FunctionMeasurer(synthetic_cost), records=ref_db)
    assert [r["knobs"] for r in ref_db.rows] == [r["knobs"] for r in sorted(rows, key=lambda r: r["trial"])]
