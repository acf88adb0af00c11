"""Errors raised by the VTA model (all are :class:`dcoc.errors.DcocError` subclasses).

* :class:`dcoc.errors.ConfigError` -- an invalid :class:`~dcoc.vta.config.HWConfig`,
  preset or board (re-exported here for convenience).
* :class:`IsaError` -- an instruction or micro-op field that does not fit its bit width.
* :class:`WorkloadError` -- a malformed workload or functional data of the wrong shape.
* :class:`SimulationError` -- an instruction stream that breaks a hardware rule (SRAM
  overflow, DRAM access out of bounds, token deadlock, bad dependency flag ...).

Invalid *knobs* never raise: :func:`dcoc.vta.simulate` returns ``valid=False``.
"""
from dcoc.errors import ConfigError, DcocError, KnobError

__all__ = ["ConfigError", "KnobError", "IsaError", "WorkloadError", "SimulationError"]


class IsaError(DcocError):
    """An instruction / micro-op field is out of range for its bit width."""


class WorkloadError(DcocError):
    """A workload that VTA cannot express, or functional data of the wrong shape/dtype."""


class SimulationError(DcocError):
    """The instruction stream breaks a rule of the machine (raised by the simulator)."""
