"""Helpers shared by the frontend tests (a plain module: ``conftest`` is not importable by
name once several test directories have one)."""
from __future__ import annotations

import functools
import os
import subprocess
import sys


@functools.lru_cache(maxsize=None)
def cached_tasks(model: str, target: str):
    """``model_tasks(model, target)``, memoized per test process."""
    from tvm_plugin.frontend import model_tasks

    return model_tasks(model, target)


def run_cli(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run ``dcoc ARGS`` in a fresh interpreter (what a user sees: exit code, stdout, stderr)."""
    return subprocess.run([sys.executable, "-m", "dcoc.cli", *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "DCOC_QUIET": "1"})
