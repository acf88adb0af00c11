"""Depthwise and grouped convs on the accelerator, end to end: ``dcoc tune`` tunes them as
VTA layers (grouped conv2d, depthwise as block-diagonal groups) and ``dcoc run`` executes
them bit-exactly on the simulator with the latency tune reported."""
from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from run_util import classifier

import dcoc


def mini_mobilenet(seed: int = 0) -> onnx.ModelProto:
    """stem conv (CPU) -> depthwise 3x3 + BN + ReLU6 -> pointwise 1x1 -> depthwise 3x3
    stride 2 + ReLU -> grouped 3x3 (4 groups) -> GlobalAveragePool -> Gemm."""
    rng = np.random.default_rng(seed)

    def t(name, *shape, scale=0.3):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [t("w0", 32, 3, 3, 3), t("w1", 32, 1, 3, 3), t("w2", 48, 32, 1, 1, scale=0.2),
             t("w3", 48, 1, 3, 3), t("w4", 64, 12, 3, 3, scale=0.1), t("wf", 10, 64), t("bf", 10),
             numpy_helper.from_array((1 + 0.2 * rng.random(32)).astype(np.float32), "g1"),
             t("be1", 32, scale=0.1), t("m1", 32, scale=0.1),
             numpy_helper.from_array((0.5 + rng.random(32)).astype(np.float32), "v1"),
             numpy_helper.from_array(np.array(0.0, np.float32), "lo"),
             numpy_helper.from_array(np.array(6.0, np.float32), "hi")]
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1], strides=[2, 2]),
        n("Relu", ["c0"], ["r0"]),
        n("Conv", ["r0", "w1"], ["c1"], pads=[1, 1, 1, 1], group=32),
        n("BatchNormalization", ["c1", "g1", "be1", "m1", "v1"], ["n1"]),
        n("Clip", ["n1", "lo", "hi"], ["r1"]),
        n("Conv", ["r1", "w2"], ["c2"]),
        n("Conv", ["c2", "w3"], ["c3"], pads=[1, 1, 1, 1], strides=[2, 2], group=48),
        n("Relu", ["c3"], ["r3"]),
        n("Conv", ["r3", "w4"], ["c4"], pads=[1, 1, 1, 1], group=4),
        n("GlobalAveragePool", ["c4"], ["p"]),
        n("Flatten", ["p"], ["f"]),
        n("Gemm", ["f", "wf", "bf"], ["y"], transB=1),
    ]
    return classifier(nodes, inits, "mini_mobilenet", (1, 3, 32, 32))


@pytest.fixture(scope="module")
def mini_path(tmp_path_factory) -> str:
    p = tmp_path_factory.mktemp("onnx") / "mini_mobilenet.onnx"
    onnx.save(mini_mobilenet(), str(p))
    return str(p)


def test_tune_and_run_depthwise_and_grouped(mini_path, tmp_path):
    res = dcoc.tune(mini_path, board="pynq", trials=12, seed=0, work_dir=str(tmp_path / "wd"),
                    n_workers=0)
    names = set(res.schedules)
    assert {"depthwise_conv2d_16x16_32x32_k3s1", "depthwise_conv2d_16x16_48x48_k3s2",
            "grouped_conv2d_8x8_48x64_k3s1_g4"} <= names
    # only the stem conv and the host ops stay on the CPU, and the summary says why
    cpu = {c["layer"]: c["reason"] for c in res.cpu_layers}
    assert not any("depthwise" in c or "grouped" in c for c in cpu)
    assert "first conv" in cpu["conv2d_32x32_3x32_k3s2"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = dcoc.run(mini_path, hardware="pynq", compare_float=False, schedules=res)
    assert r.bit_exact and r.adapted == []
    per = {g["layer"]: g for g in r.per_layer}
    assert set(per) == names
    tuned = {ly["layer"]: ly["ms"] for ly in res.layers}
    for name, knobs in res.schedules.items():
        assert per[name]["knobs"] == knobs and not per[name]["default"]
        assert per[name]["ms"] == pytest.approx(tuned[name], rel=1e-9)
    assert r.latency_ms == pytest.approx(res.latency_ms, rel=0.01)
