"""Install the CPU build of torch into this Python environment (``make install`` runs it
before ``pip install -e .[test]``, so that pip never pulls the ~3 GB CUDA build).

Order of preference:

1. torch is already importable: nothing to do (``--force`` reinstalls).
2. PyTorch's CPU wheel index (``--index``, default https://download.pytorch.org/whl/cpu)
   is reachable: ``pip install torch --index-url INDEX``.
3. Otherwise the default index (PyPI, or the mirrors and wheel directories pip is
   configured with).  If what pip would pick there is a CUDA build (it pulls nvidia-* or
   triton wheels), the newest ``+cpu`` version those indexes offer is installed instead
   (``pip index versions torch``); only if there is none is the CUDA build installed,
   with a warning.  Where PyPI's torch is CPU-only (macOS, Linux aarch64) it is used as is.

``--dry-run`` prints the pip command that would run and exits.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.request

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
FLOOR = (2, 2)  # pyproject.toml: torch>=2.2


def _pip(*args: str, capture: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", *args], text=True,
                          capture_output=capture, check=False)


def reachable(index: str, timeout: float = 15.0) -> bool:
    try:
        urllib.request.urlopen(index.rstrip("/") + "/torch/", timeout=timeout).close()
        return True
    except Exception:  # noqa: BLE001 - any failure means: not usable
        return False


def default_pick_is_cuda() -> bool:
    """Whether ``pip install torch`` from the default indexes would pull CUDA wheels."""
    with tempfile.TemporaryDirectory() as d:
        rep = os.path.join(d, "r.json")
        r = _pip("install", "--dry-run", "--quiet", "--ignore-installed", "--report", rep,
                 "torch", capture=True)
        if r.returncode != 0 or not os.path.exists(rep):
            return False
        with open(rep) as f:
            names = [i["metadata"]["name"].lower() for i in json.load(f)["install"]]
    return any(n.startswith("nvidia-") or n == "triton" for n in names)


def newest_cpu_version() -> str | None:
    r = _pip("index", "versions", "torch", capture=True)
    m = re.search(r"Available versions:\s*(.+)", r.stdout or "")
    if not m:
        return None
    for v in (x.strip() for x in m.group(1).split(",")):  # newest first
        if v.endswith("+cpu"):
            nums = tuple(int(p) for p in re.findall(r"\d+", v.split("+")[0])[:2])
            if nums >= FLOOR:
                return v
    return None


def plan(index: str) -> tuple[list[str], str]:
    """(pip arguments, why)."""
    if reachable(index):
        return ["install", "torch", "--index-url", index], f"the CPU build from {index}"
    if not default_pick_is_cuda():
        return ["install", "torch"], f"{index} is not reachable; the default index's torch is CPU-only here"
    v = newest_cpu_version()
    if v:
        return ["install", f"torch=={v}"], (f"{index} is not reachable; the CPU build {v} "
                                            "from the configured indexes")
    return ["install", "torch"], (f"WARNING: {index} is not reachable and the configured "
                                  "indexes have no CPU build of torch: installing the CUDA "
                                  "build (~3 GB)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", default=os.environ.get("TORCH_INDEX", CPU_INDEX))
    ap.add_argument("--force", action="store_true", help="install even if torch is importable")
    ap.add_argument("--dry-run", action="store_true", help="print the pip command only")
    args = ap.parse_args(argv)
    if not args.force and not args.dry_run:
        r = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"],
                           capture_output=True, text=True)
        if r.returncode == 0:
            print(f"torch {r.stdout.strip()} is already installed")
            return 0
    cmd, why = plan(args.index)
    print(f"torch: {why}: pip {' '.join(cmd)}", flush=True)
    if args.dry_run:
        return 0
    return _pip("-q", *cmd).returncode


if __name__ == "__main__":
    sys.exit(main())
