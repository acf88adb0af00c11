"""The CPU compile pipeline (weight prepacking, runtime threads), the wall-clock budget
and the profile beside ONNX Runtime -- real builds, runs and ONNX Runtime sessions on a
small conv model."""
from __future__ import annotations

import re

import numpy as np
import pytest

from tests.tvm.conftest import conv_onnx


def _ort(model_proto, x):
    import onnxruntime as ort

    s = ort.InferenceSession(model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, {"x": x})[0]


def test_runtime_threads_follow_the_target_unless_the_user_set_them(monkeypatch, llvm):
    from tvm_plugin.metaschedule.build import runtime_threads, use_runtime_threads

    monkeypatch.delenv("TVM_NUM_THREADS", raising=False)
    cores = int(llvm.tvm.attrs["num-cores"])
    assert runtime_threads(llvm.tvm) == cores
    assert use_runtime_threads(llvm.tvm) == cores
    import os

    assert os.environ["TVM_NUM_THREADS"] == str(cores)
    monkeypatch.setenv("TVM_NUM_THREADS", "1")
    assert use_runtime_threads(llvm.tvm) == 1


def test_prepacked_tuned_model_matches_onnxruntime_and_folds_the_packing(tmp_path, llvm):
    """Tuned with weight prepacking (the default on llvm): every tuned conv reads a packed
    constant (its weight buffer is no longer OIHW), nothing repacks at run time, and the
    outputs match ONNX Runtime."""
    from tvm import tirx

    from tvm_plugin.frontend import load
    from tvm_plugin.frontend.lowering import prepack_weights
    from tvm_plugin.metaschedule.build import compile_model
    from tvm_plugin.metaschedule.tuning import tune_model

    assert prepack_weights(llvm)
    proto = conv_onnx(c=8, oc=16, h=12, w=12)
    m = load(proto, name="conv8")
    # the task carries the layout-free attribute MetaSchedule's RewriteLayout needs
    (task,) = m.tasks(llvm)
    func = next(f for f in task.ms_task.dispatched[0].functions.values()
                if isinstance(f, tirx.PrimFunc))
    assert "layout_free_buffers" in (func.attrs or {})
    r = tune_model(m, llvm, trials=8, seed=0, work_dir=str(tmp_path / "wd"), progress=False,
                   baseline=False, keep_untuned_if_faster=False)
    x = np.random.default_rng(1).standard_normal((1, 8, 12, 12)).astype("float32")
    np.testing.assert_allclose(r.run({"x": x})[0], _ort(proto, x), rtol=1e-4, atol=1e-5)
    from tvm.s_tir import meta_schedule as ms

    db = ms.database.JSONDatabase(work_dir=str(tmp_path / "wd"))
    ex, report = compile_model(db, m.mod, llvm.tvm)
    assert report["tuned"]
    oihw = "T.int64(16), T.int64(8), T.int64(3), T.int64(3)"

    def signature(f):
        text = f.script()
        return text[text.index("def main("):].split("\n")[0]

    # the layouts the tuned schedule asked for: the buffers its layout-rewrite blocks write
    # (usually tiled, e.g. (2, 4, 2, 2, 4, 3, 3); a schedule may also keep OIHW order)
    best = db.query_schedule(task.ms_task.dispatched[0], llvm.tvm,
                             workload_name=task.ms_task.task_name).mod["main"].script()
    # a shape: "(T.int64(2), T.int64(4))", or one dimension "(T.int64(16),)" (a bias)
    shape = r"\(((?:T\.int64\(\d+\),? ?)+)\)"

    def dims(text):
        return tuple(int(d) for d in re.findall(r"\d+", text))

    allocs = {b: dims(s) for b, s in
              re.findall(r"(\w+) = T\.sblock_alloc_buffer\(" + shape, best)}
    rewritten = re.findall(r"T\.writes\((\w+)\[[^\n]*\n\s*"
                           r"T\.sblock_attr\(\{\"meta_schedule\.layout_rewrite_preproc\"", best)
    assert rewritten, best
    # the tuned kernel is renamed "<function>_prepacked", takes the packed constants as
    # parameters and no longer rewrites anything itself
    packed = {n: f for n, f in report["functions"].items()
              if n.endswith("_prepacked") and n[: -len("_prepacked")] in report["tuned"]}
    assert packed
    for f in packed.values():
        params = [dims(p) for p in re.findall(r"\w+: T\.Buffer\(" + shape, signature(f))]
        assert {allocs[b] for b in rewritten} <= set(params), (signature(f), rewritten)
        assert "layout_rewrite_preproc" not in f.script()
    # the packing itself was folded into the constants: the one-conv model's executable
    # has no function left but the prepacked kernel (no run-time repacking function)
    assert sorted(report["functions"]) == sorted(packed), sorted(report["functions"])
    # without prepacking the weights stay in OIHW
    _, plain = compile_model(None, m.mod, llvm.tvm, prepack=False)
    assert any(oihw in signature(f) for f in plain["functions"].values())


