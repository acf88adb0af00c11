"""``dcoc.tune(model, target="vta", ...)`` end to end, checked against first principles.

Every claim of a TuneResult is recomputed independently: the model latency from the
frontend's VTA layers and :func:`dcoc.targets.vta.simulate` of the returned schedules on the
returned hardware, the baseline from the pynq preset with :func:`dcoc.targets.vta.default_knobs`,
the fit from the board's resource model.  Runs are in-process (``n_workers=0``) with small
budgets; resume is exercised by truncating a finished run's records file, which is
exactly what a kill between two batches leaves behind (test_cli_tune.py kills real
processes).
"""
from __future__ import annotations

import json
import os

import pytest
from api_util import (
    RESULT_KEYS,
    TUNERS,
    assert_history,
    default_latency_ms,
    duplicates,
    hw_fields,
    model_latency_ms,
    read_records,
    shared_run,
    truncate_records,
    vta_layers,
)

import dcoc
from dcoc.errors import ConfigError, DcocError
from dcoc.results.result import TuneResult
from dcoc.targets.vta import HWConfig, get_board

os.environ.setdefault("DCOC_QUIET", "1")

TRIALS = 40
PYNQ = HWConfig.preset("pynq")

def _fresh(tmp_path_factory, name):
    return str(tmp_path_factory.mktemp(name))


def tuned(tmp_path_factory, tuner, seed=0, trials=TRIALS, model="resnet18", **kw):
    """One uninterrupted run per (tuner, seed, trials, model, kw) per test session."""
    key = f"{model}_{tuner}_s{seed}_t{trials}_" + "_".join(f"{k}-{v}" for k, v in sorted(kw.items()))
    return shared_run(tmp_path_factory, key, lambda wd: dcoc.tune(
        model, target="vta", trials=trials, tuner=tuner, seed=seed, work_dir=wd, n_workers=0, **kw))


def check_result(res: TuneResult, model: str, trials: int, tuner: str, seed: int, board="pynq"):
    """Everything a TuneResult must satisfy, recomputed independently."""
    bd = get_board(board)
    layers = vta_layers(model)
    assert isinstance(res, TuneResult)
    assert res.target == "vta" and res.tuner == tuner and res.seed == seed
    # budget: spent, never exceeded
    assert res.trials == trials
    # hardware: a real config that fits the board, at the clock the board achieves for
    # that core (tree depth / congestion model) and the board's bus
    assert isinstance(res.hardware, HWConfig)
    assert bd.fits(res.hardware), bd.violations(res.hardware)
    assert (res.hardware.freq_mhz, res.hardware.bus_bytes) == (bd.clock_mhz(res.hardware), bd.bus_bytes)
    assert res.hardware.freq_mhz <= bd.freq_mhz
    # every VTA layer has a valid schedule, and the latency is real
    assert set(res.schedules) == {ly[0] for ly in layers}
    lat = model_latency_ms(model, res.hardware, res.schedules)
    assert res.latency_ms == pytest.approx(lat, rel=1e-9)
    assert res.throughput == pytest.approx(1000.0 / lat, rel=1e-9)
    # baseline: the board's default 1x16x16 config (the pynq preset on pynq) + default knobs
    base_hw = PYNQ if board == "pynq" else bd.default_hw()
    assert res.baseline_latency_ms == pytest.approx(default_latency_ms(model, base_hw), rel=1e-9)
    # every driver measures the default schedules on the board default first, so the
    # result can only be at least as good once the budget covers one schedule per layer
    assert trials >= len(layers)
    assert res.latency_ms <= res.baseline_latency_ms * (1 + 1e-12)
    assert_history(res.history, trials, res.latency_ms)
    if board == "pynq":
        assert res.history[0] == (len(layers) - 1, pytest.approx(res.baseline_latency_ms, rel=1e-9))
    # per-layer table rows agree with the schedules
    assert [r["layer"] for r in res.layers] == [ly[0] for ly in layers]
    for r, (n, wl, c, _) in zip(res.layers, layers):
        assert r["count"] == c and r["device"] == "vta" and r["knobs"] == res.schedules[n]
    # records: exactly one line per trial, trial indices 0..trials-1
    rows = read_records(os.path.join(res.work_dir, "records.jsonl"))
    assert len(rows) == trials
    assert sorted(r["trial"] for r in rows) == list(range(trials))
    assert {(r["tuner"], r["seed"], r["target"]) for r in rows} == {(tuner, seed, "vta")}
    check_json(res)
    return rows


