"""The tuning task: what one tuner searches and one measurer measures.

A :class:`TuningTask` couples a :class:`~dcoc.search.space.Space` with everything a
measurer needs to turn a config into a cost, and with the identity under which its
records are stored (``workload_key``, ``target``, hardware name).

When the space contains hardware knobs (co-design), :meth:`TuningTask.split` separates a
config into the hardware part and the software knobs; the hardware name is derived
from the hardware part so that records for different hardware never mix.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from dcoc.search.space import Space


@dataclass
class TuningTask:
    """One search problem.

    Attributes
    ----------
    name: display name (e.g. the model layer name).
    space: the knobs searched.
    target: ``"vta"`` or a TVM target string.
    workload_key: stable identity of the workload (records key).
    flop: floating-point (or integer) operations of one run, for GFLOPS/GOPS reporting.
    hw_name: the fixed hardware's name, or None when the space holds hardware knobs.
    payload: measurer-specific data (e.g. the VTA workload and HWConfig).
    hw_knobs: names of the hardware knobs in ``space`` (empty for software-only tasks).
    hw_namer: maps the hardware part of a config to its hardware name.
    defaults: ``() -> list[config]``: the target's default schedule(s) for this task (the
        starting point of the ``sweep`` reference), or None.
    """

    name: str
    space: Space
    target: str
    workload_key: str
    flop: float = 0.0
    hw_name: str | None = None
    payload: Any = None
    hw_knobs: tuple = ()
    hw_namer: Callable[[dict], str] | None = field(default=None, repr=False)
    defaults: Callable[[], list] | None = field(default=None, repr=False)

    @property
    def config_space(self) -> Space:
        """AutoTVM's name for the space."""
        return self.space

    def split(self, config: dict) -> tuple[str | None, dict]:
        """Config -> (hardware name, software knobs)."""
        if not self.hw_knobs:
            return self.hw_name, dict(config)
        hw_part = {k: config[k] for k in self.hw_knobs}
        sw = {k: v for k, v in config.items() if k not in self.hw_knobs}
        return self.hw_namer(hw_part), sw