def test_profile_splits_time_by_kind_beside_onnxruntime(llvm):
    from tvm_plugin.frontend import load
    from tvm_plugin.metaschedule.build import compile_model
    from tvm_plugin.metaschedule.profile import KINDS, format_profile, gap_rows, profile_compiled

    proto = conv_onnx(c=8, oc=16, h=12, w=12)
    m = load(proto, name="conv8")
    ex, report = compile_model(None, m.mod, llvm.tvm)
    prof = profile_compiled(ex, report, llvm.tvm, m, proto.SerializeToString(), runs=5,
                            label="untuned")
    t, o = prof["tvm"], prof["onnxruntime"]
    assert [f["kind"] for f in t["functions"]][0] == "conv"
    assert not any(f["tuned"] for f in t["functions"])
    assert {n["kind"] for n in o["nodes"]} <= set(KINDS) and o["nodes"]
    assert any(n["kind"] == "conv" for n in o["nodes"])
    assert 0 < t["kernels_ms"] and 0 < o["kernels_ms"]
    rows = gap_rows(prof)
    total = rows[-1]
    assert total["part"].startswith("total")
    assert sum(r["gap_ms"] for r in rows[:-1]) == pytest.approx(total["gap_ms"], rel=1e-6, abs=1e-9)
    text = format_profile(prof)
    assert "untuned kernels" in text and "ONNX Runtime operators" in text


def test_profile_keeps_onnxruntime_runs_outside_each_blocks_warm_up():
    # profile_runs times each runtime in blocks that start with unprofiled warm-up runs;
    # ONNX Runtime's profiler records those too, and only the others may be counted
    from tvm_plugin.metaschedule.profile import _ort_runs

    events = []
    for i in range(4):  # a run's node events, then its model_run event (microseconds)
        events.append({"cat": "Node", "name": "conv_kernel_time", "dur": 1000 * (i + 1),
                       "args": {"op_name": "Conv"}})
        events.append({"cat": "Session", "name": "model_run", "dur": 1500 * (i + 1)})
    runs, walls, ops = _ort_runs(events, [False, True, False, True])
    assert runs == [{"conv": 2.0}, {"conv": 4.0}]
    assert walls == [3.0, 6.0] and ops == {"conv": "Conv"}


