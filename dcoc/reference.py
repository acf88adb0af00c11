"""The reference a tuned llvm model is compared with: ONNX Runtime on the host CPU,
timed without TVM, and the summary phrases that quote it.

:func:`onnxruntime_latency_ms` times an ONNX model in ONNX Runtime (CPU) the way
:func:`tvm_plugin.metaschedule.build.measure_latency` times a compiled TVM model: warm-up
runs, then the median of ``repeat`` timings, each averaging as many runs as fill
``min_repeat_ms``.  Pass the thread count TVM's runtime uses (``runtime.NumThreads``,
:func:`tvm_plugin.metaschedule.build.pool_threads`) so both run on the same threads.
:func:`ort_timings` is the one timing loop (also :mod:`dcoc.results.cpu_layers`'),
:func:`host_threads` the CPU cores this process may run on.
"""
from __future__ import annotations

import math
import os
import time
from typing import Any, Mapping, Sequence

import numpy as np

from dcoc.errors import DcocError


def host_threads() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def ort_session(model: Any, threads: int, profile_prefix: str | None = None,
                optimized_path: str | None = None):
    """An ONNX Runtime CPU session on ``threads`` intra-op threads (one inter-op thread,
    sequential execution); ``profile_prefix`` turns on its per-node profiler,
    ``optimized_path`` saves the graph it optimized."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = int(threads)
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 3
    if profile_prefix:
        so.enable_profiling = True
        so.profile_file_prefix = profile_prefix
    if optimized_path:
        so.optimized_model_filepath = optimized_path
    if hasattr(model, "SerializeToString"):
        model = model.SerializeToString()
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def random_feed(session, input_shapes: Mapping[str, Sequence[int]] | None = None,
                seed: int = 0) -> dict:
    """Deterministic inputs for every graph input of ``session``: floats ~ N(0, 1), ints in
    [0, 10); ``input_shapes`` gives the dynamic dimensions (one-line error when missing)."""
    rng = np.random.default_rng(seed)
    feed = {}
    for inp in session.get_inputs():
        shape = (input_shapes or {}).get(inp.name, inp.shape)
        if any(not isinstance(d, (int, np.integer)) or d < 0 for d in shape):
            raise DcocError(f"ONNX Runtime baseline: input '{inp.name}' has dynamic shape "
                            f"{list(inp.shape)}; give input_shapes")
        t = inp.type  # e.g. "tensor(float)"
        dt = {"tensor(float)": "float32", "tensor(double)": "float64", "tensor(float16)": "float16",
              "tensor(int64)": "int64", "tensor(int32)": "int32", "tensor(int8)": "int8",
              "tensor(uint8)": "uint8", "tensor(bool)": "bool"}.get(t, "float32")
        if dt.startswith("float"):
            feed[inp.name] = rng.standard_normal(tuple(shape)).astype(dt)
        elif dt == "bool":
            feed[inp.name] = rng.integers(0, 2, tuple(shape)).astype(dt)
        else:
            feed[inp.name] = rng.integers(0, 10, tuple(shape)).astype(dt)
    return feed


def onnxruntime_latency_ms(model_path: Any, input_shapes: Mapping[str, Sequence[int]] | None = None,
                           threads: int = 1, repeat: int = 5, *, inputs: Mapping | None = None,
                           warmup: int = 3, min_repeat_ms: float = 100.0, session=None) -> float:
    """Median latency (ms) of one inference of an ONNX model in ONNX Runtime on the CPU.

    model_path: an ONNX file, its serialized bytes or an ``onnx.ModelProto``.
    input_shapes: ``{input name: shape}`` for inputs with dynamic dimensions (random
        inputs are made for every input, seeded).
    threads: ONNX Runtime's intra-op thread count (inter-op 1, sequential execution).
    repeat: timings; each averages the runs that fill ``min_repeat_ms``.
    inputs: ``{input name: array}`` to run instead of random ones.
    session: an :func:`ort_session` to time instead of a new one (``model_path`` unused).
    """
    if int(threads) < 1:
        raise DcocError(f"threads must be >= 1, got {threads}")
    if int(repeat) < 1:
        raise DcocError(f"repeat must be >= 1, got {repeat}")
    try:
        sess = session if session is not None else ort_session(model_path, threads)
    except ImportError:
        raise DcocError("onnxruntime is not installed: no ONNX Runtime baseline") from None
    feed = dict(inputs) if inputs is not None else random_feed(sess, input_shapes)
    names = {i.name for i in sess.get_inputs()}
    feed = {k: v for k, v in feed.items() if k in names}
    times = ort_timings(sess, feed, repeat, warmup=warmup, min_repeat_ms=min_repeat_ms)
    return float(np.median([t * 1e3 for t in times]))


def ort_timings(session, feed: Mapping, repeat: int, warmup: int = 3,
                min_repeat_ms: float = 0.0) -> list[float]:
    """Seconds per run of ``session`` on ``feed``: ``warmup`` runs (at least one), then
    ``repeat`` timings, each averaging the runs that fill ``min_repeat_ms`` (0: one run)."""
    for _ in range(max(1, int(warmup))):
        session.run(None, feed)
    times = []
    for _ in range(int(repeat)):
        n, t0 = 0, time.perf_counter()
        while True:
            session.run(None, feed)
            n += 1
            el = time.perf_counter() - t0
            if el * 1e3 >= min_repeat_ms:
                break
        times.append(el / n)
    return times


def speed_line(tuned_ms: float, untuned_ms: float, ort_ms: float = math.nan,
               threads: int | None = None) -> str:
    """``tuned 521 ms = 1.83x untuned TVM, 27.6x slower than ONNX Runtime (18.9 ms)``."""
    def ms(x):
        return f"{x:.0f} ms" if x >= 100 else f"{x:.3f} ms" if x < 1 else f"{x:.1f} ms"

    out = f"tuned {ms(tuned_ms)}"
    if math.isfinite(untuned_ms) and untuned_ms > 0:
        out += f" = {untuned_ms / tuned_ms:.2f}x untuned TVM ({ms(untuned_ms)})"
    if math.isfinite(ort_ms) and ort_ms > 0:
        r = tuned_ms / ort_ms
        rel = f"{r:.2f}x slower than" if r >= 1 else f"{1 / r:.2f}x faster than"
        out += f", {rel} ONNX Runtime ({ms(ort_ms)}"
        out += f", {threads} thread{'s' if threads != 1 else ''})" if threads else ")"
    return out


def untuned_phrase(n_untuned: int, n_tasks: int, n_unmeasured: int) -> str:
    """``13 of 30 tasks run TVM's default code (11 unmeasured, 2 faster untuned)``."""
    kept = n_untuned - n_unmeasured
    why = [f"{n_unmeasured} unmeasured"] if n_unmeasured else []
    why += [f"{kept} faster untuned"] if kept else []
    return f"{n_untuned} of {n_tasks} tasks run TVM's default code ({', '.join(why)})"


__all__ = ["host_threads", "onnxruntime_latency_ms", "ort_session", "ort_timings", "random_feed",
           "speed_line", "untuned_phrase"]
