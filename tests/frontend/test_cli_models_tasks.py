"""`dcoc models` and `dcoc tasks` on every light_* model and every zoo model."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from frontend_util import run_cli

import dcoc_models
from dcoc.cli import main
from dcoc.cli.options import parse_input_shape, parse_input_shapes
from dcoc.errors import ModelError

ALL_MODELS = dcoc_models.zoo_names() + dcoc_models.light_names()
#: the llvm sweep in the default suite; the rest (VGG-16/19, AlexNet, ZFNet: large fc
#: weights, 2-13 s each) runs with -m slow
LLVM_DEFAULT = ["resnet18", "mobilenetv2", "transformer", "light_resnet50",
                "light_squeezenet", "light_inception_v1", "light_shufflenet"]


def test_models_table(capfd):
    assert main(["models"]) == 0
    out = capfd.readouterr().out
    for name in ALL_MODELS:
        assert name in out
    row = next(ln for ln in out.splitlines() if ln.startswith("resnet18 "))
    assert "11.70M" in row and "1.81G" in row and "input:1x3x224x224" in row


def test_models_json(capfd):
    assert main(["models", "--json", "--zoo-only"]) == 0
    data = json.loads(capfd.readouterr().out)
    assert [d["name"] for d in data] == dcoc_models.zoo_names()
    assert data[2]["params"] == 138_357_544


@pytest.mark.parametrize("name", ALL_MODELS)
def test_tasks_vta_every_model(name, capfd):
    assert main(["tasks", name]) == 0
    out, err = capfd.readouterr()
    assert err == ""
    assert out.startswith(f"{name}: ") and "total: " in out and "CPU ops" in out


@pytest.mark.parametrize("name", LLVM_DEFAULT)
def test_tasks_llvm_representative(name, capfd):
    assert main(["tasks", name, "--target", "llvm"]) == 0
    out, err = capfd.readouterr()
    assert err == ""
    assert "MetaSchedule task" in out and "total: " in out


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in ALL_MODELS if n not in LLVM_DEFAULT])
def test_tasks_llvm_rest(name, capfd):
    assert main(["tasks", name, "--target", "llvm"]) == 0
    out, err = capfd.readouterr()
    assert err == "" and "total: " in out


def test_tasks_output_resnet18(capfd):
    assert main(["tasks", "resnet18", "--target", "vta"]) == 0
    out = capfd.readouterr().out
    assert "conv2d_56x56_64x64_k3s1" in out
    assert "1x64x56x56 -> 64x56x56  k3 s1 p1" in out
    assert "CPU ops (outside any task): max_pool2d x1, mean x1, reshape x1" in out
    assert "total: 12 tasks (11 on VTA, 1 on CPU), 21 occurrences, 3.628 GFLOP" in out


def test_tasks_json(capfd):
    assert main(["tasks", "transformer", "--json"]) == 0
    data = json.loads(capfd.readouterr().out)
    assert data["model"] == "transformer" and data["target"] == "vta"
    assert {t["kind"] for t in data["tasks"]} == {"dense", "batch_matmul"}
    assert any(op["name"] == "softmax" and op["weight"] == 4 for op in data["cpu_ops"])
    assert main(["tasks", "light_squeezenet", "--json", "--target", "llvm"]) == 0
    data = json.loads(capfd.readouterr().out)
    assert all("ms_task" in t for t in data["tasks"]) and data["cpu_ops"] == []


def test_parse_input_shapes():
    assert parse_input_shape("input:1,3,224,224") == ("input", (1, 3, 224, 224))
    assert parse_input_shape("gpu_0/data_0:1x3x224x224") == ("gpu_0/data_0", (1, 3, 224, 224))
    assert parse_input_shape("a:b:1,2") == ("a:b", (1, 2))
    assert parse_input_shapes([]) is None
    assert parse_input_shapes(["x:1,2", "y:3"]) == {"x": (1, 2), "y": (3,)}
    for bad in ["1,3,224", "x:", "x:1,a", ":1,2", "x:1,,2", "x:0,3"]:
        with pytest.raises(ModelError):
            parse_input_shape(bad)
    with pytest.raises(ModelError, match="given twice"):
        parse_input_shapes(["x:1", "x:2"])


def test_input_shape_for_light_model_name_with_slash(capfd):
    rc = main(["tasks", "light_shufflenet", "--input-shape", "gpu_0/data_0:1,3,224,224"])
    assert rc == 0 and "light_shufflenet: " in capfd.readouterr().out


def test_help_is_fast_and_does_not_import_tvm():
    code = ("import sys; from dcoc.cli import build_parser; build_parser(); "
            "print('tvm' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60)
    assert r.stdout.strip() == "False", r.stderr
    r = run_cli("tasks", "--help")
    assert r.returncode == 0
    for frag in ("--input-shape NAME:D0,D1,...", "--target TARGET", "light_resnet50",
                 "JSON dict"):
        assert frag in r.stdout
