"""ONNX model building shared by the ``dcoc run`` tests."""
from __future__ import annotations

import onnx
from onnx import TensorProto as TP
from onnx import helper


def classifier(nodes, inits, name: str, input_shape, classes: int = 10) -> onnx.ModelProto:
    """A checked opset-17 model of ``nodes``: input ``x`` of ``input_shape``, output ``y``
    of shape ``(1, classes)``."""
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TP.FLOAT, list(input_shape))],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [1, classes])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m
