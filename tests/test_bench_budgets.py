"""scripts.bench_codesign's small-budget read-out: best design at a budget, the fraction of
the best-known throughput, the paired test against the default and the verdict lines."""
import math

from scripts.bench_codesign import at_budget, budget_compare, render_budgets


def _run(tuner, seed, board, hist):
    return {"model": "m", "board": board, "tuner": tuner, "seed": seed, "history": hist}


def test_at_budget_reads_the_curve():
    hist = [(11, 90.0), (40, 85.0), (250, 80.0)]
    assert math.isinf(at_budget(hist, 10))
    assert at_budget(hist, 100) == 85.0
    assert at_budget(hist, 250) == 80.0
    assert at_budget(hist, 1000) == 80.0


def test_budget_compare_fractions_tests_and_verdict():
    runs = []
    for board in ("a", "b"):
        for seed in range(5):
            # the default reaches the best-known (80) by 500, 'other' stays 10% slower and is late
            runs.append(_run("surrogate", seed, board, [(20, 90.0), (300 + seed, 80.0)]))
            runs.append(_run("other", seed, board, [(150, 88.0 + 0.1 * seed)]))
    res = {"runs": runs, "budgets": [100, 500],
           "best_known": {f"m|{b}": {"latency_ms": 80.0, "hw": "x", "evaluated": {}, "source": "t"}
                          for b in ("a", "b")}}
    res["budget_compare"] = bc = budget_compare(res, [100, 500])
    cell = {(r["budget"], r["tuner"]): r for r in bc["pooled"]}
    assert cell[(100, "other")]["fraction"][0] == 0.0          # no complete design yet
    assert abs(cell[(100, "surrogate")]["fraction"][0] - 80 / 90) < 1e-12
    assert cell[(500, "surrogate")]["fraction"][0] == 1.0
    t = cell[(500, "other")]["test"]
    assert t["n"] == 10 and t["sign"] == -1 and t["p"] < 0.05    # other significantly worse
    assert cell[(100, "other")]["test"]["sign"] == -1
    out = render_budgets(res)
    assert "500 sims: surrogate median 1.0000; not ahead of: none; significantly ahead of: other" in out
    assert ">= 99% of best-known at 500 sims on every model/board: met" in out
    assert "issue" not in out.lower()


def test_best_known_searches_each_config_once_and_caches(tmp_path, monkeypatch):
    """best_known (shared by bench_codesign and bench_transfer): landscape top + extras
    (HWConfig or field dicts), each searched once, cached, the minimum returned."""
    import scripts.bench_codesign as bc
    from dcoc.targets.vta import HWConfig
    from scripts import hw_landscape

    monkeypatch.setenv("DCOC_CACHE", str(tmp_path))
    monkeypatch.setattr(hw_landscape, "run", lambda model, board, jobs=None: [])
    calls = []

    def fake_optimum(args):
        _, fields = args
        hw = HWConfig(**fields)
        calls.append(hw.name)
        return hw.name, {"1x16x16": 80.0, "1x8x32": 78.0}[f"{hw.batch}x{hw.block_in}x{hw.block_out}"]

    monkeypatch.setattr(bc, "_hw_optimum", fake_optimum)
    a, b = HWConfig.preset("pynq"), HWConfig.parse("1x8x32_i8w8a32_15_15_17_17", board="pynq")
    r = bc.best_known("m", "pynq", extra=[a, bc._hw_fields(b)], top=0, jobs=1)
    assert r["hw"] == b.name and r["latency_ms"] == 78.0 and set(r["evaluated"]) == {a.name, b.name}
    r2 = bc.best_known("m", "pynq", extra=[a, b], top=0, jobs=1)   # from the cache
    assert r2 == r and sorted(calls) == sorted([a.name, b.name])


def test_merge_pools_budget_files_and_keeps_the_better_best_known(tmp_path):
    """``--merge``: one report from per-board files; a pair in two files keeps the lower
    best-known latency and its runs count once."""
    import json

    from scripts.bench_codesign import merge

    def result(board, bk, seeds):
        runs = [_run("surrogate", s, board, [(20, 80.0)]) for s in seeds]
        runs += [_run("other", s, board, [(20, 88.0)]) for s in seeds]
        return {"runs": runs, "budgets": [100], "refs": {},
                "best_known": {f"m|{board}": {"latency_ms": bk, "hw": "x", "evaluated": {}, "source": "t"}}}

    paths = []
    for i, (board, bk) in enumerate((("a", 80.0), ("b", 80.0), ("a", 76.0))):
        paths.append(str(tmp_path / f"{i}.json"))
        with open(paths[-1], "w") as f:
            json.dump(result(board, bk, range(5)), f)
    res = merge(paths)
    assert len(res["runs"]) == 20 and res["best_known"]["m|a"]["latency_ms"] == 76.0
    cell = {(r["budget"], r["tuner"]): r for r in res["budget_compare"]["pooled"]}
    assert cell[(100, "other")]["test"]["n"] == 10 and cell[(100, "other")]["test"]["sign"] == -1
    assert abs(cell[(100, "surrogate")]["fraction"][0] - (76 / 80 + 1.0) / 2) < 1e-12   # median of 5 x 0.95, 5 x 1


