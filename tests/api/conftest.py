"""Fixtures for the tests/api tests (helpers live in api_util.py)."""
from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

os.environ.setdefault("DCOC_QUIET", "1")


@pytest.fixture(scope="session")
def no_vta_model(tmp_path_factory) -> str:
    """An ONNX file whose only compute is a depthwise conv (+ ReLU, max-pool): the network's
    first conv, which stays on the CPU, so nothing VTA runs."""
    w = numpy_helper.from_array(np.ones((8, 1, 3, 3), np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], group=8, pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[2, 2])]
    g = helper.make_graph(nodes, "novta", [helper.make_tensor_value_info("x", TP.FLOAT, [1, 8, 16, 16])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [1, 8, 8, 8])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    p = tmp_path_factory.mktemp("onnx") / "novta.onnx"
    onnx.save(m, str(p))
    return str(p)
