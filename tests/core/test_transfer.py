"""Warm-start of DCOC's co-design from other models' runs (dcoc.codesign.prior).

On the systolic target's simulator (fast); one VTA check for records written
without a layers file."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
from systolic_helpers import BOARD, SYS, Counting, small_config, systolic_layers

from dcoc import codesign as cd
from dcoc.codesign.prior import LAYERS_FILE, Prior, as_prior, write_layers
from dcoc.errors import DcocError
from dcoc.search import Records
from dcoc.targets import Layer, get
from dcoc.targets.systolic import GemmWorkload


def _source_layers():  # another "model": different workloads
    return [Layer("s1", GemmWorkload("s1", 3136, 288, 32), 1, "conv2d", target="systolic"),
            Layer("s2", GemmWorkload("s2", 49, 2304, 256), 3, "conv2d", target="systolic"),
            Layer("s3", GemmWorkload("s3", 1, 1024, 1000), 1, "dense", target="systolic")]


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A finished DCOC co-design run on the source model, also saved as a run directory."""
    d = tmp_path_factory.mktemp("src")
    s = cd.Session(_source_layers(), Counting(), 80, "dcoc", 0, Records(str(d / "records.jsonl")), target=SYS)
    write_layers(str(d / LAYERS_FILE), s.layers)
    drv = cd.DCOCCoDesign(s, BOARD, 0, config=small_config())
    s.run(drv)
    return s, drv, str(d)


def _session(budget=40, records=None, m=None):
    return cd.Session(systolic_layers(), m or Counting(), budget, "dcoc", 0, records, target=SYS)


def _first_round(prior):
    s = _session()
    d = cd.DCOCCoDesign(s, BOARD, 0, config=small_config(), prior=prior)
    jobs = d.ask()                                   # the default schedules (same for all)
    d.tell(jobs, s.measure(jobs))
    return d, jobs, d.ask()


# ------------------------------------------------------------------ the cost model
def test_prior_prefits_the_cost_model_and_changes_the_first_proposals(source):
    s, _, _ = source
    prior = Prior(rows=Prior.from_sessions([s]).rows)    # measurements only: no hardware
    fresh = cd.DCOCCoDesign(_session(), BOARD, 0, config=small_config())
    warm = cd.DCOCCoDesign(_session(), BOARD, 0, config=small_config(), prior=prior)
    assert not fresh.problem.models.models["conv2d"].fitted
    assert warm.problem.models.models["conv2d"].fitted and warm.problem.models.models["dense"].fitted
    # used before any measurement of the target model: predictions are no longer the
    # untrained placeholder (4x the compute-bound time)
    hw = SYS.default_hw(BOARD)
    items = [(li, hw, SYS.default_schedule(l, hw)) for li, l in enumerate(warm.s.layers)]
    mu_f, _ = fresh.problem.models.predict_many(items)
    mu_w, _ = warm.problem.models.predict_many(items)
    ideal = np.array([l.bound_seconds(hw) for l in warm.s.layers])
    assert np.allclose(mu_f, 4 * ideal) and not np.allclose(mu_w, 4 * ideal)
    d0, start0, round0 = _first_round(None)
    d1, start1, round1 = _first_round(prior)
    assert start0 == start1                          # both start from the default design
    key = lambda jobs: [(li, hw.name, sorted(k.items())) for li, hw, k in jobs]  # noqa: E731
    assert key(round0) != key(round1)


def test_prior_is_never_counted_measured_or_recorded(source, tmp_path):
    s, _, _ = source
    prior = Prior.from_sessions([s])
    m = Counting()
    path = str(tmp_path / "records.jsonl")
    t = _session(40, Records(path), m)
    t.run(cd.DCOCCoDesign(t, BOARD, 0, config=small_config(), prior=prior))
    rows = Records(path).rows
    assert t.trials == 40 and len(rows) == 40 and m.calls == 40
    assert {r["task"] for r in rows} <= {l.key for l in systolic_layers()}
    assert all(0 <= li < len(t.layers) for (_, li, _) in t.measured)


