"""The MetaSchedule benchmark's read-out (no tuning: synthetic rows)."""
from __future__ import annotations

import json

import pytest

from dcoc.errors import DcocError
from scripts.bench_metaschedule import model_ablations, model_ratios, summarize


def _rows():
    rows = [{"workload": "small_cnn", "task": "small_cnn", "strategy": "onnxruntime",
             "best_ms": 0.1, "threads": 2}]
    for w, base in (("small_cnn", 1.0), ("transformer", 30.0)):
        for seed in range(3):
            for s, f, t in (("evolutionary", 1.0, 100.0), ("surrogate", 0.9, 20.0),
                            ("surrogate:select=confidence", 1.1, 20.0)):
                rows.append({"workload": w, "task": w, "budget": 64, "seed": seed, "strategy": s,
                             "best_ms": base * f * (1 + 0.01 * seed), "tune_s": t,
                             "ort_ms": base / 4})
    return rows


def test_ratios_and_ablations_pair_model_seed():
    out = "\n".join(model_ratios(_rows()))
    line = next(ln for ln in out.splitlines() if ln.startswith("| 64 | surrogate |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[2] == "6" and float(cells[3]) == pytest.approx(0.9, abs=1e-3)
    assert float(cells[4]) == pytest.approx(0.2, abs=1e-3) and cells[5] == "6/0"
    assert len(cells) == 7 and "target" not in out and "met" not in out   # plain ratios
    abl = "\n".join(model_ablations(_rows()))
    line = next(ln for ln in abl.splitlines() if "select=confidence" in ln)
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert float(cells[3]) == pytest.approx(1.1 / 0.9, abs=1e-3) and cells[4] == "0/6"
    assert "evolutionary" not in abl                   # only DCOC-family variants, vs surrogate
    assert "transformer tuned with surrogate at budget 64" in summarize(_rows())


def test_summarize_reads_out_files_without_running(tmp_path, capsys):

    from scripts.bench_metaschedule import main, model_pairs, read_rows

    f = tmp_path / "rows.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    assert read_rows([f]) == _rows()
    pairs = model_pairs(_rows(), "surrogate:select=confidence")
    assert len(pairs) == 5 + 6 and pairs[-1].split("|")[6].strip() == f"{1.1 / 0.9:.3f}"
    assert main(["--summarize", str(f)]) == 0
    out = capsys.readouterr().out
    assert "| 64 | surrogate | 6 | 0.900 |" in out and "Per group, surrogate (A) vs evolutionary (B)" in out
    assert "Per group, surrogate:select=confidence (A) vs surrogate (B)" in out
    assert main(["--summarize", str(tmp_path / "missing.jsonl")]) == 2
    assert "cannot read benchmark rows" in capsys.readouterr().err
    (tmp_path / "other.jsonl").write_text('{"a": 1}\n')
    assert main(["--summarize", str(tmp_path / "other.jsonl")]) == 2
    assert "not a benchmark row" in capsys.readouterr().err


def _work_dir(path, tasks):
    """A kept work dir: result.json layers + a MetaSchedule JSON database (no TVM)."""

    path.mkdir()
    layers, wl, recs, names = [], [], [], {}
    for i, (name, weight, costs) in enumerate(tasks):
        layers.append({"task": name, "weight": weight, "flop": 1e6})
        wl.append(json.dumps([f"0x{i:x}", "mod"]))
        names[f"0x{i:x}"] = name
        for c in costs:
            secs = [1e9] if c is None else [c, c]
            recs.append(json.dumps([i, [{"trace": 0}, secs, {"kind": "llvm"}, []]]))
    (path / "result.json").write_text(json.dumps({"layers": layers}))
    (path / "database_workload.json").write_text("\n".join(wl) + "\n")
    (path / "database_tuning_record.json").write_text("\n".join(recs) + "\n")
    (path / "ms_tasks.json").write_text(json.dumps(names))
    return str(path)


def test_whole_model_p_value_tests_the_log_ratios_not_raw_latencies():
    """Models 100x apart in latency: a raw-latency Wilcoxon ranks the large model's small
    relative loss above the small model's large relative wins; the read-out tests the logs,
    as its geomean ratio does."""
    from dcoc.stats import fmt_p, paired_test, ratio_test

    rows = []
    for w, base, ratios in (("small_cnn", 1.0, (0.90, 0.89, 0.88, 0.87)),
                            ("transformer", 100.0, (1.02, 1.03))):
        for seed, f in enumerate(ratios):
            for s, m in (("evolutionary", 1.0), ("dcoc", f)):
                rows.append({"workload": w, "task": w, "budget": 256, "seed": seed,
                             "strategy": s, "best_ms": base * m, "tune_s": 10.0})
    ref = [r["best_ms"] for r in rows if r["strategy"] == "evolutionary"]
    oth = [r["best_ms"] for r in rows if r["strategy"] == "dcoc"]
    logs, raw = ratio_test(ref, oth)[1].p, paired_test(ref, oth).p
    assert fmt_p(logs) != fmt_p(raw)
    line = next(ln for ln in model_ratios(rows) if ln.startswith("| 256 | dcoc |"))
    assert line.split("|")[7].strip() == fmt_p(logs)
    line = next(ln for ln in model_ablations(rows, ref="evolutionary")
                if ln.startswith("| 256 | dcoc |"))
    assert line.split("|")[6].strip() == fmt_p(logs)


def test_flush_cache_flag_reaches_the_runner_and_the_rows(monkeypatch):
    """--flush-cache: run() gets it (default off), and the runner it builds times candidates
    with MetaSchedule's CPU cache flush on; without it the runner is the default one."""
    import scripts.bench_metaschedule as bm
    from tvm_plugin.metaschedule.build import evaluator_config, make_runner

    got = []
    monkeypatch.setattr(bm, "run", lambda *a, **k: got.append(k["flush_cache"]) or [])
    monkeypatch.setattr(bm, "summarize", lambda rows, *a, **k: "")
    assert bm.main(["--workloads", "small_cnn", "--flush-cache"]) == 0
    assert bm.main(["--workloads", "small_cnn"]) == 0
    assert got == [True, False]
    cold = make_runner("local", evaluator=evaluator_config(flush_cache=True)).evaluator_config
    # the flush precedes each repeat: only one run per repeat and no minimum time is cold
    assert (cold.enable_cpu_cache_flush, cold.number, cold.min_repeat_ms) == (True, 1, 0)
    assert cold.repeat > 1
    warm = make_runner("local").evaluator_config
    assert (warm.enable_cpu_cache_flush, warm.number, warm.min_repeat_ms) == (False, 3, 10)
    with pytest.raises(DcocError, match="number=3, min_repeat_ms=10.*warm"):
        evaluator_config(number=3, min_repeat_ms=10, flush_cache=True)


def test_run_tunes_whole_models_with_the_flush_cache_setting(monkeypatch, tmp_path):
    """run(flush_cache=...) reaches tune_model for every strategy of a whole model (which
    builds its own runner and records the timing in the work dir), the tuner spec goes to
    tune_model whole, and the rows say so."""
    import types

    import scripts.bench_metaschedule as bm
    import tvm_plugin.metaschedule.build
    import tvm_plugin.metaschedule.tuning

    calls = []

    def fake_tune_model(model, target, **kw):
        calls.append((kw["tuner"], kw["flush_cache"], kw["population"]))
        return types.SimpleNamespace(extra={"new_trials": 4, "tuning_seconds": 1.0},
                                     latency_ms=1.0, executable=object(),
                                     baseline_latency_ms=2.0)

    model = types.SimpleNamespace(name="m", input_shapes={"x": (1, 4)},
                                  input_dtypes={"x": "float32"})
    monkeypatch.setattr(tvm_plugin.metaschedule.tuning, "tune_model", fake_tune_model)
    monkeypatch.setattr(tvm_plugin.metaschedule.build, "make_builder", lambda *a, **k: None)
    monkeypatch.setattr(tvm_plugin.metaschedule.build, "close_builder", lambda b: None)
    monkeypatch.setattr(bm, "load_model", lambda w: (model, "src.onnx"))
    monkeypatch.setattr(bm, "_ort_latency", lambda *a, **k: 0.5)
    monkeypatch.setattr(bm, "time_models", lambda exes, *a, **k: {**{s: 1.0 for s in exes},
                                                                   "onnxruntime": 0.5})
    for flush in (True, False):
        rows = bm.run(budgets=(4,), seeds=(0,), workloads=("small_cnn",),
                      strategies=("surrogate:select=confidence", "evolutionary"), population=64,
                      work_root=str(tmp_path / str(flush)), log=lambda *a: None, flush_cache=flush)
        tuned = [r for r in rows if r["strategy"] != "onnxruntime"]
        assert [r["strategy"] for r in tuned] == ["surrogate:select=confidence", "evolutionary"]
        assert all(r.get("flush_cache", False) is flush for r in tuned)
    assert calls == [("surrogate:select=confidence", True, 64), ("evolutionary", True, 64),
                     ("surrogate:select=confidence", False, 64), ("evolutionary", False, 64)]


def test_held_out_models_are_disjoint_from_the_tuning_set_and_exist_in_the_wheel():
    from dcoc_models import light_names
    from scripts.bench_metaschedule import HELD_OUT_MODELS, MODELS, TUNING_MODELS

    assert not set(HELD_OUT_MODELS) & set(TUNING_MODELS)
    assert set(HELD_OUT_MODELS) | set(TUNING_MODELS) == set(MODELS)
    for w in HELD_OUT_MODELS:  # the onnx wheel's real topologies, not dcoc-built stand-ins
        assert MODELS[w][0] in light_names()

