"""Table-driven fuzz suite: bad input to every CLI command and the Python API.

Every case runs in this process (``dcoc.cli.main``) under a per-case time limit (a hang
fails it) and asserts:

* no traceback on stderr;
* a user error exits 2 with exactly one ``dcoc: error:`` line (``dcoc: warning:`` lines
  may precede it, nothing else);
* nothing recorded is lost: a records file given to the command is byte-for-byte what
  it was before (or, for a run that appends, starts with it).

API cases assert that a :class:`dcoc.errors.DcocError` (never a bare Python exception)
is raised, and the silent-wrong-result cases of the runtime (NaN/Inf/huge inputs,
degenerate calibration) are refused.  :data:`CLI_CASES` / :data:`API_CASES` list them;
``test_case_counts`` prints the count per command.
"""
from __future__ import annotations

import json
import os
import stat
import sys
from collections import Counter

import numpy as np
import pytest

pytestmark = pytest.mark.timeout(120)

GOOD_RECORD = {"task": "vta:x", "task_name": "x", "hw": "h", "knobs": {"a": 1}, "cost": 0.001,
               "valid": True, "tuner": "random", "seed": 0, "trial": 0}
NESTED = "[" * 100000 + "]" * 100000


def tiny_conv_onnx(path: str) -> str:
    """Conv 16->16 3x3 + ReLU on 1x16x16x16: one VTA layer."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((16, 16, 3, 3)) * 0.1).astype("float32"), "w")
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["y"])], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 16, 16])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def data_dependent_onnx(path: str) -> str:
    """Conv, ReLU, then NonZero: the output size depends on the input values."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.full((16, 16, 1, 1), 0.01, "float32"), "w")
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("NonZero", ["r"], ["y"])],
        "nz", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [4, None])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


@pytest.fixture(scope="module")
def F(tmp_path_factory):
    """The bad (and good) files the cases point at: ``F[name]`` is a path."""
    d = tmp_path_factory.mktemp("fuzz")
    f = {}

    def put(name, data: bytes | str):
        p = d / name
        p.write_bytes(data if isinstance(data, bytes) else data.encode())
        f[name] = str(p)

    put("non_utf8.json", b"\xff\xfe\x00\x81 not text")
    put("nested.json", NESTED)
    put("not_json.json", "{this is not json")
    put("list.json", "[1, 2, 3]")
    put("empty", b"")
    put("text.onnx", "not an onnx model")
    put("records_nested.jsonl", NESTED + "\n")
    put("records_non_utf8.jsonl", b"\xff\xfe\x00garbage\n")
    put("records_list.jsonl", "[1, 2]\n")
    put("records_forged.jsonl", json.dumps(dict(GOOD_RECORD, cost=-1.0)) + "\n")
    put("records_good.jsonl", json.dumps(GOOD_RECORD) + "\n" + NESTED + "\n")
    f["dir"] = str(d / "adir")
    os.mkdir(f["dir"])
    ro = d / "readonly"
    ro.mkdir()
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    f["readonly_json"] = str(ro / "out.json")
    f["under_file"] = str(d / "empty" / "out.json")
    f["missing"] = str(d / "no" / "such.file")
    f["tiny"] = tiny_conv_onnx(str(d / "tiny.onnx"))
    f["nonzero"] = data_dependent_onnx(str(d / "nonzero.onnx"))
    shape = (1, 16, 16, 16)
    ok = np.random.default_rng(0).standard_normal(shape).astype("float32")
    for name, arr in {"nan": np.full(shape, np.nan, "float32"),
                      "inf": np.where(ok > 1, np.inf, ok).astype("float32"),
                      "huge": np.full(shape, 3e38, "float32"),
                      "zeros": np.zeros(shape, "float32"),
                      "ok": ok, "wrong_dtype": ok.astype("float64"),
                      "wrong_shape": ok[:, :8]}.items():
        np.savez(d / f"{name}.npz", x=arr)
        f[f"{name}.npz"] = str(d / f"{name}.npz")
    small = ok[:, :, :8, :8]
    f["two_samples8.npz"] = str(d / "two_samples8.npz")  # NonZero keeps different counts
    np.savez(f["two_samples8.npz"], x=np.stack([small, np.abs(small)]))
    f["empty_stack.npz"] = str(d / "empty_stack.npz")
    np.savez(f["empty_stack.npz"], x=np.zeros((0, *shape), "float32"))
    yield f
    ro.chmod(stat.S_IRWXU)


