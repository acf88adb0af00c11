"""One accelerator for a mix of models (``dcoc.tune([m1, m2], weights=...)``, ``dcoc tune M1 M2``).

Two small ResNets (16x16 and 8x8 inputs; they share one layer, the final dense) on pynq:
every number the result claims is recomputed from the frontend's layers and the simulator
(:mod:`api_util`'s oracles); the export holds one hardware config and one schedules file
per model, and ``dcoc run`` of each model from it is bit-exact at the latency tune reported.
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import onnx
import pytest
from api_util import default_latency_ms, duplicates, model_latency_ms, read_records

import dcoc
from dcoc.targets.vta import HWConfig

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRIALS = 30


def _dcoc(*args, cwd, timeout=600):
    env = dict(os.environ, DCOC_QUIET="1", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "dcoc.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict:
    from scripts.bench_tune_vs_run import mini_resnet

    d = tmp_path_factory.mktemp("mix_models")
    out = {}
    for name, image, seed in (("big", 16, 3), ("small", 8, 3), ("twin", 16, 5)):
        out[name] = str(d / f"{name}.onnx")
        onnx.save(mini_resnet(image=image, seed=seed), out[name])
    return out


@pytest.fixture(scope="module")
def mix(models, tmp_path_factory):
    wd = tmp_path_factory.mktemp("mix") / "wd"
    return dcoc.tune([models["big"], models["small"]], board="pynq", trials=TRIALS, seed=0,
                     work_dir=str(wd), n_workers=0, weights=[2, 1])


def test_every_number_of_the_mix_is_true(mix, models):
    hw = mix.hardware
    big, small = mix.models
    assert [big.model, small.model] == ["big", "small"]
    for r, path in ((big, models["big"]), (small, models["small"])):
        assert r.hardware == hw
        assert r.latency_ms == pytest.approx(model_latency_ms(path, hw, r.schedules), rel=1e-9)
        assert r.baseline_latency_ms == pytest.approx(default_latency_ms(path, HWConfig.preset("pynq")),
                                                      rel=1e-9)
    assert mix.objective_ms == pytest.approx(2 * big.latency_ms + small.latency_ms, rel=1e-12)
    assert mix.baseline_objective_ms == pytest.approx(2 * big.baseline_latency_ms + small.baseline_latency_ms)
    assert mix.history[-1][1] == pytest.approx(mix.objective_ms, rel=1e-9)
    # the shared dense layer: one layer, one schedule for both models, measured once
    assert mix.extra["layers"] == len(big.layers) + len(small.layers) - 1 and mix.extra["shared"] == 1
    shared = set(big.schedules) & set(small.schedules)
    assert shared == {"dense_m1_n10_k64"}
    assert big.schedules["dense_m1_n10_k64"] == small.schedules["dense_m1_n10_k64"]
    rows = read_records(os.path.join(mix.work_dir, "records.jsonl"))
    assert len(rows) == mix.trials == TRIALS and not duplicates(rows)


def test_singles_are_each_models_own_design_on_the_whole_mix(mix):
    wd = os.path.join(mix.work_dir, "singles")
    assert [s["design"] for s in mix.singles] == ["big", "small"]
    for s in mix.singles:
        own = json.load(open(os.path.join(wd, s["design"], "result.json")))
        assert own["trials"] == TRIALS // 2 and own["hardware"]["name"] == s["hardware"]
        for name in ("big", "small"):
            sub = s["design"] if name == s["design"] else f"{name}-on-{s['design']}"
            r = json.load(open(os.path.join(wd, sub, "result.json")))
            assert r["hardware"]["name"] == s["hardware"] and r["trials"] == TRIALS // 2
            assert s["latency_ms"][name] == r["latency_ms"]
        assert s["objective_ms"] == pytest.approx(2 * s["latency_ms"]["big"] + s["latency_ms"]["small"])
    text = mix.summary()
    assert "on big's design" in text and "best single-model design" in text
    saved = json.load(open(os.path.join(mix.work_dir, "result.json")))
    assert saved["singles"] == mix.singles and saved["objective_ms"] == mix.objective_ms
    for m in saved["models"]:  # each model's entry has the fields of a single-model result
        assert {"hardware", "schedules", "latency_ms", "baseline_latency_ms", "layers"} <= set(m)


def test_export_holds_one_design_and_runs_each_model_bit_exactly(mix, tmp_path):
    path = tmp_path / "design"
    meta = mix.export(str(path))
    assert sorted(meta["files"]) == sorted(
        ["vta_config.json", "hardware_report.json", "export.json", "README.md", "schedules-big.json",
         "layers-big.json", "schedules-small.json", "layers-small.json"])
    assert json.loads((path / "vta_config.json").read_text()) == mix.hardware.to_vta_config("pynq")
    r = _dcoc("export", mix.work_dir, str(tmp_path / "again"), cwd=tmp_path)  # from the work dir
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "again" / "schedules-small.json").read_text() == (path / "schedules-small.json").read_text()
    r = _dcoc("export", "--check", ".", "--json", "-", cwd=path)
    assert r.returncode == 0, r.stderr
    chk = json.loads(r.stdout)
    assert chk["reproduced"] and chk["models"]["big"] == pytest.approx(mix.models[0].latency_ms, rel=1e-9)
    for m, res in zip(meta["models"], mix.models):
        cmd = shlex.split(m["commands"]["run"])
        r = _dcoc(*cmd[1:], "--json", "-", cwd=path)
        assert r.returncode == 0, r.stderr
        ran = json.loads(r.stdout)
        assert ran["bit_exact"] and ran["latency_ms"] == pytest.approx(res.latency_ms, rel=1e-9)


def test_rerun_resumes_from_the_records(mix, models):
    n = len(read_records(os.path.join(mix.work_dir, "records.jsonl")))
    again = dcoc.tune([models["big"], models["small"]], board="pynq", trials=TRIALS, seed=0,
                      work_dir=mix.work_dir, n_workers=0, weights=[2, 1], singles=False)
    assert again.extra["replayed_trials"] == TRIALS  # (the singles are single-model runs: they resume alike)
    assert len(read_records(os.path.join(mix.work_dir, "records.jsonl"))) == n
    assert again.objective_ms == mix.objective_ms and again.hardware == mix.hardware
    assert [m.schedules for m in again.models] == [m.schedules for m in mix.models]


def test_models_sharing_every_layer_cost_one_run(models, tmp_path):
    """Two models with the same layers (other weights): the mix spends the budget of one
    run and each model gets that run's latency -- half what two single runs cost."""
    mix = dcoc.tune([models["big"], models["twin"]], board="pynq", trials=20, seed=0,
                    work_dir=str(tmp_path / "mix"), n_workers=0, singles=False)
    one = dcoc.tune(models["big"], board="pynq", trials=20, seed=0, work_dir=str(tmp_path / "one"),
                    n_workers=0)
    assert mix.extra["shared"] == mix.extra["layers"] == len(one.layers)
    assert [m.latency_ms for m in mix.models] == [one.latency_ms] * 2
    assert mix.singles is None and mix.trials == 20


