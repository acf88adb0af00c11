"""Fixtures for the MetaSchedule integration tests (tvm_plugin.metaschedule.trace_space/strategy/build/tune/rpc).

Everything is real: real builds, real runs, real RPC servers on loopback.  Budgets are
tiny (8-16 trials) and the models small (a 16->16 3x3 conv on 16x16), so the default
suite stays within a few minutes on 2 cores; the first TuneContext of the session pays
TVM's one-off ``tvm.s_tir.tensor_intrin`` import (~15 s).
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper


def conv_onnx(n=1, c=16, h=16, w=16, oc=16, k=3, stride=1, pad=1, relu=True, seed=0,
              bn=False, groups=1):
    """A Conv(+bias)(+BatchNormalization)(+ReLU) ONNX model with deterministic weights;
    input ``x``."""
    rng = np.random.default_rng(seed)
    W = (rng.standard_normal((oc, c // groups, k, k)) * 0.1).astype("float32")
    B = (rng.standard_normal((oc,)) * 0.1).astype("float32")
    inits = [numpy_helper.from_array(W, "W"), numpy_helper.from_array(B, "B")]
    out = "c" if relu or bn else "y"
    nodes = [helper.make_node("Conv", ["x", "W", "B"], [out], kernel_shape=[k, k],
                              strides=[stride] * 2, pads=[pad] * 4, group=groups)]
    if bn:
        for name, v in [("gamma", rng.uniform(0.5, 1.5, oc)), ("beta", rng.normal(0, .1, oc)),
                        ("mean", rng.normal(0, .1, oc)), ("var", rng.uniform(0.5, 1.5, oc))]:
            inits.append(numpy_helper.from_array(v.astype("float32"), name))
        nodes.append(helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"],
                                      ["n" if relu else "y"]))
    if relu:
        nodes.append(helper.make_node("Relu", ["n" if bn else "c"], ["y"]))
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    g = helper.make_graph(
        nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, h, w])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, oc, oh, ow])],
        initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def three_task_onnx(path: str) -> str:
    """conv 3->8 (3x3) + relu, conv 8->8 (1x1), max pool on a 1x3x12x12 input ``x``: three
    MetaSchedule tasks of unequal FLOP, saved to ``path`` (returned)."""
    import onnx

    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array((rng.standard_normal((8, 3, 3, 3)) * 0.1).astype(np.float32), "w1")
    w2 = numpy_helper.from_array((rng.standard_normal((8, 8, 1, 1)) * 0.1).astype(np.float32), "w2")
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["a"], ["b"]),
         helper.make_node("Conv", ["b", "w2"], ["c"]),
         helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
        "three", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 6, 6])], [w1, w2])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


@pytest.fixture(scope="session")
def llvm():
    from tvm_plugin.frontend import resolve_target

    return resolve_target("llvm")


@pytest.fixture(scope="session")
def conv_model():
    from tvm_plugin.frontend import load

    return load(conv_onnx(), name="conv16")


@pytest.fixture(scope="session")
def conv_task(conv_model, llvm):
    """The conv model's one MetaSchedule task (a dcoc.tasks.Task with ms_task)."""
    tl = conv_model.tasks(llvm)
    assert len(tl) == 1
    return tl[0]


@pytest.fixture(scope="session")
def builder():
    from tvm_plugin.metaschedule.build import close_builder, make_builder

    b = make_builder("persistent", max_workers=2)
    yield b
    close_builder(b)


@pytest.fixture(scope="session")
def runner():
    from tvm_plugin.metaschedule.build import make_runner

    return make_runner("local")


def tune_context(task, strategy, seed=0):
    """A TuneContext for one frontend Task, driven by ``strategy`` (not cloned)."""
    from tvm_plugin.metaschedule.trace_space import make_tune_context

    et = task.ms_task
    return make_tune_context(et.dispatched[0], et.target, et.task_name, strategy=strategy,
                             num_threads=2, seed=seed)


def relu_onnx(shape=(1, 8, 8, 8)):
    """A single ReLU: its MetaSchedule task has a tiny knob space (unroll choices only)."""
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def count_records(db, mod) -> int:
    """Records of ``mod``'s workload in a MetaSchedule database."""
    if not db.has_workload(mod):
        return 0
    wl = db.commit_workload(mod)
    return sum(1 for r in db.get_all_tuning_records() if r.workload.same_as(wl))
