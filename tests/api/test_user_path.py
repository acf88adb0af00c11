"""Regression tests of the user's path: every hang and traceback found by
fuzzing is a one-line error with exit 2 or a correct result; output conventions.

In-process runs go through :func:`dcoc.cli.main` (what ``dcoc`` runs); the ones that need
a real process (progress off a terminal, exit codes as a shell sees them) use
``api_util.run_cli``.
"""
from __future__ import annotations

import json
import os
import time

import pytest
from api_util import run_cli

from dcoc.cli import main

UNSCHEDULABLE = ["1x16x16_i8w8a32_15_15_11_17", "1x16x16_i8w8a32_8_8_8_8"]


def _one_line_error(err: str, *needles: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("dcoc: error: "), err
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def _json_out(capsys) -> dict:
    out = capsys.readouterr().out
    return json.loads(out)  # stdout holds the JSON and nothing else


# ------------------------------------------------------------------ hangs
@pytest.mark.timeout(300)
@pytest.mark.parametrize("hw", UNSCHEDULABLE)
def test_software_only_on_hardware_without_a_schedule_is_one_line(hw, tmp_path, capsys):
    t0 = time.monotonic()
    rc = main(["tune", "resnet18", "--hardware", hw, "--trials", "100", "--tuner", "ga",
               "--workers", "0", "-q", "--work-dir", str(tmp_path / "wd")])
    assert rc == 2
    line = _one_line_error(capsys.readouterr().err, "no valid schedule", hw)
    assert "raise --trials" not in line  # more trials cannot help
    assert time.monotonic() - t0 < 240


@pytest.mark.timeout(240)
@pytest.mark.parametrize("tuner", ["ga", "random", "grid", "xgb"])
def test_software_tuning_stops_when_a_layer_has_no_valid_schedule(tuner):
    """dcoc.codesign.SoftwareTuning: a layer without any valid schedule (its tuner
    exhausted, no best result) used to keep priority inf forever: 100% CPU, no end."""
    from dcoc import codesign as cd
    from dcoc.api.tune import _hw
    from dcoc.targets.vta import Conv2DWorkload, VTASimMeasurer

    hw = _hw(UNSCHEDULABLE[0], "pynq")
    layers = [cd.Layer("c3", Conv2DWorkload(1, 56, 56, 64, 64, (3, 3), (1, 1), (1, 1)), 1, "conv2d"),
              cd.Layer("c1", Conv2DWorkload(1, 56, 56, 64, 128, (1, 1), (2, 2), (0, 0)), 1, "conv2d")]
    s = cd.Session(layers, VTASimMeasurer(n_workers=0), 40, tuner, 0)
    cd.default_schedules(s, hw)
    st = cd.tune_software(s, hw, tuner, s.remaining, 0)
    assert (hw.name, 0) not in s.best       # the 3x3 layer has nothing valid on this hw
    assert (hw.name, 1) in s.best           # the 1x1 layer was tuned
    assert 0 in st.exhausted and s.best_hw is None


@pytest.mark.parametrize("cmd", [["tune", "resnet18"], ["tune-task", "C2"]])
def test_negative_workers_is_one_line(cmd, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:  # argparse's range check: one line, exit 2
        main([*cmd, "--workers", "-1", "--trials", "20", "-q"]
             + (["--work-dir", str(tmp_path / "wd")] if cmd[0] == "tune" else []))
    assert e.value.code == 2
    _one_line_error(capsys.readouterr().err, "--workers")


def test_negative_workers_in_the_api():
    import dcoc
    from dcoc.targets.vta import Conv2DWorkload

    with pytest.raises(dcoc.DcocError, match="n_workers"):
        dcoc.tune_task(Conv2DWorkload(1, 14, 14, 32, 32, (3, 3), (1, 1), (1, 1)),
                       tuner="random", trials=4, n_workers=-1)


# --------------------------------------------------------- bad files and paths
def test_work_dir_that_is_a_file(tmp_path, capsys):
    f = tmp_path / "afile"
    f.write_text("x")
    for wd in (f, f / "sub"):
        rc = main(["tune", "resnet18", "--trials", "15", "--tuner", "random", "--workers", "0",
                   "-q", "--work-dir", str(wd)])
        assert rc == 2
        _one_line_error(capsys.readouterr().err, "work dir")


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write to read-only directories")
def test_unwritable_work_dir(tmp_path, capsys):
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o500)
    try:
        rc = main(["tune", "resnet18", "--trials", "15", "--tuner", "random", "--workers", "0",
                   "-q", "--work-dir", str(d / "wd")])
    finally:
        d.chmod(0o700)
    assert rc == 2
    _one_line_error(capsys.readouterr().err, "not writable")


@pytest.mark.parametrize("cmd", [
    ["tune", "resnet18", "--trials", "15", "--tuner", "random", "--workers", "0", "-q"],
    ["tune-task", "C2", "--trials", "5", "-q"],
    ["models", "--zoo-only"],
    ["simulate", "resnet18"],
    ["tasks", "resnet18"],
])
def test_unwritable_json_path_is_refused_before_the_run(cmd, tmp_path, capsys):
    wd = tmp_path / "wd"
    extra = ["--work-dir", str(wd)] if cmd[0] == "tune" else []
    t0 = time.monotonic()
    afile = tmp_path / "afile"
    afile.write_text("x")
    rc = main([*cmd, *extra, "--json", str(afile / "dir" / "out.json")])  # under a file
    assert rc == 2
    _one_line_error(capsys.readouterr().err, "--json")
    assert not wd.exists()          # nothing ran
    assert time.monotonic() - t0 < 30
    rc = main([*cmd, *extra, "--json", str(tmp_path)])  # a directory
    assert rc == 2
    _one_line_error(capsys.readouterr().err, "is a directory")


def test_unwritable_cache_is_one_line(tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    env_before = os.environ.get("DCOC_CACHE")
    os.environ["DCOC_CACHE"] = str(f)
    try:
        r = run_cli("tasks", "resnet18")
    finally:
        if env_before is None:
            del os.environ["DCOC_CACHE"]
        else:
            os.environ["DCOC_CACHE"] = env_before
    assert r.returncode == 2
    _one_line_error(r.stderr, "cache directory")


BAD_LINES = {
    "null": b"null\n",
    "no_knobs": b'{"task": "vta:x", "hw": "h", "cost": 1.0, "valid": true}\n',
    "list": b"[1, 2]\n",
    "not_utf8": b"\xff\xfe\x00garbage\n",
    "valid_without_cost": b'{"task": "vta:x", "hw": "h", "knobs": {}, "valid": true}\n',
}


@pytest.mark.parametrize("kind", sorted(BAD_LINES))
def test_records_that_are_not_records(kind, tmp_path, capfd):
    """A bad line among records is skipped with one warning (never counted); a file with
    no record at all is refused with one line."""
    good = (b'{"task": "vta:x", "hw": "h", "knobs": {"a": 1}, "cost": 0.001, "valid": true, '
            b'"tuner": "random", "seed": 0, "trial": 0}\n')
    f = tmp_path / "r.jsonl"
    f.write_bytes(good + BAD_LINES[kind] + good)
    assert main(["records", str(f), "--json", "-"]) == 0
    out, err = capfd.readouterr()
    warn = [ln for ln in err.splitlines() if ln.strip()]
    assert len(warn) == 1 and warn[0].startswith("dcoc: warning: ") and "line 2" in warn[0], err
    assert "Traceback" not in err and '"vta:x"' in out
    only_bad = tmp_path / "bad.jsonl"
    only_bad.write_bytes(BAD_LINES[kind])
    assert main(["records", str(only_bad)]) == 2
    _one_line_error(capfd.readouterr().err, "bad.jsonl:1")
    # tune-task --records: the bad line is skipped, the run resumes from the good ones
    f2 = tmp_path / "c2.jsonl"
    f2.write_bytes(BAD_LINES[kind])
    assert main(["tune-task", "C2", "--trials", "3", "-q", "--records", str(f2)]) == 2
    _one_line_error(capfd.readouterr().err, "c2.jsonl:1")


def test_truncated_last_line_is_still_tolerated(tmp_path, capsys):
    f = tmp_path / "r.jsonl"
    f.write_bytes(b'{"task": "vta:x", "hw": "h", "knobs": {"a": 1}, "cost": 0.001, "valid": true}\n'
                  b'{"task": "vta:x", "hw"')
    assert main(["records", str(f), "--json", "-"]) == 0
    assert _json_out(capsys)["records"] == 1


def test_work_dir_belongs_to_one_model_and_target(tmp_path, capsys):
    wd = str(tmp_path / "wd")
    common = ["--trials", "15", "--tuner", "random", "--workers", "0", "-q", "--work-dir", wd]
    assert main(["tune", "resnet18", *common]) == 0
    capsys.readouterr()
    with open(os.path.join(wd, "result.json")) as f:
        before = f.read()
    n_records = sum(1 for _ in open(os.path.join(wd, "records.jsonl")))
    assert main(["tune", "mobilenetv2", *common[:-2], "--trials", "30", "--work-dir", wd]) == 2
    _one_line_error(capsys.readouterr().err, "belongs to model resnet18", "mobilenetv2")
    assert main(["tune", "resnet18", "--board", "ultra96", *common]) == 2
    _one_line_error(capsys.readouterr().err, "vta/pynq", "vta/ultra96")
    with open(os.path.join(wd, "result.json")) as f:
        assert f.read() == before                     # not overwritten
    assert sum(1 for _ in open(os.path.join(wd, "records.jsonl"))) == n_records
    assert main(["tune", "resnet18", *common]) == 0   # the same model resumes


def test_flush_cache_is_for_cpu_targets_and_reaches_the_llvm_tuner(tmp_path, capsys,
                                                                    monkeypatch):
    import dcoc

    wd = str(tmp_path / "wd")
    assert main(["tune", "resnet18", "--flush-cache", "--trials", "15", "--work-dir", wd]) == 2
    _one_line_error(capsys.readouterr().err, "--flush-cache", "VTA")
    assert not os.path.exists(os.path.join(wd, "records.jsonl"))  # refused before any work
    got = {}

    def fake_tune(model, **kw):
        got.update(kw)
        raise dcoc.DcocError("stop here")

    monkeypatch.setattr(dcoc, "tune", fake_tune)
    assert main(["tune", "resnet18", "--target", "llvm", "--flush-cache", "-q"]) == 2
    assert got.get("flush_cache") is True and got.get("runner") == "local"
    got.clear()
    assert main(["tune", "resnet18", "--target", "llvm", "-q"]) == 2
    assert "flush_cache" not in got  # warm (the default) unless asked


def test_corrupt_cached_zoo_model_is_rebuilt(tmp_path, monkeypatch):
    import hashlib

    import dcoc_models

    monkeypatch.setenv("DCOC_CACHE", str(tmp_path / "cache"))
    p = dcoc_models.get("resnet18")
    digest = hashlib.sha256(open(p, "rb").read()).hexdigest()
    with open(p, "r+b") as f:  # flip bytes in the middle: same size, wrong content
        f.seek(os.path.getsize(p) // 2)
        f.write(b"\x00\x01\x02\x03")
    os.utime(p, ns=(1, 1))
    dcoc_models._VERIFIED.clear()
    p2 = dcoc_models.get("resnet18")
    assert p2 == p and hashlib.sha256(open(p, "rb").read()).hexdigest() == digest
    os.remove(p + ".sha256")  # no recorded digest: not trusted either
    dcoc_models._VERIFIED.clear()
    assert dcoc_models.get("resnet18") == p and os.path.exists(p + ".sha256")


def test_xdg_cache_home(monkeypatch, tmp_path):
    from dcoc.paths import cache_root

    monkeypatch.delenv("DCOC_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root("models") == str(tmp_path / "xdg" / "dcoc" / "models")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # invalid per the spec: ignored
    assert cache_root() == os.path.join(os.path.expanduser("~"), ".cache", "dcoc")
    monkeypatch.setenv("DCOC_CACHE", str(tmp_path / "mine"))
    assert cache_root("models") == str(tmp_path / "mine" / "models")


# ------------------------------------------------------------ output conventions
def test_json_dash_on_every_command(tmp_path, capsys):
    wd = str(tmp_path / "wd")
    assert main(["models", "--zoo-only", "--json", "-"]) == 0
    assert [m["name"] for m in _json_out(capsys)][:1] == ["resnet18"]
    assert main(["tasks", "resnet18", "--json", "-"]) == 0
    assert _json_out(capsys)["target"]
    assert main(["simulate", "resnet18", "--json", "-"]) == 0
    assert _json_out(capsys)["board"] == "pynq"
    assert main(["tune", "resnet18", "--trials", "15", "--tuner", "random", "--workers", "0", "-q",
                 "--work-dir", wd, "--json", "-"]) == 0
    res = _json_out(capsys)
    assert res["trials"] == 15 and res["latency_ms"] > 0
    assert not os.path.exists("-")
    rec = str(tmp_path / "c2.jsonl")
    assert main(["tune-task", "C2", "--trials", "6", "--tuner", "random", "-q", "--records", rec,
                 "--json", "-"]) == 0
    assert _json_out(capsys)["trials"] == 6
    assert main(["records", os.path.join(wd, "records.jsonl"), "--json", "-"]) == 0
    assert _json_out(capsys)["records"] == 15
    assert main(["plot", wd, "--json", "-"]) == 0
    assert _json_out(capsys)["files"] == [os.path.join(wd, "curve.png")]
    # a PATH: the report on stdout, the JSON in the file
    out = tmp_path / "o.json"
    assert main(["records", rec, "--json", str(out)]) == 0
    assert "records" in capsys.readouterr().out and json.loads(out.read_text())["records"] == 6
    nested = tmp_path / "new" / "dir" / "o.json"  # missing directories are created
    assert main(["records", rec, "--json", str(nested)]) == 0
    assert json.loads(nested.read_text())["records"] == 6


def test_progress_off_a_terminal_is_plain_lines(tmp_path):
    r = run_cli("tune-task", "C2", "--trials", "60", "--tuner", "random",
                "--records", str(tmp_path / "r.jsonl"))
    assert r.returncode == 0, r.stderr
    assert "\r" not in r.stderr and "\x1b[" not in r.stderr   # no redraws in a log
    lines = [ln for ln in r.stderr.splitlines() if "trials" in ln]
    assert 5 <= len(lines) <= 12, r.stderr   # one line per tenth of the budget
    assert lines[-1].startswith("random: 60/60 trials")
    r = run_cli("tune-task", "C2", "--trials", "30", "--tuner", "random", "-q")
    assert r.returncode == 0 and r.stderr == ""


def test_baseline_label_per_board_and_plot(tmp_path):
    from dcoc.results.plots import baseline_label, plot_run_dir

    assert baseline_label({"target": "vta", "board": "pynq"}).startswith("pynq preset")
    assert baseline_label({"target": "vta", "board": "zcu104"}).startswith("zcu104 default")
    assert "untuned" in baseline_label({"target": "llvm -mcpu=x"})
    d = tmp_path / "run"
    d.mkdir()
    (d / "result.json").write_text(json.dumps({
        "model": "m", "target": "vta", "board": "ultra96", "tuner": "dcoc", "seed": 0,
        "history": [[0, 5.0], [9, 5.0]], "baseline_latency_ms": 5.0}))
    assert plot_run_dir(str(d)) == [str(d / "curve.png")]
