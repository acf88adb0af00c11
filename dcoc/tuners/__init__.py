"""Tuners: one module per method, one registry of names.

``create("xgb", task)`` instantiates a tuner for a task; ``get_tuner(name)`` returns its
class.  Every tuner follows :class:`~dcoc.tuners.tuner.Tuner` (AutoTVM-style ``tune`` and
ask/tell).  A name may carry settings of the DCOC family's config, ``NAME:key=value,...``
(``surrogate:select=confidence``, ``dcoc:explore_frac=0``): the ablations of the evidence.

Each name means one algorithm on every path (one task, whole-model co-design and the
MetaSchedule strategy); :data:`DESCRIPTIONS` says which, and :data:`DEFAULT` is the default
everywhere.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

from dcoc.errors import DcocError

if TYPE_CHECKING:
    from dcoc.tuners.tuner import Tuner

#: name -> "module:Class" (imported lazily: torch/xgboost load only when used)
REGISTRY = {
    "surrogate": "dcoc.tuners.dcoc_tuner:SurrogateTuner",
    "dcoc": "dcoc.tuners.dcoc_tuner:DCOCTuner",
    "dcoc-frozen": "dcoc.tuners.dcoc_tuner:DCOCFrozenTuner",
    "xgb": "dcoc.tuners.xgb_tuner:XGBTuner",
    "rl": "dcoc.tuners.rl_tuner:RLTuner",
    "chameleon": "dcoc.tuners.chameleon_tuner:ChameleonTuner",
    "ga": "dcoc.tuners.ga_tuner:GATuner",
    "random": "dcoc.tuners.random_tuner:RandomTuner",
    "grid": "dcoc.tuners.random_tuner:GridSearchTuner",
    "sweep": "dcoc.tuners.sweep_tuner:SweepTuner",
}

#: name -> what it runs (the table of README and ``dcoc tune --help``)
DESCRIPTIONS = {
    "surrogate": "default: an XGBoost ensemble scores every valid point (annealing on large "
                 "spaces) and its top-k are measured",
    "dcoc": "the DCOC paper: hardware/mapping/scheduling agents (MAPPO) propose, XGBoost "
            "confidence sampling selects",
    "dcoc-frozen": "dcoc with agents that never learn (ablation)",
    "xgb": "AutoTVM's XGBTuner (rank loss, simulated annealing)",
    "rl": "CHAMELEON's RL exploration (PPO walks on an XGBoost model)",
    "chameleon": "CHAMELEON: RL exploration + adaptive sampling",
    "ga": "AutoTVM's genetic algorithm",
    "random": "random valid configs",
    "grid": "every config in order",
    "sweep": "no learning: default schedules, then neighbours (co-design: every core shape)",
}

#: MetaSchedule's own search strategies (llvm/cuda only: they search MetaSchedule's trace
#: spaces, not a knob space, so they are not dcoc tuners; the baselines of docs/RESULTS.md)
METASCHEDULE = {
    "evolutionary": "llvm/cuda only: MetaSchedule's EvolutionarySearch at its defaults "
                    "(population 512) with its XGBoost cost model",
    "replay-trace": "llvm/cuda only: MetaSchedule's ReplayTrace (random traces of the design "
                    "space, no cost model)",
}

#: the tuner used when none is named, on every path
DEFAULT = "surrogate"

#: the DCOC family: tuners built on :class:`dcoc.method.core.DCOCCore` (they take ``config=``)
DCOC_FAMILY = ("surrogate", "dcoc", "dcoc-frozen")


def __getattr__(name):
    # ``Tuner`` on first use: the base class imports numpy (dcoc.search), and listing the
    # names (``dcoc tune --help``) must not
    if name == "Tuner":
        from dcoc.tuners.tuner import Tuner

        return Tuner
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def names() -> list[str]:
    return list(REGISTRY)


def parse(spec) -> tuple[str, dict]:
    """``"dcoc:explore_frac=0,select=\"topk\""`` -> ``("dcoc", {"explore_frac": 0, "select": "topk"})``
    (values are JSON; bare words are strings; True/False are accepted)."""
    name, _, args = str(spec).strip().partition(":")
    kw = {}
    for item in filter(None, args.split(",")):
        k, eq, v = item.partition("=")
        if not eq or not k.strip():
            raise DcocError(f"tuner setting '{item}' of '{spec}' is not key=value")
        v = v.strip()
        try:
            kw[k.strip()] = {"True": True, "False": False}[v] if v in ("True", "False") else json.loads(v)
        except ValueError:
            kw[k.strip()] = v
    return name.strip().lower(), kw


def get_tuner(name) -> type:
    """The tuner class for a name (or a Tuner subclass, returned as is)."""
    from dcoc.tuners.tuner import Tuner

    if isinstance(name, type) and issubclass(name, Tuner):
        return name
    from dcoc.registry import load, lookup

    return load(lookup(REGISTRY, name, "tuner"))


def tuner_kwargs(spec) -> tuple[type, dict]:
    """(tuner class, constructor kwargs) of a name or ``NAME:key=value`` spec: the DCOC
    family's settings become its ``config``; other tuners take them as keyword arguments."""
    if isinstance(spec, type):
        return get_tuner(spec), {}
    name, kw = parse(spec)
    cls = get_tuner(name)
    if kw and name in DCOC_FAMILY:
        return cls, {"config": cls.config(**kw)}
    return cls, kw


def create(spec, task, seed: int = 0, **kwargs) -> Tuner:
    """A tuner for ``task`` from a name or spec (``kwargs`` go to its constructor)."""
    cls, kw = tuner_kwargs(spec)
    return cls(task, seed=seed, **{**kw, **kwargs})


def check(spec, accelerator: bool) -> None:
    """One-line error for a tuner name or setting that cannot run on the target
    (a MetaSchedule-only name on an accelerator; an unknown name or setting anywhere)."""
    if isinstance(spec, str) and parse(spec)[0] in METASCHEDULE:
        name, kw = parse(spec)
        if accelerator:
            raise DcocError(f"tuner '{name}' is MetaSchedule's own search: it tunes llvm/cuda "
                            f"targets; choose one of {', '.join(REGISTRY)} for an accelerator")
        if kw:
            raise DcocError(f"tuner '{name}' takes no settings (it runs at its authors' defaults)")
        return
    tuner_kwargs(spec)


def describe(spec) -> str:
    """What a name or spec runs, in words (summaries print this)."""
    name, kw = parse(spec) if not isinstance(spec, type) else (getattr(spec, "name", "?"), {})
    if name in DCOC_FAMILY:
        return get_tuner(name).config(**kw).describe()
    return DESCRIPTIONS.get(name, METASCHEDULE.get(name, name))


__all__ = ["DCOC_FAMILY", "DEFAULT", "DESCRIPTIONS", "METASCHEDULE", "REGISTRY", "Tuner", "check",
           "create", "describe",
           "get_tuner", "names", "parse", "tuner_kwargs"]
