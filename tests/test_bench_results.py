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
