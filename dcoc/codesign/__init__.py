"""Model-level tuning on an accelerator target: software-only on fixed hardware, and co-design.

Data flow: model tasks -> :class:`~dcoc.targets.Layer` s (``target.layers(tasks)``) -> a
:class:`Session` (the one place that measures, resumes, counts trials, writes records and
tracks the best model latency per hardware config) <- ask/tell -> a driver that decides:

* :class:`SoftwareTuning` (:mod:`.software`) -- fixed hardware: one tuner per layer;
* :class:`DCOCCoDesign` (:mod:`.driver`) -- the DCOC family (``surrogate``, ``dcoc``,
  ``dcoc-frozen``) on :class:`dcoc.method.core.DCOCCore` over the joint space
  (:class:`CoDesignProblem`); ``prior=`` warm-starts it from other models' runs
  (:class:`Prior`, :mod:`.prior`);
* :class:`JointCoDesign` (:mod:`.baselines`) -- the other tuners, proposing (hardware,
  schedule) jointly (the default); :class:`NestedCoDesign` -- hardware outer, software
  inner (``baseline="nested"``); :class:`SweepCoDesign` -- the ``sweep`` reference.

:func:`make_driver` picks the driver for a tuner name.
"""
from __future__ import annotations

from dcoc.codesign.baselines import JointCoDesign, NestedCoDesign, SweepCoDesign
from dcoc.codesign.driver import DCOCCoDesign, config_tag
from dcoc.codesign.prior import Prior
from dcoc.codesign.problem import CoDesignProblem
from dcoc.codesign.session import Session
from dcoc.codesign.software import SoftwareTuning, default_jobs, default_schedules, tune_software
from dcoc.method.config import CoDesignConfig, DCOCConfig
from dcoc.targets.base import Layer

BASELINE_MODES = ("joint", "nested")


def make_driver(session, board, tuner: str, seed: int, baseline: str = "joint", hardware=None,
                config: DCOCConfig | None = None, **kwargs):
    """The driver for ``tuner`` (a name or ``NAME:key=value`` spec): software-only on
    ``hardware`` if given, else co-design.  ``config``: a DCOC-family tuner's config
    (default: the one its name and spec define)."""
    from dcoc.errors import DcocError
    from dcoc.tuners import DCOC_FAMILY, parse, tuner_kwargs

    if baseline not in BASELINE_MODES:
        raise DcocError(f"unknown baseline co-design '{baseline}'; choose one of {', '.join(BASELINE_MODES)}")
    name = parse(tuner)[0]
    if hardware is not None:
        return SoftwareTuning(session, hardware, tuner, seed,
                              tuner_kwargs={"config": config} if config is not None else None)
    if name in DCOC_FAMILY:
        cls, kw = tuner_kwargs(tuner)
        cfg = cls.check_config(config) if config is not None else kw.get("config", cls.config())
        return DCOCCoDesign(session, board, seed, config=cfg, **kwargs)
    if name == "sweep":
        return SweepCoDesign(session, board, seed, **kwargs)
    if baseline == "nested":
        return NestedCoDesign(session, board, tuner, seed, **kwargs)
    return JointCoDesign(session, board, tuner, seed, **kwargs)


__all__ = [
    "BASELINE_MODES", "CoDesignConfig", "CoDesignProblem", "DCOCCoDesign", "DCOCConfig", "config_tag",
    "JointCoDesign", "Layer", "NestedCoDesign", "Prior", "Session", "SoftwareTuning", "SweepCoDesign",
    "default_jobs", "default_schedules", "make_driver", "tune_software",
]
