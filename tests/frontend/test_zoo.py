"""The model zoo: registry, deterministic cached builds, counts, light_* models."""
from __future__ import annotations

import hashlib
import os

import numpy as np
import onnx
import pytest

import dcoc_models
from dcoc.errors import ModelError
from dcoc_models._stats import onnx_stats

LIGHT = ["light_bvlc_alexnet", "light_densenet121", "light_inception_v1", "light_inception_v2",
         "light_resnet50", "light_shufflenet", "light_squeezenet", "light_vgg19",
         "light_zfnet512"]


def test_names():
    assert dcoc_models.zoo_names() == ["resnet18", "mobilenetv2", "vgg16", "transformer"]
    assert dcoc_models.light_names() == LIGHT


def test_list_models_counts_without_building(tmp_path, monkeypatch):
    monkeypatch.setenv("DCOC_CACHE", str(tmp_path))
    infos = {i.name: i for i in dcoc_models.list_models()}
    assert list(infos) == dcoc_models.zoo_names() + LIGHT
    assert not (tmp_path / "models").exists() or not os.listdir(tmp_path / "models")
    r18 = infos["resnet18"]
    # torchvision resnet18: 11,689,512 learnable parameters + 9,600 BN running statistics
    assert r18.params == 11_689_512 + 9_600
    assert r18.macs == 1_814_073_344
    assert r18.input_shapes == {"input": (1, 3, 224, 224)}
    assert infos["vgg16"].params == 138_357_544  # torchvision vgg16
    assert infos["vgg16"].macs == 15_470_264_320
    assert 300e6 < infos["mobilenetv2"].macs < 301e6
    assert infos["transformer"].input_shapes == {"input_ids": (1, 128)}
    assert infos["light_resnet50"].input_shapes == {"gpu_0/data_0": (1, 3, 224, 224)}
    assert 4.0e9 < infos["light_resnet50"].macs < 4.2e9
    assert all(i.source == "onnx-light" for n, i in infos.items() if n.startswith("light_"))


@pytest.mark.parametrize("name", ["resnet18", "mobilenetv2", "vgg16", "transformer"])
def test_zoo_model_is_valid_and_matches_dry_run(name):
    path = dcoc_models.get(name)
    assert path.endswith(".onnx") and os.path.exists(path)
    assert dcoc_models.get(name) == path  # cached
    onnx.checker.check_model(path)
    model = onnx.load(path, load_external_data=False)
    params, macs, shapes = onnx_stats(model)
    info = dcoc_models.info(name)
    assert (params, macs) == (info.params, info.macs)
    assert shapes == info.input_shapes
    if name == "vgg16":  # weights live in the external data file, not in the .onnx
        assert os.path.getsize(path) < 100_000
        assert os.path.getsize(path + ".data") == 4 * info.params


@pytest.mark.parametrize("name,learnable", [("resnet18", 11_689_512), ("mobilenetv2", 3_504_872),
                                            ("vgg16", 138_357_544)])
def test_learnable_parameters_match_torchvision(name, learnable):
    model = onnx.load(dcoc_models.get(name), load_external_data=False)
    stats = sum(int(np.prod(t.dims)) for t in model.graph.initializer
                if t.name.endswith(("running_mean", "running_var")))
    assert dcoc_models.info(name).params - stats == learnable


def test_build_is_deterministic(tmp_path):
    a = dcoc_models.build("mobilenetv2", str(tmp_path / "a.onnx"))
    b = dcoc_models.build("mobilenetv2", str(tmp_path / "b.onnx"))
    digest = [hashlib.sha256(open(p, "rb").read()).hexdigest() for p in (a, b)]
    assert digest[0] == digest[1]
    # weights are real (He-uniform), not constants
    w = onnx.numpy_helper.to_array(onnx.load(a).graph.initializer[0])
    assert w.std() > 0.05 and len(np.unique(w)) > 100


def test_cache_dir_env(tmp_path, monkeypatch):
    monkeypatch.setenv("DCOC_CACHE", str(tmp_path))
    assert dcoc_models.cache_dir() == str(tmp_path / "models")
    path = dcoc_models.get("transformer")
    assert os.path.dirname(path) == str(tmp_path / "models")
    # a stale version of the same model is removed after a rebuild
    stale = tmp_path / "models" / "transformer-0000000000.onnx"
    stale.write_bytes(b"old")
    os.remove(path)
    assert dcoc_models.get("transformer") == path
    assert not stale.exists()


def test_resolve():
    assert dcoc_models.resolve("light_squeezenet").endswith("light_squeezenet.onnx")
    p = dcoc_models.resolve("resnet18")
    assert dcoc_models.resolve(p) == p
    with pytest.raises(ModelError) as e:
        dcoc_models.resolve("resnet19")
    msg = str(e.value)
    assert msg.startswith("unknown model 'resnet19'; not a file and not in the zoo (resnet18, ")
    assert "light_resnet50" in msg and "\n" not in msg
    with pytest.raises(ModelError, match="does not exist"):
        dcoc_models.resolve("/no/such/model.onnx")


@pytest.mark.parametrize("name", ["resnet18", "transformer"])
def test_zoo_runs_in_onnxruntime(name):
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(dcoc_models.get(name), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {}
    for i in sess.get_inputs():
        if "int64" in i.type:
            feeds[i.name] = rng.integers(0, 8192, size=i.shape).astype(np.int64)
        else:
            feeds[i.name] = rng.standard_normal(i.shape).astype(np.float32)
    out = sess.run(None, feeds)[0]
    assert np.isfinite(out).all() and out.std() > 0
