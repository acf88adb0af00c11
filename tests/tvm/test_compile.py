"""Tuned compiled models give the same outputs as the untuned model and ONNX Runtime.

Tolerance: fp32 with a different summation order (tiling splits the reduction) ->
``rtol=1e-4, atol=1e-5`` against ONNX Runtime, the ONNX test's stored output and the
untuned TVM build (measured differences are ~1e-6).
"""
from __future__ import annotations

import glob
import os

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

RTOL, ATOL = 1e-4, 1e-5
DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "pytorch-converted")


def _ort(model_path, feeds):
    import onnxruntime as ort

    s = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


@pytest.mark.parametrize("case", ["test_Conv2d", "test_Conv2d_strided"])
def test_tuned_model_matches_untuned_and_onnxruntime(case, tmp_path):
    from dcoc.api.cpu import tune_metaschedule as tune_model
    from tvm_plugin.frontend import load, resolve_target
    from tvm_plugin.metaschedule.build import compile_model, make_model_runner

    d = os.path.join(DATA, case)
    path = os.path.join(d, "model.onnx")
    inputs = [numpy_helper.to_array(onnx.load_tensor(p))
              for p in sorted(glob.glob(os.path.join(d, "test_data_set_0", "input_*.pb")))]
    expected = [numpy_helper.to_array(onnx.load_tensor(p))
                for p in sorted(glob.glob(os.path.join(d, "test_data_set_0", "output_*.pb")))]
    m = load(path)
    feeds = dict(zip(m.input_shapes, inputs))
    r = tune_model(m, "llvm", trials=8, tuner="random", seed=0, work_dir=str(tmp_path),
                   num_trials_per_iter=8, progress=False, baseline=False,
                   keep_untuned_if_faster=False)
    assert r.extra["tuned_functions"], "no tuned PrimFunc was applied"
    got = r.run(feeds)
    ref = _ort(path, feeds)
    tgt = resolve_target(r.target).tvm
    ex0, rep0 = compile_model(None, m.mod, tgt)
    assert rep0["tuned"] == []
    untuned = make_model_runner(ex0, tgt, list(m.input_shapes))(feeds)
    for g, e, o, u in zip(got, expected, ref, untuned):
        np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(g, o, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(g, u, rtol=RTOL, atol=ATOL)
    assert r.latency_ms > 0 and r.trials >= 1 and r.database_path == str(tmp_path)
    assert os.path.exists(os.path.join(str(tmp_path), "database_tuning_record.json"))
    js = r.to_json()
    assert js["schedules"] and all(v["trace"] for v in js["schedules"].values())


def test_compile_model_refuses_fused_module(conv_model, llvm):
    from dcoc.errors import DcocError
    from tvm_plugin.metaschedule.build import compile_model

    with pytest.raises(DcocError, match="unfused"):
        compile_model(None, conv_model.fused(llvm), llvm.tvm)


@pytest.mark.slow
def test_resnet18_tuned_matches_onnxruntime(tmp_path):
    """ResNet-18 (zoo, deterministic weights): every task tuned a little, compiled, and
    compared with ONNX Runtime (same tolerance; ~2-4 min on 2 cores)."""
    import dcoc_models
    from dcoc.api.cpu import tune_metaschedule as tune_model
    from tvm_plugin.frontend import load

    path = dcoc_models.resolve("resnet18")
    m = load(path)
    x = np.random.default_rng(0).standard_normal(m.input_shapes["input"]).astype("float32")
    r = tune_model(m, "llvm", trials=2 * len(m.tasks("llvm")), tuner="random", seed=0,
                   work_dir=str(tmp_path), num_trials_per_iter=2, progress=False,
                   baseline=False, keep_untuned_if_faster=False)
    assert len(r.extra["tuned_functions"]) >= 15
    got = r.run({"input": x})
    ref = _ort(path, {"input": x})
    np.testing.assert_allclose(got[0], ref[0], rtol=RTOL, atol=1e-4)
    assert r.latency_ms > 0
