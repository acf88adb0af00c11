"""The pre-trained start (tvm_plugin.metaschedule.prior): the shipped model loads and matches
this dcoc's program features, a model of other features is refused with one line, it
ranks each task's warm-up by default and is switched off by --no-prior / prior=False, and a
run with it still computes what ONNX Runtime computes."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from dcoc.errors import DcocError
from tests.tvm.conftest import three_task_onnx


def test_shipped_prior_loads_with_this_feature_version_and_scores_programs():
    from tvm_plugin.metaschedule.prior import DEFAULT_PATH, feature_version, load_prior

    p = load_prior(True)
    assert p.meta["feature_version"] == feature_version()
    assert p.booster.num_features() == feature_version()["dim"]
    assert os.path.getsize(DEFAULT_PATH[:-5] + ".ubj") < 2_000_000     # small, shipped in git
    assert not any(m.startswith("light_") or m.startswith("squeezenet") or m.startswith("shufflenet")
                   for m in p.meta["models"])                      # trained on the zoo only
    X = np.random.default_rng(0).random((5, feature_version()["dim"])).astype(np.float32)
    X[2] = np.nan                                                  # a schedule that does not build
    s = p.predict(X)
    assert np.isfinite(s[[0, 1, 3, 4]]).all() and s[2] == -np.inf
    assert p.rank(X)[-1] == 2
    assert load_prior(False) is None


@pytest.fixture()
def copied(tmp_path):
    from tvm_plugin.metaschedule.prior import DEFAULT_PATH

    meta = tmp_path / "p.json"
    shutil.copy(DEFAULT_PATH, meta)
    shutil.copy(DEFAULT_PATH[:-5] + ".ubj", tmp_path / "p.ubj")
    return meta


def test_a_model_of_other_features_is_refused_with_one_line(copied):
    from tvm_plugin.metaschedule.prior import PriorMismatch, load_prior

    assert load_prior(str(copied)).meta["rows"] > 0
    data = json.loads(copied.read_text())
    data["feature_version"]["dim"] = 164
    copied.write_text(json.dumps(data))
    with pytest.raises(PriorMismatch) as e:
        load_prior(str(copied))
    msg = str(e.value)
    assert "\n" not in msg and "dim=164" in msg and "--no-prior" in msg
    with pytest.raises(DcocError, match="not found"):
        load_prior(str(copied.parent / "missing.json"))
    (copied.parent / "p.ubj").write_bytes(b"not a booster")
    data["feature_version"]["dim"] = 328
    copied.write_text(json.dumps(data))
    with pytest.raises(DcocError, match="does not load"):
        load_prior(str(copied))


def test_cli_refuses_a_mismatched_prior_before_tuning(copied, tmp_path):
    data = json.loads(copied.read_text())
    data["feature_version"]["tvm"] = "0.1"
    copied.write_text(json.dumps(data))
    tiny = three_task_onnx(str(tmp_path / "tiny.onnx"))
    p = subprocess.run([sys.executable, "-m", "dcoc", "tune", tiny, "--target", "llvm",
                        "--trials", "2", "--prior", str(copied), "--work-dir", str(tmp_path / "w")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 2
    err = p.stderr.strip()
    assert err.count("\n") == 0 and "tvm=0.1" in err and "--no-prior" in err, err
    assert not os.path.exists(tmp_path / "w" / "database_tuning_record.json")
    p = subprocess.run([sys.executable, "-m", "dcoc", "tune", "resnet18", "--no-prior"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "llvm/cuda" in p.stderr and p.stderr.strip().count("\n") == 0


def test_prior_ranks_the_warm_up_by_default_and_the_model_matches_onnxruntime(tmp_path):
    import onnxruntime as ort

    from dcoc.api.cpu import tune_metaschedule

    path = three_task_onnx(str(tmp_path / "tiny.onnx"))
    on = tune_metaschedule(path, "llvm", trials=8, seed=0, work_dir=str(tmp_path / "on"),
                           progress=False, baseline=False, onnxruntime=False, latency_repeat=1)
    off = tune_metaschedule(path, "llvm", trials=8, seed=0, work_dir=str(tmp_path / "off"),
                            progress=False, baseline=False, onnxruntime=False, latency_repeat=1,
                            prior=False)
    searched = [t for t in on.extra["tasks"] if t["ran"] != "grid"]
    assert searched and all(t["prior"] for t in searched)
    assert "pre-trained start on" in on.method and "pre-trained" not in off.method
    assert not any(t["prior"] for t in off.extra["tasks"])
    assert sum(t["feature_seconds"] for t in searched) > 0      # the sample was featurized
    assert on.extra["time_profile"]["seconds"]["features"] > 0
    x = np.random.default_rng(1).standard_normal((1, 3, 12, 12)).astype(np.float32)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = on.run({"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_no_trial_limit_with_a_time_budget_and_the_time_profile_adds_up(tmp_path):
    from dcoc.api.cpu import tune_metaschedule
    from tvm_plugin.metaschedule.options import UNLIMITED, MetaScheduleOptions
    from tvm_plugin.metaschedule.timeline import PARTS

    with pytest.raises(DcocError, match="needs a time_budget"):
        MetaScheduleOptions(trials=None)
    assert MetaScheduleOptions(trials=None, time_budget=1).trial_limit == UNLIMITED
    lines: list = []
    r = tune_metaschedule(three_task_onnx(str(tmp_path / "t.onnx")), "llvm", trials=None,
                          time_budget=4, seed=0, work_dir=str(tmp_path / "w"), progress=lines.append,
                          measure=False, baseline=False, prior=False)
    assert r.extra["stopped_on_time"]
    assert any("no trial limit" in ln for ln in lines)
    assert any(ln.startswith("dcoc: tuning time ") for ln in lines)
    tp = r.extra["time_profile"]
    assert tp["built"] == tp["run"] == r.extra["new_trials"]
    assert sum(tp["seconds"][p] for p in PARTS) == pytest.approx(tp["wall_s"], abs=0.05)
    assert tp["seconds"]["build"] > 0 and tp["seconds"]["run"] > 0
