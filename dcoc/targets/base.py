"""The hardware-target interface: what tuners, co-design drivers, records and the CLI
need to know about an accelerator template -- and nothing else.

A target implements eight methods (the rest have working defaults built on them):

=================  =====================================================================
``make_hw``        hardware-knob values on a board -> a hardware config (a dataclass with
                   ``name``, ``freq_mhz``, ``bus_bytes`` and the knobs as fields)
``violations``     why a config does not fit a board (``[]``: it fits)
``resources``      ``{"bram36", "dsp", "lut", ...}`` of a config on a board
``workload``       a workload from a ``dcoc.tasks.Task``, a CLI spec string or an object
``workload_key``   the records key of a layer's workload
``sw_space``       the :class:`dcoc.search.Space` of a layer's schedules on a config
``ideal_seconds``  the compute-bound lower bound of a layer on a config
``measurer``       the :class:`dcoc.search.Measurer` that times a schedule
=================  =====================================================================

and sets :attr:`~HardwareHalf.boards` (objects with ``name``, ``default_hw()``,
``bram36``, ``dsp``, ``lut``), :attr:`~HardwareHalf.default_board`,
:attr:`~HardwareHalf.hw_knobs`, :attr:`~HardwareHalf.hw_ranges` (or overrides
``hw_space``) and :attr:`~ScheduleHalf.slots` (the schedule knob names).  Overriding a
default refines it: ``default_schedule`` (a heuristic), ``bound_seconds`` /
``memory_seconds`` (tighter bounds), ``sw_union``, ``descriptor``, ``transfer`` /
``scale_knob`` (moving a schedule between configs), ``parse_hw`` (config names).

Implementations: :class:`dcoc.targets.vta.target.VTATarget`,
:class:`dcoc.targets.systolic.SystolicTarget`; a minimal one is docs/extending.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from dcoc.errors import ConfigError
from dcoc.targets.registry import DEFAULT_TARGET
from dcoc.targets.timing import cycles as _cycles
from dcoc.targets.timing import roofline_fraction


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
    :attr:`hw_knobs`, :attr:`hw_ranges`, :attr:`core_knobs` (and :attr:`fit_knobs` where it
    holds) and implement ``make_hw``, ``violations``, ``resources``.
    """

    #: board name -> board object (with ``name``, ``default_hw()``, ``bram36``, ``dsp``, ``lut``)
    boards: dict = {}
    default_board = ""
    #: hardware knob names, in the order DCOC's hardware agent sees them
    hw_knobs: tuple = ()
    #: hardware knob -> its choices (the default :meth:`hw_space`)
    hw_ranges: dict = {}
    #: the hardware knobs that set the compute core's shape (``sweep``: one config per shape)
    core_knobs: tuple = ()
    #: the hardware knobs that only decide which schedules *fit* (on-chip buffer sizes): a
    #: schedule valid on two configs that differ only in them runs the same instruction
    #: stream, so it takes the same time on both (checked in tests/core/test_targets.py);
    #: empty: no such claim
    fit_knobs: tuple = ()
    #: options this instance was made with (:meth:`with_options`); saved in result.json
    options: dict = {}

    # ---------------------------------------------------------------- to implement
    def make_hw(self, values: dict, board):
        """The hardware config of hardware-knob ``values`` on ``board``."""
        raise NotImplementedError

    def violations(self, hw, board) -> list[str]:
        """Why ``hw`` does not fit ``board``, one phrase each (empty: it fits)."""
        raise NotImplementedError

    def resources(self, hw, board) -> dict:
        """Resource estimate of ``hw`` on ``board`` (for the result and the CLI): at least
        ``bram36``, ``dsp`` and ``lut`` (the Pareto front's axes)."""
        raise NotImplementedError

    # ---------------------------------------------------------------- defaults
    def hw_space(self, board, ranges: dict | None = None):
        """:class:`dcoc.search.Space` of the hardware knobs that fit ``board``: the choices
        of ``ranges`` (default :attr:`hw_ranges`) with :meth:`violations` as the
        constraint; the space keeps the board as ``.board``."""
        from dcoc.search.space import hardware_space

        bd = self.board(board)
        ranges = ranges or self.hw_ranges
        if not ranges:
            raise NotImplementedError(f"target {self.name} sets no hw_ranges and no hw_space")
        space = hardware_space({k: ranges[k] for k in self.hw_knobs},
                               lambda cfg: self.violations(self.make_hw(cfg, bd), bd), bd,
                               f"{self.name}[{bd.name}]")
        space.board = bd
        return space

    def parse_hw(self, spec, board=None):
        """A hardware config from a config object, a config name or a dict (its hardware
        knobs are made on ``board``, default :attr:`default_board`).  Default: a name is
        looked up among the feasible configs of ``board`` (of every board without one)."""
        if spec is None or not isinstance(spec, (str, dict)):
            if spec is not None and not hasattr(spec, "name"):
                raise ConfigError(f"{self.name} hardware must be a config, a name or a dict, "
                                  f"got {type(spec).__name__}")
            return spec
        if isinstance(spec, dict):
            missing = [k for k in self.hw_knobs if k not in spec]
            if missing:
                raise ConfigError(f"bad {self.name} hardware dict: no {', '.join(missing)}")
            return self.make_hw(spec, self.board(self.default_board if board is None else board))
        bds = [self.board(board)] if board is not None else list(self.boards.values())
        for bd in bds:
            for hw in self.feasible_hw(bd):
                if hw.name == spec.strip():
                    return hw
        raise ConfigError(f"unknown {self.name} hardware '{spec}' (not a config that fits "
                          f"{' or '.join(b.name for b in bds)})")

    def budgets(self, board) -> dict:
        """``{resource: (limit, label)}`` of the board for the keys :meth:`resources` reports
        (the Pareto plot's budget lines).  Default: the board's ``bram36``, ``dsp``, ``lut``."""
        bd = self.board(board)
        return {k: (getattr(bd, k), f"{'BRAM36' if k == 'bram36' else k.upper()} ({getattr(bd, k)})")
                for k in ("bram36", "dsp", "lut")}

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

    # ------------------------------------------------ export (docs/export.md), defaults
    #: the export README's words for :attr:`config_file`
    config_file_description = "the hardware config (its knobs, clock and bus)"

    @property
    def config_file(self) -> str:
        """The file an export writes the hardware config to, in the target's own format."""
        return f"{self.name}_config.json"

    def export_config(self, hw, board) -> dict:
        """``hw`` in the target's own format (what :attr:`config_file` holds)."""
        return {**self.hw_values(hw), "freq_mhz": hw.freq_mhz, "bus_bytes": hw.bus_bytes,
                "name": hw.name}

    def hw_from_export(self, config: dict, report: dict):
        """The config an export's :attr:`config_file` holds (``report``: its hardware report,
        for what the target's own format leaves out)."""
        return self.parse_hw({k: v for k, v in config.items() if k != "name"})

    def hardware_report(self, hw) -> dict:
        """What the export's hardware report says about ``hw`` beyond resources and clock."""
        return {"core": {k: getattr(hw, k) for k in self.core_knobs}}

    def build_notes(self, hw, board) -> list[str]:
        """README lines on building ``hw`` with the target's own hardware flow."""
        return []

    def hw_notes(self, hw, board) -> dict:
        """What summaries, result.json and the Pareto table say about ``hw`` beyond its
        resources: ``build`` (whether the target's flow builds it, in words), ``basis``
        (what its latencies rest on, in words), ``basis_label`` (a short table marker).
        Empty: nothing to say."""
        return {}

    def with_options(self, **options):
        """This target with target-specific options (none by default)."""
        if options:
            from dcoc.errors import ConfigError

            raise ConfigError(f"the {self.name} target has no option {sorted(options)[0]!r}")
        return self


