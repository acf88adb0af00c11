"""The hardware-target interface: what tuners, co-design drivers, records and the CLI
need to know about an accelerator template -- and nothing else.

A target owns

* its **boards** (resource budgets; :attr:`Target.boards`, declared in the target module);
* the **hardware space** of a board (:meth:`Target.hw_space`, :meth:`Target.make_hw`):
  hardware knobs whose values fit the board; a hardware config has a unique ``.name``;
* the **schedule space** of a workload on a hardware config (:meth:`Target.sw_space`,
  :meth:`Target.task`) and its **default schedule** (:meth:`Target.default_schedule`);
* how to **measure** (:meth:`Target.measurer`: a :class:`dcoc.search.Measurer`);
* **resources** of a config on a board and the compute-bound **ideal** time of a layer;
* the helpers DCOC's co-design uses to move a schedule between hardware configs
  (:meth:`Target.sw_union`, :meth:`Target.slot`, :meth:`Target.transfer`,
  :meth:`Target.descriptor`).

Implementations: :class:`dcoc.targets.vta.target.VTATarget`, :class:`dcoc.targets.systolic.SystolicTarget`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dcoc.errors import ConfigError
from dcoc.targets.registry import DEFAULT_TARGET


@dataclass
class Layer:
    """One distinct accelerator workload of a model and how many times it runs per inference."""

    name: str
    workload: object        # the target's workload object (e.g. Conv2DWorkload)
    count: int              # occurrences x repeats (batch_matmul heads)
    kind: str               # "conv2d" | "dense"
    epilogue: object = None  # target-specific extra (VTA: the fused ALU epilogue)
    target: str = DEFAULT_TARGET

    def __post_init__(self):
        if self.epilogue is None:
            from dcoc.targets.registry import get

            self.epilogue = get(self.target).model_epilogue()

    @property
    def key(self) -> str:
        """Records key of the workload."""
        from dcoc.targets.registry import get

        return get(self.target).workload_key(self)

    def ideal_seconds(self, hw) -> float:
        """Compute-bound lower bound of this layer on ``hw``."""
        from dcoc.targets.registry import get

        return get(self.target).ideal_seconds(self, hw)

    def bound_seconds(self, hw) -> float:
        """Compute-bound lower bound counting the padding of the work to ``hw``'s tiles."""
        from dcoc.targets.registry import get

        return get(self.target).bound_seconds(self, hw)


