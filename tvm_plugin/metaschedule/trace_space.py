"""The knob view of MetaSchedule design-space traces.

A MetaSchedule task has one or more *design spaces*: schedule traces whose sampling
instructions (``SamplePerfectTile``, ``SampleCategorical``, ``SampleComputeLocation``)
carry the decisions a search strategy chooses.  :class:`TraceSpace` turns them into a
:class:`dcoc.search.Space`, so that every dcoc tuner (random, grid, ga, xgb, rl,
chameleon, dcoc) can search a MetaSchedule task through the same ask/tell interface it
uses on the VTA simulator.

Knobs (one :class:`DecisionKnob` per sampling decision):

* ``SamplePerfectTile`` -> ``tile_<loop>``: choices = every ordered n-tuple whose product
  is the loop extent and whose innermost factor respects ``max_innermost_factor``
  (tuples; features are log2 of each factor); group ``"tile"``.
* ``SampleCategorical`` -> named after the annotation that consumes it (e.g.
  ``unroll_explicit``): choices = indices into the candidate list (features are
  log2(1 + candidate value)); group ``"schedule"``.
* ``SampleComputeLocation`` -> ``compute_at_<block>``: choices = the locations that were
  valid (exact probe, notes section 3.4) on the design-space tiling and on a few random
  tilings (union, sorted); features are the ordinal position; group ``"schedule"``.
  Validity depends on the tiling: TVM snaps an invalid location down to the nearest valid
  one, so two configs can give the same schedule; :meth:`TraceSpace.apply` reports the
  structural hash so callers deduplicate.
* Other sampling kinds (``SamplePartitionedTile``, ``SampleInt`` ...; not produced by the
  default llvm/cuda rules) keep the decision recorded in the design space.

Several design spaces: **one** Space with a categorical ``design_space`` knob (group
``"schedule"``) plus the union of all design spaces' knobs.  Knobs with the same name and
the same choices are shared (MetaSchedule's design spaces of one task differ by cache-write
structure, not by their tilings, so the tiling knobs mean the same loops in every design
space and a cost model learns across them); a knob a design space does not have is
ignored when that design space is selected (such configs collapse onto the same schedule,
which structural-hash deduplication catches).

Only this package imports tvm.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dcoc.search.space import Knob, Space
from dcoc.search.tuning_task import TuningTask

TILE, CATEGORICAL, COMPUTE_AT = "SamplePerfectTile", "SampleCategorical", "SampleComputeLocation"
KNOB_KINDS = (TILE, CATEGORICAL, COMPUTE_AT)

#: random tilings probed (besides the design space's own) to collect compute locations
N_LOCATION_PROBES = 3


@dataclass(frozen=True)
class DecisionKnob(Knob):
    """A knob for one trace decision; ``values`` (optional) are the numeric feature of
    each choice (one column), overriding the default log2-of-choice features."""

    kind: str = ""
    values: tuple = ()

    @property
    def feature_table(self) -> np.ndarray:
        if not self.values:
            return Knob.feature_table.fget(self)
        table = self.__dict__.get("_ftable")
        if table is None:
            table = np.asarray(self.values, dtype=np.float32).reshape(-1, 1)
            object.__setattr__(self, "_ftable", table)
        return table


# ---------------------------------------------------------------- decisions
def perfect_tiles(extent: int, n: int, max_innermost: int) -> list[tuple]:
    """Ordered n-tuples with product == extent and last factor <= max_innermost (-1: any)."""
    divisors = [d for d in range(1, extent + 1) if extent % d == 0]

    def rec(rem, k):
        if k == 1:
            yield (rem,)
            return
        for d in divisors:
            if d > rem:
                break
            if rem % d == 0:
                for rest in rec(rem // d, k - 1):
                    yield (d,) + rest

    return [t for t in rec(extent, n) if max_innermost < 0 or t[-1] <= max_innermost]


def compute_location_choices(sch, block_rv) -> list[int]:
    """Exact probe (notes 3.4): d is valid iff TVM records it unchanged on a copy."""
    consumers = sch.get_consumers(block_rv)
    depth = len(sch.get_loops(consumers[0])) if len(consumers) else 0
    valid = []
    for d in range(-2, depth):
        probe = sch.copy()
        try:
            probe.sample_compute_location(block_rv, decision=d)
        except Exception:  # noqa: BLE001 - invalid location
            continue
        if int(probe.trace.decisions[probe.trace.insts[-1]]) == d:
            valid.append(d)
    return valid


def _new_schedule(mod, seed=None):
    from tvm.s_tir import Schedule

    return Schedule(mod, seed=seed, debug_mask="none", error_render_level="none")


def _sampling_kind(inst) -> str | None:
    name = inst.kind.name
    return name if name.startswith("Sample") else None


def _annotation_of(trace, inst) -> str | None:
    """The annotation key of the Annotate instruction consuming ``inst``'s output."""
    outs = list(inst.outputs)
    if not outs:
        return None
    out = outs[0]
    for other in trace.insts:
        if other.kind.name != "Annotate":
            continue
        for x in other.inputs:
            if hasattr(x, "same_as") and x.same_as(out):
                key = str(other.attrs[0]) if len(other.attrs) else ""
                return key.replace("meta_schedule.", "")
    return None