class ScheduleHalf:
    """The schedule half of a target: a model's layers, each layer's schedule space on a
    hardware config, its default schedule, how to measure it, and what DCOC's co-design
    needs to move a schedule between configs.  Subclasses set :attr:`slots` (and
    :attr:`shrink_order`) and implement ``workload``, ``workload_key``, ``sw_space``,
    ``ideal_seconds``, ``measurer``.
    """

    #: how messages name the accelerator ("model X has no layer VTA can run")
    label = "the accelerator"
    #: software slots of DCOC's joint co-design state (every layer's knobs map onto them)
    slots: tuple = ()
    #: knobs :meth:`transfer` shrinks, first first
    shrink_order: tuple = ()
    #: which accelerator extraction of ``tvm_plugin.frontend.model_tasks`` gives the layers
    #: (conv2d / dense workloads marked with this device, the rest left on the CPU)
    frontend_target = "vta"
    #: the task kinds of that extraction this target runs (the others stay on the CPU)
    task_kinds = ("conv2d", "dense", "batch_matmul")

    # ---------------------------------------------------------------- to implement
    def workload(self, spec):
        """A workload from a ``dcoc.tasks.Task`` (:meth:`layers`), an object or a CLI spec
        (``tune-task``)."""
        raise NotImplementedError

    def workload_key(self, layer: Layer) -> str:
        """The records key of ``layer``'s workload (stable across runs)."""
        raise NotImplementedError

    def sw_space(self, layer: Layer, hw):
        """:class:`dcoc.search.Space` of ``layer``'s schedules on ``hw``."""
        raise NotImplementedError

    def ideal_seconds(self, layer: Layer, hw) -> float:
        """Compute-bound lower bound of ``layer`` on ``hw`` (MACs / MACs per cycle / clock)."""
        raise NotImplementedError

    def measurer(self, n_workers: int | None = None):
        """The default measurer of this target (a :class:`dcoc.search.Measurer`)."""
        raise NotImplementedError

    # ---------------------------------------------------------------- defaults
    def layers(self, tasks) -> tuple[list[Layer], list]:
        """Model tasks -> (accelerator layers, CPU layers ``[(name, kind, count)]``).
        Default: one layer per task of device :attr:`frontend_target` and a kind of
        :attr:`task_kinds` (its workload by :meth:`workload`; a batch_matmul counts its
        batch as repeats), the rest and the tasks' ``cpu_ops`` on the CPU."""
        layers, cpu = [], []
        for t in tasks:
            if getattr(t, "device", self.frontend_target) != self.frontend_target or \
                    t.kind not in self.task_kinds:
                cpu.append((t.name, t.kind, int(t.weight)))
                continue
            wl = self.workload(t)
            reps = int(t.workload.get("batch", 1)) if t.kind == "batch_matmul" else 1
            layers.append(Layer(t.name, wl, int(t.weight) * reps, "conv2d" if t.kind == "conv2d" else "dense",
                                epilogue=None, target=self.name))
        for t in getattr(tasks, "cpu_ops", []) or []:
            cpu.append((t.name, t.kind, int(t.weight)))
        return layers, cpu

    def cpu_reason(self, task) -> str:
        """Why ``task`` (a CPU layer of :meth:`layers`) runs on the CPU."""
        from dcoc.tasks import cpu_reason

        if getattr(task, "device", None) == self.frontend_target and task.kind not in self.task_kinds:
            return f"{task.kind}: {self.label} does not run it"
        return cpu_reason(task)

    def layer(self, workload, name: str | None = None) -> Layer:
        """A single-workload layer (``tune_task``); its kind is the workload's ``kind``
        (default ``dense``)."""
        wl = self.workload(workload)
        return Layer(name or wl.name, wl, 1, getattr(wl, "kind", "dense"), epilogue=None,
                     target=self.name)

    def task(self, layer: Layer, hw):
        """A software-only :class:`dcoc.search.TuningTask` of ``layer`` on ``hw``: its
        :meth:`sw_space`, payload ``{"workload", "hw"}`` for the measurer, the default
        schedule as the task's default."""
        from dcoc.search.tuning_task import TuningTask

        wl = layer.workload
        space = self.sw_space(layer, hw)
        return TuningTask(name=layer.name, space=space, target=self.name,
                          workload_key=self.workload_key(layer),
                          flop=float(wl.flops if hasattr(wl, "flops") else 2 * wl.macs),
                          hw_name=hw.name, payload={"workload": wl, "hw": hw},
                          defaults=lambda: [d for d in [self.default_schedule(layer, hw, space)] if d])

    def default_schedule(self, layer: Layer, hw, space=None) -> dict | None:
        """The target's heuristic schedule if it is valid (else None).  Default: the first
        valid point of the space."""
        space = space if space is not None else self.sw_space(layer, hw)
        for k in space:
            if space.is_valid(k):
                return k
        return None

    def sw_union(self, layer: Layer, hw_space) -> list[tuple]:
        """Per slot, the union of ``layer``'s knob choices over the hardware options.
        Default: over one feasible config per :attr:`core_knobs` shape of ``hw_space``
        (on its ``.board``, else :attr:`default_board`)."""
        bd = self.board(getattr(hw_space, "board", None) or self.default_board)
        u: list[set] = [set() for _ in self.slots]
        seen = set()
        for cfg in hw_space:
            shape = tuple(cfg[k] for k in (self.core_knobs or self.hw_knobs))
            if shape in seen or not hw_space.is_valid(cfg):
                continue
            seen.add(shape)
            for knob in self.sw_space(layer, self.make_hw(cfg, bd)).knobs:
                u[self.slot(layer, knob.name)].update(knob.choices)
        return [tuple(sorted(s)) if s else (1,) for s in u]

    def descriptor(self, layer: Layer) -> list[float]:
        """Up to 12 numbers describing the workload (DCOC's agents' context).  Default: the
        workload's numeric dataclass fields."""
        wl = layer.workload
        vals = [getattr(wl, f.name) for f in fields(wl)] if hasattr(wl, "__dataclass_fields__") else []
        return [float(v) for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)][:12]

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
        return roofline_fraction(self.roofline_seconds(layer, hw), seconds)

    def cycles(self, seconds: float, hw) -> int:
        """``seconds`` in cycles of ``hw``'s clock."""
        return _cycles(seconds, hw.freq_mhz)

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


class Target(HardwareHalf, ScheduleHalf):
    """An accelerator target: a :class:`HardwareHalf` and a :class:`ScheduleHalf` under a
    registered :attr:`name` (see the module docstring)."""

    name = "base"
    description = ""