# (command, argv with {file} placeholders, expected exit code, fragment of the error line)
CLI_CASES: list[tuple[str, list[str], int, str]] = [
    # ---------------------------------------------------------------- models / tasks
    ("models", ["models", "--bogus"], 2, "unrecognized"),
    ("tasks", ["tasks", "{missing}"], 2, "does not exist"),
    ("tasks", ["tasks", "{text.onnx}"], 2, ""),
    ("tasks", ["tasks", "{empty}"], 2, ""),
    ("tasks", ["tasks", "{dir}"], 2, ""),
    ("tasks", ["tasks", "{non_utf8.json}"], 2, ""),
    ("tasks", ["tasks", "resnet18", "--input-shape", "input"], 2, "--input-shape"),
    ("tasks", ["tasks", "resnet18", "--input-shape", "input:0,3,8,8"], 2, "positive"),
    ("tasks", ["tasks", "resnet18", "--input-shape", "input:-1,3,8,8"], 2, "--input-shape"),
    ("tasks", ["tasks", "resnet18", "--input-shape", "input:1e9,3,8,8"], 2, "--input-shape"),
    ("tasks", ["tasks", "resnet18", "--target", "fpga"], 2, ""),
    ("tasks", ["tasks", "resnet18", "--target", "{\"kind\": 5}"], 2, ""),
    ("tasks", ["tasks", "resnet18", "--json", "{under_file}"], 2, "--json"),
    # ---------------------------------------------------------------- simulate
    ("simulate", ["simulate", "resnet18", "--knobs", "{non_utf8.json}"], 2, "UTF-8"),
    ("simulate", ["simulate", "resnet18", "--knobs", "{nested.json}"], 2, "--knobs"),
    ("simulate", ["simulate", "resnet18", "--knobs", "{not_json.json}"], 2, "not valid JSON"),
    ("simulate", ["simulate", "resnet18", "--knobs", "{list.json}"], 2, "--knobs"),
    ("simulate", ["simulate", "resnet18", "--knobs", "{missing}"], 2, "--knobs"),
    ("simulate", ["simulate", "resnet18", "--knobs", "{dir}"], 2, "--knobs"),
    ("simulate", ["simulate", "resnet18", "--hw", "nope"], 2, ""),
    ("simulate", ["simulate", "resnet18", "--board", "nope"], 2, ""),
    ("simulate", ["simulate", "resnet18", "--json", "{under_file}"], 2, "--json"),
    # ---------------------------------------------------------------- tune-task
    ("tune-task", ["tune-task", "C99"], 2, "C99"),
    ("tune-task", ["tune-task", "conv:1,2"], 2, ""),
    ("tune-task", ["tune-task", "C2", "--trials", "0"], 2, "--trials"),
    ("tune-task", ["tune-task", "C2", "--trials", "-5"], 2, "--trials"),
    ("tune-task", ["tune-task", "C2", "--trials", "1e3"], 2, "--trials"),
    ("tune-task", ["tune-task", "C2", "--trials", "nan"], 2, "--trials"),
    ("tune-task", ["tune-task", "C2", "--workers", "-1"], 2, "--workers"),
    ("tune-task", ["tune-task", "C2", "--workers", "100000"], 2, "--workers"),
    ("tune-task", ["tune-task", "C2", "--early-stopping", "0"], 2, "--early-stopping"),
    ("tune-task", ["tune-task", "C2", "--early-stopping", "-3"], 2, "--early-stopping"),
    ("tune-task", ["tune-task", "C2", "--seed", "x"], 2, "--seed"),
    ("tune-task", ["tune-task", "C2", "--tuner", "autotvm"], 2, "unknown tuner"),
    ("tune-task", ["tune-task", "C2", "--tuner", "dcoc:nope=1"], 2, ""),
    ("tune-task", ["tune-task", "C2", "--hw", "1x99x16_i8w8a32_15_15_18_17"], 2, ""),
    ("tune-task", ["tune-task", "C2", "--target", "tpu"], 2, ""),
    ("tune-task", ["tune-task", "C2", "--records", "{dir}"], 2, ""),
    ("tune-task", ["tune-task", "C2", "--records", "{records_nested.jsonl}", "-q"], 2, "nested"),
    ("tune-task", ["tune-task", "C2", "--records", "{records_non_utf8.jsonl}", "-q"], 2, "UTF-8"),
    ("tune-task", ["tune-task", "C2", "--records", "{records_list.jsonl}", "-q"], 2, "a list"),
    ("tune-task", ["tune-task", "C2", "--records", "{records_forged.jsonl}", "-q"], 2, "cost > 0"),
    ("tune-task", ["tune-task", "C2", "--json", "{under_file}"], 2, "--json"),
    # ---------------------------------------------------------------- tune
    ("tune", ["tune", "{missing}", "--trials", "20"], 2, "does not exist"),
    ("tune", ["tune", "{text.onnx}", "--trials", "20"], 2, ""),
    ("tune", ["tune", "resnet18", "--trials", "0"], 2, "--trials"),
    ("tune", ["tune", "resnet18", "--trials", "many"], 2, "--trials"),
    ("tune", ["tune", "resnet18", "--workers", "-1"], 2, "--workers"),
    ("tune", ["tune", "resnet18", "--workers", "99999"], 2, "--workers"),
    ("tune", ["tune", "resnet18", "--board", "nope"], 2, "--board"),
    ("tune", ["tune", "resnet18", "--hardware", "big"], 2, "big"),
    ("tune", ["tune", "resnet18", "--target", "fpga"], 2, "fpga"),
    ("tune", ["tune", "resnet18", "--tuner", "nope"], 2, "unknown tuner"),
    ("tune", ["tune", "resnet18", "--work-dir", "{empty}"], 2, "work dir"),
    ("tune", ["tune", "resnet18", "--json", "{under_file}"], 2, "--json"),
    ("tune", ["tune", "resnet18", "--json", "{dir}"], 2, "--json"),
    ("tune", ["tune", "resnet18", "--warm-start", "{records_nested.jsonl}", "--tuner", "dcoc",
              "--trials", "20", "-q"], 2, ""),
    ("tune", ["tune", "resnet18", "--input-shape", "input:1,3,0,8"], 2, "--input-shape"),
    # ---------------------------------------------------------------- run
    ("run", ["run", "{tiny}", "--inputs", "{nan.npz}", "-q"], 2, "NaN"),
    ("run", ["run", "{tiny}", "--inputs", "{inf.npz}", "-q"], 2, "NaN/Inf"),
    ("run", ["run", "{tiny}", "--inputs", "{huge.npz}", "-q"], 2, "magnitude"),
    ("run", ["run", "{tiny}", "--inputs", "{wrong_dtype.npz}", "-q"], 2, "dtype"),
    ("run", ["run", "{tiny}", "--inputs", "{wrong_shape.npz}", "-q"], 2, "shape"),
    ("run", ["run", "{tiny}", "--inputs", "{empty_stack.npz}", "-q"], 2, "shape"),
    ("run", ["run", "{tiny}", "--inputs", "{text.onnx}", "-q"], 2, "npz"),
    ("run", ["run", "{tiny}", "--inputs", "{missing}", "-q"], 2, "does not exist"),
    ("run", ["run", "{tiny}", "--inputs", "{ok.npz}", "--calibration", "{zeros.npz}", "-q"], 2,
     "zero in every calibration sample"),
    ("run", ["run", "{tiny}", "--inputs", "{ok.npz}", "--calibration", "{nan.npz}", "-q"], 2, "NaN"),
    ("run", ["run", "{tiny}", "--inputs", "{ok.npz}", "--calibration", "{huge.npz}", "-q"], 2,
     "magnitude"),
    ("run", ["run", "{tiny}", "--calibration-samples", "0"], 2, "--calibration-samples"),
    ("run", ["run", "{tiny}", "--schedules", "{non_utf8.json}"], 2, "UTF-8"),
    ("run", ["run", "{tiny}", "--schedules", "{nested.json}"], 2, "--schedules"),
    ("run", ["run", "{tiny}", "--schedules", "{list.json}"], 2, "--schedules"),
    ("run", ["run", "{tiny}", "--schedules", "{missing}"], 2, "--schedules"),
    ("run", ["run", "{tiny}", "--json", "{under_file}"], 2, "--json"),
    ("run", ["run", "{tiny}", "--json", "{under_file}"], 2, "--json"),
    ("run", ["run", "{tiny}", "--hardware", "nope"], 2, ""),
    ("run", ["run", "{nonzero}", "--inputs", "{two_samples8.npz}", "-q"], 2, "depends on the input data"),
    # ---------------------------------------------------------------- plot / records
    ("plot", ["plot", "{missing}"], 2, ""),
    ("plot", ["plot", "{records_nested.jsonl}"], 2, "nested"),
    ("plot", ["plot", "{records_non_utf8.jsonl}"], 2, "UTF-8"),
    ("plot", ["plot", "{empty}"], 2, ""),
    ("records", ["records", "{missing}"], 2, "not found"),
    ("records", ["records", "{records_nested.jsonl}"], 2, "nested"),
    ("records", ["records", "{records_non_utf8.jsonl}"], 2, "UTF-8"),
    ("records", ["records", "{records_list.jsonl}"], 2, "a list"),
    ("records", ["records", "{records_forged.jsonl}"], 2, "cost > 0"),
    ("records", ["records", "{dir}"], 2, ""),
    ("records", ["records", "{records_good.jsonl}", "--top", "-1"], 2, "--top"),
    ("records", ["records", "{records_good.jsonl}", "--json", "{under_file}"], 2, "--json"),
    # ---------------------------------------------------------------- rpc
    ("rpc", ["rpc", "serve", "--tracker", "127.0.0.1:9190", "--port", "99999"], 2, "--port"),
    ("rpc", ["rpc", "serve", "--tracker", "127.0.0.1:9190", "--port", "0"], 2, "--port"),
    ("rpc", ["rpc", "serve", "--tracker", "127.0.0.1:9190", "--port-end", "70000"], 2, "--port-end"),
    ("rpc", ["rpc", "serve", "--tracker", "127.0.0.1:9190", "--time-limit", "nan"], 2, "--time-limit"),
    ("rpc", ["rpc", "serve", "--tracker", "127.0.0.1:9190", "--time-limit", "-1"], 2, "--time-limit"),
    ("rpc", ["rpc", "serve", "--tracker", "127.0.0.1:9190", "--time-limit", "inf"], 2, "--time-limit"),
    ("rpc", ["rpc", "serve", "--tracker", "no-port"], 2, "--tracker"),
    ("rpc", ["rpc", "status", "--tracker", "127.0.0.1:9190", "--timeout", "-1"], 2, "--timeout"),
    ("rpc", ["rpc", "status", "--tracker", "127.0.0.1:9190", "--timeout", "0"], 2, "--timeout"),
    ("rpc", ["rpc", "status", "--tracker", "127.0.0.1:99999"], 2, "--tracker"),
    ("rpc", ["rpc", "status", "--tracker", "127.0.0.1:1", "--timeout", "1"], 2, "RPC tracker"),
    ("rpc", ["rpc", "bogus"], 2, ""),
]