def check_json(res: TuneResult):
    js = res.to_json()
    text = json.dumps(js)  # plain JSON, no default= needed
    assert RESULT_KEYS <= set(js), RESULT_KEYS - set(js)
    hw = js["hardware"]
    assert set(hw) == set(hw_fields(res.hardware)) | {"name"}, sorted(hw)
    assert hw["name"] == res.hardware.name
    assert HWConfig(**{k: v for k, v in hw.items() if k != "name"}) == res.hardware
    assert js["schedules"] == res.schedules
    assert js["latency_ms"] == res.latency_ms and js["throughput"] == res.throughput
    assert js["baseline_latency_ms"] == res.baseline_latency_ms
    assert (js["trials"], js["tuner"], js["seed"]) == (res.trials, res.tuner, res.seed)
    assert all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], int) and isinstance(p[1], float)
               for p in js["history"])
    assert js["history"] == [[t, v] for t, v in res.history]
    with open(os.path.join(res.work_dir, "result.json")) as f:
        saved = json.load(f)
    assert saved == json.loads(text)


# ======================================================================== every tuner
@pytest.mark.parametrize("tuner", TUNERS)
def test_tune_resnet18_result_is_real(tmp_path_factory, tuner):
    res = tuned(tmp_path_factory, tuner)
    check_result(res, "resnet18", TRIALS, tuner, 0)
    from dcoc.tuners import describe

    assert res.method == describe(tuner)   # the summary says what ran
    # CPU layers reported: the 3-channel stem conv, pooling, the flatten
    cpu = {c["layer"] for c in res.cpu_layers}
    assert {"conv2d_224x224_3x64_k7s2", "max_pool2d", "mean"} <= cpu


@pytest.mark.parametrize("tuner", TUNERS)
def test_no_measurement_is_repeated(tmp_path_factory, tuner):
    """A run never measures the same (task, hw, knobs) twice (every trial counts)."""
    res = tuned(tmp_path_factory, tuner)
    assert duplicates(read_records(os.path.join(res.work_dir, "records.jsonl"))) == []


def test_save_roundtrip(tmp_path_factory, tmp_path):
    res = tuned(tmp_path_factory, "xgb")
    p = res.save(str(tmp_path / "sub" / "out.json"))
    with open(p) as f:
        assert json.load(f) == json.loads(json.dumps(res.to_json()))


# ======================================================================== determinism
def _trajectory(res):
    return [(r["task"], r["hw"], json.dumps(r["knobs"], sort_keys=True), r["cost"])
            for r in sorted(read_records(os.path.join(res.work_dir, "records.jsonl")),
                            key=lambda r: r["trial"])]


@pytest.mark.parametrize("tuner", ["dcoc", "xgb", "rl"])
def test_deterministic_per_seed(tmp_path_factory, tuner):
    """Same seed: the same run, also when the simulator runs in a pool of worker processes
    (forked after torch/xgboost are loaded); another seed: another trajectory."""
    a = tuned(tmp_path_factory, tuner)
    b = dcoc.tune("resnet18", target="vta", trials=TRIALS, tuner=tuner, seed=0,
                  work_dir=_fresh(tmp_path_factory, f"again_{tuner}"), n_workers=2)
    assert a.history == b.history
    assert a.hardware == b.hardware and a.schedules == b.schedules
    assert a.latency_ms == b.latency_ms
    assert _trajectory(a) == _trajectory(b)
    c = tuned(tmp_path_factory, tuner, seed=1)
    check_result(c, "resnet18", TRIALS, tuner, 1)
    assert _trajectory(c) != _trajectory(a)


# ============================================================================= resume
_RESUMED: dict = {}


