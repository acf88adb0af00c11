"""The rules of docs/architecture.md that the import graph can check.

* no import cycle among dcoc, tvm_plugin and dcoc_models (every import statement counted,
  lazy ones inside functions too);
* no library module imports the command line (``dcoc.cli``);
* only tvm_plugin imports TVM;
* ``dcoc --help`` imports neither TVM nor torch.
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys

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


def test_help_imports_neither_tvm_nor_torch():
    code = ("import sys, contextlib, io\nfrom dcoc.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try:\n        main(['tune', '--help'])\n    except SystemExit:\n        pass\n"
            "print(sorted(m for m in ('tvm', 'torch', 'xgboost', 'onnxruntime') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