def test_merge_exhaustive_found_searches_every_config_a_run_ended_on(tmp_path, monkeypatch):
    """``--merge --exhaustive-found``: every config any merged run ended on goes to
    :func:`best_known` (``top=0``), whose lower latency becomes the pair's best-known; only
    the named pairs; a pair without runs is an error."""
    import json

    import pytest

    from scripts import bench_codesign as bc

    runs = [dict(_run("surrogate", s, "a", [(20, 80.0)]), hw_fields={"n": s % 2}) for s in range(4)]
    runs += [dict(_run("surrogate", s, "b", [(20, 80.0)]), hw_fields={"n": 9}) for s in range(4)]
    path = str(tmp_path / "r.json")
    with open(path, "w") as f:
        json.dump({"runs": runs, "budgets": [100], "refs": {},
                   "best_known": {f"m|{b}": {"latency_ms": 80.0, "hw": "x", "evaluated": {}, "source": "t"}
                                  for b in "ab"}}, f)
    calls = []

    def fake(model, board, extra=(), top=20, jobs=None, quiet=True):
        calls.append((model, board, sorted(e["n"] for e in extra), top))
        return {"latency_ms": 76.0, "hw": "y", "evaluated": {"y": 76.0}, "landscape_top": top}

    monkeypatch.setattr(bc, "best_known", fake)
    res = bc.merge([path], exhaustive_found=["m/a"])
    assert calls == [("m", "a", [0, 0, 1, 1], 0)]
    assert res["best_known"]["m|a"]["latency_ms"] == 76.0 and res["best_known"]["m|b"]["latency_ms"] == 80.0
    assert res["exhaustive_found"] == ["m/a"]
    cell = {(r["budget"], r["tuner"]): r for r in res["budget_compare"]["pooled"]}
    assert cell[(100, "surrogate")]["fraction"][0] == pytest.approx((0.95 + 1.0) / 2)
    with pytest.raises(SystemExit, match="no runs of m/c"):
        bc.merge([path], exhaustive_found=["m/c"])


def test_kept_runs_are_keyed_by_the_spec_config():
    """bench_codesign --runs-dir: a DCOC-family run's file name carries its config's hash
    (the spec's settings included); other tuners' do not."""
    from scripts.bench_codesign import _config_tag

    tags = {t: _config_tag(t) for t in ("surrogate", "surrogate:select=confidence", "dcoc", "xgb")}
    assert tags["xgb"] == ""
    assert all(tags[t].startswith("_cfg") for t in ("surrogate", "surrogate:select=confidence", "dcoc"))
    assert len({tags["surrogate"], tags["surrogate:select=confidence"], tags["dcoc"]}) == 3


def test_transfer_methods_build_the_warm_started_default_and_plain_specs(monkeypatch):
    """bench_transfer: ``transfer[:settings]`` is the source tuner (surrogate) with the
    sources as prior; any other method is a tuner spec, from scratch."""
    import types

    import dcoc.codesign
    import scripts.bench_transfer as bt

    calls = []

    class FakeRunState:
        def __init__(self, *a, **k):
            self.trials, self.best_latency, self.best_hw = 5, 1e-3, "hw"
            self.hw, self.history = {"hw": None}, [(0, 1e-3)]

    def fake_driver(s, bd, spec, seed, **kw):
        calls.append((spec, kw.get("prior")))
        return types.SimpleNamespace(run=lambda: None)

    monkeypatch.setattr(bt, "_layers", lambda model: [])
    monkeypatch.setattr(bt, "_measurer", lambda: None)
    monkeypatch.setattr(dcoc.codesign, "Session", FakeRunState)
    monkeypatch.setattr(dcoc.codesign, "make_driver", fake_driver)
    for method in ("transfer", "transfer:prior_hw=0", "surrogate", "dcoc", "xgb"):
        r = bt._run("resnet18", "pynq", method, 0, 5, ["src"])
        assert r["method"] == method and r["latency_ms"] == 1.0
    assert calls == [("surrogate", ["src"]), ("surrogate:prior_hw=0", ["src"]), ("surrogate", None),
                     ("dcoc", None), ("xgb", None)]
    assert bt.SOURCE == "surrogate" and set(bt.TUNING_METHODS) <= set(bt.METHODS) | {"transfer:prior_hw=0"}