def _argv(argv, F):
    import re

    return [re.sub(r"^\{([\w.]+)\}$", lambda m: F[m[1]], a) for a in argv]


def _run(argv, capfd):
    from dcoc.cli import main

    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse's own one-line errors
        rc = exc.code
    out, err = capfd.readouterr()
    return rc, out, err


@pytest.mark.parametrize("case", range(len(CLI_CASES)),
                         ids=[f"{c[0]}:{' '.join(c[1][1:])[:60]}" for c in CLI_CASES])
def test_cli_bad_input(case, F, capfd, tmp_path, monkeypatch):
    cmd, argv, want, fragment = CLI_CASES[case]
    monkeypatch.chdir(tmp_path)  # default work dirs land here
    argv = _argv(argv, F)
    records = [a for a in argv if a.endswith(".jsonl") and os.path.isfile(a)]
    before = {p: open(p, "rb").read() for p in records}
    rc, out, err = _run(argv, capfd)
    assert "Traceback" not in err, err
    assert rc == want, (rc, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("dcoc: error:")]
    others = [ln for ln in lines if not ln.startswith(("dcoc: error:", "dcoc: warning:"))]
    assert len(errors) == 1 and not others, err
    assert fragment in errors[0], (fragment, errors[0])
    for p, data in before.items():  # nothing recorded is lost
        assert open(p, "rb").read().startswith(data), p


