"""Hardware targets: one :class:`~dcoc.targets.base.Target` per accelerator template.

``available()`` lists the registered names; ``get(name)`` returns the (cached) target
object.  Registered here, imported lazily:

* ``vta`` -- the VTA-style accelerator (:mod:`dcoc.targets.vta.target`, wrapping :mod:`dcoc.targets.vta`);
* ``systolic`` -- a weight-stationary systolic array (:mod:`dcoc.targets.systolic`).

Adding a target = one module with a :class:`Target` subclass + one line in
:data:`REGISTRY` (docs/architecture.md).
"""
from __future__ import annotations

from dcoc.targets.registry import DEFAULT_TARGET, REGISTRY, available, get, is_accelerator


def __getattr__(name):
    # Layer and Target on first use: dcoc.targets.base imports numpy, and reading the
    # registry (``dcoc tune --help``) must not
    if name in ("Layer", "Target"):
        from dcoc.targets import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["DEFAULT_TARGET", "Layer", "REGISTRY", "Target", "available", "get", "is_accelerator"]
