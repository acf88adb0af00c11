"""Throughput/area Pareto front (dcoc.results.pareto, tune(pareto=True), dcoc tune --pareto, plot)."""
from __future__ import annotations

import json
import os
import re

import onnx
import pytest
from api_util import model_latency_ms, read_records, residual_cnn, run_cli

import dcoc
from dcoc.errors import DcocError
from dcoc.results.pareto import (
    ESTIMATED,
    MEASURED,
    RESOURCE_KEYS,
    THROUGHPUT_TOL,
    complete_points,
    dominates,
    pareto_front,
    spanning,
)
from dcoc.targets import get as get_target
from dcoc.targets.vta import HWConfig, get_board

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


def test_a_sliver_more_throughput_does_not_buy_more_area():
    small, big = _pt("small", 100.0, 40, 64, 1000), _pt("big", 100.2, 48, 64, 1000)
    assert dominates(small, big) and not dominates(big, small)  # 0.2 % faster: not worth 8 BRAM36
    assert [p["hardware"]["name"] for p in pareto_front([small, big])] == ["small"]
    faster = _pt("faster", 101.0, 48, 64, 1000)  # 1 % faster: a design of its own
    assert {p["hardware"]["name"] for p in pareto_front([small, faster])} == {"small", "faster"}
    assert [p["hardware"]["name"] for p in pareto_front([small, big], tol=0)] == ["big", "small"]


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
def residual_model(tmp_path_factory) -> str:
    p = tmp_path_factory.mktemp("onnx") / "residual_cnn.onnx"
    onnx.save(residual_cnn(), str(p))
    return str(p)


@pytest.fixture(scope="module")
def pareto_run(tmp_path_factory, residual_model):
    wd = str(tmp_path_factory.mktemp("pareto"))
    res = dcoc.tune(residual_model, target="vta", board="pynq", trials=40, tuner="surrogate", seed=0,
                    work_dir=wd, n_workers=0, pareto=True)
    return res, wd, residual_model


def test_front_spans_the_hardware_space_measured_and_estimated(pareto_run):
    """A small residual model on pynq: >= 3 designs, both kinds, over the whole (buildable)
    space; every design is marked buildable and says what its latency rests on."""
    res, wd, model = pareto_run
    front = res.pareto
    sources = [p["source"] for p in front]
    assert len(front) >= 3 and MEASURED in sources and ESTIMATED in sources, sources
    assert all(p["buildable"] for p in front)
    assert {p["latency_basis"].split(" ")[0] for p in front} <= {"calibrated", "estimated"}
    stats = res.extra["pareto"]
    assert stats["configs"] == len(get_target("vta").feasible_hw("pynq"))
    assert stats["measured"] + stats["estimated"] + stats["unschedulable"] == stats["configs"]
    for k in RESOURCE_KEYS:  # the designs span the resource range, not one corner of it
        assert min(p["resources"][k] for p in front) < max(p["resources"][k] for p in front)
    with open(os.path.join(wd, "result.json")) as f:
        saved = json.load(f)
    assert saved["pareto"] == json.loads(json.dumps(front))
    bd = get_board("pynq")
    rows = read_records(os.path.join(wd, "records.jsonl"))
    tg = get_target("vta")
    for p in front:
        assert set(p) == {"hardware", "latency_ms", "throughput", "resources", "schedules", "source",
                          "buildable", "latency_basis"}
        hw = HWConfig.parse(p["hardware"]["name"], board="pynq")
        assert bd.fits(hw)
        u = bd.usage(hw)
        assert p["resources"] == {k: u[k] for k in RESOURCE_KEYS}
        # measured or estimated, the latency is what the schedules give on that hardware
        assert p["latency_ms"] == pytest.approx(model_latency_ms(model, hw, p["schedules"]), rel=1e-6)
        assert p["throughput"] == pytest.approx(1e3 / p["latency_ms"])
        assert not any(dominates(q, p) for q in front if q is not p)
        # measured: the search tuned every layer on this config or a buffer-size variant of it
        tuned = all(any(r["task_name"] == layer and r["valid"] and
                        tg.timing_key(HWConfig.parse(r["hw"], board="pynq")) == tg.timing_key(hw) for r in rows)
                    for layer in p["schedules"])
        assert tuned or p["source"] == ESTIMATED, p["hardware"]["name"]
    # the design the run returns is on the front or matched by one (within the tolerance)
    assert any(p["throughput"] >= res.throughput * (1 - THROUGHPUT_TOL) for p in front)
    # every evaluated point is on the front or dominated by it
    with open(os.path.join(wd, "pareto_points.json")) as f:
        pts = json.load(f)["points"]
    assert len(pts) == stats["measured"] + stats["estimated"]
    names = {p["hardware"]["name"] for p in front}
    for p in pts:
        assert p["hardware"]["name"] in names or any(dominates(q, p) for q in front) or any(
            q["throughput"] == p["throughput"] and q["resources"] == p["resources"] for q in front)
    # every complete config of the records is evaluated as measured
    layers = [(r["layer"], r["count"]) for r in res.layers]
    measured = {p["hardware"]["name"] for p in pts if p["source"] == MEASURED}
    assert {p["hardware"]["name"] for p in complete_points(rows, layers, "pynq")} <= measured


