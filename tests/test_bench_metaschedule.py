"""The MetaSchedule benchmark's read-out (no tuning: synthetic rows)."""
from __future__ import annotations

import json

import pytest

from dcoc.errors import DcocError
from scripts.bench_metaschedule import model_ablations, model_targets, summarize


def _rows():
    rows = [{"workload": "small_cnn", "task": "small_cnn", "strategy": "onnxruntime",
             "best_ms": 0.1, "threads": 2}]
    for w, base in (("small_cnn", 1.0), ("transformer", 30.0)):
        for seed in range(3):
            for s, f, t in (("evolutionary", 1.0, 100.0), ("dcoc", 0.9, 20.0),
                            ("dcoc:program_rerank=0", 1.1, 20.0)):
                rows.append({"workload": w, "task": w, "budget": 64, "seed": seed, "strategy": s,
                             "best_ms": base * f * (1 + 0.01 * seed), "tune_s": t,
                             "ort_ms": base / 4})
    return rows


def test_targets_and_ablations_pair_model_seed():
    out = "\n".join(model_targets(_rows()))
    line = next(ln for ln in out.splitlines() if ln.startswith("| 64 | dcoc |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[2] == "6" and float(cells[3]) == pytest.approx(0.9, abs=1e-3)
    assert float(cells[4]) == pytest.approx(0.2, abs=1e-3) and cells[5] == "6/0"
    assert cells[7] == "met"                           # 0.9 <= 0.95 and 0.2 <= 0.5
    bad = next(ln for ln in out.splitlines() if "program_rerank=0 |" in ln)
    assert bad.rstrip().endswith("not met |")
    abl = "\n".join(model_ablations(_rows()))
    line = next(ln for ln in abl.splitlines() if "program_rerank=0" in ln)
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert float(cells[3]) == pytest.approx(1.1 / 0.9, abs=1e-3) and cells[4] == "0/6"
    assert "transformer tuned with dcoc at budget 64" in summarize(_rows())


def test_summarize_reads_out_files_without_running(tmp_path, capsys):
    import json

    from scripts.bench_metaschedule import main, model_pairs, read_rows

    f = tmp_path / "rows.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    assert read_rows([f]) == _rows()
    pairs = model_pairs(_rows(), "dcoc:program_rerank=0")
    assert len(pairs) == 5 + 6 and pairs[-1].split("|")[6].strip() == f"{1.1 / 0.9:.3f}"
    assert main(["--summarize", str(f)]) == 0
    out = capsys.readouterr().out
    assert "| 64 | dcoc | 6 | 0.900 |" in out and "Per group, dcoc (A) vs evolutionary (B)" in out
    assert "Per group, dcoc:program_rerank=0 (A) vs dcoc (B)" in out
    assert main(["--summarize", str(tmp_path / "missing.jsonl")]) == 2
    assert "cannot read benchmark rows" in capsys.readouterr().err
    (tmp_path / "other.jsonl").write_text('{"a": 1}\n')
    assert main(["--summarize", str(tmp_path / "other.jsonl")]) == 2
    assert "not a benchmark row" in capsys.readouterr().err


def _work_dir(path, tasks):
    """A kept work dir: result.json layers + a MetaSchedule JSON database (no TVM)."""
    import json

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


def test_task_gap_weights_differences_and_scores_the_choices(tmp_path, capsys):
    from scripts.ms_task_gap import gap_table, load_run, main

    a = _work_dir(tmp_path / "a", [("conv", 2, [4e-3, 2e-3, 1e-3]), ("dw", 1, [5e-3, None])])
    b = _work_dir(tmp_path / "b", [("conv", 2, [1e-3, 1.1e-3, 9e-4]), ("dw", 1, [6e-3])])
    runs = {"a": load_run(a), "b": load_run(b)}
    assert runs["a"]["dw"]["costs"] == [5e-3, None]
    rows, totals = gap_table(runs, batch=1)
    conv = next(r for r in rows if r["task"] == "conv")
    assert conv["gap_ms"] == pytest.approx(2 * (0.9 - 1.0))      # weight x (b - a)
    assert conv["near:b"] == pytest.approx(1.0) and conv["near:a"] == pytest.approx(1 / 3)
    assert conv["first:a"] == pytest.approx(4e-3 / 9e-4)           # cold start vs best known
    assert rows[0]["task"] == "dw"                  # largest |gap| first: 1 x (6 - 5) ms
    assert totals["a"]["sum_ms"] == pytest.approx(2 * 1.0 + 5.0)
    assert totals["b"]["trials"] == 4
    assert main([a, b, "--labels", "a", "b"]) == 0
    out = capsys.readouterr().out
    assert "total weighted gap (b - a): +0.8000 ms" in out
    assert main([a]) == 2


def test_task_gap_pools_pairs_by_operator_class(tmp_path, capsys):
    from scripts.ms_task_gap import main, op_class

    assert op_class("depthwise_conv2d_16x16_144x144_k3s1") == "depthwise_conv2d"
    assert op_class("dense_m1_n1000_k1280") == "dense" and op_class("mean") == "mean"
    dirs = []
    for seed in range(3):
        dirs.append(_work_dir(tmp_path / f"ref{seed}", [
            ("depthwise_conv2d_8x8_1x1_k3s1", 1, [1e-3]), ("conv2d_8x8_1x1_k1s1", 1, [1e-3]),
            ("conv2d_4x4_1x1_k1s1", 1, [1e-3])]))
        dirs.append(_work_dir(tmp_path / f"oth{seed}", [
            ("depthwise_conv2d_8x8_1x1_k3s1", 1, [2e-3]), ("conv2d_8x8_1x1_k1s1", 1, [1e-3]),
            ("conv2d_4x4_1x1_k1s1", 1, [0.5e-3])]))
    assert main(["--pooled", *dirs]) == 0
    out = capsys.readouterr().out
    assert "| depthwise_conv2d | 3 | 2.000 | 0 | 3 |" in out
    assert "| conv2d | 6 | 0.707 | 3 | 0 |" in out            # sqrt(0.5): three ties, three wins
    assert "other slower on 3 of 3 depthwise_conv2d tasks" in out
    assert main(["--pooled", *dirs[:3]]) == 2                 # pairs only


def test_task_gap_sums_pairs_of_groups_and_tests_the_log_ratios(tmp_path, capsys):
    from scripts.ms_task_gap import main

    dirs = []
    for seed, f in enumerate((0.5, 0.8, 0.9, 0.7, 0.6, 0.95)):  # other faster in all six
        dirs.append(_work_dir(tmp_path / f"ref{seed}", [("conv", 2, [1e-3]), ("dw", 1, [2e-3])]))
        dirs.append(_work_dir(tmp_path / f"oth{seed}", [("conv", 2, [f * 1e-3]), ("dw", 1, [2e-3])]))
    assert main(["--sums", *dirs]) == 0
    out = capsys.readouterr().out
    assert "| ref0 | oth0 | 4.0000 | 3.0000 | 0.750 |" in out       # 2 x 1 + 2 vs 2 x 0.5 + 2
    assert "6 pairs:" in out and "other better 6 / worse 0" in out
    assert "p = 0.031" in out                                        # exact: 2 / 2^6
    assert main(["--sums", *dirs[:3]]) == 2
    assert "--sums takes (reference, other) pairs" in capsys.readouterr().err


def test_task_gap_divides_the_retimed_model_by_the_summed_kernels(tmp_path, capsys):
    import json

    from scripts.ms_task_gap import main

    a = _work_dir(tmp_path / "r_1000_1_dcoc", [("conv", 2, [1e-3, 5e-4]), ("dw", 1, [2e-3])])
    b = _work_dir(tmp_path / "r_1000_1_evolutionary", [("conv", 2, [1e-3]), ("dw", 1, [1e-3])])
    times = tmp_path / "t.json"   # ms_retime --out raw times: keyed by the path it timed
    times.write_text(json.dumps({"/elsewhere/r_1000_1_dcoc": [3.3, 3.0, 3.6],
                                 "/elsewhere/r_1000_1_evolutionary": [3.0, 3.0, 3.0],
                                 "onnxruntime": [1.0, 1.0, 1.0]}))
    assert main(["--model-times", str(times), a, b]) == 0  # dirs matched by name
    out = capsys.readouterr().out
    assert "| r_1000_1_dcoc | 3.0000 | 3.3000 | 1.100 |" in out          # 2 x 0.5 + 2 = 3 ms
    assert "| r_1000_1_evolutionary | 3.0000 | 3.0000 | 1.000 |" in out  # 2 x 1 + 1
    c = _work_dir(tmp_path / "r_1000_2_dcoc", [("conv", 1, [1e-3])])
    assert main(["--model-times", str(times), a, c]) == 2
    assert "r_1000_2_dcoc is not among the timed dirs" in capsys.readouterr().err
    assert main(["--model-times", str(times), str(tmp_path / "r_1000_1_replay-trace")]) == 2
    assert "not a kept work directory" in capsys.readouterr().err
    missing = str(tmp_path / "r_1000_1_replay-trace")  # every mode: one line, no traceback
    for mode in (["--sums"], ["--pooled"], []):
        assert main(mode + [a, missing]) == 2
        assert f"ms_task_gap: not a kept work directory (no result.json): {missing}" \
            in capsys.readouterr().err


def test_task_gap_local_share_counts_trials_near_the_best_so_far(tmp_path):
    import json

    from scripts.ms_task_gap import load_run, local_share

    d = tmp_path / "w"
    _work_dir(d, [("conv", 1, [])])
    insts = [["SamplePerfectTile", [], [], []], ["SampleCategorical", [], [], []]]
    recs = []
    for cost, dec in ((2e-3, [4, 1]), (1e-3, [2, 1]),    # first batch: best is [2, 1]
                      (3e-3, [2, 0]),                    # one decision from it: near
                      (3e-3, [8, 3])):                   # two decisions from it: near
        recs.append(json.dumps([0, [[insts, [[0, [dec[0]]], [1, dec[1]]]], [cost],
                                    {"kind": "llvm"}, []]]))
    recs.append(json.dumps([0, [[insts + [["ReverseComputeAt", ["b", "l1"], [], []]],
                                 [[0, [2]], [1, 1]]], [1e-3], {"kind": "llvm"}, []]]))
    (d / "database_tuning_record.json").write_text("\n".join(recs) + "\n")
    run = load_run(str(d))
    assert len(run["conv"]["traces"]) == 5
    # 3 trials after a first batch of 2: two near (same space), one in another design space
    assert local_share(run, batch=2) == 2 / 3
    assert local_share(run, batch=2, radius=1) == 1 / 3


def test_rank_replay_scores_variants_on_the_same_draws():
    """ms_rank_replay (offline, synthetic tasks): a model that learns the shared law of the
    pooled tasks ranks a new task's candidates better than random picks, and every variant
    is scored on the same draws."""
    import numpy as np

    from scripts.ms_rank_replay import rank_scores, summarize

    rng = np.random.default_rng(0)
    data = {}
    for t in range(4):
        X = rng.random((40, 6)).astype(np.float32)
        thr = 1.0 + 4.0 * X[:, 0] * X[:, 1] + 0.05 * rng.random(40)  # one law for all tasks
        data[str(t)] = {"name": f"task{t}", "X": X, "thr": thr}
    rows = rank_scores(data, ["pool+own", "pool", "random"], ks=[3], m=2, reps=3, min_records=12)
    assert len(rows) == 4 * 3 and all(r["n_cand"] == 37 for r in rows)
    assert all(0 < r[v] <= 1 for r in rows for v in ("pool+own", "pool", "random"))
    mean = {v: np.mean([r[v] for r in rows]) for v in ("pool", "random")}
    assert mean["pool"] > mean["random"] + 0.05, mean
    text = summarize(rows, ["pool+own", "pool", "random"], "pool+own")
    assert "| 3 | pool | 12 |" in text


def test_retime_report_pairs_groups_and_compares_with_the_recorded_latency(tmp_path):
    """ms_retime's read-out (no TVM): pairs by strategy suffix within a group, the recorded
    best_ms matched by work-dir name, ratios and spreads per pass."""
    import json

    from scripts.ms_retime import _pairs_by, _recorded, report

    dirs = [str(tmp_path / n) for n in ("mobilenetv2_256_1_dcoc",
                                        "mobilenetv2_256_1_dcoc_program_pool_only=true",
                                        "mobilenetv2_256_2_dcoc",
                                        "mobilenetv2_256_2_dcoc_program_pool_only=true",
                                        "mobilenetv2_256_3_dcoc_program_pool_only=true")]
    pairs = _pairs_by(dirs, "dcoc_program_pool_only=true", "dcoc")
    assert pairs == [(dirs[1], dirs[0]), (dirs[3], dirs[2])]  # seed 3 has no reference
    rows = tmp_path / "rows.jsonl"
    rows.write_text("\n".join(json.dumps(r) for r in (
        {"workload": "mobilenetv2", "strategy": "onnxruntime", "best_ms": 0.5},
        {"workload": "mobilenetv2", "budget": 256, "seed": 1, "strategy": "dcoc", "best_ms": 2.0},
        {"workload": "mobilenetv2", "budget": 256, "seed": 1,
         "strategy": "dcoc:program_pool_only=true", "best_ms": 3.0})) + "\n")
    rec = _recorded([str(rows)], dirs)
    assert rec == {dirs[0]: 2.0, dirs[1]: 3.0}
    times = {dirs[0]: [2.0, 2.2], dirs[1]: [2.0, 1.1], "onnxruntime": [0.5, 0.5]}
    text = report(times, rec, [(dirs[1], dirs[0])])
    assert "| mobilenetv2_256_1_dcoc | 2.0000 | 2.2000 | 1.100 | 2.0000 | 0.952 |" in text
    # pass ratios 1.000 and 0.500, recorded 1.500, spread 2.000
    assert "| 1.000 | 0.500 | 1.500 | 2.000 |" in text


def test_retime_reads_earlier_times_back_and_sums_up_the_pairs(tmp_path, capsys):
    """ms_retime --times (no TVM): several workloads' raw times merged, pairs named by dir
    name or found by --pair-by, the paired read-out on the medians of the passes; a missing
    file is a one-line error; a read-out never rewrites the raw times."""
    import json

    from scripts.ms_retime import main

    a = {"/x/m_256_1_dcoc": [1.0, 0.9, 0.8], "/x/m_256_1_evolutionary": [1.0, 1.0, 1.0],
         "/x/m_256_2_dcoc": [2.0, 2.0, 2.0], "/x/m_256_2_evolutionary": [1.0, 1.0, 1.0],
         "onnxruntime": [0.3, 0.3, 0.3]}
    b = {"/y/r_256_1_dcoc": [0.5, 0.5, 0.5], "/y/r_256_1_evolutionary": [1.0, 1.0, 1.0],
         "onnxruntime": [0.2, 0.2, 0.2]}
    fa, fb = tmp_path / "a.json", tmp_path / "b.json"
    fa.write_text(json.dumps(a))
    fb.write_text(json.dumps(b))
    out = tmp_path / "t.md"
    assert main(["--times", str(fa), str(fb), "--pair-by", "dcoc", "--ref", "evolutionary",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| onnxruntime (a.json) | 0.3000 |" in text and "| onnxruntime (b.json) |" in text
    # medians 0.9/1, 2/1, 0.5/1 -> geomean (0.9 * 2 * 0.5) ** (1/3) = 0.965; faster 2 / slower 1
    assert "3 pairs, A / B on the medians of the passes: geomean 0.965, A faster 2 / slower 1" in text
    assert out.read_text().strip() == text.strip()
    assert json.loads(fa.read_text()) == a and not (tmp_path / "t.json").exists()
    assert main(["--times", str(fa), "--pairs", "m_256_2_dcoc", "m_256_1_dcoc"]) == 0
    assert "| m_256_2_dcoc / m_256_1_dcoc | 2.000 | 2.222 | 2.500 | - |" in capsys.readouterr().out
    assert main(["--times", str(fa), "--pairs", "m_256_9_dcoc", "m_256_1_dcoc"]) == 2
    assert "m_256_9_dcoc is not among the timed dirs" in capsys.readouterr().err
    assert main(["--times", str(tmp_path / "none.json")]) == 2
    assert "no such times file" in capsys.readouterr().err
    assert main(["--times", str(fa), str(fa)]) == 2  # the same dir timed twice
    assert "m_256_1_dcoc is timed in both" in capsys.readouterr().err
    kept = tmp_path / "m_256_3_dcoc"
    kept.mkdir()
    (kept / "result.json").write_text("{}")
    assert main([str(kept), "--workload", "mobilenetv2", "--pairs", "x", "y"]) == 2
    assert "x is not among the timed dirs" in capsys.readouterr().err  # before any timing
    # timing is refused before any TVM work: a dir without result.json, an unknown
    # workload, an --out whose table would overwrite the raw times written next to it
    assert main([str(tmp_path), "--workload", "mobilenetv2"]) == 2
    assert f"not a kept work directory (no result.json): {tmp_path}" in capsys.readouterr().err
    assert main([str(kept), "--workload", "alexnet"]) == 2
    assert "unknown --workload alexnet" in capsys.readouterr().err
    assert main([str(kept), "--workload", "mobilenetv2", "--out", str(tmp_path / "r.json")]) == 2
    assert "would overwrite the raw times" in capsys.readouterr().err
    assert main(["--times", str(fa), "--out", str(fa)]) == 2  # nor a read-out's table
    assert "would overwrite the raw times" in capsys.readouterr().err
    assert json.loads(fa.read_text()) == a


def test_retime_combine_averages_ratios_taken_within_each_retiming(tmp_path, capsys):
    """ms_retime --combine --times: each file one re-timing; a pair's ratio is taken inside
    each file that times both dirs (never across files), then geomeaned over the files."""
    import json

    from scripts.ms_retime import main

    one = {"/s28/m_256_1_dcoc": [1.0, 1.0, 1.0], "/s28/m_256_1_evolutionary": [2.0, 2.0, 2.0],
           "/s28/m_256_2_dcoc": [3.0, 3.0, 3.0], "onnxruntime": [0.3, 0.3, 0.3]}
    two = {"/s28/m_256_1_dcoc": [1.0, 1.0, 1.0], "/s28/m_256_1_evolutionary": [0.5, 0.5, 0.5],
           "/s29/m_256_2_evolutionary": [1.0, 1.0, 1.0], "onnxruntime": [0.2, 0.2, 0.2]}
    f1, f2 = tmp_path / "one.json", tmp_path / "two.json"
    f1.write_text(json.dumps(one))
    f2.write_text(json.dumps(two))
    assert main(["--combine", "--times", str(f1), str(f2), "--pairs", "m_256_1_dcoc",
                 "m_256_1_evolutionary"]) == 0
    text = capsys.readouterr().out
    # 1/2 in one re-timing, 1/0.5 in the other: geomean sqrt(0.5 * 2) = 1
    assert "| m_256_1_dcoc / m_256_1_evolutionary | 0.500, 2.000 | 1.000 |" in text
    assert "1 pairs, A / B combined over the re-timings: geomean 1.000" in text
    # seed 2's dirs are timed, but never in one re-timing: no ratio across two timings
    assert main(["--combine", "--times", str(f1), str(f2), "--pair-by", "dcoc",
                 "--ref", "evolutionary"]) == 2
    assert "no times file times both m_256_2_dcoc and m_256_2_evolutionary" in capsys.readouterr().err
    assert main(["--combine", "--times", str(f1)]) == 2
    assert "--combine needs --pairs or --pair-by" in capsys.readouterr().err
    assert main(["--combine", "--pairs", "a", "b"]) == 2
    assert "--combine reads --times files" in capsys.readouterr().err
    assert main(["--combine", "--times", str(f1), str(tmp_path), "--pair-by", "dcoc"]) == 2
    assert "no such times file" in capsys.readouterr().err  # a dir given as a times file
    assert main([str(tmp_path), "--combine", "--times", str(f1), "--pair-by", "dcoc"]) == 2
    assert "--combine re-reads --times files only" in capsys.readouterr().err


def test_whole_model_p_value_tests_the_log_ratios_not_raw_latencies():
    """Models 100x apart in latency: a raw-latency Wilcoxon ranks the large model's small
    relative loss above the small model's large relative wins; the read-out tests the logs,
    as its geomean ratio does (and as ms_retime does)."""
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
    line = next(ln for ln in model_targets(rows) if ln.startswith("| 256 | dcoc |"))
    assert line.split("|")[7].strip() == fmt_p(logs)
    line = next(ln for ln in model_ablations(rows, ref="evolutionary")
                if ln.startswith("| 256 | dcoc |"))
    assert line.split("|")[6].strip() == fmt_p(logs)


def test_retime_reads_out_by_workload_and_leaves_out_ambiguous_rows(tmp_path, capsys):
    """ms_retime's read-out by workload: each model's geomean over its groups, then the
    geomean over models (a model with two groups weighs as much as one with one), with the
    tuning-time ratio from --rows; a dir name two rows files give different values for
    (two sessions' runs of one group) has no recorded value rather than the wrong one."""
    import json

    from scripts.ms_retime import by_model, main

    t = {"/d/small_cnn_1000_1_dcoc": [1.0] * 3, "/d/small_cnn_1000_1_evolutionary": [2.0] * 3,
         "/d/small_cnn_1000_2_dcoc": [1.0] * 3, "/d/small_cnn_1000_2_evolutionary": [0.5] * 3,
         "/d/mb_1000_1_dcoc": [0.81] * 3, "/d/mb_1000_1_evolutionary": [1.0] * 3,
         "onnxruntime": [1.0] * 3}
    f = tmp_path / "t.json"
    f.write_text(json.dumps(t))
    rows = [{"workload": w, "budget": 1000, "seed": s, "strategy": k, "best_ms": 1.0,
             "tune_s": ts} for w, s, k, ts in (
        ("small_cnn", 1, "dcoc", 10.0), ("small_cnn", 1, "evolutionary", 40.0),
        ("small_cnn", 2, "dcoc", 10.0), ("small_cnn", 2, "evolutionary", 10.0),
        ("mb", 1, "dcoc", 9.0), ("mb", 1, "evolutionary", 100.0))]
    r1 = tmp_path / "r1.jsonl"
    r1.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert main(["--times", str(f), "--pair-by", "dcoc", "--ref", "evolutionary",
                 "--rows", str(r1)]) == 0
    text = capsys.readouterr().out
    # small_cnn: ratios 0.5 and 2 -> 1.000, times 0.25 and 1 -> 0.5; mb 0.81, time 0.09;
    # over models sqrt(1 * 0.81) = 0.9 (over the 3 pairs it would be 0.81 ** (1/3) = 0.932)
    assert "| small_cnn | 2 | 1.000 | 0.500 |" in text and "| mb | 1 | 0.810 | 0.090 |" in text
    assert "geomean over the 2 workloads 0.900, tuning time A / B 0.212" in text
    assert "3 pairs, A / B on the medians of the passes: geomean 0.932" in text
    # a second session's row of one group: recorded latency and tuning time left out
    r2 = tmp_path / "r2.jsonl"
    r2.write_text(json.dumps(dict(rows[4], best_ms=3.0, tune_s=50.0)) + "\n")
    assert main(["--times", str(f), "--pair-by", "dcoc", "--ref", "evolutionary",
                 "--rows", str(r1), str(r2)]) == 0
    out = capsys.readouterr()
    assert "mb_1000_1_dcoc each match several runs' rows" in out.err
    assert "| mb_1000_1_dcoc | 0.8100 | 0.8100 | 0.8100 | 1.000 | - | - |" in out.out
    assert "geomean over the 2 workloads 0.900" in out.out and "tuning time" not in out.out
    # the combined read-out prints it too; pairs across groups get no by-workload table
    assert main(["--combine", "--times", str(f), "--pair-by", "dcoc", "--ref",
                 "evolutionary"]) == 0
    assert "geomean over the 2 workloads 0.900" in capsys.readouterr().out
    assert by_model([("/d/mb_1000_1_dcoc", "/d/small_cnn_1000_1_dcoc")], [1.0]) == ""


def test_flush_cache_flag_reaches_the_runner_and_the_rows(monkeypatch):
    """--flush-cache: run() gets it (default off), and the runner it builds times candidates
    with MetaSchedule's CPU cache flush on; without it the runner is the default one."""
    import scripts.bench_metaschedule as bm
    from tvm_plugin.build import evaluator_config, make_runner

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
    builds its own runner and records the timing in the work dir), and the rows say so."""
    import types

    import tvm_plugin.build
    import tvm_plugin.tune
    import scripts.bench_metaschedule as bm

    calls = []

    def fake_tune_model(model, target, **kw):
        calls.append((kw["tuner"], kw["flush_cache"]))
        return types.SimpleNamespace(extra={"new_trials": 4, "tuning_seconds": 1.0},
                                     latency_ms=1.0, executable=object(),
                                     baseline_latency_ms=2.0)

    model = types.SimpleNamespace(name="m", input_shapes={"x": (1, 4)},
                                  input_dtypes={"x": "float32"})
    monkeypatch.setattr(tvm_plugin.tune, "tune_model", fake_tune_model)
    monkeypatch.setattr(tvm_plugin.build, "make_builder", lambda *a, **k: None)
    monkeypatch.setattr(tvm_plugin.build, "close_builder", lambda b: None)
    monkeypatch.setattr(bm, "load_model", lambda w: (model, "src.onnx"))
    monkeypatch.setattr(bm, "_ort_latency", lambda *a, **k: 0.5)
    monkeypatch.setattr(bm, "_strategy", lambda s, seed, pop: (s, "xgb"))
    monkeypatch.setattr(bm, "time_models", lambda exes, *a, **k: {**{s: 1.0 for s in exes},
                                                                   "onnxruntime": 0.5})
    for flush in (True, False):
        rows = bm.run(budgets=(4,), seeds=(0,), workloads=("small_cnn",),
                      strategies=("dcoc", "evolutionary"), work_root=str(tmp_path / str(flush)),
                      log=lambda *a: None, flush_cache=flush)
        tuned = [r for r in rows if r["strategy"] != "onnxruntime"]
        assert [r["strategy"] for r in tuned] == ["dcoc", "evolutionary"]
        assert all(r.get("flush_cache", False) is flush for r in tuned)
    assert calls == [("dcoc", True), ("evolutionary", True), ("dcoc", False),
                     ("evolutionary", False)]


def test_profile_table_sums_calls_and_reads_back_without_tvm(tmp_path, capsys):
    from scripts.ms_profile import main, table

    prof = {"model_ms": 3.0, "builtin_ms": 0.1, "functions": {
        "fused_conv": {"calls": 2, "in_model": 1.0, "tuned": 0.5, "warm": 0.6, "cold": 0.9},
        "max_pool": {"calls": 1, "in_model": 0.5, "tuned": None, "warm": 0.4, "cold": 0.5}}}
    text = table("r18", prof)
    assert text.index("fused_conv") < text.index("max_pool")  # largest in-model share first
    # sums: in model 2.5, warm 1.6, cold 2.3; tuned 1.0 over the recorded function's 2.0
    assert "model / sum in model 1.200" in text and "warm / in model 0.640" in text
    assert "cold / in model 0.920" in text
    assert "tuned / in model 0.500 (the 1 of 2 functions with a tuning record)" in text
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"/d/resnet18_1000_80_dcoc": prof}))
    assert main(["--read", str(f)]) == 0
    assert "== resnet18_1000_80_dcoc: compiled model 3.0000 ms" in capsys.readouterr().out
    assert main(["--read", str(tmp_path / "missing.json")]) == 2
    assert main(["--workload", "resnet18", str(tmp_path)]) == 2
    assert "no result.json" in capsys.readouterr().err
    assert main(["--workload", "vgg", str(tmp_path)]) == 2
    assert "unknown --workload vgg" in capsys.readouterr().err


def test_held_out_models_are_disjoint_from_the_tuning_set_and_exist_in_the_wheel():
    from dcoc_models import light_names
    from scripts.bench_metaschedule import HELD_OUT_MODELS, MODELS, TUNING_MODELS

    assert not set(HELD_OUT_MODELS) & set(TUNING_MODELS)
    assert set(HELD_OUT_MODELS) | set(TUNING_MODELS) == set(MODELS)
    for w in HELD_OUT_MODELS:  # the onnx wheel's real topologies, not dcoc-built stand-ins
        assert MODELS[w][0] in light_names()


def test_fill_summary_ranks_records_by_each_fill_against_the_model_data(tmp_path, capsys):
    from scripts.ms_fill import _regret, main, summary

    recs = [  # a fill-sensitive task: on [1, 10] data record b looks best, on model data c is
        {"dir": "/x/t_1000_1_dcoc", "rank": 0, "recorded_ms": 0.40,
         "metaschedule": 0.40, "normal": 1.9, "model": 1.5},
        {"dir": "/x/t_1000_1_dcoc", "rank": 1, "recorded_ms": 0.41,
         "metaschedule": 0.30, "normal": 2.0, "model": 1.6},
        {"dir": "/x/t_1000_1_evolutionary", "rank": 0, "recorded_ms": None,
         "metaschedule": 0.50, "normal": 1.5, "model": 1.2},
    ]
    assert _regret(recs, "metaschedule") == pytest.approx(1.6 / 1.2)
    assert _regret(recs, "normal") == pytest.approx(1.0)
    text = summary({"workload": "transformer", "task": "dense", "function": "f", "records": recs})
    assert "| pooled | 3 | 1.2000 |" in text
    assert "-1.000 | 1.333" in text  # metaschedule fill ranks the three exactly backwards
    p = tmp_path / "fill.json"
    p.write_text(json.dumps({"workload": "transformer", "task": "dense", "function": "f",
                             "records": recs}))
    assert main(["--read", str(p)]) == 0
    assert "pooled" in capsys.readouterr().out
    assert main(["--workload", "transformer"]) == 2
    assert "--task" in capsys.readouterr().err


def test_fill_refuses_dirs_whose_task_compiles_to_another_function(tmp_path):
    """ms_fill.time_records compares one compiled function across dirs: a dir whose task is
    another function is refused before any workload is loaded or compiled."""
    from dcoc.errors import DcocError
    from scripts.ms_fill import time_records

    dirs = []
    for name, fn in (("r_1000_1_dcoc", "fused_conv"), ("r_1000_1_evolutionary", "fused_conv_1")):
        d = tmp_path / name
        d.mkdir()
        (d / "result.json").write_text(json.dumps({
            "layers": [{"task": "conv", "layer": "L0"}],
            "schedules": {"L0": {"ms_task": fn}}}))
        dirs.append(str(d))
    with pytest.raises(DcocError, match="r_1000_1_evolutionary: task 'conv' compiles to another function"):
        time_records("no_such_workload", "conv", dirs)
