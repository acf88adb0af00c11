"""The rules of docs/architecture.md that the import graph can check.

* no import cycle among dcoc, tvm_plugin and dcoc_models (every import statement counted,
  lazy ones inside functions too);
* no library module imports the command line (``dcoc.cli``);
* only tvm_plugin imports TVM;
* ``dcoc --help`` and the commands' help import no heavy library (numpy, scipy, xgboost,
  torch, TVM);
* ``python -m dcoc`` is the ``dcoc`` command.
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = {"dcoc": "dcoc", "tvm_plugin": "tvm_plugin", "models": "dcoc_models"}


def _modules() -> dict[str, str]:
    out = {}
    for folder, pkg in PACKAGES.items():
        for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
            for f in files:
                if f.endswith(".py"):
                    rel = os.path.relpath(os.path.join(dirpath, f), os.path.join(ROOT, folder))
                    name = ".".join([pkg] + rel[:-3].split(os.sep))
                    out[name.removesuffix(".__init__")] = os.path.join(dirpath, f)
    return out


def _imports(mods: dict[str, str]) -> dict[str, set[str]]:
    """module -> the project modules it imports (resolved to the longest known prefix) and
    the external top-level packages it imports (prefixed with '!')."""

    def resolve(name):
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for m, path in mods.items():
        edges = set()
        is_pkg = path.endswith("__init__.py")
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = m.split(".")[: len(m.split(".")) - node.level + (1 if is_pkg else 0)]
                    base = ".".join(parts + ([base] if base else []))
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for n in names:
                r = resolve(n)
                if r is not None and r != m:
                    edges.add(r)
                elif r is None:
                    edges.add("!" + n.split(".")[0])
        graph[m] = edges
    return graph


def _cycles(graph) -> list[list[str]]:
    index, low, stack, on, out = {}, {}, [], set(), []
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w.startswith("!"):
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


GRAPH = _imports(_modules())


def test_no_import_cycles():
    assert _cycles(GRAPH) == []


def test_the_library_never_imports_the_command_line():
    bad = {m: sorted(e for e in edges if e.startswith("dcoc.cli"))
           for m, edges in GRAPH.items() if not m.startswith("dcoc.cli")}
    assert {m: e for m, e in bad.items() if e} == {}


def test_only_tvm_plugin_imports_tvm():
    bad = sorted(m for m, edges in GRAPH.items()
                 if not m.startswith("tvm_plugin") and edges & {"!tvm", "!tvm_ffi"})
    assert bad == []


HEAVY = ("numpy", "scipy", "xgboost", "torch", "tvm", "onnx", "onnxruntime", "matplotlib")


@pytest.mark.parametrize("argv", [["--help"], ["tune", "--help"], ["tune-task", "--help"], []])
def test_help_imports_no_heavy_library(argv):
    """``dcoc --help`` and a command's help list names only: no numpy, scipy, xgboost,
    torch or TVM (the board names come from the targets registry's static table)."""
    code = ("import sys, contextlib, io\nfrom dcoc.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    try:\n        main({argv!r})\n    except SystemExit:\n        pass\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_python_m_dcoc_is_the_dcoc_command():
    run = [sys.executable, "-m", "dcoc"]
    r = subprocess.run(run + ["--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: dcoc ") and "tune-task" in r.stdout and "exit status:" in r.stdout
    r = subprocess.run(run + ["--version"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("dcoc "), r.stderr
    r = subprocess.run(run + ["tune", "m", "--board", "kv260"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("dcoc: error: argument --board") and len(r.stderr.splitlines()) == 1


def test_python_m_dcoc_ctrl_c_is_one_line_exit_130(tmp_path):
    import signal
    import time

    p = subprocess.Popen([sys.executable, "-m", "dcoc", "tune", "resnet18", "--trials", "3000",
                          "--tuner", "random", "--workers", "0", "--work-dir", str(tmp_path / "wd"),
                          "-q"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        time.sleep(1.0)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    if p.returncode == 0:
        pytest.skip("the run ended before Ctrl-C")
    assert p.returncode in (130, -signal.SIGINT), (p.returncode, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("dcoc: interrupted"), err
