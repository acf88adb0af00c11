"""bench_cpu's read-out and the profile's arithmetic (no TVM, no tuning)."""
from __future__ import annotations

import math

import pytest


def _rows():
    rows = []
    for m, ort, r in (("a", 1.0, {"untuned": 8.0, "surrogate@5min": 1.0, "evolutionary@5min": 1.5,
                                   "surrogate@15min": 0.8, "evolutionary@15min": 1.2}),
                      ("b", 2.0, {"untuned": 20.0, "surrogate@5min": 1.5, "evolutionary@5min": 2.0,
                                  "surrogate@15min": 1.2, "evolutionary@15min": 1.0}),
                      ("squeezenet", 4.0, {"surrogate@5min": 1.1, "surrogate/no-prior@5min": 1.3,
                                           "evolutionary@5min": 2.2})):
        rows.append({"kind": "timing", "model": m, "strategy": "onnxruntime", "ms": ort})
        for k, ratio in r.items():
            tuner, _, mins = k.partition("@")
            row = {"kind": "timing", "model": m, "strategy": k, "ms": ratio * ort, "ort_ms": ort,
                   "ratio": ratio, "ratio_lo": ratio * 0.9, "ratio_hi": ratio * 1.1,
                   "minutes": float(mins[:-3]) if mins else 0.0}
            rows.append(row)
            if mins:
                rows.append({"kind": "tuning", "model": m, "strategy": k, "tuner": tuner,
                             "trials": 10, "tuning_s": 1.0, "stopped_by": "clock",
                             "time_profile": {"share": {"build": 0.5, "run": 0.2, "search": 0.1,
                                                        "fit": 0.05, "spaces": 0.1,
                                                        "rest": 0.05}}})
    return rows


def test_summary_gives_ratios_spread_geomeans_and_the_targets():
    from scripts.bench_cpu import summarize

    text = summarize(_rows())
    assert "| a | 1.000 | 8.00 (7.20-8.80) |" in text
    assert "| squeezenet (evaluation) | 4.000 |" in text
    assert f"**{math.sqrt(0.8 * 1.2):.2f}**" in text           # surrogate@15min, zoo geomean
    assert "`surrogate@15min`, zoo: geomean 0.98, worst 1.20, <= 1.0 on 1 of 2 models" in text
    assert "`surrogate@5min`, evaluation models: geomean 1.10 over 1" in text
    # the prior: with / without at 5 min on the evaluation model
    assert f"latency with / without geomean {1.1 / 1.3:.2f} over 1" in text
    # dcoc / EvolutionarySearch at equal time, over every model
    assert f"geomean {(1.0 / 1.5 * 1.5 / 2.0 * 1.1 / 2.2) ** (1 / 3):.2f} over 3 models" in text
    assert "| a | surrogate@5min | 10 | 1.0 | 50% | 20% | 0% | 10% | 15% | 5% |" in text


def test_summarize_reads_row_files_and_skips_a_torn_row(tmp_path, capsys):
    import json

    from scripts.bench_cpu import main

    p = tmp_path / "rows.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in _rows()) + '{"kind": "tim')
    assert main(["--summarize", str(p)]) == 0
    assert "geomean" in capsys.readouterr().out


def test_runs_and_budgets_make_the_plan():
    from scripts.bench_cpu import parse_run, plan

    assert parse_run("surrogate") == ("surrogate", None)
    assert parse_run("evolutionary@5,15") == ("evolutionary", (5.0, 15.0))
    with pytest.raises(ValueError, match="minutes"):
        parse_run("evolutionary@x")
    p = plan(["m"], [1.0, 5.0], ["surrogate", "evolutionary@5"])
    assert p == [("m", 1.0, "surrogate"), ("m", 5.0, "surrogate"), ("m", 5.0, "evolutionary")]


@pytest.mark.parametrize("argv", [["--budget-minutes", "0"], ["--rounds", "0"],
                                  ["--runs", "surrogate@-1"]])
def test_bad_arguments_are_one_line(argv, capsys):
    from scripts.bench_cpu import main

    assert main(argv) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_kinds_of_tvm_functions_and_onnxruntime_nodes():
    from scripts.bench_cpu import EVOLUTIONARY  # noqa: F401 - the script imports without TVM
    from tvm_plugin.metaschedule.profile import ort_kind, tvm_kind

    assert tvm_kind("fused_transpose_reshape1") == "layout"
    assert tvm_kind("fused_add_relu") == "pooling/elementwise"
    assert tvm_kind("max_pool2d") == "pooling/elementwise"
    assert tvm_kind("fused_conv2d_add_relu") == "conv"
    assert tvm_kind("fused_matmul_add3") == "dense/matmul"
    assert ort_kind("FusedConv") == "conv" and ort_kind("Conv", group=32) == "depthwise"
    assert ort_kind("ReorderInput") == "layout" and ort_kind("Gemm") == "dense/matmul"
    assert ort_kind("GlobalAveragePool") == "pooling/elementwise"


def test_gap_rows_attribute_onnxruntime_time_by_flops_within_a_kind():
    from tvm_plugin.metaschedule.profile import gap_rows, kind_rows

    prof = {"tvm": {"latency_ms": 10.0, "kernels_ms": 9.0, "glue_ms": 1.0, "functions": [
                {"name": "c1", "kind": "conv", "tuned": True, "calls": 1, "ms": 6.0, "flop": 3.0},
                {"name": "c2", "kind": "conv", "tuned": False, "calls": 1, "ms": 2.0, "flop": 1.0},
                {"name": "r", "kind": "layout", "tuned": False, "calls": 1, "ms": 1.0, "flop": 0}]},
            "onnxruntime": {"latency_ms": 4.0, "kernels_ms": 3.5, "glue_ms": 0.5, "nodes": [
                {"name": "n1", "op": "Conv", "kind": "conv", "ms": 3.0},
                {"name": "n2", "op": "Add", "kind": "pooling/elementwise", "ms": 0.5}]}}
    rows = {r["part"].split(" (")[0]: r for r in gap_rows(prof)}
    assert rows["tuned kernels"]["ort_ms"] == pytest.approx(2.25)     # 3 ms x 3/4 of the FLOPs
    assert rows["untuned kernels"]["ort_ms"] == pytest.approx(0.75)
    assert rows["kinds only ONNX Runtime has"]["ort_ms"] == pytest.approx(0.5)
    assert rows["glue"]["tvm_ms"] == pytest.approx(1.0) and rows["glue"]["ort_ms"] == pytest.approx(0.5)
    assert rows["total"]["gap_ms"] == pytest.approx(6.0)
    assert sum(r["share"] for k, r in rows.items() if k != "total") == pytest.approx(1.0)
    kinds = {r["kind"]: r for r in kind_rows(prof)}
    assert kinds["conv"]["ratio"] == pytest.approx(8.0 / 3.0) and kinds["layout"]["ort_ms"] == 0