def test_objective_max_is_the_slowest_weighted_model(models, tmp_path):
    res = dcoc.tune([models["big"], models["small"]], board="pynq", trials=16, seed=0,
                    work_dir=str(tmp_path / "wd"), n_workers=0, singles=False, objective="max",
                    weights=[1, 3])
    big, small = (m.latency_ms for m in res.models)
    assert res.objective_ms == max(big, 3 * small)
    assert "max of weight x ms" in res.summary()


def test_fixed_hardware_tunes_every_models_schedules_there(models, tmp_path):
    res = dcoc.tune([models["big"], models["small"]], board="pynq", hardware="pynq", trials=20,
                    seed=0, work_dir=str(tmp_path / "wd"), n_workers=0)
    assert res.hardware == HWConfig.preset("pynq") and res.singles is None
    for r, path in zip(res.models, (models["big"], models["small"])):
        assert r.latency_ms == pytest.approx(model_latency_ms(path, res.hardware, r.schedules), rel=1e-9)
    assert "software only" in res.extra["search"]


def test_a_busy_work_dir_is_refused_with_the_holders_pid(models, tmp_path):
    wd = tmp_path / "wd"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom dcoc.workdir import lock_work_dir\n"
                               "with lock_work_dir(sys.argv[1]):\n    print('locked', flush=True)\n"
                               "    time.sleep(60)", str(wd)], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, PYTHONPATH=ROOT))
    try:
        assert holder.stdout.readline().strip() == "locked"
        r = _dcoc("tune", models["big"], models["small"], "--trials", "30", "--work-dir", str(wd), "-q",
                  cwd=tmp_path)
        assert r.returncode == 2 and f"PID {holder.pid}" in r.stderr, r.stderr
        assert not (wd / "records.jsonl").exists()
    finally:
        holder.kill()
        holder.wait(10)


def test_max_objective_linearizes_at_the_slowest_model(models):
    """The drivers' linear estimate under ``max``: the slowest model's weighted latency plus
    OTHERS of the others' (so the search works on the bottleneck)."""
    from dcoc.codesign import default_schedules
    from dcoc.codesign.mix import OTHERS, MixSession
    from dcoc.targets import get
    from tvm_plugin.frontend import model_tasks

    tg = get("vta")
    per = [tg.layers(model_tasks(models[k], "vta"))[0] for k in ("big", "small")]
    hw = tg.default_hw(tg.board("pynq"))
    for weights in ([1, 1], [1, 30]):
        s = MixSession(per, weights, "max", tg.measurer(n_workers=0), 100, "surrogate", 0, target=tg)
        default_schedules(s, hw)
        terms = [w * s.model_latency(hw.name, m) for m, w in enumerate(weights)]
        assert s.latency(hw.name) == max(terms) == s.best_latency
        linear = sum(layer.count * s.best[(hw.name, li)][0] for li, layer in enumerate(s.layers))
        assert linear == pytest.approx(max(terms) + OTHERS * min(terms), rel=1e-9)


def test_bad_mixes_are_one_line_errors(models, tmp_path):
    big, small = models["big"], models["small"]
    for args in ([big, small, "--weights", "1"], [big, "--weights", "2"],
                 [big, small, "--trials", "12"]):  # 12 // 2 < 7 layers for the singles
        r = _dcoc("tune", *args, "--work-dir", str(tmp_path / "wd"), "-q", cwd=tmp_path)
        assert r.returncode == 2, (args, r.stderr)
        assert r.stderr.startswith("dcoc: error:") and len(r.stderr.strip().splitlines()) == 1, r.stderr
    for kw, match in (({"weights": [1, -2]}, "positive"), ({"weights": [1, float("nan")]}, "positive"),
                      ({"objective": "mean"}, "objective"), ({"target": "llvm"}, "accelerator target"),
                      ({"input_shapes": {"input": (1, 3, 8, 8)}}, "not supported")):
        with pytest.raises(dcoc.DcocError, match=match):
            dcoc.tune([big, small], **{"board": "pynq", **kw})
    with pytest.raises(dcoc.DcocError, match="two or more"):
        dcoc.tune([big], board="pynq")
    with pytest.raises(dcoc.DcocError, match="given twice"):
        dcoc.tune([big, big], board="pynq")
    with pytest.raises(dcoc.DcocError, match="list of models"):
        dcoc.tune(big, weights=[1])
