"""Helpers shared by the tests/api tests (a plain module: ``conftest`` is not importable by
name once several test directories have one).

The oracle functions here recompute what a tuning result claims from first principles
(the frontend's task list and :func:`dcoc.targets.vta.simulate`), without going through
``dcoc.codesign`` or ``dcoc.api``.
"""
from __future__ import annotations

import dataclasses
import fcntl
import functools
import json
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import time

#: the keys a user relies on in ``dcoc tune --json OUT`` / ``TuneResult.to_json()``
RESULT_KEYS = {"hardware", "schedules", "latency_ms", "throughput", "baseline_latency_ms",
               "trials", "tuner", "seed", "history"}

BASELINES = ["random", "grid", "ga", "xgb", "rl", "chameleon"]
TUNERS = ["surrogate", "dcoc"] + BASELINES


@functools.lru_cache(maxsize=None)
def vta_layers(model: str):
    """``[(name, workload, count, epilogue)]`` of a model's VTA layers (one per task and
    fused epilogue, :func:`dcoc.targets.vta.report.model_layers`), straight from the frontend."""
    from dcoc.targets.vta.report import model_layers
    from tvm_plugin.frontend import model_tasks

    return tuple((ml.name, ml.workload, ml.count, ml.epilogue)
                 for ml in model_layers(model_tasks(model, "vta"))[0])


def sim_seconds(wl, hw, knobs, epilogue=None) -> float:
    from dcoc.targets.vta import simulate
    from dcoc.targets.vta.report import MODEL_EPILOGUE

    r = simulate(wl, hw, knobs, epilogue=epilogue or MODEL_EPILOGUE)  # the layer's epilogue
    assert r.valid, f"schedule {knobs} is invalid on {hw.name}: {r.reason}"
    return r.seconds


def model_latency_ms(model: str, hw, schedules: dict) -> float:
    """Sum over VTA layers of count x simulated time of ``schedules[layer]`` on ``hw``."""
    layers = vta_layers(model)
    assert set(schedules) == {ly[0] for ly in layers}, "schedules do not cover the VTA layers"
    return 1e3 * sum(c * sim_seconds(wl, hw, schedules[n], ep) for n, wl, c, ep in layers)


def default_latency_ms(model: str, hw) -> float:
    """The model on ``hw`` with every layer at :func:`dcoc.targets.vta.default_knobs` for its epilogue."""
    from dcoc.targets.vta import default_knobs

    return 1e3 * sum(c * sim_seconds(wl, hw, default_knobs(wl, hw, epilogue=ep), ep)
                     for _, wl, c, ep in vta_layers(model))


def hw_fields(hw) -> dict:
    return {f.name: getattr(hw, f.name) for f in dataclasses.fields(hw) if f.init}


def read_records(path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def measurement_key(r: dict) -> tuple:
    return (r["task"], r["hw"], json.dumps(r["knobs"], sort_keys=True), r["tuner"], r["seed"])


def duplicates(rows: list[dict]) -> list[tuple]:
    """Measurement keys recorded more than once."""
    seen, dup = set(), []
    for r in rows:
        k = measurement_key(r)
        if k in seen:
            dup.append(k)
        seen.add(k)
    return dup


def assert_history(history, trials: int, final_ms: float):
    """[(trial, best ms)]: trial indices increasing inside the budget, values non-increasing,
    the last one the final latency."""
    assert history, "empty history"
    ts = [int(t) for t, _ in history]
    vs = [float(v) for _, v in history]
    assert ts == sorted(set(ts)), "trial indices not strictly increasing"
    assert 0 <= ts[0] and ts[-1] < trials
    assert all(b <= a for a, b in zip(vs, vs[1:])), "best-so-far latency went up"
    assert vs[-1] == final_ms


def truncate_records(src_dir, dst_dir, n_lines: int, partial: str | None = None):
    """Copy a work dir's first ``n_lines`` records (optionally plus a torn last line)."""
    os.makedirs(dst_dir, exist_ok=True)
    with open(os.path.join(src_dir, "records.jsonl"), encoding="utf-8") as f:
        lines = f.readlines()[:n_lines]
    with open(os.path.join(dst_dir, "records.jsonl"), "w", encoding="utf-8") as f:
        f.writelines(lines)
        if partial:
            f.write(partial)


def dcoc_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "dcoc.cli", *args]


def cli_env() -> dict:
    return {**os.environ, "DCOC_QUIET": "1", "PYTHONUNBUFFERED": "1"}


