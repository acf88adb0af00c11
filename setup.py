"""Package discovery; everything else is declared in pyproject.toml.

pyproject's ``[tool.setuptools.packages.find]`` can only name a package after its directory,
and one package is not: ``dcoc_models`` lives in ``models/`` (``[tool.setuptools.package-dir]``).
So the packages are discovered here: every package under ``dcoc/`` and ``tvm_plugin/``, and
``dcoc_models`` with any sub-packages of ``models/``.  A new sub-package needs no edit.
"""
from setuptools import find_packages, setup

setup(packages=find_packages(include=["dcoc", "dcoc.*", "tvm_plugin", "tvm_plugin.*"])
      + ["dcoc_models"] + [f"dcoc_models.{p}" for p in find_packages("models")])
