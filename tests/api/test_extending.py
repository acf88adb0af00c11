"""docs/extending.md's "add a target" walkthrough, executed: the doc's code blocks marked
``<!-- file: PATH -->`` are written into a copy of the ``dcoc`` package, the block marked
``<!-- registry: PATH -->`` is inserted into that registry, and ``dcoc tune --target
macarray --pareto`` then ``dcoc export`` run end to end on a small model with the copy
first on PYTHONPATH.  The diff the walkthrough needs (new folder + one line) is reported
and checked to touch no other file."""
from __future__ import annotations

import difflib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time

from api_util import small_cnn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(ROOT, "docs", "extending.md")
_MARK = re.compile(r"^<!--\s*(file|registry):\s*(\S+)\s*-->\s*$")


def doc_blocks() -> list[tuple[str, str, str]]:
    """``(kind, path, code)`` of every marked block of docs/extending.md, in order."""
    lines = open(DOC, encoding="utf-8").read().split("\n")
    out = []
    for i, line in enumerate(lines):
        m = _MARK.match(line.strip())
        if not m:
            continue
        assert lines[i + 1].startswith("```"), f"extending.md:{i + 1}: a marker must precede a code block"
        j = i + 2
        while not lines[j].startswith("```"):
            j += 1
        out.append((m.group(1), m.group(2), "\n".join(lines[i + 2:j]) + "\n"))
    return out


def apply_walkthrough(dest: str) -> dict:
    """Copy ``dcoc/`` to ``dest`` and apply the doc's blocks; the diff's size per file."""
    shutil.copytree(os.path.join(ROOT, "dcoc"), os.path.join(dest, "dcoc"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    blocks = doc_blocks()
    assert [k for k, _, _ in blocks].count("registry") == 1, "one registry line, no more"
    for kind, rel, code in blocks:
        path = os.path.join(dest, rel)
        if kind == "file":
            assert not os.path.exists(path), f"{rel} exists already: the walkthrough must add it"
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(code)
        else:
            text = open(path, encoding="utf-8").read()
            assert "REGISTRY = {\n" in text
            with open(path, "w", encoding="utf-8") as f:
                f.write(text.replace("REGISTRY = {\n", "REGISTRY = {\n" + code, 1))
    added = {}
    for dirpath, _, files in os.walk(os.path.join(dest, "dcoc")):
        for name in files:
            if not name.endswith(".py"):
                continue
            new = os.path.join(dirpath, name)
            rel = os.path.relpath(new, dest)
            old = os.path.join(ROOT, rel)
            a = open(old, encoding="utf-8").read().split("\n") if os.path.exists(old) else []
            b = open(new, encoding="utf-8").read().split("\n")
            diff = [d for d in difflib.unified_diff(a, b, lineterm="", n=0)
                    if d[:1] in "+-" and not d.startswith(("+++", "---"))]
            if diff:
                added[rel] = sum(d.startswith("+") for d in diff)
                assert all(d.startswith("+") for d in diff), f"{rel}: the walkthrough only adds lines"
    return added


def _cli(pkg: str, cwd: str, *args) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=pkg + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "dcoc.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=600)


def test_add_a_target_walkthrough(tmp_path):
    pkg = str(tmp_path / "pkg")
    added = apply_walkthrough(pkg)
    new_files = sorted(r for r in added if not os.path.exists(os.path.join(ROOT, r)))
    changed = sorted(r for r in added if r not in new_files)
    assert new_files == ["dcoc/targets/macarray/__init__.py"]
    assert changed == ["dcoc/targets/registry.py"] and added["dcoc/targets/registry.py"] == 1
    print(f"\nextending.md walkthrough: +{sum(added.values())} lines "
          f"({', '.join(f'{r} +{n}' for r, n in sorted(added.items()))})")

    model = small_cnn(str(tmp_path / "small.onnx"))
    wd, out = str(tmp_path / "wd"), str(tmp_path / "design")
    t0 = time.perf_counter()
    p = _cli(pkg, str(tmp_path), "tune", model, "--target", "macarray", "--trials", "30", "--pareto",
             "--work-dir", wd, "--quiet")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "the MAC array runs" in p.stdout and "Pareto front on tiny" in p.stdout
    res = json.load(open(os.path.join(wd, "result.json")))
    assert res["target"] == "macarray" and res["board"] == "tiny" and res["trials"] == 30
    assert math.isfinite(res["latency_ms"]) and 0 < res["latency_ms"] <= res["baseline_latency_ms"]
    assert len(res["layers"]) == 2 and all(ly["device"] == "macarray" for ly in res["layers"])
    front = res["pareto"]
    assert front and all(math.isfinite(pt["latency_ms"]) and set(pt["resources"]) >= {"bram36", "dsp", "lut"}
                         for pt in front)
    assert res["hardware"]["name"] in {pt["hardware"]["name"] for pt in front}
    assert os.path.getsize(os.path.join(wd, "records.jsonl")) > 0

    p = _cli(pkg, str(tmp_path), "export", wd, out)
    assert p.returncode == 0, p.stdout + p.stderr
    for name in ("export.json", "hardware_report.json", "schedules.json", "layers.json", "README.md"):
        assert os.path.getsize(os.path.join(out, name)) > 0, name
    meta = json.load(open(os.path.join(out, "export.json")))
    assert meta["target"] == "macarray" and meta["hardware"] == res["hardware"]["name"]
    p = _cli(pkg, out, "export", "--check", ".")
    assert p.returncode == 0 and "reproduced" in p.stdout, p.stdout + p.stderr
    print(f"tune + export + check: {time.perf_counter() - t0:.1f} s")
