"""scripts.bench: RESULTS.md holds only the generated sections, a partial run keeps the
others, and the suites name tuners the library knows."""
import pytest

from scripts.bench import SUITES, split_sections


def test_split_sections_keeps_only_generated_sections():
    text = ("# r\n\nhead line\n\n## 1. VTA simulator\nsim\n\n### sub\nsub text\n\n"
            "## Notes (by hand)\nstale notes\n\n## 4. MetaSchedule (llvm)\nms\n")
    head, parts = split_sections(text)
    assert head == "# r\n\nhead line"
    assert set(parts) == {"simulator", "metaschedule"}
    assert "sub text" in parts["simulator"]
    assert "stale notes" not in "".join(parts.values())


def test_regenerating_one_section_keeps_the_others(tmp_path, monkeypatch):
    import scripts.bench as bench

    out = tmp_path / "docs" / "RESULTS.md"
    out.parent.mkdir()
    out.write_text("# dcoc benchmark results\n\nGenerated on day 1.\n\n## 1. VTA simulator\nsim numbers\n\n"
                   "## 2. Software-only tuning\nsw numbers\n\n## 3. Co-design: accelerator + schedules\n"
                   "old co-design\n\n## 4. MetaSchedule (llvm)\nms numbers\n\n"
                   "## Studies\nnot generated\n")
    monkeypatch.setattr(bench, "ROOT", str(tmp_path))
    monkeypatch.setattr(bench, "section_codesign", lambda cfg, img: ("## 3. Co-design: accelerator + schedules\n"
                                                                     "new co-design", {}))
    assert bench.main(["--sections", "codesign", "--out", str(out)]) == 0
    text = out.read_text()
    for kept in ("Generated on day 1.", "sim numbers", "sw numbers", "ms numbers", "new co-design"):
        assert kept in text, kept
    assert "old co-design" not in text and "not generated" not in text
    assert "--sections codesign" in text
    # file order is kept: the regenerated section stays third
    assert text.index("sw numbers") < text.index("new co-design") < text.index("ms numbers")


@pytest.mark.parametrize("suite", list(SUITES))
def test_suites_name_known_tuners_and_the_default(suite):
    """Every spec of the suites is accepted by the library; each section runs the default."""
    from dcoc.tuners import DEFAULT, tuner_kwargs
    from scripts import bench_codesign, bench_metaschedule, bench_sw

    cfg = SUITES[suite]
    sw = cfg["sw"]["tuners"] or bench_sw.TUNERS
    cd = cfg["codesign"]["tuners"] or bench_codesign.TUNERS
    for spec in sw + cd:
        tuner_kwargs(spec)
    assert bench_sw.REFERENCE == bench_codesign.REFERENCE == bench_metaschedule.DEFAULT == DEFAULT
    assert DEFAULT in sw and DEFAULT in cd and DEFAULT in bench_metaschedule.STRATEGIES


def _sw_run(layer, tuner, seed, curve):
    return {"layer": layer, "tuner": tuner, "seed": seed, "budget": 10, "opt": 1.0, "curve": curve}


def test_sw_compare_pairs_against_the_default_and_dcoc_against_its_ablations():
    from scripts.bench_sw import PAPER, REFERENCE, ablations, compare, render_compare

    tuners = ["xgb", "surrogate", "dcoc", "dcoc-frozen", "dcoc:select=topk", "surrogate:select=confidence"]
    assert ablations(tuners) == ["dcoc-frozen", "dcoc:select=topk"]
    runs = []
    for layer in ("a", "b"):
        for seed in range(5):
            runs.append(_sw_run(layer, "surrogate", seed, [1.5, 1.0]))        # 99% at trial 2
            runs.append(_sw_run(layer, "dcoc", seed, [1.5, 1.2, 1.1, 1.0]))   # at trial 4
            runs.append(_sw_run(layer, "dcoc-frozen", seed, [1.5] * 5 + [1.0]))  # at trial 6
    main = {r["tuner"]: r for r in compare(runs)}
    assert "t99_test" not in main[REFERENCE] and main["dcoc"]["t99_test"]["sign"] == -1
    paper = {r["tuner"]: r for r in compare(runs, PAPER, ablations(tuners))}
    assert set(paper) == {"dcoc", "dcoc-frozen"} and paper["dcoc-frozen"]["t99_test"]["sign"] == -1
    table = render_compare(list(paper.values()), 10, PAPER, md=True)
    assert "vs dcoc" in table and "worse than dcoc" in table