def _resume_case(tmp_path_factory, tuner, keep: int):
    full = tuned(tmp_path_factory, tuner)
    if (tuner, keep) in _RESUMED:
        return full, _RESUMED[(tuner, keep)]
    wd = _fresh(tmp_path_factory, f"resume_{tuner}")
    # what a kill leaves: the first batches, and maybe half a line of the batch in flight
    truncate_records(full.work_dir, wd, keep, partial='{"task": "vta:conv2d_56x56_64x64_k3s1", "hw": "1x1')
    res = dcoc.tune("resnet18", target="vta", trials=TRIALS, tuner=tuner, seed=0, work_dir=wd,
                    n_workers=0)
    _RESUMED[(tuner, keep)] = res
    return full, res


KEEP = 19  # records a kill left: the 11 default schedules and a first tuning chunk


@pytest.mark.parametrize("tuner", TUNERS)
def test_resume_after_interruption_equals_uninterrupted(tmp_path_factory, tuner):
    full, res = _resume_case(tmp_path_factory, tuner, KEEP)
    assert (res.history, res.hardware, res.schedules, res.latency_ms) == \
        (full.history, full.hardware, full.schedules, full.latency_ms)
    rows = read_records(os.path.join(res.work_dir, "records.jsonl"))
    assert rows[:KEEP] == read_records(os.path.join(full.work_dir, "records.jsonl"))[:KEEP]
    trials = [r["trial"] for r in rows]
    assert len(set(trials)) == len(trials) and set(trials) <= set(range(TRIALS))
    assert duplicates(rows) == []


@pytest.mark.parametrize("tuner", TUNERS)
def test_resumed_records_file_has_one_line_per_trial(tmp_path_factory, tuner):
    full, res = _resume_case(tmp_path_factory, tuner, KEEP)
    assert res.extra["replayed_trials"] == KEEP
    rows = read_records(os.path.join(res.work_dir, "records.jsonl"))
    assert sorted(r["trial"] for r in rows) == list(range(TRIALS))
    assert _trajectory(res) == _trajectory(full)


@pytest.mark.parametrize("tuner", ["dcoc", "xgb"])
def test_rerun_of_a_finished_run_measures_nothing(tmp_path_factory, tuner):
    full = tuned(tmp_path_factory, tuner)
    wd = _fresh(tmp_path_factory, f"rerun_{tuner}")
    truncate_records(full.work_dir, wd, TRIALS)
    res = dcoc.tune("resnet18", target="vta", trials=TRIALS, tuner=tuner, seed=0, work_dir=wd,
                    n_workers=0)
    assert res.extra["replayed_trials"] == TRIALS
    assert len(read_records(os.path.join(wd, "records.jsonl"))) == TRIALS
    assert (res.history, res.hardware, res.schedules) == (full.history, full.hardware, full.schedules)


def test_records_of_another_seed_are_not_reused(tmp_path_factory):
    full = tuned(tmp_path_factory, "random")
    wd = _fresh(tmp_path_factory, "other_seed")
    truncate_records(full.work_dir, wd, TRIALS)
    res = dcoc.tune("resnet18", target="vta", trials=TRIALS, tuner="random", seed=1, work_dir=wd,
                    n_workers=0)
    assert res.extra["replayed_trials"] == 0
    assert len(read_records(os.path.join(wd, "records.jsonl"))) == 2 * TRIALS


def test_no_resume_measures_again(tmp_path_factory):
    full = tuned(tmp_path_factory, "random")
    wd = _fresh(tmp_path_factory, "no_resume")
    truncate_records(full.work_dir, wd, TRIALS)
    res = dcoc.tune("resnet18", target="vta", trials=TRIALS, tuner="random", seed=0, work_dir=wd,
                    n_workers=0, resume=False)
    assert res.extra["replayed_trials"] == 0
    assert len(read_records(os.path.join(wd, "records.jsonl"))) == 2 * TRIALS
    assert res.history == full.history