@dataclass
class _Slot:
    """One sampling instruction of one design space."""

    kind: str
    knob: str | None  # None: a kind we do not expose; the recorded decision is kept
    default: Any = None  # the design-space decision (as a knob value)


@dataclass
class TraceSpace:
    """Knob view of one MetaSchedule task's design spaces.

    Build with :meth:`from_context` (inside a search strategy) or :meth:`from_mod`.

    Attributes
    ----------
    mod: the task's IRModule.
    target: the tvm Target.
    traces: design-space traces (simplified, postprocs removed).
    postprocs: the space generator's postprocessors (initialized).
    space: the :class:`dcoc.search.Space`.
    slots: per design space, the sampling instructions in order.
    """

    mod: Any
    target: Any
    traces: list
    postprocs: list
    space: Space = None
    slots: list = field(default_factory=list)
    task_name: str = "task"
    flop: float = 0.0
    seed: int = 0

    # --------------------------------------------------------------- building
    @classmethod
    def from_context(cls, context, design_spaces, seed: int = 0) -> "TraceSpace":
        """From a TuneContext and the design spaces MetaSchedule passed to ``pre_tuning``."""
        traces = [s.trace.simplified(remove_postproc=True) for s in design_spaces]
        postprocs = list(context.space_generator.postprocs) if context.space_generator else []
        ts = cls(mod=context.mod, target=context.target, traces=traces, postprocs=postprocs,
                 task_name=str(context.task_name or "task"), seed=seed)
        ts._build()
        return ts

    @classmethod
    def from_mod(cls, mod, target, task_name: str = "task", seed: int = 0,
                 num_threads: int | None = None) -> "TraceSpace":
        """Generate the design spaces with MetaSchedule's default ``post-order-apply``."""
        ctx = make_tune_context(mod, target, task_name, num_threads=num_threads)
        spaces = ctx.space_generator.generate_design_space(ctx.mod)
        ts = cls.from_context(ctx, spaces, seed=seed)
        ts.context = ctx
        return ts

    def _build(self) -> None:
        from tvm.s_tir.analysis import estimate_tir_flops

        try:
            self.flop = float(estimate_tir_flops(self.mod))
        except Exception:  # noqa: BLE001 - not every module has an estimate
            self.flop = 0.0
        rng = random.Random(self.seed)
        # pass 1: describe every sampling instruction of every design space
        per_ds = []
        for trace in self.traces:
            records = self._record(trace)
            locs = [r for r in records if r["kind"] == COMPUTE_AT]
            for r in locs:
                r["locations"] = set(r["locations"]) | {int(r["decision"])}
            for _ in range(N_LOCATION_PROBES if locs else 0):
                extra = [r for r in self._record(trace, rng=rng) if r["kind"] == COMPUTE_AT]
                for r, e in zip(locs, extra):
                    r["locations"].update(e["locations"])
            names, used = [], {}
            for r in records:
                if r["kind"] not in KNOB_KINDS:
                    names.append(None)
                    continue
                base = {TILE: f"tile_{r['label']}", CATEGORICAL: r["label"] or "categorical",
                        COMPUTE_AT: f"compute_at_{r['label']}"}[r["kind"]]
                k = used.get(base, 0)
                used[base] = k + 1
                names.append(base if k == 0 else f"{base}_{k}")
            per_ds.append((records, names))
        # compute locations: one choice set per knob name, the union over design spaces
        loc_union: dict = {}
        for records, names in per_ds:
            for r, nm in zip(records, names):
                if r["kind"] == COMPUTE_AT:
                    loc_union.setdefault(nm, set()).update(r["locations"])
        # pass 2: knobs (shared by name when the choices agree) and slots
        knobs: dict[str, DecisionKnob] = {}
        order: list[str] = []
        self.slots = []
        for di, (records, names) in enumerate(per_ds):
            slots = []
            for r, name in zip(records, names):
                if name is None:
                    slots.append(_Slot(r["kind"], None))
                    continue
                if r["kind"] == TILE:
                    group = "tile"
                    choices = tuple(perfect_tiles(r["extent"], r["n"], r["max_inner"]))
                    values = ()
                    default = tuple(int(x) for x in r["decision"])
                elif r["kind"] == CATEGORICAL:
                    group = "schedule"
                    choices = tuple(range(len(r["candidates"])))
                    values = tuple(_log2p1(c) for c in r["candidates"])
                    default = int(r["decision"])
                else:
                    group = "schedule"
                    choices = tuple(sorted(loc_union[name]))
                    values = tuple(float(i) for i in range(len(choices)))
                    default = int(r["decision"])
                if name in knobs and knobs[name].choices != choices:
                    name = f"{name}@ds{di}"
                knob = DecisionKnob(name, choices, group, kind=r["kind"], values=values)
                if name not in knobs:
                    knobs[name] = knob
                    order.append(name)
                if default not in knob.choices:  # a repaired decision: keep it valid
                    default = knob.choices[0]
                slots.append(_Slot(r["kind"], name, default))
            self.slots.append(slots)
        # tiles first (the mapping agent), then the rest, both in trace order
        ordered = [knobs[n] for n in order if knobs[n].group == "tile"]
        ordered += [knobs[n] for n in order if knobs[n].group != "tile"]
        if len(self.traces) > 1:
            ordered.insert(0, DecisionKnob("design_space", tuple(range(len(self.traces))),
                                           "schedule", kind="DesignSpace",
                                           values=tuple(float(i) for i in range(len(self.traces)))))
        self.space = Space(ordered, descriptor={"flop": self.flop} if self.flop else {},
                           name=self.task_name)

    def _record(self, trace, rng: random.Random | None = None) -> list[dict]:
        """Replay ``trace`` (recorded decisions, or random tiles when ``rng``) and describe
        each sampling instruction on the live schedule."""
        sch = _new_schedule(self.mod, seed=1)
        out: list[dict] = []

        def provider(inst, inputs, attrs, decision):
            kind = _sampling_kind(inst)
            if kind is None:
                return decision
            r: dict = {"kind": kind, "decision": decision, "label": ""}
            if kind == TILE:
                loop = sch.get(inputs[0])
                r.update(extent=int(loop.extent), n=int(attrs[0]), max_inner=int(attrs[1]),
                         label=str(loop.loop_var.name))
                if rng is not None:
                    decision = list(rng.choice(perfect_tiles(r["extent"], r["n"], r["max_inner"])))
            elif kind == CATEGORICAL:
                r.update(candidates=[_num(c) for c in attrs[0]], label=_annotation_of(trace, inst))
            elif kind == COMPUTE_AT:
                r.update(label=str(sch.get(inputs[0]).name_hint),
                         locations=compute_location_choices(sch, inputs[0]))
            out.append(r)
            return decision

        trace.apply_to_schedule(sch, remove_postproc=True, decision_provider=provider)
        return out

    # -------------------------------------------------------------- applying
    def default_config(self, design_space: int = 0) -> dict:
        """The config of a design space's own recorded decisions."""
        cfg = {k.name: k.choices[0] for k in self.space.knobs}
        for s in self.slots[design_space]:
            if s.knob is not None:
                cfg[s.knob] = s.default
        if "design_space" in cfg:
            cfg["design_space"] = design_space
        return cfg

    def apply(self, config: dict, seed: int | None = None):
        """Config -> postprocessed Schedule, or None when the config is invalid."""
        di = int(config.get("design_space", 0))
        if not 0 <= di < len(self.traces):
            return None
        slots = self.slots[di]
        pos = [0]
        sch = _new_schedule(self.mod, seed=seed if seed is not None else 1)

        def provider(inst, inputs, attrs, decision):
            if _sampling_kind(inst) is None:
                return decision
            i = pos[0]
            pos[0] += 1
            if i >= len(slots):
                return decision
            slot = slots[i]
            if slot.knob is None or slot.knob not in config:
                return decision
            v = config[slot.knob]
            if slot.kind == TILE:
                return [int(x) for x in v]
            return int(v)

        try:
            slot_trace = self.traces[di]
            slot_trace.apply_to_schedule(sch, remove_postproc=True, decision_provider=provider)
        except Exception:  # noqa: BLE001 - an invalid decision combination
            return None
        sch.enter_postproc()
        for p in self.postprocs:
            try:
                if not p.apply(sch):
                    return None
            except Exception:  # noqa: BLE001
                return None
        return sch

    def config_of_trace(self, trace) -> dict | None:
        """The config whose replay gives ``trace`` (e.g. a database record's trace), or None
        if the trace does not come from one of these design spaces."""
        t = trace.simplified(remove_postproc=True)
        sig = _signature(t)
        for di, dt in enumerate(self.traces):
            if _signature(dt) != sig:
                continue
            cfg = self.default_config(di)
            decs = [t.decisions.get(i) for i in t.insts if _sampling_kind(i) is not None]
            for slot, d in zip(self.slots[di], decs):
                if slot.knob is None or d is None:
                    continue
                knob = self.space.knob(slot.knob)
                v = tuple(int(x) for x in d) if slot.kind == TILE else int(d)
                if v not in knob.choices:
                    return None
                cfg[slot.knob] = v
            return cfg
        return None

    # ------------------------------------------------------------------ glue
    def tuning_task(self, target_name: str | None = None) -> TuningTask:
        """A :class:`dcoc.search.TuningTask` over this space (``payload`` = self)."""
        return TuningTask(
            name=self.task_name, space=self.space,
            target=target_name or target_kind(self.target),
            workload_key=f"ms:{workload_hash(self.mod)}", flop=self.flop,
            hw_name=target_kind(self.target), payload=self,
        )


