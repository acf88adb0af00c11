"""End to end on every accelerator target: the Python API and the CLI, every tuner.

Also the regression of the software-only spin (a layer with no valid schedule on the
given hardware): a one-line error naming the layer, exit status 2."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
from api_util import small_cnn

import dcoc
from dcoc.targets import get
from dcoc.tuners import names

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def small_model(tmp_path_factory) -> str:
    return small_cnn(str(tmp_path_factory.mktemp("onnx") / "small.onnx"))


@pytest.mark.parametrize("tuner", names())
def test_systolic_codesign_with_every_tuner(small_model, tmp_path, tuner):
    res = dcoc.tune(small_model, target="systolic", board="kv260", trials=60, tuner=tuner, seed=0,
                    work_dir=str(tmp_path / tuner), n_workers=0)
    t = get("systolic")
    assert res.target == "systolic" and res.board == "kv260" and res.trials == 60
    layers = t.layers(_tasks(small_model))[0]
    assert len(res.layers) == len(layers) >= 2 and all(r["device"] == "systolic" for r in res.layers)
    assert not t.violations(res.hardware, "kv260")
    # the reported latency is the sum of the layers' re-measured schedules
    m = t.measurer(n_workers=0)
    tot = 0.0
    for row, layer in zip(res.layers, layers):
        r = m.measure(t.task(layer, res.hardware), [row["knobs"]])[0]
        assert r.valid and r.cost == pytest.approx(row["ms"] / 1e3)
        tot += layer.count * r.cost
    assert res.latency_ms == pytest.approx(tot * 1e3)
    assert math.isfinite(res.baseline_latency_ms) and res.latency_ms <= res.baseline_latency_ms + 1e-9
    saved = json.load(open(os.path.join(res.work_dir, "result.json")))
    assert saved["hardware"]["name"] == res.hardware.name


def _tasks(model):
    from tvm_plugin.frontend import model_tasks

    return model_tasks(model, "vta", None)


def test_systolic_tune_task_api(tmp_path):
    r = dcoc.tune_task("C5", target="systolic", hw="ws32x16_i16w15o16", board="arty-a7", tuner="dcoc",
                       trials=30, seed=0, records=str(tmp_path / "r.jsonl"))
    assert r.hw_name == "ws32x16_i16w15o16_142MHz_bus8" and r.trials == 30 and r.best_knobs
    again = dcoc.tune_task("C5", target="systolic", hw="ws32x16_i16w15o16", board="arty-a7", tuner="dcoc",
                           trials=30, seed=0, records=str(tmp_path / "r.jsonl"))
    assert again.best_cost == r.best_cost
    assert sum(1 for _ in open(tmp_path / "r.jsonl")) == 30   # the rerun was replayed


def _cli(*args, timeout=600):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "dcoc.cli", *args], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=ROOT)


def test_systolic_cli(small_model, tmp_path):
    p = _cli("tune", small_model, "--target", "systolic", "--trials", "40", "--tuner", "sweep",
             "--work-dir", str(tmp_path / "w"), "--quiet", "--json", str(tmp_path / "o.json"))
    assert p.returncode == 0, p.stderr
    assert "weight-stationary array" in p.stdout and "arty-a7" in p.stdout
    assert json.load(open(tmp_path / "o.json"))["target"] == "systolic"
    bad = _cli("tune", small_model, "--target", "systolic", "--board", "pynq", "--trials", "40")
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "pynq" in bad.stderr


@pytest.mark.parametrize("tuner", ["ga", "dcoc"])
def test_software_only_without_a_valid_schedule_is_a_one_line_error(tmp_path, tuner):
    """Regression: this command used to spin forever at 100% CPU."""
    p = _cli("tune", "resnet18", "--hardware", "1x16x16_i8w8a32_15_15_11_17", "--trials", "100",
             "--tuner", tuner, "--work-dir", str(tmp_path / tuner), "--quiet", timeout=300)
    assert p.returncode == 2
    err = p.stderr.strip()
    assert err.count("\n") == 0 and "no valid schedule" in err and "1x16x16_i8w8a32_15_15_11_17" in err
    assert "conv2d_" in err and "--trials" not in err.replace("not more --trials", "")
