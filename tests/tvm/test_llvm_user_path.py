"""`dcoc tune MODEL --target llvm` is as first-class as VTA: it leaves
result.json and curve.png in its work dir, `dcoc records` / `dcoc plot` read its
MetaSchedule database, TVM's native output goes to WORK_DIR/logs/tvm.log, `--json -`
prints JSON only, and the work dir refuses another model."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _odd_model(path: str, oc: int = 5) -> str:
    """A conv with odd sizes (3->5 channels, 17x19 image)."""
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((oc, 3, 3, 3)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                           helper.make_node("Relu", ["c"], ["y"])], "odd",
                          [helper.make_tensor_value_info("x", TP.FLOAT, [1, 3, 17, 19])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [1, oc, 17, 19])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def _dcoc(*args, cwd):
    env = dict(os.environ, DCOC_QUIET="1",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "dcoc.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)


def test_llvm_tune_leaves_result_and_curve_and_tools_read_the_database(tmp_path):
    odd = _odd_model(str(tmp_path / "odd.onnx"))
    wd = tmp_path / "wd"
    r = _dcoc("tune", odd, "--target", "llvm", "--trials", "4", "--work-dir", str(wd),
              "-q", "--json", "-", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)  # stdout: the JSON only
    assert res["model"] == "odd" and res["latency_ms"] > 0 and res["history"]
    for f in ("result.json", "curve.png", "ms_tasks.json", "dcoc_run.json",
              "database_tuning_record.json"):
        assert (wd / f).is_file(), f
    assert (wd / "logs" / "tvm.log").exists()
    assert "Traceback" not in r.stderr and len(r.stderr.splitlines()) < 20
    assert json.loads((wd / "result.json").read_text())["latency_ms"] == res["latency_ms"]

    r = _dcoc("records", str(wd), "--json", "-", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    assert rec["records"] >= 4 and rec["best"][0]["task"] == "ms:conv2d_17x19_3x5_k3s1"
    r = _dcoc("records", str(wd / "database_tuning_record.json"), cwd=tmp_path)
    assert r.returncode == 0 and "conv2d_17x19_3x5_k3s1" in r.stdout, r.stderr

    (wd / "curve.png").unlink()
    r = _dcoc("plot", str(wd), "--json", "-", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["files"] == [str(wd / "curve.png")]
    os.rename(wd / "result.json", wd / "result.json.bak")  # database only: per-task curves
    r = _dcoc("plot", str(wd), "--out", str(tmp_path / "p"), cwd=tmp_path)
    assert r.returncode == 0 and "task_conv2d_17x19_3x5_k3s1.png" in r.stdout, r.stderr
    os.rename(wd / "result.json.bak", wd / "result.json")

    other = _odd_model(str(tmp_path / "other.onnx"), oc=7)
    os.replace(other, odd)  # same name, different model
    r = _dcoc("tune", odd, "--target", "llvm", "--trials", "4", "--work-dir", str(wd), "-q",
              cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.startswith("dcoc: error: work dir"), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_cold_tuning_is_remembered_by_the_work_dir(tmp_path):
    """tune_model(flush_cache=True) measures with the cold evaluator, says so in the result
    and the work dir, and a warm run refuses that dir (their records measure different
    costs); a Runner object or a non-CPU use is refused in one line."""
    import pytest

    from dcoc.errors import DcocError
    from tvm_plugin.metaschedule.build import make_runner
    from tvm_plugin.metaschedule.tuning import tune_model

    path = _odd_model(str(tmp_path / "odd.onnx"))
    wd = str(tmp_path / "cold")
    kw = dict(trials=4, tuner="random", seed=0, num_trials_per_iter=4, progress=False,
              baseline=False, measure=False, keep_untuned_if_faster=False)
    r = tune_model(path, "llvm", work_dir=wd, flush_cache=True, **kw)
    assert r.extra["timing"] == "cold" and r.trials >= 1
    with open(os.path.join(wd, "dcoc_run.json")) as f:
        assert json.load(f)["timing"] == "cold"
    with pytest.raises(DcocError, match="timed cold"):
        tune_model(path, "llvm", work_dir=wd, **kw)
    with pytest.raises(DcocError, match="Runner object"):
        tune_model(path, "llvm", work_dir=str(tmp_path / "x"), runner=make_runner("local"),
                   flush_cache=True, **kw)