# ------------------------------------------------------------------ hardware
def test_prior_best_hardware_is_scored(source):
    s, drv, run_dir = source
    p = Prior.load([run_dir], "systolic", BOARD)
    assert len(p) == s.trials
    assert p.best_hw[0].name == s.best_hw
    d = cd.DCOCCoDesign(_session(), BOARD, 0, config=small_config(), prior=p)
    assert [h.name for h in d.problem.models.prior_hw][:1] == [s.best_hw]
    # the data stay apart from the run's own and join every fit
    n_prior = len(d.problem.models.prior_data["conv2d"][1])
    assert n_prior == sum(1 for (_, li, _) in s.measured if s.layers[li].kind == "conv2d")
    d.s.run(d)
    own = len(d.problem.models.data["conv2d"][1])
    assert len(d.problem.models._training_set("conv2d")[1]) == own + n_prior


# ------------------------------------------------------------------ bad input
def test_bad_warm_start_sources_are_one_line_errors(source, tmp_path):
    _, _, run_dir = source
    cases = {}
    cases["missing"] = str(tmp_path / "no" / "such")
    empty = tmp_path / "empty"
    empty.mkdir()
    cases["no records"] = str(empty)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("this is not json\n{}\n")
    cases["corrupt"] = str(bad)
    other = tmp_path / "other"
    other.mkdir()
    (other / "records.jsonl").write_text(open(os.path.join(run_dir, "records.jsonl")).read())
    (other / LAYERS_FILE).write_text("[{\"key\": 1}]")
    cases["bad layers"] = str(other)
    for what, path in cases.items():
        with pytest.raises(DcocError) as ei:
            Prior.load([path], "systolic", BOARD)
        msg = str(ei.value)
        assert "\n" not in msg and msg, what
    with pytest.raises(DcocError, match="no vta measurement"):   # another target's records
        Prior.load([run_dir], "vta", "pynq")
    with pytest.raises(DcocError, match="warm_start must be"):
        as_prior([3], "systolic", BOARD)
    with pytest.raises(DcocError, match="no source"):
        Prior.load([], "systolic", BOARD)


def test_cli_warm_start_errors_exit_2(tmp_path, capfd):
    from dcoc.cli import main

    wd = tmp_path / "wd"
    for extra, fragment in (([str(tmp_path / "nothing")], "does not exist"),):
        for tuner_args in ([], ["--tuner", "xgb"]):
            try:
                rc = main(["tune", "resnet18", "--trials", "20", "--work-dir", str(wd), "--quiet",
                           "--warm-start", *extra, *tuner_args])
            except SystemExit as exc:
                rc = exc.code
            out, err = capfd.readouterr()
            assert rc == 2, err
            lines = err.splitlines()
            assert len(lines) == 1 and lines[0].startswith("dcoc: error: "), err
            assert (fragment if not tuner_args else "needs a DCOC tuner") in lines[0]
            assert not wd.exists()


# ------------------------------------------------------------------ VTA records without layers.json
def test_vta_records_without_layers_file_resolve_workload_and_padding(tmp_path):
    from dcoc.targets.vta import Conv2DWorkload, HWConfig, VTASimMeasurer

    vta = get("vta")
    wl = Conv2DWorkload(batch=1, height=14, width=14, in_channels=64, out_channels=64, kernel=(3, 3),
                        stride=(1, 1), padding=(1, 1))
    layer = Layer("conv", wl, 2, "conv2d")              # the model epilogue (bias)
    hw = HWConfig.preset("pynq")
    path = str(tmp_path / "records.jsonl")
    s = cd.Session([layer], VTASimMeasurer(n_workers=0), 6, "dcoc", 0, Records(path))
    sp = vta.sw_space(layer, hw)
    rng = np.random.default_rng(0)
    jobs = [(0, hw, vta.default_schedule(layer, hw))]
    while len(jobs) < 6:
        k = sp.sample(rng)
        if sp.is_valid(k):
            jobs.append((0, hw, k))
    s.measure(jobs)
    p = Prior.load([path], "vta", "pynq")
    assert len(p) == 6
    got = p.rows[0][0]
    assert got.key == layer.key and got.workload.padding == wl.padding
    assert got.workload.out_height == wl.out_height
    assert p.rows[0][1].name == hw.name
    # with layers.json the layer (and its count) is read back as written
    write_layers(str(tmp_path / LAYERS_FILE), [layer])
    p2 = Prior.load([str(tmp_path)], "vta", "pynq")
    assert p2.rows[0][0].count == 2 and p2.rows[0][0].workload == wl
    with open(tmp_path / LAYERS_FILE) as f:
        assert json.load(f)[0]["key"] == layer.key
