"""Tuners: one module per method, one registry of string shortcuts.

``get_tuner("xgb")`` returns the class; :func:`create` instantiates it for a task.
Every tuner follows :class:`~dcoc.tuners.tuner.Tuner` (AutoTVM-style ``tune`` and ask/tell).
"""
from __future__ import annotations

import importlib

from dcoc.errors import DcocError
from dcoc.tuners.tuner import Tuner

#: name -> "module:Class" (imported lazily: torch/xgboost load only when used)
REGISTRY = {
    "random": "dcoc.tuners.random_tuner:RandomTuner",
    "grid": "dcoc.tuners.random_tuner:GridSearchTuner",
    "ga": "dcoc.tuners.ga_tuner:GATuner",
    "xgb": "dcoc.tuners.xgb_tuner:XGBTuner",
    "rl": "dcoc.tuners.rl_tuner:RLTuner",
    "chameleon": "dcoc.tuners.chameleon_tuner:ChameleonTuner",
    "dcoc": "dcoc.tuners.dcoc_tuner:DCOCTuner",
    # ablations of DCOC (flags of dcoc.method.core.DCOCConfig) and non-learning references
    "dcoc-agents": "dcoc.tuners.dcoc_tuner:DCOCAgentsTuner",
    "dcoc-frozen": "dcoc.tuners.dcoc_tuner:DCOCFrozenTuner",
    "dcoc-noagents": "dcoc.tuners.dcoc_tuner:DCOCNoAgentsTuner",
    "dcoc-topk": "dcoc.tuners.dcoc_tuner:DCOCTopKTuner",
    "surrogate": "dcoc.tuners.dcoc_tuner:SurrogateTuner",
    "sweep": "dcoc.tuners.sweep_tuner:SweepTuner",
}

#: the DCOC family: tuners that take ``agents=`` and drive :class:`dcoc.method.core.DCOCCore`
DCOC_FAMILY = ("dcoc", "dcoc-agents", "dcoc-frozen", "dcoc-noagents", "dcoc-topk", "surrogate")


def names() -> list[str]:
    return list(REGISTRY)


def get_tuner(name: str) -> type:
    """The tuner class for a string shortcut (or a Tuner subclass, returned as is)."""
    if isinstance(name, type) and issubclass(name, Tuner):
        return name
    spec = REGISTRY.get(str(name).lower())
    if spec is None:
        raise DcocError(f"unknown tuner '{name}'; choose one of {', '.join(REGISTRY)}")
    mod, cls = spec.split(":")
    try:
        return getattr(importlib.import_module(mod), cls)
    except ModuleNotFoundError as exc:
        if exc.name == mod:
            raise DcocError(f"tuner '{name}' is not available in this build") from None
        raise


def create(name, task, seed: int = 0, **kwargs) -> Tuner:
    return get_tuner(name)(task, seed=seed, **kwargs)


__all__ = ["DCOC_FAMILY", "REGISTRY", "Tuner", "create", "get_tuner", "names"]
