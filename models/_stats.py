"""Parameter and MAC counts of an ONNX model, from its graph alone (no TVM).

Used by ``dcoc models`` for the ``light_*`` models that ship inside the onnx wheel (whose
weights are ``ConstantOfShape`` nodes, so they count as parameters here).  MACs are those
of ``Conv``, ``ConvTranspose``, ``Gemm`` and ``MatMul`` nodes after ONNX shape inference.
"""
from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference


def _static_shape(value_info) -> tuple[int, ...] | None:
    t = value_info.type.tensor_type
    if not t.HasField("shape"):
        return None
    dims = []
    for d in t.shape.dim:
        if not d.HasField("dim_value") or d.dim_value <= 0:
            return None
        dims.append(d.dim_value)
    return tuple(dims)


def onnx_stats(model: onnx.ModelProto) -> tuple[int, int, dict[str, tuple]]:
    """``(params, macs, input_shapes)`` of a model (unknown shapes count as 0 MACs)."""
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    consts: dict[str, np.ndarray] = {}
    for node in graph.node:
        if node.op_type == "Constant":
            for a in node.attribute:
                if a.name == "value":
                    consts[node.output[0]] = numpy_helper.to_array(a.t)
    # float tensors with more than one element (scalars are constants such as Clip bounds)
    params = sum(math.prod(t.dims) for t in graph.initializer
                 if t.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16,
                                    onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16)
                 and math.prod(t.dims) > 1)
    for node in graph.node:
        if node.op_type == "ConstantOfShape":
            src = node.input[0]
            shape = consts.get(src)
            if shape is None and src in inits:
                shape = numpy_helper.to_array(inits[src])
            if shape is not None:
                params += int(math.prod(int(d) for d in shape.reshape(-1)))

    try:
        inferred = shape_inference.infer_shapes(model, data_prop=True)
    except Exception:  # noqa: BLE001 - stats are best effort
        inferred = model
    shapes: dict[str, tuple[int, ...]] = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + \
            list(inferred.graph.output):
        s = _static_shape(vi)
        if s is not None:
            shapes[vi.name] = s
    for t in graph.initializer:
        shapes[t.name] = tuple(t.dims)

    macs = 0
    for node in inferred.graph.node:
        out = shapes.get(node.output[0]) if node.output else None
        if out is None:
            continue
        if node.op_type == "Conv":
            w = shapes.get(node.input[1])
            if w:
                macs += math.prod(out) * math.prod(w[1:])
        elif node.op_type == "ConvTranspose":
            x, w = shapes.get(node.input[0]), shapes.get(node.input[1])
            if x and w:
                macs += math.prod(x) * math.prod(w[1:])
        elif node.op_type in ("Gemm", "MatMul"):
            a = shapes.get(node.input[0])
            if a:
                trans_a = any(at.name == "transA" and at.i for at in node.attribute)
                k = a[-2] if (node.op_type == "Gemm" and trans_a) else a[-1]
                macs += math.prod(out) * k

    input_shapes = {}
    for vi in graph.input:
        if vi.name in inits:
            continue
        dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
                     for d in vi.type.tensor_type.shape.dim)
        input_shapes[vi.name] = dims
    return int(params), int(macs), input_shapes
