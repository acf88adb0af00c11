"""The installed environment is the small, CPU-only one the README promises.

* torch is a CPU build: no CUDA runtime compiled in, no CUDA libraries beside it, no
  nvidia-* / triton distributions installed (they are what makes the CUDA build ~3 GB).
* exactly one distribution provides the ``xgboost`` module (``xgboost-cpu`` and
  ``xgboost`` own the same files; installing both -- e.g. through
  ``apache-tvm[meta-schedule]`` -- leaves whichever was installed last half-overwritten).
* the package metadata carries the SPDX license, the LICENSE file and project URLs.

Set ``DCOC_ALLOW_CUDA_TORCH=1`` to skip the torch check on a machine that wants CUDA.
"""
from __future__ import annotations

import glob
import importlib.metadata as md
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _dists() -> dict[str, str]:
    out = {}
    for d in md.distributions():
        name = (d.metadata["Name"] or "").lower().replace("_", "-")
        if name:
            out[name] = d.version
    return out


@pytest.mark.skipif(os.environ.get("DCOC_ALLOW_CUDA_TORCH") == "1",
                    reason="DCOC_ALLOW_CUDA_TORCH=1: a CUDA build of torch is wanted here")
def test_torch_is_a_cpu_build_without_cuda_libraries():
    import torch

    assert torch.version.cuda is None, f"torch {torch.__version__} is a CUDA build"
    assert not torch.backends.cudnn.is_available()
    lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    cuda_libs = [os.path.basename(p) for p in glob.glob(os.path.join(lib, "*"))
                 if re.match(r"lib(cudart|cublas|cudnn|nccl|cufft|cusparse|nvrtc|nvToolsExt)",
                             os.path.basename(p))]
    assert not cuda_libs, f"CUDA libraries next to torch: {cuda_libs}"
    nv = sorted(n for n in _dists() if n.startswith("nvidia-") or n == "triton")
    assert not nv, f"CUDA wheels installed: {nv}"


def test_one_distribution_provides_xgboost():
    have = [n for n in ("xgboost", "xgboost-cpu") if n in _dists()]
    assert len(have) == 1, f"distributions providing the xgboost module: {have or 'none'}"


def test_package_metadata_license_and_urls():
    try:
        meta = md.metadata("dcoc")
    except md.PackageNotFoundError:
        pytest.skip("dcoc is not installed (run from a checkout via PYTHONPATH)")
    if meta.get("License-Expression") is None:
        pytest.skip("dcoc was installed from an older checkout; reinstall to refresh its metadata")
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta.get_all("License-File") and "LICENSE" in meta.get_all("License-File")
    assert meta.get_all("Project-URL")


def test_pyproject_declares_no_machine_specific_caps():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        proj = tomllib.load(f)["project"]
    assert proj["license"] == "Apache-2.0"
    assert os.path.isfile(os.path.join(ROOT, "LICENSE"))
    torch_req = [d for d in proj["dependencies"] if d.startswith("torch")]
    assert torch_req and "<" not in torch_req[0], torch_req  # a floor, no cap from one machine
    assert set(proj["optional-dependencies"]) >= {"test", "dev"}


def test_the_pre_trained_cost_model_ships_in_the_package():
    # setuptools copies a package's non-Python files only where package-data names them
    tomllib = pytest.importorskip("tomllib")

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        data = tomllib.load(f)["tool"]["setuptools"]["package-data"]
    pkg = os.path.join(ROOT, "tvm_plugin", "metaschedule")
    shipped = {os.path.relpath(p, pkg) for pat in data["tvm_plugin.metaschedule"]
               for p in glob.glob(os.path.join(pkg, pat))}
    assert {"data/cpu_prior.json", "data/cpu_prior.ubj"} <= shipped