def test_records_survive_a_refused_and_a_failed_append(F, tmp_path, capfd):
    """A records file with a good line and a bad one: ``tune-task`` resumes from the good
    line, appends, and leaves both lines where they were."""
    from dcoc.targets.vta import HWConfig
    from dcoc.targets.vta.catalogue import resnet18_layer
    from dcoc.targets.vta.spaces import vta_task

    rec = tmp_path / "c2.jsonl"
    task = vta_task(resnet18_layer("C2"), HWConfig.preset("pynq"))
    first = dict(GOOD_RECORD, task=task.workload_key, target="vta", hw="1x16x16_i8w8a32_15_15_18_17",
                 valid=False, cost=None, knobs=task.space.get(0))
    rec.write_text(json.dumps(first) + "\n" + NESTED + "\n")
    before = rec.read_bytes()
    rc, out, err = _run(["tune-task", "C2", "--trials", "4", "--tuner", "random", "-q",
                         "--records", str(rec)], capfd)
    assert rc == 0, err
    assert err.count("dcoc: warning:") == 1 and "nested" in err and "Traceback" not in err
    after = rec.read_bytes()
    assert after.startswith(before) and len(after.splitlines()) > 2


def test_full_disk_while_tuning_is_one_line_with_records_intact(tmp_path):
    """The file-size limit (RLIMIT_FSIZE) stands in for a full disk: the append that
    crosses it fails; the run stops with one line, every line on disk is a whole record."""
    import resource
    import signal
    import subprocess

    rec = tmp_path / "c2.jsonl"
    limit = 6000  # a few batches of records

    def cap():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a signal
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "dcoc.cli", "tune-task", "C2", "--trials", "200",
                        "--tuner", "random", "-q", "--records", str(rec)], cwd=root, env=env,
                       preexec_fn=cap, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "cannot append to records file" in lines[0], r.stderr
    assert "intact" in lines[0] and "Traceback" not in r.stderr
    data = rec.read_bytes()
    assert 0 < len(data) <= limit and data.endswith(b"\n")
    rows = [json.loads(x) for x in data.splitlines()]
    assert [row["trial"] for row in rows] == list(range(len(rows)))