# ============================================================ fixed hardware (software only)
@pytest.mark.parametrize("hardware", [
    "pynq_4x8",
    HWConfig.preset("pynq_4x8"),
    {**hw_fields(HWConfig.preset("pynq_4x8")), "name": "ignored"},
    "1x16x16_i8w8a32_15_15_18_17",
])
def test_fixed_hardware_tunes_software_only(tmp_path, hardware):
    res = dcoc.tune("resnet18", target="vta", trials=30, tuner="xgb", seed=0, work_dir=str(tmp_path),
                    hardware=hardware, n_workers=0)
    want = HWConfig.parse(hardware) if isinstance(hardware, str) else \
        hardware if isinstance(hardware, HWConfig) else HWConfig.preset("pynq_4x8")
    assert res.hardware == want
    rows = read_records(tmp_path / "records.jsonl")
    assert len(rows) == res.trials == 30
    assert {r["hw"] for r in rows} == {want.name}
    lat = model_latency_ms("resnet18", want, res.schedules)
    assert res.latency_ms == pytest.approx(lat, rel=1e-9)
    # software-only starts from the default schedules on that hardware
    n = len(vta_layers("resnet18"))
    assert res.history[0] == (n - 1, pytest.approx(default_latency_ms("resnet18", want), rel=1e-9))
    assert_history(res.history, 30, res.latency_ms)
    assert res.extra["hardware_explored"] == 1


def test_fixed_hardware_with_the_dcoc_tuner(tmp_path):
    res = dcoc.tune("resnet18", target="vta", trials=24, tuner="dcoc", seed=0, work_dir=str(tmp_path),
                    hardware="pynq", n_workers=0)
    assert res.hardware == PYNQ and res.trials == 24
    assert res.latency_ms == pytest.approx(model_latency_ms("resnet18", PYNQ, res.schedules), rel=1e-9)
    assert res.latency_ms <= default_latency_ms("resnet18", PYNQ) * (1 + 1e-12)


def test_fixed_hardware_takes_the_board_clock(tmp_path):
    """A config name without a clock means the board's clock and bus, as in co-design."""
    res = dcoc.tune("resnet18", target="vta", board="ultra96", trials=16, tuner="random",
                    work_dir=str(tmp_path), hardware="1x16x16_i8w8a32_15_15_18_17", n_workers=0)
    assert (res.hardware.freq_mhz, res.hardware.bus_bytes) == (333.0, 16)


@pytest.mark.parametrize("hardware,board,fragment", [
    ("1x32x32_i8w8a32_15_15_18_17", "pynq", "does not fit board pynq"),
    ("4x32x32_i8w8a32_15_16_18_18", "ultra96", "does not fit board ultra96"),
    ("zcu104", "pynq", "333 MHz"),           # a 333 MHz / 16-byte-bus design on a PYNQ
    ("1x16x16_i8w8a32_15_15_18_17_333MHz_bus16", "pynq", "333 MHz"),
    # fits the PYNQ's LUTs only at ~85 %: routing congestion caps its clock below 100 MHz
    ("2x16x16_i8w8a32_15_15_18_17_100MHz_bus8", "pynq", "achieves on pynq"),
])
def test_hardware_that_does_not_fit_the_board(tmp_path, hardware, board, fragment):
    wd = tmp_path / "wd"
    with pytest.raises(ConfigError) as ei:
        dcoc.tune("resnet18", target="vta", board=board, trials=20, tuner="random", work_dir=str(wd),
                  hardware=hardware, n_workers=0)
    msg = str(ei.value)
    assert fragment in msg and "\n" not in msg
    assert not wd.exists(), "a refused run must not leave a work dir behind"


# ============================================================================ bad input
@pytest.mark.parametrize("kw,exc,fragment", [
    (dict(tuner="autotvm"), DcocError, "unknown tuner 'autotvm'"),
    (dict(tuner="dcoc:agents=two"), DcocError, "unknown DCOC setting 'agents'"),
    (dict(trials=0), DcocError, "trials must be in 1..1000000"),
    (dict(board="de10"), ConfigError, "unknown board 'de10'"),
    (dict(hardware="9x9"), ConfigError, "cannot parse HW config"),
    (dict(trials=5), DcocError, "15 VTA layers"),   # fewer trials than one schedule per layer
])
def test_bad_arguments_are_one_line_errors(tmp_path, kw, exc, fragment):
    args = dict(target="vta", trials=20, tuner="random", work_dir=str(tmp_path / "wd"), n_workers=0)
    args.update(kw)
    with pytest.raises(exc) as ei:
        dcoc.tune("resnet18", **args)
    assert fragment in str(ei.value) and "\n" not in str(ei.value)
    assert not (tmp_path / "wd").exists()


