"""Hardware targets: one :class:`~dcoc.targets.target.Target` per accelerator template.

``available()`` lists the registered names; ``get(name)`` returns the (cached) target
object.  Registered here, imported lazily:

* ``vta`` -- the VTA-style accelerator (:mod:`dcoc.vta.target`, wrapping :mod:`dcoc.vta`);
* ``systolic`` -- a weight-stationary systolic array (:mod:`dcoc.targets.systolic`).

Adding a target = one module with a :class:`Target` subclass + one line in
:data:`REGISTRY` (docs/architecture.md).
"""
from __future__ import annotations

import importlib

from dcoc.errors import TargetError
from dcoc.targets.target import Layer, Target

#: name -> "module:Class"
REGISTRY = {
    "vta": "dcoc.vta.target:VTATarget",
    "systolic": "dcoc.targets.systolic:SystolicTarget",
}

#: the accelerator target used when none is named
DEFAULT_TARGET = "vta"

_CACHE: dict = {}


def available() -> list[str]:
    """Names of the registered accelerator targets."""
    return list(REGISTRY)


def get(name=None) -> Target:
    """The target called ``name`` (default :data:`DEFAULT_TARGET`); a Target instance is returned as is."""
    if isinstance(name, Target):
        return name
    key = DEFAULT_TARGET if name is None else str(name).strip().lower()
    if key not in REGISTRY:
        raise TargetError(f"unknown accelerator target '{name}'; choose one of {', '.join(REGISTRY)}")
    if key not in _CACHE:
        mod, cls = REGISTRY[key].split(":")
        _CACHE[key] = getattr(importlib.import_module(mod), cls)()
    return _CACHE[key]


def is_accelerator(target) -> bool:
    """Whether ``target`` names a registered accelerator target (else: a TVM target)."""
    return isinstance(target, Target) or (isinstance(target, str) and target.strip().lower() in REGISTRY)


def boards(target=None) -> list[str]:
    return list(get(target).boards)


__all__ = ["DEFAULT_TARGET", "Layer", "REGISTRY", "Target", "available", "boards", "get", "is_accelerator"]