# ------------------------------------------------------------------------ the API
def _wl():
    from dcoc.targets.vta import Conv2DWorkload

    return Conv2DWorkload(1, 14, 14, 32, 32, (3, 3), (1, 1), (1, 1))


def _hw():
    from dcoc.targets.vta import HWConfig

    return HWConfig.preset("pynq")


def _api_cases(F):
    import dcoc
    import dcoc.targets.vta as v
    from dcoc.search.measure import FunctionMeasurer

    wl = _wl
    hw = _hw
    tiny = F["tiny"]
    ok = {"x": np.load(F["ok.npz"])["x"]}
    return [
        ("tune_task", lambda: dcoc.tune_task(wl(), tuner="random", trials="5")),
        ("tune_task", lambda: dcoc.tune_task(wl(), tuner="random", trials=2.5)),
        ("tune_task", lambda: dcoc.tune_task(wl(), tuner="random", trials=None)),
        ("tune_task", lambda: dcoc.tune_task(wl(), tuner="random", trials=0)),
        ("tune_task", lambda: dcoc.tune_task(wl(), tuner="random", trials=3, seed="x")),
        ("tune_task", lambda: dcoc.tune_task(wl(), tuner="random", trials=3, seed=-1)),
        ("tune_task", lambda: dcoc.tune_task(wl(), hw=5, tuner="random", trials=3)),
        ("tune_task", lambda: dcoc.tune_task(None, tuner="random", trials=3)),
        ("tune_task", lambda: dcoc.tune_task(42, tuner="random", trials=3)),
        ("tune_task", lambda: dcoc.tune_task("C99", tuner="random", trials=3)),
        ("tune_task", lambda: dcoc.tune_task(wl(), tuner=3, trials=3)),
        ("tune_task", lambda: dcoc.tune_task(wl(), tuner="random", trials=3, records=5)),
        ("tune_task", lambda: dcoc.tune_task(wl(), tuner="random", trials=3, records=F["dir"])),
        ("tune_task", lambda: dcoc.tune_task(wl(), tuner="random", trials=3,
                                             records=F["records_nested.jsonl"])),
        ("tune_task", lambda: dcoc.tune_task(wl(), tuner="random", trials=3, early_stopping=0)),
        ("tune_task", lambda: dcoc.tune_task(wl(), tuner="random", trials=3, n_workers=-1)),
        ("tune_task", lambda: dcoc.tune_task(wl(), tuner="random", trials=3, n_workers=10 ** 6)),
        ("tune_task", lambda: dcoc.tune_task(wl(), tuner="random", trials=3, target=5)),
        ("tune_task", lambda: dcoc.tune_task(wl(), tuner="random", trials=3, board=5)),
        ("tune_task", lambda: dcoc.tune_task(wl(), tuner="random", trials=3, callbacks=5)),
        ("tune", lambda: dcoc.tune(None, trials=20)),
        ("tune", lambda: dcoc.tune(5, trials=20)),
        ("tune", lambda: dcoc.tune(F["text.onnx"], trials=20)),
        ("tune", lambda: dcoc.tune("resnet18", trials="x")),
        ("tune", lambda: dcoc.tune("resnet18", trials=20, seed=1.5)),
        ("tune", lambda: dcoc.tune("resnet18", target=5, trials=20)),
        ("tune", lambda: dcoc.tune("resnet18", board=5, trials=20)),
        ("tune", lambda: dcoc.tune("resnet18", hardware=5, trials=20)),
        ("tune", lambda: dcoc.tune("resnet18", input_shapes=5, trials=20)),
        ("tune", lambda: dcoc.tune("resnet18", input_shapes={"x": "abc"}, trials=20)),
        ("tune", lambda: dcoc.tune("resnet18", work_dir=5, trials=20)),
        ("tune", lambda: dcoc.tune("resnet18", tuner=None, trials=20)),
        ("tune", lambda: dcoc.tune("resnet18", n_workers=-2, trials=20)),
        ("run", lambda: dcoc.run(None)),
        ("run", lambda: dcoc.run(5)),
        ("run", lambda: dcoc.run(tiny, inputs="x")),
        ("run", lambda: dcoc.run(tiny, inputs=5)),
        ("run", lambda: dcoc.run(tiny, schedules=5)),
        ("run", lambda: dcoc.run(tiny, inputs={"x": [[1, 2], [3]]})),
        ("run", lambda: dcoc.run(tiny, inputs={"x": np.full((1, 16, 16, 16), np.nan, "float32")})),
        ("run", lambda: dcoc.run(tiny, inputs={"x": np.full((1, 16, 16, 16), np.inf, "float32")})),
        ("run", lambda: dcoc.run(tiny, inputs={"x": np.full((1, 16, 16, 16), 3e38, "float32")})),
        ("run", lambda: dcoc.run(tiny, inputs=ok, calibration=[])),
        ("run", lambda: dcoc.run(tiny, inputs=ok, calibration_samples=0)),
        ("run", lambda: dcoc.run(tiny, inputs=ok, calibration_samples=-1)),
        ("run", lambda: dcoc.run(tiny, inputs=ok,
                                 calibration={"x": np.zeros((1, 16, 16, 16), "float32")})),
        ("run", lambda: dcoc.run(tiny, inputs=ok,
                                 calibration={"x": np.full((1, 16, 16, 16), np.nan, "float32")})),
        ("vta", lambda: v.simulate(None, hw(), {})),
        ("vta", lambda: v.simulate(wl(), None, {})),
        ("vta", lambda: v.simulate(wl(), hw(), v.default_knobs(wl(), hw()), timing=5)),
        ("vta", lambda: v.simulate(wl(), hw(), v.default_knobs(wl(), hw()), epilogue=5)),
        ("vta", lambda: v.conv2d_space(wl(), None)),
        ("vta", lambda: v.conv2d_space(None, hw())),
        ("vta", lambda: v.dense_space(wl(), hw())),
        ("vta", lambda: v.vta_task(None, hw())),
        ("vta", lambda: v.vta_task(wl(), None)),
        ("vta", lambda: v.simulate_model("nope-model", hw())),
        ("vta", lambda: v.simulate_model(5, hw())),
        ("vta", lambda: v.simulate_model([], None)),
        ("vta", lambda: v.resnet18_layer(5)),
        ("vta", lambda: v.resnet18_layer("C99")),
        ("vta", lambda: v.Conv2DWorkload(1, -14, 14, 32, 32, (3, 3), (1, 1), (1, 1))),
        ("vta", lambda: v.Conv2DWorkload(1, 14.5, 14, 32, 32, (3, 3), (1, 1), (1, 1))),
        ("vta", lambda: v.DenseWorkload("a", 10, 10)),
        ("vta", lambda: v.HWConfig.preset("nope")),
        ("vta", lambda: v.HWConfig.parse(5)),
        ("vta", lambda: v.HWConfig(batch=0)),
        ("vta", lambda: v.HWConfig(freq_mhz=float("nan"))),
        ("vta", lambda: v.VTASimMeasurer(n_workers="x")),
        ("vta", lambda: v.VTASimMeasurer(n_workers=-1)),
        ("vta", lambda: v.VTASimMeasurer(timeout=float("nan"))),
        ("measure", lambda: FunctionMeasurer(lambda t, c: 1.0, n_workers=-3)),
        ("measure", lambda: FunctionMeasurer(lambda t, c: 1.0, timeout=-1)),
    ]


