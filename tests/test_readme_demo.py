"""The README's demo output is what `make demo` prints with the current code.

The block after ``<!-- demo-output -->`` must equal a fresh run of the demo command, with
long tables cut to their first rows (:func:`shorten`), except the wall time and the lines
with the CPU layers' host-measured time (masked).  After a
change that moves the demo's result, regenerate it with ``make readme-demo`` (this file
run as a script with ``--update``).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
MARK = "<!-- demo-output -->"
#: the demo, as the Makefile runs it (``make demo``), minus its work dir
DEMO = ["tune", "resnet18", "--target", "vta", "--board", "pynq", "--trials", "300", "--seed", "0"]
_WALL = re.compile(r"wall \d+ s")
#: the lines holding the CPU layers' time, measured on this host (ONNX Runtime): not reproducible
_HOST = re.compile(r"^(cpu layers|latency) .*$", re.M)


def _mask(text: str) -> str:
    return _HOST.sub(r"\1 (timed on the host)", _WALL.sub("wall N s", text))


#: a table with more rows than this shows its first KEEP_ROWS rows in the README
MAX_ROWS, KEEP_ROWS = 5, 3


def shorten(text: str) -> str:
    """``text`` with every long table (a header, a ``-----`` rule, rows up to a blank line)
    cut to its first rows and one ``... (N more rows)`` line."""
    out, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        out.append(lines[i])
        if i + 1 < len(lines) and lines[i + 1].startswith("-----"):
            out.append(lines[i + 1])
            j = i + 2
            while j < len(lines) and lines[j].strip():
                j += 1
            rows = lines[i + 2:j]
            if len(rows) > MAX_ROWS:
                rows = rows[:KEEP_ROWS] + [f"... ({len(rows) - KEEP_ROWS} more rows)"]
            out += rows
            i = j
            continue
        i += 1
    return "\n".join(out)


def fresh_output() -> str:
    """The summary a fresh demo run prints (progress off, the work-dir line dropped)."""
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, MPLBACKEND="Agg")
        r = subprocess.run([sys.executable, "-m", "dcoc.cli", *DEMO, "--work-dir", d, "-q"],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [ln for ln in r.stdout.rstrip("\n").split("\n") if not ln.startswith("work dir")]
    return shorten("\n".join(lines).rstrip())


def readme_block(text: str) -> tuple[int, int]:
    """(start, end) character offsets of the demo block's contents in the README."""
    i = text.index(MARK)
    start = text.index("```text\n", i) + len("```text\n")
    end = text.index("\n```", start)
    return start, end


def test_the_makefile_runs_the_same_demo():
    make = open(os.path.join(ROOT, "Makefile"), encoding="utf-8").read()
    assert "$(DCOC) " + " ".join(DEMO) in make


def test_readme_demo_block_matches_a_fresh_run():
    text = open(README, encoding="utf-8").read()
    start, end = readme_block(text)
    want = _mask(text[start:end].rstrip())
    got = _mask(fresh_output())
    assert got == want, ("README.md's demo output is stale; run `make readme-demo`.\n"
                         f"--- fresh run ---\n{got}")


def main(argv) -> int:
    if argv != ["--update"]:
        print("usage: python tests/test_readme_demo.py --update", file=sys.stderr)
        return 2
    text = open(README, encoding="utf-8").read()
    start, end = readme_block(text)
    with open(README, "w", encoding="utf-8") as f:
        f.write(text[:start] + fresh_output() + text[end:])
    print("README.md demo output updated")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
