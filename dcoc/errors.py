"""The one exception family dcoc raises for bad input.

Every message is a single line that names the problem (file, operator, knob, board ...).
The CLI prints ``dcoc: error: <message>`` and exits non-zero; library callers catch
:class:`DcocError` (or a subclass) and read the same message.
"""


class DcocError(Exception):
    """Base class: a user-facing error with a one-line message."""

    exit_code = 2

    def __init__(self, message: str):
        message = " ".join(str(message).split())  # force one line
        super().__init__(message)


class ModelError(DcocError):
    """The model file is missing, corrupt, fails the ONNX checker, or uses unsupported operators."""


class TargetError(DcocError):
    """Unknown or malformed target / board."""


class ConfigError(DcocError):
    """An invalid hardware configuration (HWConfig) or an unknown preset."""


class KnobError(DcocError):
    """An invalid schedule knob (unknown name, value not in the space)."""


class RecordsError(DcocError):
    """A records file that cannot be read or belongs to a different run."""


class IsaError(DcocError):
    """An accelerator instruction or micro-op field is out of range for its bit width."""


class WorkloadError(DcocError):
    """A workload the accelerator cannot express, or functional data of the wrong shape/dtype."""


class SimulationError(DcocError):
    """An instruction stream breaks a rule of the machine (raised by the simulator)."""


def caused_by_ctrl_c(exc: BaseException) -> bool:
    """Whether a KeyboardInterrupt is ``exc`` or in its chain of causes and contexts (code
    may wrap it: Python 3.11 turns one raised in ``__set_name__`` into a RuntimeError)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False
