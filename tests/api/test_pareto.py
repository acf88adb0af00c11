"""Throughput/area Pareto front (dcoc.results.pareto, tune(pareto=True), dcoc tune --pareto, plot)."""
from __future__ import annotations

import json
import os

import pytest
from api_util import model_latency_ms, read_records, run_cli

import dcoc
from dcoc.errors import DcocError
from dcoc.results.pareto import RESOURCE_KEYS, complete_points, dominates, pareto_front
from dcoc.vta import HWConfig, get_board

os.environ.setdefault("DCOC_QUIET", "1")


def _pt(name, thr, bram, dsp, lut):
    return {"hardware": {"name": name}, "throughput": thr, "latency_ms": 1e3 / thr,
            "resources": {"bram36": bram, "dsp": dsp, "lut": lut}, "schedules": {}}


def test_front_keeps_exactly_the_non_dominated_points():
    pts = [_pt("a", 10, 100, 200, 20000),   # fastest
           _pt("b", 9, 80, 200, 20000),     # slower but fewer BRAMs: kept
           _pt("c", 9, 90, 200, 20000),     # dominated by b
           _pt("d", 8, 100, 100, 30000),    # fewest DSPs: kept
           _pt("e", 10, 100, 200, 20000),   # duplicate of a: one survives
           _pt("f", 7, 120, 220, 40000)]    # dominated by everything
    front = pareto_front(pts)
    names = [p["hardware"]["name"] for p in front]
    assert names == ["a", "b", "d"]
    assert dominates(pts[1], pts[2]) and not dominates(pts[2], pts[1])
    assert not dominates(pts[0], pts[4]) and not dominates(pts[0], pts[3])
    for p in pts:
        assert p in front or any(dominates(q, p) for q in front) or p["hardware"]["name"] == "e"


def test_complete_points_from_records():
    hw_a = HWConfig.preset("pynq")
    hw_b = HWConfig(block_in=8, block_out=32, log_wgt_buff=17)
    rows = [
        {"hw": hw_a.name, "task_name": "L1", "cost": 0.002, "valid": True, "knobs": {"k": 1}},
        {"hw": hw_a.name, "task_name": "L1", "cost": 0.001, "valid": True, "knobs": {"k": 2}},
        {"hw": hw_a.name, "task_name": "L2", "cost": 0.003, "valid": True, "knobs": {"k": 3}},
        {"hw": hw_a.name, "task_name": "L2", "cost": 0.0001, "valid": False, "knobs": {"k": 9}},
        {"hw": hw_b.name, "task_name": "L1", "cost": 0.0005, "valid": True, "knobs": {"k": 4}},
    ]  # hw_b lacks L2: not complete
    pts = complete_points(rows, [("L1", 2), ("L2", 1)], "pynq")
    assert [p["hardware"]["name"] for p in pts] == [hw_a.name]
    p = pts[0]
    assert p["latency_ms"] == pytest.approx((2 * 0.001 + 0.003) * 1e3)
    assert p["throughput"] == pytest.approx(1 / (2 * 0.001 + 0.003))
    assert p["schedules"] == {"L1": {"k": 2}, "L2": {"k": 3}}
    u = get_board("pynq").usage(hw_a)
    assert p["resources"] == {k: u[k] for k in RESOURCE_KEYS}


@pytest.fixture(scope="module")
def pareto_run(tmp_path_factory):
    wd = str(tmp_path_factory.mktemp("pareto"))
    res = dcoc.tune("resnet18", target="vta", board="pynq", trials=40, tuner="random", seed=1,
                    work_dir=wd, n_workers=0, pareto=True)
    return res, wd


def test_tune_pareto_is_the_front_of_the_records(pareto_run):
    res, wd = pareto_run
    front = res.pareto
    assert front, "a finished run has at least the hardware it returns"
    with open(os.path.join(wd, "result.json")) as f:
        saved = json.load(f)
    assert saved["pareto"] == json.loads(json.dumps(front))
    names = {p["hardware"]["name"] for p in front}
    bd = get_board("pynq")
    for p in front:
        assert set(p) == {"hardware", "latency_ms", "throughput", "resources", "schedules"}
        hw = HWConfig.parse(p["hardware"]["name"], board="pynq")
        assert bd.fits(hw)
        # the latency is what the schedules really give on that hardware
        assert p["latency_ms"] == pytest.approx(model_latency_ms("resnet18", hw, p["schedules"]), rel=1e-6)
        assert p["throughput"] == pytest.approx(1e3 / p["latency_ms"])
        assert not any(dominates(q, p) for q in front if q is not p)
    # the returned design is on the front (nothing explored beats it on every axis)
    assert res.hardware.name in names or any(
        p["throughput"] >= res.throughput * (1 - 1e-9) for p in front)
    # every complete hardware config in the records is on the front or dominated by it
    layers = [(r["layer"], r["count"]) for r in res.layers]
    for p in complete_points(read_records(os.path.join(wd, "records.jsonl")), layers, "pynq"):
        assert p["hardware"]["name"] in names or any(dominates(q, p) for q in front) or any(
            q["throughput"] == p["throughput"] and q["resources"] == p["resources"] for q in front)


def test_plot_draws_the_front(pareto_run, tmp_path):
    from dcoc.results.plots import plot_run_dir

    _, wd = pareto_run
    files = plot_run_dir(wd, str(tmp_path))
    png = [f for f in files if f.endswith("pareto.png")]
    assert png and os.path.getsize(png[0]) > 10_000


def test_pareto_needs_vta():
    with pytest.raises(DcocError, match="pareto"):
        dcoc.tune("resnet18", target="llvm", trials=4, pareto=True)


def test_cli_pareto_table(pareto_run, tmp_path):
    _, wd = pareto_run
    # resume: the same command on the finished work dir measures nothing new
    p = run_cli("tune", "resnet18", "--target", "vta", "--board", "pynq", "--trials", "40",
                "--tuner", "random", "--seed", "1", "--work-dir", wd, "--pareto", "--quiet",
                "--workers", "0")
    assert p.returncode == 0, p.stderr
    assert "Pareto front on pynq" in p.stdout and "BRAM36" in p.stdout