def _signature(trace) -> tuple:
    """Instruction kinds, attributes, literal inputs and the dataflow between random
    variables (not decisions): identifies the design space a trace was replayed from."""
    ids: dict = {}
    sig = []
    for inst in trace.insts:
        k = inst.kind.name
        if k == "EnterPostproc":
            break
        ins = []
        for x in inst.inputs:
            if _is_literal(x):
                ins.append(str(x))
            else:
                ins.append(ids.get(_handle(x), "?"))
        for o in inst.outputs:
            ids.setdefault(_handle(o), len(ids))
        sig.append((k, str(list(inst.attrs)), tuple(ins)))
    return tuple(sig)


def _handle(x):
    h = getattr(x, "__chandle__", None)
    return h() if callable(h) else id(x)


def _is_literal(x) -> bool:
    if isinstance(x, (str, int, float)):
        return True
    return type(x).__name__ in ("IntImm", "FloatImm", "StringImm", "String")


def _num(x):
    try:
        v = float(x.value if hasattr(x, "value") else x)
        return int(v) if v == int(v) else v
    except (TypeError, ValueError):
        return str(x)


def _log2p1(v) -> float:
    if isinstance(v, (int, float)) and v >= 0:
        return math.log2(1.0 + v)
    return 0.0


def workload_hash(mod) -> str:
    import tvm_ffi

    return f"{tvm_ffi.structural_hash(mod) & 0xFFFFFFFFFFFFFFFF:016x}"


def schedule_hash(sch) -> int:
    import tvm_ffi

    return int(tvm_ffi.structural_hash(sch.mod))


def target_kind(target) -> str:
    try:
        return str(target.kind.name)
    except AttributeError:
        return str(target)


def make_tune_context(mod, target, task_name: str = "task", strategy=None,
                      num_threads: int | None = None, seed: int | None = None, logger=None):
    """A TuneContext with MetaSchedule's default space generator for ``target``."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from tvm_plugin.metaschedule.build import preload_tensor_intrin

    preload_tensor_intrin()
    if not isinstance(target, tvm.target.Target):
        target = tvm.target.Target(target)
    if not isinstance(mod, tvm.IRModule):
        mod = tvm.IRModule({"main": mod})
    kw = {}
    if strategy is not None:
        kw["search_strategy"] = strategy
    if logger is not None:
        kw["logger"] = logger
    return ms.TuneContext(mod=mod, target=target, space_generator="post-order-apply",
                          task_name=task_name, num_threads=num_threads or "physical",
                          rand_state=seed if seed is not None else -1, **kw)
