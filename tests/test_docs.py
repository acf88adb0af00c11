"""Every ``python`` and ``bash`` block of README.md and docs/*.md runs.

Blocks of one file run in order, in one test and one scratch directory holding ``model.onnx`` (a
small static conv net with one input named ``input``, 1x3x224x224) and a ``dcoc`` on the
PATH; Python blocks each run in a fresh interpreter, shell blocks with ``bash -e``.

A block may be preceded by directive comments, visible in the Markdown source::

    <!-- doctest: sub "trials=2000" "trials=30" -->   replace text before running (budgets)
    <!-- doctest: cwd repo -->                        run in the repository root
    <!-- doctest: slow -->                            only with -m slow (make test-all)

Nothing else is changed: what runs is the block as written plus those substitutions.
Blocks without a language (outputs, diagrams) are not run.
"""
from __future__ import annotations

import glob
import os
import re
import shlex
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
LANGS = {"python": "python", "py": "python", "bash": "bash", "sh": "bash", "shell": "bash"}
_DIRECTIVE = re.compile(r"^<!--\s*doctest:\s*(.*?)\s*-->\s*$")


def blocks(path: str) -> list[dict]:
    """The runnable blocks of a Markdown file with their directives."""
    out, pending = [], []
    lines = open(os.path.join(ROOT, path), encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _DIRECTIVE.match(line.strip())
        if m:
            pending.append(m.group(1))
            i += 1
            continue
        fence = re.match(r"^```(\w*)\s*$", line)
        if fence:
            lang = fence.group(1).lower()
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            if lang in LANGS:
                out.append({"file": path, "line": i + 1, "lang": LANGS[lang],
                            "code": "\n".join(lines[i + 1:j]), "directives": pending})
            pending = []
            i = j + 1
            continue
        if line.strip():
            pending = []
        i += 1
    return out


ALL = [b for p in DOCS for b in blocks(p)]


def _prepared(block: dict) -> tuple[str, str, bool]:
    code, cwd, slow = block["code"], "scratch", False
    for d in block["directives"]:
        words = shlex.split(d)
        if words[0] == "sub" and len(words) == 3:
            assert words[1] in code, f"{block['file']}:{block['line']}: '{words[1]}' not in the block"
            code = code.replace(words[1], words[2])
        elif words[:2] == ["cwd", "repo"]:
            cwd = "repo"
        elif words == ["slow"]:
            slow = True
        else:
            raise AssertionError(f"{block['file']}:{block['line']}: unknown directive '{d}'")
    return code, cwd, slow


def _model(path: str) -> None:
    import numpy as np
    import onnx
    from onnx import TensorProto as TP
    from onnx import helper, numpy_helper

    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    g = helper.make_graph(
        [helper.make_node("Conv", ["input", "w"], ["c"], strides=[4, 4], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["output"])], "doc_model",
        [helper.make_tensor_value_info("input", TP.FLOAT, [1, 3, 224, 224])],
        [helper.make_tensor_value_info("output", TP.FLOAT, [1, 4, 56, 56])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


def _scratch(d) -> tuple[str, dict]:
    """A scratch dir with model.onnx and a `dcoc` launcher on PATH, and the environment."""
    _model(str(d / "model.onnx"))
    bindir = d / "bin"
    bindir.mkdir()
    launcher = bindir / "dcoc"
    launcher.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m dcoc.cli \"$@\"\n")
    launcher.chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = f"{bindir}{os.pathsep}{os.path.dirname(sys.executable)}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["DCOC_QUIET"] = "1"
    env["MPLBACKEND"] = "Agg"
    return str(d), env


def _params():
    """One test per file (its blocks run in order: later blocks read what earlier ones
    wrote), and one more, marked slow, for a file with slow blocks: all of them."""
    out = []
    for p in DOCS:
        bs = [b for b in ALL if b["file"] == p]
        if not bs:
            continue
        out.append(pytest.param(p, False, id=p))
        if any(_prepared(b)[2] for b in bs):
            out.append(pytest.param(p, True, id=f"{p}+slow", marks=[pytest.mark.slow]))
    return out


def test_the_docs_have_blocks_to_run():
    assert len([b for b in ALL if b["file"] == "README.md"]) >= 6
    # every block with a language that looks like code is one we run
    for p in DOCS:
        for m in re.finditer(r"^```(\w+)", open(os.path.join(ROOT, p), encoding="utf-8").read(), re.M):
            assert m.group(1).lower() in LANGS or m.group(1).lower() in ("text", "console", "toml", "json"), \
                f"{p}: block language '{m.group(1)}' is neither run nor declared as output"


@pytest.mark.parametrize("path,with_slow", _params())
def test_doc_blocks_run(path, with_slow, tmp_path):
    d, env = _scratch(tmp_path)
    for block in (b for b in ALL if b["file"] == path):
        code, where, slow = _prepared(block)
        if slow and not with_slow:
            continue
        cwd = ROOT if where == "repo" else d
        if block["lang"] == "python":
            cmd = [sys.executable, "-c", code]
        else:
            cmd = ["bash", "-e", "-o", "pipefail", "-c", code]
        r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=1500)
        assert r.returncode == 0, (f"{block['file']}:{block['line']} failed (exit {r.returncode})\n"
                                   f"--- code ---\n{code}\n--- stdout ---\n{r.stdout[-3000:]}\n"
                                   f"--- stderr ---\n{r.stderr[-5000:]}")
        if block["lang"] == "python":  # a snippet must not flood the console (TVM task tables)
            assert len(r.stdout.splitlines()) + len(r.stderr.splitlines()) < 60, \
                f"{block['file']}:{block['line']} printed {r.stdout[-2000:]}{r.stderr[-2000:]}"