class HardwareHalf:
    """The hardware half of a target: boards, the hardware space of a board, a config's
    resources and fit.  Subclasses set :attr:`boards`, :attr:`default_board`,
    :attr:`hw_knobs`, :attr:`core_knobs` (and :attr:`fit_knobs` where it holds) and
    implement ``hw_space``, ``make_hw``, ``parse_hw``, ``violations``, ``resources``,
    ``budgets``.
    """

    #: board name -> board object (with ``name`` and ``default_hw()``)
    boards: dict = {}
    default_board = ""
    #: hardware knob names, in the order DCOC's hardware agent sees them
    hw_knobs: tuple = ()
    #: the hardware knobs that set the compute core's shape (``sweep``: one config per shape)
    core_knobs: tuple = ()
    #: the hardware knobs that only decide which schedules *fit* (on-chip buffer sizes): a
    #: schedule valid on two configs that differ only in them runs the same instruction
    #: stream, so it takes the same time on both (checked in tests/core/test_targets.py);
    #: empty: no such claim
    fit_knobs: tuple = ()

    # ---------------------------------------------------------------- to implement
    def hw_space(self, board, ranges: dict | None = None):
        """:class:`dcoc.search.Space` of the hardware knobs that fit ``board``."""
        raise NotImplementedError

    def make_hw(self, values: dict, board):
        """The hardware config of hardware-knob ``values`` on ``board``."""
        raise NotImplementedError

    def parse_hw(self, spec, board=None):
        """A hardware config from a config object, a name/preset string or a dict."""
        raise NotImplementedError

    def violations(self, hw, board) -> list[str]:
        raise NotImplementedError

    def resources(self, hw, board) -> dict:
        """Resource estimate of ``hw`` on ``board`` (for the result and the CLI)."""
        raise NotImplementedError

    def budgets(self, board) -> dict:
        """``{resource: (limit, label)}`` of the board for the keys :meth:`resources` reports
        (the Pareto plot's budget lines)."""
        raise NotImplementedError

    # ---------------------------------------------------------------- provided
    def board(self, name):
        """The board object called ``name`` (or the object itself)."""
        if not isinstance(name, str):
            return name
        key = name.strip().lower()
        if key not in self.boards:
            from dcoc.errors import TargetError

            raise TargetError(f"unknown board '{name}' for target {self.name}; choose one of "
                              f"{', '.join(self.boards)}")
        return self.boards[key]

    def default_hw(self, board):
        """Where co-design starts on ``board`` (every tuner alike)."""
        return self.board(board).default_hw()

    def baseline_hw(self, board):
        """The reference config the result's speedup is measured against."""
        return self.default_hw(board)

    def check_fits(self, hw, board) -> None:
        """ConfigError (one line) unless ``hw`` fits ``board``."""
        problems = self.violations(hw, board)
        if problems:
            raise ConfigError(f"hardware {hw.name} does not fit board {self.board(board).name}: "
                              f"{'; '.join(problems)}")

    def feasible_hw(self, board, ranges: dict | None = None) -> list:
        """Every hardware config of :meth:`hw_space` that fits the board."""
        s = self.hw_space(board, ranges)
        bd = self.board(board)
        return [self.make_hw(c, bd) for c in s if s.is_valid(c)]

    def hw_values(self, hw) -> dict:
        """Hardware-knob values of a config (inverse of :meth:`make_hw`)."""
        return {k: getattr(hw, k) for k in self.hw_knobs}

    def timing_key(self, hw):
        """What a schedule's time on ``hw`` depends on: ``hw``'s fields but :attr:`fit_knobs`
        (None when the target declares none).  Two configs with one key are a *timing class*."""
        if not self.fit_knobs:
            return None
        from dataclasses import fields

        return tuple((f.name, getattr(hw, f.name)) for f in fields(hw)
                     if f.init and f.name not in self.fit_knobs)

    def fit_values(self, hw) -> tuple:
        """``hw``'s :attr:`fit_knobs` values (larger in every one: every schedule that fits
        the smaller config fits it too)."""
        return tuple(getattr(hw, k) for k in self.fit_knobs)

    def describe_hw(self, hw, board) -> str:
        """One line for the CLI summary."""
        return f"{hw.name} on {self.board(board).name}"

    def baseline_label(self, board) -> str:
        """How the CLI names the reference of the speedup."""
        return f"{self.board(board).name} default hardware + default schedules"


