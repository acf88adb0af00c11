"""The target registry: names -> :class:`~dcoc.targets.base.Target` objects (imported lazily)."""
from __future__ import annotations

from dcoc.errors import TargetError

#: name -> "module:Class"
REGISTRY = {
    "vta": "dcoc.targets.vta.target:VTATarget",
    "systolic": "dcoc.targets.systolic:SystolicTarget",
}

#: the accelerator target used when none is named
DEFAULT_TARGET = "vta"

#: name -> its board names, the default board first: what ``dcoc tune --help`` and the
#: ``--board`` check read without importing a target (tests/api/test_cli_board.py checks
#: it against each target's board table)
BOARD_NAMES = {
    "vta": ("pynq", "ultra96", "zcu104"),
    "systolic": ("arty-a7", "kv260"),
}

#: name -> ``"module:attr"`` of ``runner(result, input_shapes=None)``, which returns a
#: callable ``inputs -> [outputs]`` running a tuned model on the target (``dcoc run``,
#: ``TuneResult.run``); a target without an entry tunes and exports but does not run models
RUNNERS = {
    "vta": "dcoc.api.run:vta_runner",
}

_CACHE: dict = {}


def available() -> list[str]:
    """Names of the registered accelerator targets."""
    return list(REGISTRY)


def get(name=None) -> "Target":  # noqa: F821 - dcoc.targets.base.Target (not imported here)
    """The target called ``name`` (default :data:`DEFAULT_TARGET`); a Target instance is returned as is."""
    if _is_target(name):
        return name
    key = DEFAULT_TARGET if name is None else str(name).strip().lower()
    if key not in REGISTRY:
        raise TargetError(f"unknown accelerator target '{name}'; choose one of {', '.join(REGISTRY)}")
    if key not in _CACHE:
        from dcoc.registry import load

        _CACHE[key] = load(REGISTRY[key])()
    return _CACHE[key]


def is_accelerator(target) -> bool:
    """Whether ``target`` names a registered accelerator target (else: a TVM target)."""
    return _is_target(target) or (isinstance(target, str) and target.strip().lower() in REGISTRY)


def _is_target(obj) -> bool:
    """A target object (duck-typed: this module imports no target)."""
    return not isinstance(obj, (str, dict)) and hasattr(obj, "hw_space") and hasattr(obj, "sw_space")


__all__ = ["BOARD_NAMES", "DEFAULT_TARGET", "REGISTRY", "RUNNERS", "available", "get", "is_accelerator"]