def run_cli(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run ``dcoc ARGS`` in a fresh interpreter (exit code, stdout, stderr as a user sees them)."""
    return subprocess.run(dcoc_cmd(*args), capture_output=True, text=True, timeout=timeout,
                          env=cli_env())


def count_lines(path) -> int:
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except FileNotFoundError:
        return 0


def start_and_signal(args, records_path, min_lines: int, sig, timeout: float = 120.0):
    """Start ``dcoc ARGS`` in its own session, wait until ``records_path`` holds ``min_lines``
    complete lines, send ``sig`` (or SIGINT to the process group for ``"group-SIGINT"``);
    returns (CompletedProcess-like tuple (rc, stdout, stderr), lines at signal).

    Returns lines_at_signal = None when the run finished before the records got there.
    """
    # SIGINT back to its default in the child: a test run started in the background of a
    # non-interactive shell inherits SIGINT ignored, and Ctrl-C would then do nothing
    p = subprocess.Popen(dcoc_cmd(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=cli_env(), start_new_session=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + timeout
    at = None
    try:
        while p.poll() is None and time.monotonic() < deadline:
            n = count_lines(records_path)
            if n >= min_lines:
                if sig == "group-SIGINT":  # Ctrl-C in a terminal: the whole process group
                    os.killpg(p.pid, signal.SIGINT)
                else:
                    p.send_signal(sig)
                at = n
                break
            time.sleep(0.005)
        out, err = p.communicate(timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    return (p.returncode, out, err), at


def fresh_dir(path):
    shutil.rmtree(path, ignore_errors=True)
    return str(path)


def shared_run(tmp_path_factory, key: str, fn):
    """``fn(work_dir)`` computed once per test session, shared by the xdist workers.

    Results are pickled under the session's common base temp dir, next to the work dir;
    a file lock makes a second worker wait for the first instead of repeating the run.
    """
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    d = root / "shared_runs"
    d.mkdir(exist_ok=True)
    key = re.sub(r"[^A-Za-z0-9_.-]+", "_", key)
    with open(d / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            pkl = d / f"{key}.pkl"
            if pkl.exists():
                with open(pkl, "rb") as f:
                    return pickle.load(f)
            wd = d / key
            shutil.rmtree(wd, ignore_errors=True)
            res = fn(str(wd))
            with open(pkl, "wb") as f:
                pickle.dump(res, f)
            return res
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def residual_cnn(size: int = 32, seed: int = 0):
    """A small residual CNN (an ``onnx.ModelProto``): stem conv (CPU), then three stages of a
    stride-2 conv and a conv with a residual add (16 -> 32 -> 64 -> 128 channels), global
    pooling and a dense layer."""
    import numpy as np
    import onnx
    from onnx import TensorProto as TP
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(seed)
    inits = []

    def w(name, *shape):
        fan = int(np.prod(shape[1:])) or 1
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(fan)).astype(np.float32), name))
        return name

    n = helper.make_node
    nodes = [n("Conv", ["x", w("w0", 16, 3, 3, 3)], ["c0"], pads=[1, 1, 1, 1]), n("Relu", ["c0"], ["r0"])]
    prev, ci = "r0", 16
    for i, co in enumerate((32, 64, 128)):
        nodes += [n("Conv", [prev, w(f"d{i}", co, ci, 3, 3)], [f"d{i}o"], pads=[1, 1, 1, 1], strides=[2, 2]),
                  n("Relu", [f"d{i}o"], [f"d{i}r"]),
                  n("Conv", [f"d{i}r", w(f"b{i}", co, co, 3, 3)], [f"b{i}o"], pads=[1, 1, 1, 1]),
                  n("Add", [f"b{i}o", f"d{i}r"], [f"a{i}"]), n("Relu", [f"a{i}"], [f"s{i}"])]
        prev, ci = f"s{i}", co
    inits.append(numpy_helper.from_array(np.zeros(10, np.float32), "bf"))
    nodes += [n("GlobalAveragePool", [prev], ["p"]), n("Flatten", ["p"], ["f"]),
              n("Gemm", ["f", w("wf", 10, ci), "bf"], ["y"], transB=1)]
    g = helper.make_graph(nodes, "residual_cnn", [helper.make_tensor_value_info("x", TP.FLOAT, [1, 3, size, size])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [1, 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def small_cnn(path: str) -> str:
    """conv 16->32 (3x3; the frontend leaves it on the CPU like any stem conv) + relu + conv
    32->64 (3x3, stride 2) + global pool + dense 64->10, saved to ``path``: two accelerator
    layers."""
    import numpy as np
    import onnx
    from onnx import TensorProto as TP
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((32, 16, 3, 3)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((64, 32, 3, 3)).astype(np.float32), "w2")
    w3 = numpy_helper.from_array(rng.standard_normal((10, 64)).astype(np.float32), "w3")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("GlobalAveragePool", ["r2"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "w3"], ["y"], transB=1)]
    g = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("x", TP.FLOAT, [1, 16, 28, 28])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [1, 10])], [w1, w2, w3])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return path
