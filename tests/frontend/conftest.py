"""Fixtures for the frontend tests: small broken/dynamic ONNX files and cached task lists.

The zoo models are built into the normal cache (``$DCOC_CACHE`` or ~/.cache/dcoc), so a
second run of the suite reuses them; building all four takes ~5 s.
"""
from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper

os.environ.setdefault("DCOC_QUIET", "1")  # no "built zoo model" lines in CLI stderr checks


def _model(nodes, inputs, outputs, inits=(), opset=17, name="g", domains=()):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset),
                                            *(helper.make_opsetid(d, 1) for d in domains)])
    m.ir_version = 8
    return m


@pytest.fixture(scope="session")
def bad_models(tmp_path_factory) -> dict[str, str]:
    """Paths of ONNX files for each preflight error path (and a dynamic-shape model)."""
    d = tmp_path_factory.mktemp("bad_models")
    paths = {}

    p = d / "garbage.onnx"
    p.write_bytes(bytes(range(256)) * 4)
    paths["garbage"] = str(p)

    p = d / "text.onnx"
    p.write_text("this is not an onnx model\n")
    paths["text"] = str(p)

    p = d / "empty.onnx"
    p.write_bytes(b"")
    paths["empty"] = str(p)

    # checker failure: a node consumes a tensor nothing produces
    m = _model([helper.make_node("Relu", ["undefined_tensor"], ["y"])],
               [helper.make_tensor_value_info("x", TP.FLOAT, [1, 4])],
               [helper.make_tensor_value_info("y", TP.FLOAT, [1, 4])])
    p = d / "checker.onnx"
    onnx.save(m, str(p))
    paths["checker"] = str(p)

    # unsupported operators: Celu x2 and Det x1 at top level, LpNormalization inside an If
    # branch, and a custom-domain op
    then_g = helper.make_graph([helper.make_node("LpNormalization", ["x"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", TP.FLOAT, [3, 3])])
    else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", TP.FLOAT, [3, 3])])
    nodes = [
        helper.make_node("Celu", ["x"], ["a"]),
        helper.make_node("Celu", ["a"], ["b"]),
        helper.make_node("Det", ["b"], ["det"]),
        helper.make_node("Constant", [], ["c"], value=helper.make_tensor("v", TP.BOOL, [], [1])),
        helper.make_node("If", ["c"], ["z"], then_branch=then_g, else_branch=else_g),
        helper.make_node("FancyOp", ["z"], ["y"], domain="com.example"),
    ]
    m = _model(nodes, [helper.make_tensor_value_info("x", TP.FLOAT, [3, 3])],
               [helper.make_tensor_value_info("det", TP.FLOAT, []),
                helper.make_tensor_value_info("y", TP.FLOAT, [3, 3])], domains=["com.example"])
    p = d / "unsupported.onnx"
    onnx.save(m, str(p))
    paths["unsupported"] = str(p)

    # dynamic batch / spatial dims
    w = np.random.default_rng(0).standard_normal((8, 3, 3, 3)).astype(np.float32)
    m = _model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1]),
                helper.make_node("Relu", ["y"], ["z"])],
               [helper.make_tensor_value_info("x", TP.FLOAT, ["batch", 3, "h", "w"])],
               [helper.make_tensor_value_info("z", TP.FLOAT, ["batch", 8, "h", "w"])],
               inits=[onnx.numpy_helper.from_array(w, "w")])
    onnx.checker.check_model(m)
    p = d / "dynamic.onnx"
    onnx.save(m, str(p))
    paths["dynamic"] = str(p)

    # passes the checker, fails inside TVM's importer (impossible Reshape)
    m = _model([helper.make_node("Reshape", ["x", "s"], ["y"], name="bad_reshape")],
               [helper.make_tensor_value_info("x", TP.FLOAT, [2, 3])],
               [helper.make_tensor_value_info("y", TP.FLOAT, [7])],
               inits=[onnx.numpy_helper.from_array(np.array([7], dtype=np.int64), "s")])
    p = d / "bad_reshape.onnx"
    onnx.save(m, str(p))
    paths["tvm_failure"] = str(p)

    # external data whose .data file is missing
    m = _model([helper.make_node("Conv", ["x", "w"], ["y"])],
               [helper.make_tensor_value_info("x", TP.FLOAT, [1, 3, 8, 8])],
               [helper.make_tensor_value_info("y", TP.FLOAT, [1, 8, 6, 6])],
               inits=[onnx.numpy_helper.from_array(w, "w")])
    p = d / "extdata.onnx"
    onnx.save_model(m, str(p), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="extdata.onnx.data", size_threshold=0)
    os.remove(d / "extdata.onnx.data")
    paths["missing_data"] = str(p)
    return paths


@pytest.fixture
def tasks_of():
    """``model_tasks(model, target)``, memoized per test process."""
    from frontend_util import cached_tasks

    return cached_tasks
