"""Accelerator summaries that tell the whole story: accelerator, CPU layers and whole model
reported apart (with the baseline), the budget spent as asked, resumes announced, outputs
written with the user's umask."""
from __future__ import annotations

import json
import os
import stat
from types import SimpleNamespace

import onnx
import pytest
from api_util import count_lines, residual_cnn, run_cli

from dcoc.results.cpu_layers import estimate_cpu_layers

os.environ.setdefault("DCOC_QUIET", "1")


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """`dcoc tune` of a small residual CNN (stem conv, pooling and reshape on the CPU) under
    umask 022, run twice: the second run resumes."""
    d = tmp_path_factory.mktemp("summary")
    model = str(d / "residual_cnn.onnx")
    onnx.save(residual_cnn(), model)
    wd, out = d / "wd", d / "out.json"
    args = ("tune", model, "--board", "pynq", "--trials", "12", "--tuner", "random", "--seed", "3",
            "--work-dir", str(wd), "--json", str(out), "--workers", "0")
    old = os.umask(0o022)
    try:
        first = run_cli(*args)
        second = run_cli(*args)
    finally:
        os.umask(old)
    return first, second, wd, out


def _line(stdout: str, label: str) -> str:
    return next(ln for ln in stdout.splitlines() if ln.startswith(label))


def test_accelerator_cpu_and_model_latency_apart(tuned):
    _, r, wd, out = tuned  # the JSON is the second (resumed) run's: the CPU layers are timed afresh
    assert r.returncode == 0, r.stderr
    js = json.loads(out.read_text())
    acc, cpu, model = js["accelerator_latency_ms"], js["cpu_latency_ms"], js["model_latency_ms"]
    assert acc == js["latency_ms"] and cpu > 0
    assert model == pytest.approx(acc + cpu, rel=1e-12)
    assert js["baseline_model_latency_ms"] == pytest.approx(js["baseline_latency_ms"] + cpu, rel=1e-12)
    assert "ONNX Runtime" in js["cpu_method"] and "this host" in js["cpu_method"]
    rows = {c["layer"]: c for c in js["cpu_layers"]}
    stem = rows["conv2d_32x32_3x16_k3s1"]
    assert stem["timed_as"] == "Conv" and stem["ms"] > 0
    assert cpu == pytest.approx(sum(c["count"] * c["ms"] for c in js["cpu_layers"]), rel=1e-12)
    # the console: three lines, each number the JSON's
    assert _line(r.stdout, "accelerator").startswith(f"accelerator {acc:.3f} ms")
    assert _line(r.stdout, "cpu layers").startswith(f"cpu layers  {cpu:.3f} ms")
    lat = _line(r.stdout, "latency")
    assert lat.startswith(f"latency     {model:.3f} ms") and "accelerator + CPU layers" in lat
    assert f"baseline {js['baseline_model_latency_ms']:.3f} ms" in lat
    assert _line(r.stdout, "baseline").startswith(f"baseline    {js['baseline_latency_ms']:.3f} ms")
    assert r.stdout.index("conv2d_32x32_3x16_k3s1") > r.stdout.index("on the CPU")  # the CPU table
    search = _line(r.stdout, "search")  # how the random tuner's trials were spent, and the resume
    assert search.startswith("search      joint co-design: one tuner per layer over hardware x schedule")
    assert search.endswith("; 12 trials replayed from the records")


def test_trials_n_runs_n_and_a_resume_says_so(tuned):
    first, second, wd, out = tuned
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    assert "resuming" not in first.stderr
    assert "dcoc: resuming: 12 recorded trials" in second.stderr
    assert count_lines(wd / "records.jsonl") == 12  # 12 trials, none measured again
    assert json.loads(out.read_text())["trials"] == 12


def test_outputs_follow_the_umask(tuned):
    _, _, wd, out = tuned
    for p in (out, wd / "result.json", wd / "dcoc_run.json", wd / "records.jsonl"):
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o644, p


def test_atomic_write_applies_the_umask(tmp_path):
    from dcoc.paths import write_text_atomic

    for mask, mode in ((0o022, 0o644), (0o027, 0o640), (0o077, 0o600)):
        old = os.umask(mask)
        try:
            p = write_text_atomic(str(tmp_path / f"f{mask:o}.json"), "{}\n")
        finally:
            os.umask(old)
        assert stat.S_IMODE(os.stat(p).st_mode) == mode
        assert open(p).read() == "{}\n"
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".dcoc-")]  # no temporary left


def test_cpu_layers_timed_at_their_shapes():
    """Depthwise convs (MobileNetV2's, left on the CPU) are timed at their shapes: a 4x larger
    one takes longer; other ops as an elementwise pass over their size."""
    def conv(name, hw, c, weight=1):
        wl = dict(batch=1, in_channels=c, out_channels=c, height=hw, width=hw, kernel_h=3, kernel_w=3,
                  stride_h=1, stride_w=1, pad_top=1, pad_left=1, pad_bottom=1, pad_right=1,
                  dilation_h=1, dilation_w=1, groups=c, out_height=hw, out_width=hw)
        return SimpleNamespace(name=name, kind="depthwise_conv2d", workload=wl, weight=weight, device="cpu")

    class Tasks(list):
        cpu_ops = [SimpleNamespace(name="mean", kind="other", workload={"elements": 1280}, weight=1,
                                   device="cpu")]

    tasks = Tasks([conv("dw_small", 28, 96, weight=3), conv("dw_big", 112, 96),
                   SimpleNamespace(name="vta_conv", kind="conv2d", workload={}, weight=1, device="vta")])
    est = estimate_cpu_layers(tasks, threads=1, repeat=5)
    rows = {r["layer"]: r for r in est["layers"]}
    assert set(rows) == {"dw_small", "dw_big", "mean"}  # the accelerator's layer is not a CPU layer
    assert rows["dw_big"]["ms"] > rows["dw_small"]["ms"] > 0
    assert rows["mean"]["timed_as"] == "elementwise pass over 1280 elements"
    assert est["ms"] == pytest.approx(sum(r["count"] * r["ms"] for r in est["layers"]))
    assert est["threads"] == 1 and "1 thread" in est["method"]
