"""Model-level tuning on an accelerator target: software-only on fixed hardware, and co-design.

Data flow: model tasks -> :class:`~dcoc.targets.Layer` s (``target.layers(tasks)``) -> a
:class:`Session` (the one place that measures, resumes, counts trials, writes records and
tracks the best model latency per hardware config) <- ask/tell -> a driver that decides:

* :class:`SoftwareTuning` (:mod:`.software`) -- fixed hardware: one tuner per layer;
* :class:`DCOCCoDesign` (:mod:`.joint`) -- DCOC's joint co-design on :class:`dcoc.method.core.DCOCCore`
  (by default without agents and with top-k selection: the surrogate proposes and the
  predicted best are measured, docs/method.md §12; its ablations: ``dcoc-agents``,
  ``dcoc-frozen``, ``dcoc:select=confidence``; ``dcoc-noagents``, ``dcoc-topk`` and
  ``surrogate`` are ``dcoc`` itself here);
  ``prior=`` warm-starts it from other models' runs (:class:`Prior`, :mod:`.prior`);
* :class:`JointCoDesign` (:mod:`.baselines`) -- the baseline tuners, proposing (hardware,
  schedule) jointly (the default); :class:`NestedCoDesign` -- hardware outer, software
  inner (``baseline="nested"``); :class:`SweepCoDesign` -- the ``sweep`` reference.

:func:`make_driver` picks the driver for a tuner name.
"""
from __future__ import annotations

from dcoc.codesign.baselines import JointCoDesign, NestedCoDesign, SweepCoDesign
from dcoc.codesign.joint import CoDesignProblem, DCOCCoDesign, config_tag
from dcoc.codesign.prior import Prior
from dcoc.codesign.session import Session
from dcoc.codesign.software import (SoftwareTuning, default_jobs, default_schedules, fitting_default,
                                    tune_software)
from dcoc.method.core import CoDesignConfig, DCOCConfig
from dcoc.targets.target import Layer

BASELINE_MODES = ("joint", "nested")


def vta_layers(tasks):
    """Split extracted tasks into VTA layers and CPU layers (``[(name, kind, count)]``)."""
    from dcoc.targets import get

    return get("vta").layers(tasks)


def make_driver(session, board, tuner: str, seed: int, agents: str = "dcoc", baseline: str = "joint",
                hardware=None, **kwargs):
    """The driver for ``tuner``: software-only on ``hardware`` if given, else co-design."""
    from dcoc.errors import DcocError
    from dcoc.tuners import DCOC_FAMILY, get_tuner

    if baseline not in BASELINE_MODES:
        raise DcocError(f"unknown baseline co-design '{baseline}'; choose one of {', '.join(BASELINE_MODES)}")
    if hardware is not None:
        kw = {"agents": agents} if tuner in DCOC_FAMILY else None
        return SoftwareTuning(session, hardware, tuner, seed, tuner_kwargs=kw)
    if tuner in DCOC_FAMILY:
        return DCOCCoDesign(session, board, seed, agents=agents, **get_tuner(tuner).variant, **kwargs)
    if tuner == "sweep":
        return SweepCoDesign(session, board, seed, **kwargs)
    if baseline == "nested":
        return NestedCoDesign(session, board, tuner, seed, **kwargs)
    return JointCoDesign(session, board, tuner, seed, **kwargs)


__all__ = [
    "BASELINE_MODES", "CoDesignConfig", "CoDesignProblem", "DCOCCoDesign", "DCOCConfig", "config_tag",
    "JointCoDesign", "Layer", "NestedCoDesign", "Prior", "Session", "SoftwareTuning", "SweepCoDesign",
    "default_jobs", "default_schedules", "fitting_default", "make_driver", "tune_software", "vta_layers",
]