def test_model_without_vta_layers(tmp_path, no_vta_model):
    with pytest.raises(DcocError) as ei:
        dcoc.tune(no_vta_model, target="vta", trials=10, work_dir=str(tmp_path / "wd"), n_workers=0)
    msg = str(ei.value)
    assert "has no layer VTA can run" in msg and "depthwise_conv2d" in msg and "\n" not in msg
    assert not (tmp_path / "wd").exists()


# ===================================================================== other models/boards
def test_mobilenetv2_reports_cpu_layers(tmp_path_factory):
    res = tuned(tmp_path_factory, "random", trials=30, model="mobilenetv2")
    check_result(res, "mobilenetv2", 30, "random", 0)
    cpu = {c["layer"] for c in res.cpu_layers}
    # the depthwise layers run on VTA (block-diagonal grouped conv); only the stem conv
    # and the host ops stay on the CPU
    assert not any(c.startswith("depthwise_conv2d") for c in cpu)
    assert sum(r["layer"].startswith("depthwise_conv2d") for r in res.layers) == 10
    assert "conv2d_224x224_3x32_k3s2" in cpu   # 3 input channels: the stem stays on the CPU
    # layers + CPU layers account for every task of the model
    from dcoc.targets.vta.report import model_layers
    from tvm_plugin.frontend import model_tasks

    tasks = model_tasks("mobilenetv2", "vta")
    assert {t.name for t in tasks if t.device == "vta"} <= {r["layer"] for r in res.layers}
    assert {r["layer"] for r in res.layers} == {ly.name for ly in model_layers(tasks)[0]}
    assert {t.name for t in tasks if t.device != "vta"} | {t.name for t in tasks.cpu_ops} == cpu


def test_ultra96_board(tmp_path_factory):
    res = tuned(tmp_path_factory, "random", trials=TRIALS, board="ultra96")
    check_result(res, "resnet18", TRIALS, "random", 0, board="ultra96")
    assert res.board == "ultra96"


@pytest.mark.slow
@pytest.mark.parametrize("tuner", TUNERS)
def test_300_trials_explore_hardware(tmp_path_factory, tuner):
    """300 trials: still real, and the baselines explore more than one hardware config."""
    res = tuned(tmp_path_factory, tuner, trials=300)
    check_result(res, "resnet18", 300, tuner, 0)
    assert res.extra["hardware_explored"] > 1


def test_default_work_dir_is_found_again(tmp_path, monkeypatch):
    """Without work_dir the same call lands in the same directory and resumes from it."""
    monkeypatch.chdir(tmp_path)
    a = dcoc.tune("resnet18", target="vta", trials=20, tuner="random", seed=4, n_workers=0)
    assert a.work_dir == os.path.join("dcoc_runs", "resnet18_vta_pynq_random_s4")
    b = dcoc.tune("resnet18", target="vta", trials=20, tuner="random", seed=4, n_workers=0)
    assert b.work_dir == a.work_dir and b.extra["replayed_trials"] == 20
    assert len(read_records(os.path.join(a.work_dir, "records.jsonl"))) == 20
    # software only on fixed hardware: a directory of its own, not the co-design run's
    c = dcoc.tune("resnet18", target="vta", trials=20, tuner="random", seed=4, n_workers=0,
                  hardware="pynq")
    assert c.work_dir == os.path.join("dcoc_runs", "resnet18_vta_pynq_hw-1x16x16_i8w8a32_15_15_18_17_random_s4")
    assert c.extra["replayed_trials"] == 0
    d = dcoc.tune("resnet18", target="vta", trials=16, tuner="dcoc:select=topk", seed=4,
                  n_workers=0, board="ultra96", hardware="1x16x16_i8w8a32_15_15_18_17")
    assert d.work_dir == os.path.join(
        "dcoc_runs", "resnet18_vta_ultra96_hw-1x16x16_i8w8a32_15_15_18_17_333MHz_bus16_dcoc-select-topk_s4")


def test_no_resume_for_llvm_refuses_an_existing_database(tmp_path):
    (tmp_path / "database_tuning_record.json").write_text("")
    with pytest.raises(DcocError, match="already holds a MetaSchedule database"):
        dcoc.tune("resnet18", target="llvm", trials=8, work_dir=str(tmp_path), resume=False)
