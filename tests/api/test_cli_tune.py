"""The ``dcoc tune`` / ``tune-task`` / ``plot`` / ``records`` / ``simulate`` commands as a
user runs them: fresh processes, exit codes, one-line errors, real signals.

Resume is tested by killing real processes (SIGKILL once records are on disk; SIGINT to
the whole process group, as Ctrl-C in a terminal does) and rerunning the same command.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import signal

import pytest
from api_util import (
    RESULT_KEYS,
    assert_history,
    count_lines,
    default_latency_ms,
    duplicates,
    hw_fields,
    model_latency_ms,
    read_records,
    run_cli,
    shared_run,
    start_and_signal,
    vta_layers,
)

import dcoc
from dcoc.cli import build_parser
from dcoc.targets.vta import HWConfig, get_board

PNG = b"\x89PNG\r\n\x1a\n"


def _subparser(name):
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return sub.choices[name]


def _is_png(path) -> bool:
    with open(path, "rb") as f:
        return f.read(8) == PNG


def _uninterrupted(tmp_path_factory, tuner, trials, seed=0):
    key = f"resnet18_{tuner}_s{seed}_t{trials}_"
    return shared_run(tmp_path_factory, key, lambda wd: dcoc.tune(
        "resnet18", target="vta", trials=trials, tuner=tuner, seed=seed, work_dir=wd, n_workers=0))


# ================================================================================ help
@pytest.mark.parametrize("command", ["tune", "tune-task"])
def test_help_explains_every_option(command, capsys):
    p = _subparser(command)
    with pytest.raises(SystemExit) as ei:
        p.parse_args(["--help"])
    assert ei.value.code == 0
    text = capsys.readouterr().out
    for action in p._actions:
        if action.dest == "help" or action.help == argparse.SUPPRESS:  # a hidden deprecated alias
            continue
        assert action.help and len(action.help.split()) >= 2, f"{action.option_strings or action.dest} has no help"
        for opt in action.option_strings:
            assert opt in text
        for choice in action.choices or ():
            assert str(choice) in text
    assert "examples:" in text


def test_tune_help_lists_the_options_and_every_tuner_with_what_it_runs():
    from dcoc.tuners import DESCRIPTIONS

    r = run_cli("tune", "--help")
    assert r.returncode == 0
    for opt in ("--target", "--board", "--trials", "--tuner", "--seed", "--work-dir",
                "--json", "--hardware"):
        assert opt in r.stdout
    text = " ".join(r.stdout.split())
    for tuner, what in DESCRIPTIONS.items():
        assert f"{tuner} {' '.join(what.split())}" in text, tuner
    assert "(default: surrogate, on every target" in text


# ========================================================================== bad input
BAD = {
    # name: (args, fragment of the one error line, from argparse?)
    "unknown_tuner": (["tune", "resnet18", "--tuner", "autotvm"], "unknown tuner 'autotvm'", False),
    "unknown_setting": (["tune", "resnet18", "--tuner", "dcoc:agents=two"], "unknown DCOC setting 'agents'", False),
    "trials_0": (["tune", "resnet18", "--trials", "0"], "argument --trials: 0 is out of range", False),
    "ms_tuner_on_vta": (["tune", "resnet18", "--tuner", "evolutionary"],
                        "tuner 'evolutionary' is MetaSchedule's own search", False),
    "time_budget_on_vta": (["tune", "resnet18", "--time-budget", "60"],
                           "--time-budget bounds MetaSchedule tuning", False),
    "time_budget_0": (["tune", "x", "--target", "llvm", "--time-budget", "0"],
                      "--time-budget must be > 0 seconds", False),
    "trials_text": (["tune", "resnet18", "--trials", "many"], "'many' is not an integer", True),
    "bad_board": (["tune", "resnet18", "--board", "de10"], "invalid choice: 'de10'", True),
    "missing_model": (["tune", "no/such/model.onnx", "--trials", "20"], "does not exist", False),
    "hw_too_big": (["tune", "resnet18", "--hardware", "1x32x32_i8w8a32_15_15_18_17"],
                   "does not fit board pynq", False),
    "hw_clock": (["tune", "resnet18", "--hardware", "zcu104", "--trials", "20"],
                 "clock 333 MHz > 100 MHz of pynq", False),
    "hw_garbage": (["tune", "resnet18", "--hardware", "big"], "cannot parse HW config 'big'", False),
    "too_few_trials": (["tune", "resnet18", "--trials", "5"], "trials must be >= 15, got 5", False),
    "bad_target": (["tune", "resnet18", "--target", "fpga", "--trials", "20"], "unknown target 'fpga'", False),
    "task_workload": (["tune-task", "C99", "--trials", "5"], "bad workload 'C99'", False),
    "task_tuner": (["tune-task", "C2", "--tuner", "autotvm"], "unknown tuner 'autotvm'", False),
    "task_trials": (["tune-task", "C2", "--trials", "0"], "argument --trials: 0 is out of range", False),
    "plot_missing": (["plot", "no/such/dir"], "no such run directory or records file", False),
    "records_missing": (["records", "no/such.jsonl"], "records file not found", False),
}


def _main(argv, capfd):
    """``dcoc ARGV`` in this process: (exit code, stdout, stderr)."""
    from dcoc.cli import main

    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse
        rc = exc.code
    out, err = capfd.readouterr()
    return rc, out, err


def _check_one_line_error(rc, out, err, fragment, from_argparse):
    assert rc == 2, err
    assert "Traceback" not in err and out == ""
    errors = [ln for ln in err.splitlines() if "error:" in ln]
    assert len(errors) == 1 and fragment in errors[0], err
    if not from_argparse:  # argparse prints its usage first; ours is the only line
        assert err.splitlines() == errors
        assert errors[0].startswith("dcoc: error: ")


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_and_exit_2(tmp_path, capfd, case):
    args, fragment, from_argparse = BAD[case]
    wd = tmp_path / "wd"
    extra = ["--work-dir", str(wd), "--quiet"] if args[0] == "tune" else []
    _check_one_line_error(*_main([*args, *extra], capfd), fragment, from_argparse)
    assert not wd.exists(), "a refused run must not leave a work dir behind"


@pytest.mark.parametrize("case", ["unknown_tuner", "missing_model", "hw_too_big", "task_trials"])
def test_bad_input_in_a_real_process(tmp_path, case):
    args, fragment, from_argparse = BAD[case]
    extra = ["--work-dir", str(tmp_path / "wd")] if args[0] == "tune" else []  # progress bar on
    r = run_cli(*args, *extra, timeout=120)
    _check_one_line_error(r.returncode, r.stdout, r.stderr, fragment, from_argparse)


def test_model_without_vta_layers_is_one_line(tmp_path, no_vta_model):
    r = run_cli("tune", no_vta_model, "--trials", "10", "--work-dir", str(tmp_path / "wd"), "--quiet")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.splitlines() == [r.stderr.strip()]
    assert "has no layer VTA can run" in r.stderr and "depthwise_conv2d_16x16_8x8_k3s1" in r.stderr


# ====================================================================== a full command
def test_tune_json_table_plot_records(tmp_path):
    wd, out, plots = tmp_path / "run", tmp_path / "out.json", tmp_path / "plots"
    r = run_cli("tune", "resnet18", "--target", "vta", "--board", "pynq", "--trials", "30",
                "--tuner", "random", "--seed", "2", "--work-dir", str(wd), "--json", str(out),
                "--workers", "0")
    assert r.returncode == 0, r.stderr
    assert "30/30" in r.stderr  # the live progress bar reached the budget
    with open(out) as f:
        js = json.load(f)
    with open(wd / "result.json") as f:
        assert json.load(f) == js
    assert RESULT_KEYS <= set(js)
    hw = HWConfig(**{k: v for k, v in js["hardware"].items() if k != "name"})
    assert set(js["hardware"]) == set(hw_fields(hw)) | {"name"} and js["hardware"]["name"] == hw.name
    assert get_board("pynq").fits(hw)
    assert (js["trials"], js["tuner"], js["seed"]) == (30, "random", 2)
    assert js["latency_ms"] == pytest.approx(model_latency_ms("resnet18", hw, js["schedules"]), rel=1e-9)
    assert js["throughput"] == pytest.approx(1000 / js["latency_ms"], rel=1e-9)
    assert js["baseline_latency_ms"] == pytest.approx(
        default_latency_ms("resnet18", HWConfig.preset("pynq")), rel=1e-9)
    assert_history([tuple(p) for p in js["history"]], 30, js["latency_ms"])
    # the per-layer table: every VTA layer with its count, every CPU layer marked cpu
    rows = {ln.split()[0]: ln.split() for ln in r.stdout.splitlines() if ln.strip()}
    cpu_at = r.stdout.index("on the CPU")
    for name, _, count, _ in vta_layers("resnet18"):  # layer, kind, count, cycles, ...
        assert rows[name][2] == str(count) and r.stdout.index(name) < cpu_at
    for name in ("conv2d_224x224_3x64_k7s2", "max_pool2d", "mean"):
        assert name in rows and r.stdout.index(name) > cpu_at
    assert f"accelerator {js['latency_ms']:.3f} ms" in r.stdout
    assert f"result written to {out}" in r.stdout
    assert _is_png(wd / "curve.png")
    # dcoc plot DIR
    p = run_cli("plot", str(wd), "--out", str(plots))
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == [str(plots / "curve.png")] and _is_png(plots / "curve.png")
    # dcoc records FILE: the best record per (task, hardware)
    recs = read_records(wd / "records.jsonl")
    q = run_cli("records", str(wd / "records.jsonl"))
    assert q.returncode == 0, q.stderr
    best: dict = {}
    for x in recs:
        k = (x["task"], x["hw"])
        if x["valid"] and (k not in best or x["cost"] < best[k]):
            best[k] = x["cost"]
    lines = q.stdout.splitlines()
    for (task, hwn), cost in best.items():
        assert any(ln.startswith(task) and hwn in ln and f"{cost * 1e3:.4f}" in ln for ln in lines), task
    n_valid = sum(x["valid"] for x in recs)
    assert lines[-1] == f"{len(recs)} records ({n_valid} valid), {len({x['hw'] for x in recs})} hardware configs"
    assert len(lines) == 2 + len(best) + 1


# ============================================================================= resume
def _resume_cmd(wd, tuner, trials, workers="0"):
    return ["tune", "resnet18", "--trials", str(trials), "--tuner", tuner, "--seed", "0",
            "--work-dir", str(wd), "--json", str(wd / "out.json"), "--workers", workers, "--quiet"]


def _check_resumed(wd, full, trials):
    with open(wd / "out.json") as f:
        js = json.load(f)
    assert js["history"] == [[t, v] for t, v in full.history]
    assert js["hardware"]["name"] == full.hardware.name and js["schedules"] == full.schedules
    assert js["latency_ms"] == full.latency_ms and js["trials"] == trials
    rows = read_records(wd / "records.jsonl")
    assert duplicates(rows) == []
    assert sorted(x["trial"] for x in rows) == list(range(trials))
    ref = read_records(os.path.join(full.work_dir, "records.jsonl"))
    key = lambda x: (x["trial"], x["task"], x["hw"], json.dumps(x["knobs"], sort_keys=True), x["cost"])  # noqa: E731
    assert sorted(map(key, rows)) == sorted(map(key, ref))


@pytest.mark.parametrize("tuner,trials", [
    ("xgb", 200),
    pytest.param("dcoc", 60, marks=[pytest.mark.slow]),
])
def test_sigkill_then_rerun_resumes(tmp_path, tmp_path_factory, tuner, trials):
    wd = tmp_path / "run"
    (rc, _, err), at = start_and_signal(_resume_cmd(wd, tuner, trials), wd / "records.jsonl", 12,
                                        signal.SIGKILL)
    assert at is not None, f"the run finished before it could be killed: {err}"
    assert rc == -signal.SIGKILL
    kept = count_lines(wd / "records.jsonl")
    assert 12 <= kept < trials
    r = run_cli(*_resume_cmd(wd, tuner, trials))
    assert r.returncode == 0, r.stderr[-2000:]
    with open(wd / "out.json") as f:
        assert json.load(f)["extra"]["replayed_trials"] == kept
    _check_resumed(wd, _uninterrupted(tmp_path_factory, tuner, trials), trials)


def test_ctrl_c_exits_130_keeps_records_and_resumes(tmp_path, tmp_path_factory):
    """SIGINT to the whole process group (main process and the simulator workers)."""
    wd = tmp_path / "run"
    (rc, out, err), at = start_and_signal(_resume_cmd(wd, "xgb", 200, workers="2"), wd / "records.jsonl",
                                          12, "group-SIGINT")
    assert at is not None, f"the run finished before it could be interrupted: {err}"
    assert rc == 130
    assert err.splitlines() == ["dcoc: interrupted (measured records are kept; rerun the same "
                                "command to resume)"]
    rows = read_records(wd / "records.jsonl")   # every kept line is a whole record
    assert len(rows) >= at and all(x["valid"] for x in rows)
    r = run_cli(*_resume_cmd(wd, "xgb", 200, workers="2"))
    assert r.returncode == 0, r.stderr[-2000:]
    _check_resumed(wd, _uninterrupted(tmp_path_factory, "xgb", 200), 200)


def test_ctrl_c_swallowed_by_a_finalizer_still_exits_130(monkeypatch, capsys):
    """A KeyboardInterrupt raised while a finalizer runs is swallowed by Python; the run then
    finishes, and the CLI must still report the interruption (exit 130)."""
    import argparse
    import gc

    import dcoc.cli as cli

    class Finalized:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGINT)   # the handler runs here: swallowed

    def run(args):
        Finalized()
        gc.collect()
        return 0

    def parser():
        p = argparse.ArgumentParser()
        p.set_defaults(_run=run)
        return p

    monkeypatch.setattr(cli, "build_parser", parser)
    # as in a terminal (pytest-xdist workers, or a background job, may have SIGINT ignored)
    saved = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        assert cli.main([]) == 130
        assert "dcoc: interrupted" in capsys.readouterr().err
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler   # restored
    finally:
        signal.signal(signal.SIGINT, saved)


# ========================================================================== tune-task
def test_tune_task_command_and_resume(tmp_path):
    from dcoc.targets.vta import simulate
    from dcoc.targets.vta.catalogue import resnet18_layer

    rec = tmp_path / "c2.jsonl"
    args = ["tune-task", "C2", "--tuner", "xgb", "--trials", "30", "--records", str(rec)]
    r = run_cli(*args)
    assert r.returncode == 0, r.stderr
    assert "30/30" in r.stderr  # progress bar
    lines = r.stdout.splitlines()
    assert lines[0] == "conv2d_56x56_64x64_k3s1 on 1x16x16_i8w8a32_15_15_18_17, tuner xgb, seed 0: 30 trials"
    rows = read_records(rec)
    assert len(rows) == 30 and sorted(x["trial"] for x in rows) == list(range(30))
    best = min(rows, key=lambda x: x["cost"] if x["valid"] else math.inf)
    assert any(ln.startswith(f"best {best['cost'] * 1e3:.4f} ms") for ln in lines)
    for k, v in best["knobs"].items():  # the knob table
        assert any(ln.split() == [k, str(v)] for ln in lines), k
    assert simulate(resnet18_layer("C2"), HWConfig.preset("pynq"), best["knobs"]).seconds == best["cost"]
    # rerun: nothing new is measured, same answer
    r2 = run_cli(*args, "--quiet")
    assert r2.returncode == 0 and r2.stdout == r.stdout
    assert read_records(rec) == rows
    # a larger budget continues from trial 30
    r3 = run_cli(*args[:-4], "--trials", "40", "--records", str(rec), "--quiet")
    assert r3.returncode == 0, r3.stderr
    rows3 = read_records(rec)
    assert rows3[:30] == rows and sorted(x["trial"] for x in rows3) == list(range(40))
    assert duplicates(rows3) == []
    # dcoc plot RECORDS: one PNG per task
    p = run_cli("plot", str(rec), "--out", str(tmp_path / "plots"))
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == [str(tmp_path / "plots" / "task_conv2d_56x56_64x64_k3s1.png")]
    assert _is_png(tmp_path / "plots" / "task_conv2d_56x56_64x64_k3s1.png")


def test_simulate_command():
    r = run_cli("simulate", "resnet18")
    assert r.returncode == 0, r.stderr
    names = [ln.split()[0] for ln in r.stdout.splitlines() if ln.strip()]
    for name, _, _, _ in vta_layers("resnet18"):
        assert name in names
    assert "accelerator total:" in r.stdout and "conv2d_224x224_3x64_k7s2" in r.stdout


def test_tune_and_simulate_agree_on_the_baseline(tmp_path_factory):
    from dcoc.targets.vta import simulate_model
    from tvm_plugin.frontend import model_tasks

    res = _uninterrupted(tmp_path_factory, "xgb", 200)
    rep = simulate_model(model_tasks("resnet18", "vta"), HWConfig.preset("pynq"))
    assert res.baseline_latency_ms == pytest.approx(rep.total_seconds * 1e3, rel=1e-9)


# ============================================================================ models
#: resnet18 runs in test_tune_json_table_plot_records
DEFAULT_MODELS = {"mobilenetv2": "random", "transformer": "xgb", "light_squeezenet": "ga"}
SWEEP = ["resnet18", "mobilenetv2", "vgg16", "transformer", "light_bvlc_alexnet", "light_densenet121",
         "light_inception_v1", "light_inception_v2", "light_resnet50", "light_shufflenet",
         "light_squeezenet", "light_vgg19", "light_zfnet512"]


def _tune_model_cli(tmp_path, model, tuner):
    from tvm_plugin.frontend import model_tasks

    layers = vta_layers(model)
    trials = len(layers) + 12
    out = tmp_path / "out.json"
    r = run_cli("tune", model, "--trials", str(trials), "--tuner", tuner, "--work-dir", str(tmp_path / "wd"),
                "--json", str(out), "--workers", "0", "--quiet", timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    with open(out) as f:
        js = json.load(f)
    hw = HWConfig(**{k: v for k, v in js["hardware"].items() if k != "name"})
    assert js["latency_ms"] == pytest.approx(model_latency_ms(model, hw, js["schedules"]), rel=1e-9)
    assert js["trials"] == trials and js["latency_ms"] <= js["baseline_latency_ms"] * (1 + 1e-12)
    # every task is reported, on VTA or on the CPU
    tasks = model_tasks(model, "vta")
    cpu_at = r.stdout.index("on the CPU") if "on the CPU" in r.stdout else len(r.stdout)
    first = {}
    for ln in r.stdout.splitlines():
        if ln.strip():
            first.setdefault(ln.split()[0], r.stdout.index(ln))
    for t in tasks:  # VTA layers in the layer table, the rest in the CPU table after it
        assert t.name in first and (first[t.name] < cpu_at) == (t.device == "vta"), t.name
    for t in tasks.cpu_ops:
        assert first[t.name] > cpu_at, t.name
    assert {c["layer"] for c in js["cpu_layers"]} == \
        {t.name for t in tasks if t.device == "cpu"} | {t.name for t in tasks.cpu_ops}
    return js


@pytest.mark.parametrize("model", sorted(DEFAULT_MODELS))
def test_tune_models(tmp_path, model):
    js = _tune_model_cli(tmp_path, model, DEFAULT_MODELS[model])
    if model == "mobilenetv2":  # the depthwise layers run on VTA
        assert not any(c["layer"].startswith("depthwise_conv2d") for c in js["cpu_layers"])


@pytest.mark.slow
@pytest.mark.parametrize("model", SWEEP)
@pytest.mark.parametrize("tuner", ["dcoc", "xgb"])
def test_tune_models_sweep(tmp_path, model, tuner):
    _tune_model_cli(tmp_path, model, tuner)
