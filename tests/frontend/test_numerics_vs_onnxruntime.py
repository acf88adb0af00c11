"""The TVM-compiled, untuned model computes what ONNX Runtime computes.

Tolerance: ``rtol=1e-5, atol=1e-5`` on the real-weight ``pytorch-converted`` Conv2d cases
of the onnx wheel (observed max abs difference: 2.4e-7); for the zoo networks (random
weights, outputs up to ~300) the max abs difference must stay below ``1e-4 * max|ref|``
(observed relative: 1.4e-6 transformer, 8e-7 ResNet-18, 5e-6 MobileNetV2).
"""
from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import dcoc_models

ort = pytest.importorskip("onnxruntime")

CONVERTED = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data",
                         "pytorch-converted")
CONV2D_CASES = sorted(c for c in os.listdir(CONVERTED) if c.startswith("test_Conv2d"))


def _run_tvm(model, feeds: dict) -> np.ndarray:
    import tvm
    from tvm import relax

    target = tvm.target.Target({"kind": "llvm", "num-cores": 2})
    ex = tvm.compile(model.mod, target=target)
    vm = relax.VirtualMachine(ex, tvm.cpu())
    args = [tvm.runtime.tensor(feeds[name], tvm.cpu()) for name in model.input_shapes]
    return vm["main"](*args).numpy()


def _run_ort(path: str, feeds: dict) -> np.ndarray:
    so = ort.SessionOptions()
    so.log_severity_level = 3  # the opset-6 test models make ORT warn
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


def test_conv2d_cases_present():
    assert len(CONV2D_CASES) == 11


@pytest.mark.parametrize("case", CONV2D_CASES)
def test_pytorch_converted_conv2d_matches_onnxruntime(case):
    from tvm_plugin.frontend import load

    d = os.path.join(CONVERTED, case)
    path = os.path.join(d, "model.onnx")
    x = numpy_helper.to_array(onnx.load_tensor(os.path.join(d, "test_data_set_0", "input_0.pb")))
    expected = numpy_helper.to_array(
        onnx.load_tensor(os.path.join(d, "test_data_set_0", "output_0.pb")))
    model = load(path)
    (name,) = model.input_shapes
    feeds = {name: x}
    got = _run_tvm(model, feeds)
    ref = _run_ort(path, feeds)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    # and the task extracted from it is that conv
    (task,) = model.tasks("vta")
    assert "conv2d" in task.kind and task.workload["batch"] == x.shape[0]


def _zoo_feeds(model):
    rng = np.random.default_rng(0)
    feeds = {}
    for name, shape in model.input_shapes.items():
        if "int" in model.input_dtypes[name]:
            feeds[name] = rng.integers(0, 8192, size=shape).astype(model.input_dtypes[name])
        else:
            feeds[name] = rng.standard_normal(shape).astype(model.input_dtypes[name])
    return feeds


@pytest.mark.parametrize("name", [
    "transformer",
    pytest.param("resnet18", marks=pytest.mark.slow),
    pytest.param("mobilenetv2", marks=pytest.mark.slow),
])
def test_zoo_model_matches_onnxruntime(name):
    from tvm_plugin.frontend import load

    model = load(name)
    feeds = _zoo_feeds(model)
    got = _run_tvm(model, feeds)
    ref = _run_ort(dcoc_models.get(name), feeds)
    assert got.shape == ref.shape
    assert np.abs(got - ref).max() <= 1e-4 * np.abs(ref).max()