class ScheduleHalf:
    """The schedule half of a target: a model's layers, each layer's schedule space on a
    hardware config, its default schedule, how to measure it, and what DCOC's co-design
    needs to move a schedule between configs.  Subclasses set :attr:`slots` (and
    :attr:`shrink_order`) and implement ``layers``, ``workload``, ``layer``,
    ``workload_key``, ``sw_space``, ``task``, ``default_schedule``, ``ideal_seconds``,
    ``measurer``, ``sw_union``, ``descriptor``.
    """

    #: how messages name the accelerator ("model X has no layer VTA can run")
    label = "the accelerator"
    #: software slots of DCOC's joint co-design state (every layer's knobs map onto them)
    slots: tuple = ()
    #: knobs :meth:`transfer` shrinks, first first
    shrink_order: tuple = ()
    #: which accelerator extraction of ``tvm_plugin.frontend.model_tasks`` gives the layers
    #: (conv2d / dense workloads, the rest left on the CPU)
    frontend_target = "vta"

    # ---------------------------------------------------------------- to implement
    def layers(self, tasks) -> tuple[list[Layer], list]:
        """Model tasks -> (accelerator layers, CPU layers ``[(name, kind, count)]``)."""
        raise NotImplementedError

    def workload(self, spec):
        """A workload from an object or a CLI spec (``tune-task``)."""
        raise NotImplementedError

    def layer(self, workload, name: str | None = None) -> Layer:
        """A single-workload layer (``tune_task``)."""
        raise NotImplementedError

    def workload_key(self, layer: Layer) -> str:
        raise NotImplementedError

    def sw_space(self, layer: Layer, hw):
        """:class:`dcoc.search.Space` of ``layer``'s schedules on ``hw``."""
        raise NotImplementedError

    def task(self, layer: Layer, hw):
        """A software-only :class:`dcoc.search.TuningTask` of ``layer`` on ``hw``."""
        raise NotImplementedError

    def default_schedule(self, layer: Layer, hw, space=None) -> dict | None:
        """The target's heuristic schedule if it is valid (else None)."""
        raise NotImplementedError

    def ideal_seconds(self, layer: Layer, hw) -> float:
        """Compute-bound lower bound of ``layer`` on ``hw`` (MACs / MACs per cycle / clock)."""
        raise NotImplementedError

    def measurer(self, n_workers: int | None = None):
        """The default measurer of this target (a :class:`dcoc.search.Measurer`)."""
        raise NotImplementedError

    def sw_union(self, layer: Layer, hw_space) -> list[tuple]:
        """Per slot, the union of ``layer``'s knob choices over the hardware options."""
        raise NotImplementedError

    def descriptor(self, layer: Layer) -> list[float]:
        """Up to 12 numbers describing the workload (DCOC's agents' context)."""
        raise NotImplementedError

    # ---------------------------------------------------------------- provided
    def bound_seconds(self, layer: Layer, hw) -> float:
        """A tighter compute bound: the work padded to ``hw``'s compute tiles, at one tile
        per cycle (>= :meth:`ideal_seconds`).  DCOC's co-design cost model learns the
        efficiency ``bound / measured``, so the padding a core shape forces on a layer
        is known before that shape is ever measured (docs/method.md, "The cost model").  Default: the
        ideal bound."""
        return self.ideal_seconds(layer, hw)

    def memory_seconds(self, layer: Layer, hw) -> float:
        """Bandwidth bound of ``layer`` on ``hw``: the bytes it must move at least over the
        accelerator's memory bandwidth.  Default 0 (no bandwidth model): the roofline is
        then the compute bound alone."""
        return 0.0

    def roofline_seconds(self, layer: Layer, hw) -> float:
        """The layer's roofline bound: max(compute bound :meth:`ideal_seconds`, bandwidth
        bound :meth:`memory_seconds`).  The per-layer tables' ``roofline`` column is this
        over the measured time."""
        return max(self.ideal_seconds(layer, hw), self.memory_seconds(layer, hw))

    def roofline(self, layer: Layer, hw, seconds: float) -> float:
        """Fraction of the roofline bound reached in ``seconds`` (0 when not finite)."""
        if not seconds or not math.isfinite(seconds):
            return 0.0
        return self.roofline_seconds(layer, hw) / seconds

    def cycles(self, seconds: float, hw) -> int:
        return int(round(seconds * hw.freq_mhz * 1e6))

    def slot(self, layer: Layer, knob: str) -> int:
        """Index in :attr:`slots` of a schedule knob of ``layer``."""
        return self.slots.index(knob)

    def transfer(self, layer: Layer, src_hw, src_knobs: dict, hw, space) -> dict | None:
        """A valid schedule of ``layer`` on ``hw`` derived from its best ``src_knobs`` on
        ``src_hw`` (same knob values snapped to the nearest choice, then the largest tiles
        shrunk until it fits); None if none is found."""
        k = {}
        for knob in space.knobs:
            v = self.scale_knob(knob.name, src_knobs.get(knob.name, knob.choices[0]), src_hw, hw)
            if v in knob.choices:  # the canonical choice (2.0 -> 2)
                k[knob.name] = knob.choices[knob.choices.index(v)]
                continue
            ch = np.array([c for c in knob.choices if c > 0], dtype=float)
            if not len(ch):
                k[knob.name] = knob.choices[0]
                continue
            k[knob.name] = int(ch[np.argmin(np.abs(np.log2(ch) - math.log2(max(v, 1e-9))))])
        for _ in range(12):  # shrink the largest tile until the schedule fits
            if space.is_valid(k):
                return k
            for name in self.shrink_order:
                if name in k:
                    ch = space.knob(name).choices
                    i = ch.index(k[name])
                    if i > 0:
                        k = dict(k, **{name: ch[i - 1]})
                        break
        return None

    def scale_knob(self, name: str, value, src_hw, hw) -> float:
        """A knob value of ``src_hw`` in the units of ``hw`` (tiles counted in core blocks)."""
        return value

    def describe_epilogue(self, layer: Layer) -> str:
        """The layer's fused epilogue in words for the per-layer tables ("" if none)."""
        return ""

    def model_epilogue(self):
        """The ``Layer.epilogue`` of a model layer when none is given (None: no such notion)."""
        return None

    def layer_from_record(self, row: dict) -> Layer | None:
        """A records row's layer when its run left no ``layers.json`` (None: cannot tell)."""
        return None

    def model_runner(self, result, input_shapes=None):
        """A callable running the whole tuned model of ``result`` (a TuneResult) on this
        target, ``inputs -> outputs``; None when the target cannot run models."""
        return None


class Target(HardwareHalf, ScheduleHalf):
    """An accelerator target: a :class:`HardwareHalf` and a :class:`ScheduleHalf` under a
    registered :attr:`name` (see the module docstring)."""

    name = "base"
    description = ""

