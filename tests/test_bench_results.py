"""scripts.bench keeps RESULTS.md's hand-written sections when it regenerates the file."""
import os

from scripts.bench import HAND_MARK, hand_written

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_hand_written_tail_is_kept_and_generated_sections_are_not():
    text = "# r\n\n## 1. VTA simulator\nold numbers\n\n## Studies (written by hand)\nkeep me\n\n### sub\nme too\n"
    kept = hand_written(text)
    assert kept.startswith("## Studies") and "me too" in kept and "old numbers" not in kept
    assert hand_written("# r\n## 1. generated\n") == ""


def test_results_md_hand_sections_are_marked():
    with open(os.path.join(ROOT, "docs", "RESULTS.md")) as f:
        text = f.read()
    kept = hand_written(text)
    # every study that `make bench` does not run is in the kept tail
    for title in ("## Accelerator realism", "## Issue 13", "### MetaSchedule on whole models"):
        assert title in kept, title
    assert "## 1. VTA simulator" not in kept
    assert all(HAND_MARK in line for line in kept.splitlines() if line.startswith("## "))


def test_regenerating_one_section_keeps_the_others(tmp_path, monkeypatch):
    import scripts.bench as bench

    out = tmp_path / "docs" / "RESULTS.md"
    out.parent.mkdir()
    out.write_text("# dcoc benchmark results\n\nGenerated on day 1.\n\n## 1. VTA simulator\nsim numbers\n\n"
                   "## 2. Software-only tuning\nsw numbers\n\n## 3. Co-design: accelerator + schedules\n"
                   "old co-design\n\n## 4. MetaSchedule (llvm)\nms numbers\n\n"
                   f"## Studies ({HAND_MARK})\nkeep me\n")
    monkeypatch.setattr(bench, "ROOT", str(tmp_path))
    monkeypatch.setattr(bench, "section_codesign", lambda cfg, img: ("## 3. Co-design: accelerator + schedules\n"
                                                                     "new co-design", {}))
    assert bench.main(["--sections", "codesign", "--out", str(out)]) == 0
    text = out.read_text()
    for kept in ("Generated on day 1.", "sim numbers", "sw numbers", "ms numbers", "keep me", "new co-design"):
        assert kept in text, kept
    assert "old co-design" not in text
    assert "--sections codesign" in text
    # file order is kept: the regenerated section stays third
    assert text.index("sw numbers") < text.index("new co-design") < text.index("ms numbers") < text.index("keep me")