def test_bench_cpu_appends_rows_as_it_goes_and_a_rerun_resumes(tmp_path):
    # a few seconds of tuning, each runtime timed in its own process; then a rerun with the
    # same rows file tunes and times nothing again, and one without the timing rows only times
    import json

    from scripts import bench_cpu

    out = tmp_path / "rows.jsonl"
    kw = dict(models=["small_cnn"], minutes=[0.05], runs=["surrogate"], seed=0,
              work_dir=str(tmp_path / "w"), rounds=2, out=str(out), log=lambda line: None)
    first = bench_cpu.run(**kw)
    tuning = [r for r in first if r["kind"] == "tuning"]
    timing = {r["strategy"]: r for r in first if r["kind"] == "timing"}
    assert len(tuning) == 1 and tuning[0]["stopped_by"] == "clock"
    assert tuning[0]["time_profile"]["built"] == tuning[0]["trials"]
    assert set(timing) == {"onnxruntime", "untuned", "surrogate@0.05min"}
    for r in timing.values():
        assert len(r["rounds_ms"]) == 2 and r["ms"] == min(r["rounds_ms"]) > 0
    t = timing["surrogate@0.05min"]
    assert t["ratio_lo"] <= t["ratio_hi"] and t["ratio"] == pytest.approx(t["ms"] / t["ort_ms"])
    lines = out.read_text().splitlines()
    assert len(lines) == 4
    bench_cpu.run(**kw)
    assert out.read_text().splitlines() == lines       # nothing tuned or timed again
    out.write_text(lines[0] + "\n")                    # the tuning row only: time, do not tune
    again = bench_cpu.run(**kw)
    assert [r["kind"] for r in again].count("tuning") == 1
    assert json.loads(out.read_text().splitlines()[0]) == tuning[0]
    assert len(out.read_text().splitlines()) == 4


@pytest.mark.parametrize("groups", [1, 16])
def test_batch_norm_folds_into_the_conv_weights_and_matches_onnxruntime(llvm, groups):
    """Conv + bias + BatchNormalization + ReLU (dense and depthwise): the fused kernel's
    epilogue is one add (no subtract/divide/multiply left), tasks and compile agree, and
    the compiled model matches ONNX Runtime."""
    from tvm_plugin.frontend import load
    from tvm_plugin.metaschedule.build import compile_model

    proto = conv_onnx(c=16, oc=16, h=10, w=10, bn=True, groups=groups)
    m = load(proto, name="conv_bn")
    (task,) = m.tasks(llvm)
    assert re.fullmatch(r"fused_conv2d_add\d*_relu\d*", task.ms_task.task_name), \
        task.ms_task.task_name
    ex, report = compile_model(None, m.mod, llvm.tvm)
    assert not [n for n in report["functions"] if re.search("subtract|divide|multiply", n)]
    from tvm_plugin.metaschedule.build import make_model_runner

    x = np.random.default_rng(2).standard_normal((1, 16, 10, 10)).astype("float32")
    got = make_model_runner(ex, llvm.tvm, ["x"])({"x": x})[0]
    np.testing.assert_allclose(got, _ort(proto, x), rtol=1e-4, atol=1e-5)


def test_affine_chain_with_another_user_is_left_alone():
    """A scale whose intermediate result is also used elsewhere is not folded (folding
    would change that other use)."""
    from tvm.script import relax as R

    from tvm_plugin.frontend.rewrites import fold_affine_into_conv

    w = np.ones((4, 2, 1, 1), "float32")
    s = np.full((1, 4, 1, 1), 2.0, "float32")

    @R.function
    def main(x: R.Tensor((1, 2, 3, 3), "float32")):
        with R.dataflow():
            c = R.nn.conv2d(x, R.const(w))
            d = R.multiply(c, R.const(s))
            e = R.add(d, R.const(s))
            f = R.add(e, d)
            R.output(f)
        return f

    mod = tvm_module(main)
    assert fold_affine_into_conv(mod).same_as(mod)

    @R.function
    def chain(x: R.Tensor((1, 2, 3, 3), "float32")):
        with R.dataflow():
            c = R.nn.conv2d(x, R.const(w))
            d = R.multiply(c, R.const(s))
            e = R.add(d, R.const(s))
            R.output(e)
        return e

    folded = fold_affine_into_conv(tvm_module(chain))
    text = folded["main"].script(show_meta=True)
    assert "multiply" not in text and text.count("R.add") == 1


def tvm_module(func):
    import tvm

    return tvm.IRModule({"main": func})