def test_codesign_section_names_the_default_as_reference(tmp_path, monkeypatch):
    """Section 3's text from a synthetic run: its command lists the suite's tuners, the
    paired tests are against surrogate, every tuner is explained, no retired name appears."""
    import scripts.bench as bench
    from scripts import bench_codesign

    tuners = bench.SUITES["quick"]["codesign"]["tuners"]
    res = {"runs": [], "tuners": tuners, "trials": 100, "seeds": [0, 1],
           "refs": {f"resnet18|{b}": {"hw": "1x16x16", "tuned_ms": 10.0, "default_ms": 20.0}
                    for b in ("pynq", "ultra96")}}
    for b in ("pynq", "ultra96"):
        for t in tuners:
            for seed in (0, 1):
                lat = 9.0 if t == "surrogate" else 9.5
                res["runs"].append({"model": "resnet18", "board": b, "tuner": t, "seed": seed,
                                    "latency_ms": lat, "hw": "1x16x16", "wall": 1.0,
                                    "resources": {"bram36": 1, "dsp": 2, "lut": 3},
                                    "history": [(0, 12.0), (50, lat)],
                                    "explored": [{"hw": "1x16x16", "latency_ms": lat,
                                                  "resources": {"bram36": 1, "dsp": 2, "lut": 3}}]})
    res["compare"] = bench_codesign.compare(res)
    monkeypatch.setattr(bench_codesign, "run", lambda *a, **k: res)
    md, _ = bench.section_codesign(bench.SUITES["quick"]["codesign"], str(tmp_path))
    assert f"--tuners {' '.join(tuners)} " in md
    assert "paired against `surrogate`, the default" in md and "(reference)" in md
    assert all(f"`{t}`:" in md for t in tuners)
    for old in ("dcoc-agents", "gain_units", "sweep_incumbent", "issue", "session"):
        assert old not in md, old
    assert "**Where `surrogate` does not win:** nowhere in this run." in md


def test_an_interrupted_bench_resumes_its_finished_sections_at_the_same_commit(tmp_path, monkeypatch):
    """A clean tree at one commit keeps each finished section; the rerun reuses it and says so."""
    from scripts import bench

    monkeypatch.setattr(bench, "ROOT", str(tmp_path))
    head = {"commit": "abc1234"}
    monkeypatch.setattr(bench, "_git", lambda *a: head["commit"] if a[0] == "rev-parse" else "")
    calls = []

    def simulator(img):
        calls.append("simulator")
        return "## 1. VTA simulator\nsim numbers", {"n": 1}

    def codesign(cfg, img):
        calls.append("codesign")
        if len(calls) == 2:
            raise KeyboardInterrupt  # the first run dies in its second section
        return "## 3. Co-design: accelerator + schedules\nco numbers", {}

    monkeypatch.setattr(bench, "section_simulator", simulator)
    monkeypatch.setattr(bench, "section_codesign", codesign)
    out = tmp_path / "docs" / "RESULTS.md"
    argv = ["--sections", "simulator", "codesign", "--out", str(out)]
    with pytest.raises(KeyboardInterrupt):
        bench.main(argv)
    assert bench.main(argv) == 0
    assert calls == ["simulator", "codesign", "codesign"]  # simulator ran once
    text = out.read_text()
    assert "sim numbers" in text and "co numbers" in text
    assert "commit `abc1234`" in text and "sections simulator from an interrupted run" in text
    head["commit"] = "def5678"  # another commit starts over
    assert bench.main(argv) == 0
    assert calls[-2:] == ["simulator", "codesign"]
