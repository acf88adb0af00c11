"""What a whole-model MetaSchedule run is asked to do (:class:`MetaScheduleOptions`) and
what it hands back (:class:`ModelTuning`): plain data, no TVM.

:func:`tvm_plugin.metaschedule.tuning.tune_model` builds the options once and passes
them, whole, to each of its steps; the API floor (:mod:`dcoc.api.cpu`) turns a
:class:`ModelTuning` into a :class:`dcoc.results.result.TuneResult`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from dcoc.errors import DcocError
from dcoc.tuners import DEFAULT as DEFAULT_TUNER

#: the trial budget of a run with ``trials=None``: its ``time_budget`` ends it
#: (``dcoc.api.checks.MAX_TRIALS``, the most any run takes)
UNLIMITED = 1_000_000


@dataclass(frozen=True)
class MetaScheduleOptions:
    """The settings of :func:`~tvm_plugin.metaschedule.tuning.tune_model` (its docstring
    says what each one does)."""

    trials: int | None = 256
    tuner: str = DEFAULT_TUNER
    seed: int = 0
    runner: Any = "local"
    trials_per_task: int | None = None
    num_trials_per_iter: int | None = None
    builder: Any = "persistent"
    strategy: Any = None
    cost_model: Any = None
    tuner_kwargs: Mapping | None = None
    task_scheduler: Any = "gradient"
    population: int | None = None
    measure: bool = True
    baseline: bool = True
    progress: Any = True
    timeout_sec: float = 30.0
    latency_repeat: int = 5
    keep_untuned_if_faster: bool = True
    verbose: bool = False
    flush_cache: bool = False
    time_budget: float | None = None
    onnxruntime: bool = True
    prior: Any = True

    def __post_init__(self):
        if self.trials is None:
            if self.time_budget is None:
                raise DcocError("trials=None (no trial limit) needs a time_budget to end the run")
        elif int(self.trials) < 1:
            raise DcocError(f"trials must be >= 1, got {self.trials}")
        if self.time_budget is not None and not float(self.time_budget) > 0:
            raise DcocError(f"time_budget must be > 0 seconds, got {self.time_budget}")

    @property
    def trial_limit(self) -> int:
        """The run's trial budget: ``trials``, or :data:`UNLIMITED` when it is None (a
        time budget ends the run)."""
        return UNLIMITED if self.trials is None else int(self.trials)

    @classmethod
    def of(cls, options: MetaScheduleOptions | None = None, **settings) -> MetaScheduleOptions:
        """``options`` (default: the defaults) with ``settings`` replacing its fields; an
        unknown setting is a one-line error."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise DcocError(f"unknown MetaSchedule setting(s) {', '.join(unknown)}; "
                            f"known: {', '.join(sorted(known))}")
        if options is None:
            return cls(**settings)
        return dataclasses.replace(options, **settings) if settings else options


@dataclass
class ModelTuning:
    """What :func:`~tvm_plugin.metaschedule.tuning.tune_model` returns: the fields of a
    :class:`dcoc.results.result.TuneResult` of an llvm/cuda run (the database is
    ``work_dir``), the compiled executable and ``run({input: ndarray}) -> [outputs]``."""

    target: str
    tuner: str
    seed: int
    latency_ms: float
    baseline_latency_ms: float
    trials: int
    schedules: dict
    history: list
    layers: list
    method: str
    model: str
    work_dir: str
    wall_seconds: float
    extra: dict = field(default_factory=dict)
    #: llvm: ONNX Runtime's latency on the threads TVM's runtime uses (None: not timed)
    onnxruntime_ms: float | None = None
    executable: Any = field(default=None, repr=False)
    run: Callable | None = field(default=None, repr=False)


__all__ = ["MetaScheduleOptions", "ModelTuning", "UNLIMITED"]
