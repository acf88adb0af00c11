"""Files that are not what they claim, by kind, against every reader; locks by name.

Readers x kinds of file: each reader dcoc has (records, ``--knobs``, ``--schedules``,
``--inputs``, a model, a work dir's identity, an export directory's files, a warm
start's layers) is given a regular file (the control), a FIFO, a device, a directory, a
symbolic link to a device, a dangling link, a file over its size cap, text that is not
UTF-8 and valid JSON of the wrong schema.  Each bad one is a one-line
:class:`dcoc.errors.DcocError` within seconds (a FIFO must not block, ``/dev/zero`` must
not be read), naming the file.

Locks x names: a second run on the same records file through the same path, a symbolic
link or a hard link is refused with one line; ``dcoc export`` of a work dir a run holds
is refused naming the run's PID.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

pytestmark = pytest.mark.timeout(60)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _records_ok(d):
    from dcoc.targets.vta import HWConfig, default_knobs
    from dcoc.targets.vta.catalogue import resnet18_layer
    from dcoc.targets.vta.spaces import vta_task

    hw = HWConfig.preset("pynq")
    task = vta_task(resnet18_layer("C2"), hw)
    row = {"task": task.workload_key, "task_name": task.name, "target": "vta", "hw": hw.name,
           "knobs": default_knobs(resnet18_layer("C2"), hw), "valid": True, "cost": 0.01,
           "error_no": 0, "trial": 0}
    return json.dumps(row) + "\n"


# reader name -> (call(path), good content, content of the wrong schema)
def _readers():
    from dcoc.cli.cmd_simulate import _load_knobs
    from dcoc.codesign.prior import read_layers
    from dcoc.readfile import read_json
    from dcoc.results.export_check import check
    from dcoc.runtime.inputs import load_inputs, load_schedules
    from dcoc.search.records import Records
    from dcoc.targets import get
    from dcoc.workdir import claim_work_dir

    def export_check(p):
        d = os.path.dirname(p)  # the file under test is the export's export.json
        return check(d)

    def identity(p):
        return claim_work_dir(os.path.dirname(p), {"model": "m", "target": "vta"})

    return {
        "records": (Records.load, _records_ok, '{"task": 5}\n'),
        "--knobs": (_load_knobs, lambda d: '{"L": {"tile_h": 1}}', "[1, 2]"),
        "--schedules": (load_schedules, lambda d: '{"L": {"tile_h": 1}}', '{"schedules": 5}'),
        "--inputs": (lambda p: load_inputs(p), None, None),
        "layers.json": (lambda p: read_layers(p, get("vta")), lambda d: "[]", '{"a": 1}'),
        "dcoc_run.json": (identity, lambda d: '{"model": "m", "target": "vta"}', "[1]"),
        "export.json": (export_check, None, '{"target": "tpu"}'),
        "json": (lambda p: read_json(p, "a JSON file"), lambda d: "{}", "5"),
    }


FILE_NAMES = {"dcoc_run.json": "dcoc_run.json", "export.json": "export.json",
              "layers.json": "layers.json"}
KINDS = ["regular", "fifo", "device", "directory", "link to device", "dangling link",
         "loop link", "too large", "not utf-8", "wrong schema"]


def _make(kind: str, path: str, good: str | None, bad: str | None):
    if kind == "regular":
        with open(path, "w") as f:
            f.write(good)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        return "/dev/zero"
    elif kind == "directory":
        os.mkdir(path)
    elif kind == "link to device":
        os.symlink("/dev/zero", path)
    elif kind == "dangling link":
        os.symlink(path + ".nowhere", path)
    elif kind == "loop link":
        os.symlink(path + ".b", path)
        os.symlink(path, path + ".b")
    elif kind == "too large":
        with open(path, "wb") as f:
            f.truncate((4 << 30) + 1)  # sparse: over every cap
    elif kind == "not utf-8":
        with open(path, "wb") as f:
            f.write(b'{"a": "caf\xe9"}\n')
    elif kind == "wrong schema":
        with open(path, "w") as f:
            f.write(bad)
    return path


CASES = [(r, k) for r in ["records", "--knobs", "--schedules", "--inputs", "layers.json",
                          "dcoc_run.json", "export.json", "json"] for k in KINDS]


@pytest.mark.parametrize("reader,kind", CASES, ids=[f"{r}:{k}" for r, k in CASES])
def test_reader_refuses_what_is_not_its_file(reader, kind, tmp_path):
    from dcoc.errors import DcocError

    call, good, bad = _readers()[reader]
    if (kind == "regular" and good is None) or (kind == "wrong schema" and bad is None):
        pytest.skip("covered by the reader's own tests")
    if kind == "device" and reader in FILE_NAMES:
        pytest.skip("the file name is fixed: the link case covers it")
    path = _make(kind, str(tmp_path / FILE_NAMES.get(reader, "input.file")),
                 good and good(tmp_path), bad)
    t0 = time.monotonic()
    if kind == "regular":
        call(path)  # the control: a good file reads
        return
    with pytest.raises(DcocError) as exc:
        call(path)
    msg = str(exc.value)
    assert time.monotonic() - t0 < 10 and "\n" not in msg
    if kind in ("fifo", "device", "directory", "link to device"):
        assert ("not a regular file" in msg or "is a directory" in msg or "directory" in msg), msg
    elif kind == "dangling link":
        assert "dangling" in msg or "does not exist" in msg, msg
    elif kind == "loop link":
        assert "loop" in msg, msg
    elif kind == "too large":
        assert "limit" in msg and ("GiB" in msg or "MiB" in msg), msg
    elif kind == "not utf-8":
        assert "UTF-8" in msg or "npz" in msg, msg


def test_case_counts_by_kind():
    """Readers x kinds (printed with ``pytest -s``)."""
    print(f"\n{len(CASES)} reader cases: {len(_readers())} readers x {len(KINDS)} kinds")
    assert len(CASES) >= 70


# ------------------------------------------------------------------------ locks
def _hold(target: str, kind: str):
    """A child process holding ``lock_records(target)`` / ``lock_work_dir(target)``."""
    code = ("import sys, time\nfrom dcoc.workdir import lock_records, lock_work_dir\n"
            f"with {'lock_records' if kind == 'records' else 'lock_work_dir'}({target!r}):\n"
            "    print('held', flush=True)\n    time.sleep(60)\n")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


LOCK_NAMES = ["same path", "symbolic link", "hard link", "link to the directory"]


@pytest.mark.parametrize("name", LOCK_NAMES)
def test_a_records_file_in_use_is_refused_by_every_name(name, tmp_path):
    from dcoc.workdir import WorkDirBusy, lock_records

    real = tmp_path / "real.jsonl"
    real.write_text(_records_ok(tmp_path))
    other = {"same path": real, "symbolic link": tmp_path / "link.jsonl",
             "hard link": tmp_path / "hard.jsonl",
             "link to the directory": tmp_path / "dirlink" / "real.jsonl"}[name]
    if name == "symbolic link":
        os.symlink(real, other)
    elif name == "hard link":
        os.link(real, other)
    elif name == "link to the directory":
        os.symlink(tmp_path, tmp_path / "dirlink")
    p = _hold(str(real), "records")
    try:
        with pytest.raises(WorkDirBusy, match="in use by"):
            with lock_records(str(other)):
                pass
    finally:
        p.kill()
        p.wait()
    with lock_records(str(other)):  # free again once the holder is gone
        pass


def test_export_of_a_work_dir_a_run_holds_names_its_pid(tmp_path, capfd):
    from dcoc.cli import main

    wd = tmp_path / "wd"
    wd.mkdir()
    (wd / "result.json").write_text('{"target": "vta"}')
    link = tmp_path / "wdlink"
    os.symlink(wd, link)
    p = _hold(str(wd), "workdir")
    try:
        rc = main(["export", str(link), str(tmp_path / "out")])
        err = capfd.readouterr().err
        assert rc == 2 and f"PID {p.pid}" in err and "--wait" in err, err
    finally:
        p.kill()
        p.wait()


def test_trials_caps_agree():
    from dcoc.api.checks import MAX_TRIALS
    from dcoc.cli.options import MAX_TRIALS as CLI_MAX

    assert MAX_TRIALS == CLI_MAX


@pytest.fixture
def npz(tmp_path):
    p = tmp_path / "x.npz"
    np.savez(p, x=np.zeros((1, 2), "float32"))
    return str(p)


def test_inputs_control_reads(npz):
    from dcoc.runtime.inputs import load_inputs

    assert load_inputs(npz)["x"].shape == (1, 2)


@pytest.mark.parametrize("name", ["result.json", "records.jsonl", "layers.json"])
def test_a_run_refuses_a_work_dir_whose_files_are_fifos(name, tmp_path):
    """A run writes its result at the end: a FIFO there would block it then."""
    from dcoc.errors import DcocError
    from dcoc.workdir import claim_work_dir

    os.mkfifo(tmp_path / name)
    with pytest.raises(DcocError, match=f"{name} .*FIFO"):
        claim_work_dir(str(tmp_path), {"model": "m", "target": "vta"})


def test_writing_to_a_fifo_nobody_reads_is_one_line(tmp_path):
    from dcoc.errors import DcocError
    from dcoc.paths import write_text_atomic

    os.mkfifo(tmp_path / "out.json")
    with pytest.raises(DcocError, match="no process reads"):
        write_text_atomic(str(tmp_path / "out.json"), "{}", "--json file")