def test_summary_says_how_the_trials_were_spent(pareto_run):
    res, _, _ = pareto_run
    text = res.extra["search"]
    m = re.match(r"co-design: (\d+) DCOC rounds? \((\d+) trials\), default schedules on the start "
                 r"hardware \((\d+)\)(?:, random schedules around the incumbent .*? \((\d+)\))?; "
                 r"(\d+) hardware configs? explored$", text)
    assert m, text
    rounds, in_rounds, default, fill, explored = (int(g or 0) for g in m.groups())
    assert rounds >= 1 and in_rounds + default + fill == res.trials == 40
    assert explored == res.extra["hardware_explored"]


def test_plot_draws_the_front(pareto_run, tmp_path):
    from dcoc.results.plots import plot_run_dir

    _, wd, _ = pareto_run
    files = plot_run_dir(wd, str(tmp_path))
    png = [f for f in files if f.endswith("pareto.png")]
    assert png and os.path.getsize(png[0]) > 10_000


def test_spanning_keeps_the_extremes_and_the_measured():
    pts = [dict(_pt(f"p{i}", 10 + i, 10 + 3 * i, 64 + 8 * i, 1000 + 50 * i), source=ESTIMATED) for i in range(30)]
    pts[7]["source"] = MEASURED
    shown = spanning(pts, 8)
    assert len(shown) <= 9 and pts[7] in shown and pts[0] in shown and pts[-1] in shown
    assert [p["resources"]["dsp"] for p in shown] == sorted(p["resources"]["dsp"] for p in shown)
    assert spanning(pts[:5], 8) == pts[:5]


def test_pareto_needs_vta():
    with pytest.raises(DcocError, match="pareto"):
        dcoc.tune("resnet18", target="llvm", trials=4, pareto=True)


def test_cli_pareto_table(pareto_run):
    _, wd, model = pareto_run
    # resume: the same command on the finished work dir measures nothing new
    p = run_cli("tune", model, "--target", "vta", "--board", "pynq", "--trials", "40",
                "--seed", "0", "--work-dir", wd, "--pareto", "--workers", "0")
    assert p.returncode == 0, p.stderr
    assert "Pareto front on pynq" in p.stdout and "BRAM36" in p.stdout
    table = p.stdout[p.stdout.index("Pareto front on pynq"):]
    assert " measured " in table and " estimated " in table
    assert "resuming: 40 recorded trials" in p.stderr


def test_systolic_front(tmp_path, residual_model):
    """The front works for any accelerator target: the systolic array on its default board."""
    res = dcoc.tune(residual_model, target="systolic", trials=20, tuner="random", seed=0,
                    work_dir=str(tmp_path / "s"), n_workers=0, pareto=True)
    assert res.extra["pareto"]["configs"] == len(get_target("systolic").feasible_hw(res.board))
    assert res.pareto and all(p["source"] in (MEASURED, ESTIMATED) for p in res.pareto)
    assert any(p["source"] == ESTIMATED for p in res.pareto)