def test_gelu_uses_the_fast_erf_and_matches_onnxruntime(llvm):
    """MatMul + exact GELU (Erf): the fused kernel computes TVM's fast_erf (no scalar libm
    erff call per element), and the compiled model matches ONNX Runtime."""
    from onnx import TensorProto, helper, numpy_helper

    from tvm_plugin.frontend import load
    from tvm_plugin.metaschedule.build import compile_model, make_model_runner

    rng = np.random.default_rng(0)
    w = (rng.standard_normal((32, 64)) * 0.3).astype("float32")
    consts = {"w": w, "sqrt2": np.array(2 ** 0.5, "float32"), "one": np.array(1, "float32"),
              "half": np.array(0.5, "float32")}
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("Div", ["h", "sqrt2"], ["d"]),
             helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["a"]),
             helper.make_node("Mul", ["h", "a"], ["m"]),
             helper.make_node("Mul", ["m", "half"], ["y"])]
    g = helper.make_graph(nodes, "gelu",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 32])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 64])],
                          initializer=[numpy_helper.from_array(v, k) for k, v in consts.items()])
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    m = load(proto, name="gelu")
    (task,) = m.tasks(llvm)
    assert "fast_erf" in task.ms_task.task_name, task.ms_task.task_name
    ex, report = compile_model(None, m.mod, llvm.tvm)
    assert [n for n in report["functions"] if "fast_erf" in n]
    assert "@erff" not in ex.mod.imports[0].inspect_source("ll")  # no libm call left
    x = (rng.standard_normal((8, 32)) * 2).astype("float32")
    got = make_model_runner(ex, llvm.tvm, ["x"])({"x": x})[0]
    np.testing.assert_allclose(got, _ort(proto, x), rtol=1e-4, atol=1e-5)


def test_onnx_sum_becomes_adds_that_fuse_into_the_conv_and_matches_onnxruntime(llvm):
    """Conv + Sum(conv, input, per-channel constant) + ReLU, a residual join as Caffe2
    exports it: one fused conv task with the adds and the ReLU in its epilogue (no
    stack/sum kernel left), and the compiled model matches ONNX Runtime."""
    from onnx import TensorProto, helper, numpy_helper

    from tvm_plugin.frontend import load
    from tvm_plugin.metaschedule.build import compile_model, make_model_runner

    rng = np.random.default_rng(1)
    consts = {"w": (rng.standard_normal((8, 8, 3, 3)) * 0.3).astype("float32"),
              "k": rng.standard_normal((1, 8, 1, 1)).astype("float32")}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Sum", ["c", "x", "k"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    g = helper.make_graph(nodes, "residual_sum",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 10, 10])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 10, 10])],
                          initializer=[numpy_helper.from_array(v, k) for k, v in consts.items()])
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    proto.ir_version = 8
    m = load(proto, name="residual_sum")
    assert "R.stack" in m.mod["main"].script()  # how the importer spells Sum
    (task,) = m.tasks(llvm)
    assert re.fullmatch(r"fused_conv2d_add\d*_add\d*_relu\d*", task.ms_task.task_name), \
        task.ms_task.task_name
    ex, report = compile_model(None, m.mod, llvm.tvm)
    assert not [n for n in report["functions"] if re.search("stack|sum|broadcast", n)]
    x = rng.standard_normal((1, 8, 10, 10)).astype("float32")
    got = make_model_runner(ex, llvm.tvm, ["x"])({"x": x})[0]
    np.testing.assert_allclose(got, _ort(proto, x), rtol=1e-4, atol=1e-5)


def test_a_stack_with_another_use_is_not_rewritten():
    from tvm.script import relax as R

    from tvm_plugin.frontend.rewrites import sum_as_adds

    @R.function
    def main(a: R.Tensor((1, 4), "float32"), b: R.Tensor((1, 4), "float32")):
        with R.dataflow():
            s = R.stack((a, b), axis=0)
            t = R.sum(s, axis=[0], keepdims=False)
            u = R.max(s, axis=[0], keepdims=False)
            v = R.add(t, u)
            R.output(v)
        return v

    mod = tvm_module(main)
    assert sum_as_adds(mod).same_as(mod)
