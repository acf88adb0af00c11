"""Exporting accelerator runs (vta, systolic): the hardware config in the target's own
format, the resource report, the schedules, and commands that reproduce the latency;
``TuneResult.run`` on a model given by path."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import dcoc
from dcoc.targets.vta.hardware import HWConfig

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def model_file(tmp_path_factory) -> str:
    """conv 16->32 (stays on the CPU as the first conv) + relu + conv 32->32 stride 2 + relu."""
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array((rng.standard_normal((32, 16, 3, 3)) * 0.1).astype(np.float32), "w1")
    w2 = numpy_helper.from_array((rng.standard_normal((32, 32, 3, 3)) * 0.1).astype(np.float32), "w2")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1] * 4),
             helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Conv", ["b", "w2"], ["c"], pads=[1] * 4, strides=[2, 2]),
             helper.make_node("Relu", ["c"], ["y"])]
    g = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TP.FLOAT, [1, 16, 16, 16])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [1, 32, 8, 8])], [w1, w2])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    p = tmp_path_factory.mktemp("onnx") / "tiny.onnx"
    onnx.save(m, str(p))
    return str(p)


@pytest.fixture(scope="module")
def vta_run(model_file, tmp_path_factory):
    wd = tmp_path_factory.mktemp("vta") / "wd"
    return dcoc.tune(model_file, target="vta", board="pynq", trials=16, seed=0, work_dir=str(wd),
                     n_workers=0)


def _dcoc(*args, cwd):
    env = dict(os.environ, DCOC_QUIET="1", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "dcoc.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def test_run_works_for_a_model_given_by_path(vta_run, model_file, tmp_path):
    assert vta_run.model_path == os.path.abspath(model_file)
    saved = json.loads(open(os.path.join(vta_run.work_dir, "result.json")).read())
    assert saved["model_path"] == vta_run.model_path
    x = np.random.default_rng(1).standard_normal((1, 16, 16, 16)).astype(np.float32)
    with pytest.warns(Warning, match="calibrat"):
        out = vta_run.run({"x": x})
    assert out[0].shape == (1, 32, 8, 8)


def test_vta_export_writes_vtas_config_report_schedules_and_reproduces(vta_run, tmp_path):
    path = tmp_path / "design"
    meta = vta_run.export(str(path))
    assert set(meta["files"]) == {"vta_config.json", "hardware_report.json", "schedules.json",
                                  "layers.json", "export.json", "README.md"}
    hw = vta_run.hardware
    cfg = json.loads((path / "vta_config.json").read_text())
    assert cfg == hw.to_vta_config("pynq") and cfg["TARGET"] == "pynq"
    assert HWConfig.from_vta_config(cfg, hw.freq_mhz, hw.bus_bytes) == hw
    rep = json.loads((path / "hardware_report.json").read_text())
    assert rep["resources"] == vta_run.extra["resources"] and rep["clock_mhz"] == hw.freq_mhz
    assert rep["buffers"]["wgt"]["depth"] == hw.wgt_depth
    sched = json.loads((path / "schedules.json").read_text())
    assert sched["schedules"] == vta_run.schedules
    readme = (path / "README.md").read_text()
    assert "dcoc run" in readme and "not exported" in readme

    # timing from the exported files alone
    r = _dcoc("export", "--check", ".", "--json", "-", cwd=path)
    assert r.returncode == 0, r.stderr
    chk = json.loads(r.stdout)
    assert chk["reproduced"] and chk["latency_ms"] == pytest.approx(vta_run.latency_ms, rel=1e-9)

    # the recorded `dcoc run` command: the quantized model on the simulator with these
    # schedules; its layers have no bias, the tuner times a bias epilogue (a few % apart)
    cmd = shlex.split(meta["commands"]["run"])
    assert cmd[:2] == ["dcoc", "run"]
    r = _dcoc(*cmd[1:], "--json", "-", cwd=path)
    assert r.returncode == 0, r.stderr
    ran = json.loads(r.stdout)
    assert ran["bit_exact"] and ran["latency_ms"] == pytest.approx(vta_run.latency_ms, rel=0.03)
    assert [row["knobs"] for row in ran["layers"]] == list(vta_run.schedules.values())

    # a changed schedule is caught
    name = next(iter(sched["schedules"]))
    knobs = sched["schedules"][name]
    knobs["tile_w"] = 1 if knobs["tile_w"] != 1 else 2
    (path / "schedules.json").write_text(json.dumps(sched))
    r = _dcoc("export", "--check", str(path), cwd=tmp_path)
    assert r.returncode == 1 and "DIFFERENT" in r.stdout, r.stdout + r.stderr


def test_cli_export_of_a_work_dir_and_bad_input(vta_run, tmp_path):
    r = _dcoc("export", vta_run.work_dir, str(tmp_path / "d"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "d" / "vta_config.json").is_file()
    assert json.loads((tmp_path / "d" / "export.json").read_text())["latency_ms"] == vta_run.latency_ms
    for args in (["export", str(tmp_path / "nowhere"), str(tmp_path / "e")],
                 ["export", str(tmp_path), str(tmp_path / "e")],            # no result.json
                 ["export", vta_run.work_dir, str(tmp_path / "d" / "README.md")],  # a file
                 ["export", "--check", str(tmp_path / "nowhere")],
                 ["export", vta_run.work_dir]):
        r = _dcoc(*args, cwd=tmp_path)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert r.stderr.startswith("dcoc: error:") and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_systolic_export(model_file, tmp_path):
    res = dcoc.tune(model_file, target="systolic", board="kv260", trials=20, seed=0,
                    work_dir=str(tmp_path / "wd"), n_workers=0)
    meta = res.export(str(tmp_path / "arr"))
    assert "systolic_config.json" in meta["files"] and meta["commands"]["run"] is None
    cfg = json.loads((tmp_path / "arr" / "systolic_config.json").read_text())
    hw = res.hardware
    assert cfg["name"] == hw.name
    assert {k: cfg[k] for k in ("rows", "cols", "log_ifmap", "log_wgt", "log_ofmap")} == \
        {k: getattr(hw, k) for k in ("rows", "cols", "log_ifmap", "log_wgt", "log_ofmap")}
    rep = json.loads((tmp_path / "arr" / "hardware_report.json").read_text())
    assert rep["resources"]["dsp"] == res.extra["resources"]["dsp"] and rep["clock_mhz"] == hw.freq_mhz
    from dcoc.api.export import check

    assert check(str(tmp_path / "arr"))["latency_ms"] == pytest.approx(res.latency_ms, rel=1e-9)


def test_tune_export_flag(model_file, tmp_path):
    r = _dcoc("tune", model_file, "--trials", "16", "--workers", "0", "--work-dir", str(tmp_path / "wd"),
              "--export", str(tmp_path / "x"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "exported" in r.stdout and (tmp_path / "x" / "vta_config.json").is_file()
    (tmp_path / "f").write_text("")
    r = _dcoc("tune", model_file, "--trials", "16", "--work-dir", str(tmp_path / "wd2"),
              "--export", str(tmp_path / "f"), cwd=tmp_path)
    assert r.returncode == 2 and not (tmp_path / "wd2").exists(), r.stderr  # refused before work
