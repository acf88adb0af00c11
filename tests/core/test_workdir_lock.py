"""One run at a time per work dir / records file (an OS file lock), released on any exit.

Two real processes: a holder (a Python process that takes the lock the way ``dcoc tune``
does, then sleeps) and ``dcoc tune`` / ``dcoc tune-task`` on the same path.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

HOLDER = """
import sys, time
from dcoc.workdir import lock_records, lock_work_dir
kind, path, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
with (lock_work_dir(path) if kind == "dir" else lock_records(path)):
    print("locked", flush=True)
    time.sleep(secs)
"""


def _env():
    return dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _hold(kind: str, path, secs: float) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", HOLDER, kind, str(path), str(secs)], cwd=ROOT,
                         env=_env(), stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "locked"
    return p


def _dcoc(*argv, timeout=120):
    return subprocess.run([sys.executable, "-m", "dcoc.cli", *argv], cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=timeout)


def test_second_tune_is_refused_with_the_holders_pid(tmp_path):
    wd = tmp_path / "wd"
    holder = _hold("dir", wd, 60)
    try:
        r = _dcoc("tune", "resnet18", "--board", "pynq", "--trials", "5", "--work-dir", str(wd), "-q")
        assert r.returncode == 2, r
        assert r.stderr.count("\n") == 1, r.stderr
        assert f"PID {holder.pid}" in r.stderr and "--wait" in r.stderr, r.stderr
        assert not (wd / "records.jsonl").exists()
    finally:
        holder.kill()
        holder.wait(10)


def test_kill_9_releases_the_lock_and_wait_queues_up(tmp_path):
    rec = tmp_path / "c2.jsonl"
    holder = _hold("records", rec, 60)
    r = _dcoc("tune-task", "C2", "--trials", "4", "--records", str(rec), "-q")
    assert r.returncode == 2 and f"PID {holder.pid}" in r.stderr, r
    os.kill(holder.pid, signal.SIGKILL)  # the kernel drops the lock with the process
    holder.wait(10)
    r = _dcoc("tune-task", "C2", "--trials", "4", "--records", str(rec), "-q")
    assert r.returncode == 0, r.stderr
    n = len(rec.read_text().splitlines())
    assert n == 4
    # --wait: queued behind a holder; released once the run says it is waiting, then it runs
    holder = _hold("records", rec, 600)
    try:
        p = subprocess.Popen([sys.executable, "-m", "dcoc.cli", "tune-task", "C2", "--trials", "8",
                              "--records", str(rec), "--wait", "-q"], cwd=ROOT, env=_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = ""
        while "waiting" not in first:   # blocks until the run reports (pytest-timeout bounds it)
            line = p.stderr.readline()
            assert line, first
            first += line
        assert p.poll() is None       # still queued while the holder lives
    finally:
        holder.kill()
        holder.wait(10)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, first + err
    assert len(rec.read_text().splitlines()) == 8  # resumed: 4 more


def test_lock_is_reentrant_in_one_process(tmp_path):
    from dcoc.workdir import WorkDirBusy, held_here, lock_work_dir

    with lock_work_dir(str(tmp_path)):
        assert held_here(str(tmp_path))
        with lock_work_dir(str(tmp_path)):
            pass
        assert held_here(str(tmp_path))
        # another process is refused while this one holds it
        r = subprocess.run([sys.executable, "-c", HOLDER, "dir", str(tmp_path), "0"], cwd=ROOT,
                           env=_env(), capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and "in use by dcoc process PID" in r.stderr
    assert not held_here(str(tmp_path))
    assert issubclass(WorkDirBusy, Exception)


@pytest.mark.parametrize("flag", [["--workers", "100000"], ["--workers", "-1"],
                                  ["--early-stopping", "0"], ["--trials", "0"]])
def test_numeric_flags_are_range_checked(flag):
    r = _dcoc("tune-task", "C2", *flag, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r
