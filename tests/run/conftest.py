"""Fixtures for the ``dcoc run`` tests: a small residual CNN as an ONNX file."""
from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from run_util import classifier

os.environ.setdefault("DCOC_QUIET", "1")


def tiny_cnn(seed: int = 0) -> onnx.ModelProto:
    """stem conv (CPU) -> conv+BN+ReLU -> conv+BN + residual -> ReLU -> 1x1 conv + Clip(0, 6)
    -> GlobalAveragePool -> Flatten -> Gemm (dense) : every kind of epilogue VTA absorbs."""
    rng = np.random.default_rng(seed)

    def t(name, *shape, scale=0.2):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32),
                                       name)

    inits = [t("w0", 16, 3, 3, 3, scale=0.4), t("w1", 32, 16, 3, 3, scale=0.1),
             t("w2", 32, 32, 3, 3, scale=0.08), t("w3", 32, 16, 1, 1, scale=0.2),
             t("w4", 48, 32, 1, 1, scale=0.2), t("wf", 10, 48, scale=0.2), t("bf", 10),
             t("b0", 16)]
    for i, c in ((1, 32), (2, 32)):
        inits += [numpy_helper.from_array((1 + 0.2 * rng.random(c)).astype(np.float32), f"g{i}"),
                  t(f"be{i}", c, scale=0.1), t(f"m{i}", c, scale=0.1),
                  numpy_helper.from_array((0.5 + rng.random(c)).astype(np.float32), f"v{i}")]
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1]),
        n("Relu", ["c0"], ["r0"]),
        n("Conv", ["r0", "w1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
        n("BatchNormalization", ["c1", "g1", "be1", "m1", "v1"], ["n1"]),
        n("Relu", ["n1"], ["r1"]),
        n("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        n("BatchNormalization", ["c2", "g2", "be2", "m2", "v2"], ["n2"]),
        n("Conv", ["r0", "w3"], ["c3"], strides=[2, 2]),  # downsample branch
        n("Add", ["n2", "c3"], ["a2"]),
        n("Relu", ["a2"], ["r2"]),
        n("Conv", ["r2", "w4"], ["c4"]),
        n("Clip", ["c4", "lo", "hi"], ["r4"]),
        n("GlobalAveragePool", ["r4"], ["p"]),
        n("Flatten", ["p"], ["f"]),
        n("Gemm", ["f", "wf", "bf"], ["y"], transB=1),
    ]
    inits += [numpy_helper.from_array(np.array(0.0, np.float32), "lo"),
              numpy_helper.from_array(np.array(6.0, np.float32), "hi")]
    return classifier(nodes, inits, "tiny_cnn", (1, 3, 16, 16))


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> str:
    p = tmp_path_factory.mktemp("run") / "tiny_cnn.onnx"
    onnx.save(tiny_cnn(), str(p))
    return str(p)


@pytest.fixture(scope="session")
def tiny_inputs(tmp_path_factory) -> str:
    """Three input samples stacked on a leading axis, as an .npz."""
    rng = np.random.default_rng(1)
    p = tmp_path_factory.mktemp("run") / "x.npz"
    np.savez(p, x=rng.standard_normal((3, 1, 3, 16, 16)).astype(np.float32))
    return str(p)
