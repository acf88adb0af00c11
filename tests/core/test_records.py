import json
import os
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
    db = Records.load(p)  # a corrupt line in the middle: skipped and reported
    assert len(db) == 2 and db.skipped == [(3, "not a JSON record")]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("garbage\nmore garbage\n")  # nothing but bad lines: not a records file
    with pytest.raises(RecordsError, match=r"bad.jsonl:1: not a JSON record"):
        Records.load(bad)


def test_complete_last_line_without_newline_is_kept(tmp_path):
    p = tmp_path / "r.jsonl"
    Records(p).append([{"task": "t", "hw": "h", "knobs": {}, "valid": True, "cost": 1.0, "trial": 0}])
    with open(p, "a") as f:
        f.write('{"task": "t", "hw": "h", "knobs": {}, "valid": true, "cost": 0.5, "trial": 1}')
    assert [r["trial"] for r in Records.load(p)] == [0, 1]  # counted ...
    Records(p).append([{"task": "t", "hw": "h", "knobs": {}, "valid": True, "cost": 0.7, "trial": 2}])
    assert [r["trial"] for r in Records.load(p)] == [0, 1, 2]  # ... and never cut away


def test_forged_and_foreign_lines_are_skipped_never_best(tmp_path, capsys):
    from dcoc.targets.vta import HWConfig, default_knobs
    from dcoc.targets.vta.catalogue import resnet18_layer
    from dcoc.targets.vta.spaces import vta_task

    hw = HWConfig.preset("pynq")
    task = vta_task(resnet18_layer("C2"), hw)
    row = {"task": task.workload_key, "task_name": task.name, "target": "vta", "hw": hw.name,
           "knobs": default_knobs(resnet18_layer("C2"), hw), "valid": True, "error_no": 0,
           "trial": 0}
    p = tmp_path / "r.jsonl"
    lines = [dict(row, cost=9e-3), dict(row, cost=1e-12, trial=1),  # forged: 1e-12 s
             dict(row, cost=-1.0, trial=2), dict(row, cost=0, trial=3)]
    p.write_text("".join(json.dumps(r) + "\n" for r in lines)
                 + "[" * 100000 + "]" * 100000 + "\n"  # nested too deeply for json
                 + '{"task": "t", "hw": "h", "knobs": {}, "valid": true, "cost": "NaN"}\n')
    db = Records.load(p)
    assert [r["trial"] for r in db] == [0]
    assert [n for n, _ in db.skipped] == [2, 3, 4, 5, 6]
    assert "below the compute bound" in db.skipped[0][1] and "nested" in db.skipped[3][1]
    assert db.best(task.workload_key, hw=hw.name)["cost"] == 9e-3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "5 line(s) skipped" in err


def test_disk_full_keeps_the_records_intact(tmp_path, monkeypatch):
    import errno

    p = tmp_path / "r.jsonl"
    db = Records(p)
    db.append([{"task": "t", "hw": "h", "knobs": {}, "valid": True, "cost": 1.0}])
    before = p.read_bytes()
    ino = os.stat(p).st_ino
    real_write = os.write

    def full_write(fd, data):  # half a batch reaches the file, then the disk is full
        if os.fstat(fd).st_ino != ino:
            return real_write(fd, data)
        if len(data) > 1:
            return real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full_write)
    with pytest.raises(RecordsError, match="No space left on device.*intact"):
        db.append([{"task": "t", "hw": "h", "knobs": {}, "valid": True, "cost": c} for c in (2.0, 3.0)])
    monkeypatch.undo()
    assert p.read_bytes() == before
    assert len(db) == 1 and len(Records.load(p)) == 1

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
