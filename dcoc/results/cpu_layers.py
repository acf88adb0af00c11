"""How long the layers an accelerator leaves on the CPU take: timed with ONNX Runtime.

An accelerator run's latency (``TuneResult.latency_ms``) is the accelerator's time for the
layers it runs.  The others -- the stem convolution VTA's quantizer keeps in fp32,
dilated convolutions (and, on targets without grouped convs, depthwise / grouped ones),
pooling, reshapes -- run on the host CPU.
:func:`estimate_cpu_layers` times them so that summaries can report the accelerator, the
CPU layers and the whole model separately:

* every CPU **convolution or matmul** task is built as a one-operator fp32 ONNX graph with
  its exact shapes (strides, padding, groups, dilation) and timed with ONNX Runtime on this
  host (``threads`` intra-op threads; the fastest of ``repeat`` runs after warm-up: on a
  shared machine other processes only ever add time);
* every **other operator** (pooling, mean, reshape, ...), of which the task list keeps the
  op name and the average output size only, is timed as one elementwise pass (ONNX
  ``Relu``) over that many fp32 elements: a memory-bound lower estimate.

The numbers are this host's (the machine running dcoc), not the board's CPU; the result
says so (``method``).
"""
from __future__ import annotations

from dcoc.reference import host_threads

__all__ = ["estimate_cpu_layers", "host_threads"]


def _conv_graph(wl: dict):
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    n, c, h, w = wl["batch"], wl["in_channels"], wl["height"], wl["width"]
    o, g = wl["out_channels"], wl.get("groups", 1)
    kh, kw = wl["kernel_h"], wl["kernel_w"]
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((o, c // g, kh, kw)).astype(np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], group=g, kernel_shape=[kh, kw],
                            strides=[wl["stride_h"], wl["stride_w"]],
                            dilations=[wl.get("dilation_h", 1), wl.get("dilation_w", 1)],
                            pads=[wl["pad_top"], wl["pad_left"], wl["pad_bottom"], wl["pad_right"]])
    graph = helper.make_graph([node], "cpu_conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, h, w])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [weight])
    return graph, {"x": rng.standard_normal((n, c, h, w)).astype(np.float32)}


def _matmul_graph(wl: dict):
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    b, m, n, k = wl.get("batch", 1), wl["m"], wl["n"], wl["k"]
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((b, k, n)).astype(np.float32), "w")
    node = helper.make_node("MatMul", ["x", "w"], ["y"])
    graph = helper.make_graph([node], "cpu_matmul", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [b, m, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [weight])
    return graph, {"x": rng.standard_normal((b, m, k)).astype(np.float32)}


def _elementwise_graph(elements: int):
    import numpy as np
    from onnx import TensorProto, helper

    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph([node], "cpu_pass", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [elements])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [elements])])
    return graph, {"x": np.random.default_rng(0).standard_normal(elements).astype(np.float32)}


def _time(graph, feeds, threads: int, repeat: int) -> float:
    """Seconds of one run of a one-operator graph under ONNX Runtime (the fastest of
    ``repeat`` single runs after 3 warm-up runs)."""
    from onnx import helper

    from dcoc.reference import ort_session, ort_timings

    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    sess = ort_session(model.SerializeToString(), threads)
    return min(ort_timings(sess, feeds, repeat, warmup=3, min_repeat_ms=0))


def estimate_cpu_layers(tasks, threads: int | None = None, repeat: int = 20,
                        names=None) -> dict:
    """Time the CPU layers of an accelerator task list (``tvm_plugin.frontend.model_tasks``):
    ``{"ms": total per inference, "method": how, "threads": n, "layers": [{"layer", "kind",
    "count", "ms" (one occurrence), "timed_as"}]}``.  The CPU layers are the tasks of
    device ``cpu`` and the ``cpu_ops``, or, given ``names``, the tasks and ops so named
    (the target's own split)."""
    threads = int(threads or host_threads())
    rows = []
    every = list(tasks) + list(getattr(tasks, "cpu_ops", []) or [])
    if names is None:
        cpu = [t for t in every if getattr(t, "device", "cpu") == "cpu"]
    else:
        cpu = [t for t in every if t.name in set(names)]
    memo: dict = {}
    for t in cpu:
        wl = dict(getattr(t, "workload", {}) or {})
        if "conv" in t.kind and "kernel_h" in wl:
            key, build, how = ("conv", tuple(sorted(wl.items()))), lambda wl=wl: _conv_graph(wl), "Conv"
        elif t.kind in ("dense", "batch_matmul", "matmul") and "m" in wl:
            key, build, how = ("mm", tuple(sorted(wl.items()))), lambda wl=wl: _matmul_graph(wl), "MatMul"
        else:
            n = max(int(wl.get("elements", 0)), 1)
            key, build, how = ("pass", n), lambda n=n: _elementwise_graph(n), f"elementwise pass over {n} elements"
        if key not in memo:
            memo[key] = _time(*build(), threads, repeat)
        rows.append({"layer": t.name, "kind": t.kind, "count": int(t.weight), "ms": memo[key] * 1e3,
                     "timed_as": how})
    total = sum(r["count"] * r["ms"] for r in rows)
    import onnxruntime as ort

    method = (f"fp32 ONNX Runtime {ort.__version__} on this host, {threads} thread(s), fastest of {repeat} "
              "runs per layer (convolutions/matmuls at their shapes, other ops as one elementwise pass); "
              "not the board's CPU")
    return {"ms": total, "method": method, "threads": threads, "layers": rows}