API_COUNTS = Counter({"tune_task": 20, "tune": 13, "run": 14, "vta": 24, "measure": 2})


def test_api_bad_input_raises_dcoc_errors(F):
    from dcoc.errors import DcocError

    cases = _api_cases(F)
    assert Counter(c for c, _ in cases) == API_COUNTS
    bare = []
    for i, (name, call) in enumerate(cases):
        try:
            call()
        except DcocError as exc:
            assert "\n" not in str(exc)
            continue
        except Exception as exc:  # noqa: BLE001 - what this test hunts
            bare.append(f"#{i} {name}: {type(exc).__name__}: {exc}")
            continue
        bare.append(f"#{i} {name}: no error")
    assert not bare, "\n".join(bare)


def test_case_counts():
    """The cases tried per command (printed with ``pytest -s``)."""
    counts = Counter(c for c, *_ in CLI_CASES)
    print("\nCLI cases per command:", dict(sorted(counts.items())), "total", sum(counts.values()))
    print("API cases per entry point:", dict(sorted(API_COUNTS.items())), "total",
          sum(API_COUNTS.values()))
    assert set(counts) == {"models", "tasks", "simulate", "tune-task", "tune", "run", "plot",
                           "records", "rpc"}
    assert sum(counts.values()) >= 100


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-s"]))
