"""The layers handed to the accelerator: one :class:`VTAKernel` per offloaded layer.

The BYOC codegen (:mod:`tvm_plugin.byoc`) turns every partitioned composite function
into a *kernel spec* (a dict of plain Python/numpy values: kind, shapes, int8 weights,
int32 bias, epilogue) and asks :meth:`Offload.kernel` for a kernel.  A kernel is the
compiled layer: a workload, the tuned (or default) knobs for the hardware, the epilogue,
and its constants; the packed function TVM calls at run time hands the int8 inputs to
:meth:`VTAKernel.__call__`, which runs

* ``backend="sim"``: the dcoc VTA simulator, functional and timed (``dcoc.targets.vta.simulate``
  with data: the compiled instruction stream executes bit-exactly and is timed by the
  event simulator), or
* ``backend="ref"``: the independent integer reference :mod:`dcoc.runtime.intref`.

Each call site is one of the model's tuned layers (:func:`dcoc.targets.vta.report.model_layers`:
a task with one fused epilogue), and runs that layer's schedule -- the one the tuner timed
with the same epilogue, so it fits as tuned.  On the simulator backend every call is also
computed by the reference on the *same* inputs and compared (``mismatches``), so a
difference is pinned to the layer that makes it, even when later layers hide it.

A layer whose schedule does not compile for the hardware is refused (the reason is
kept) and stays on the CPU.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from dcoc.errors import KnobError
from dcoc.runtime import intref

__all__ = ["Offload", "VTAKernel", "find_task"]


def find_task(tasks, kind: str, workload: dict):
    """The VTA task (``device == "vta"``) of ``tasks`` with this kind and workload (kind
    ``conv2d``: any conv kind, the workload's ``groups`` tells them apart)."""
    from dcoc.targets.vta.workloads import CONV_KINDS

    kinds = CONV_KINDS if kind == "conv2d" else (kind,)
    for t in tasks:
        if t.kind in kinds and getattr(t, "device", "vta") == "vta" and \
                dict(t.workload) == dict(workload):
            return t
    return None


@dataclass
class VTAKernel:
    """One offloaded layer (see the module docstring)."""

    name: str
    kind: str
    workload: object
    knobs: dict
    default: bool
    spec: dict
    epilogue: object
    owner: "Offload" = field(repr=False, default=None)
    note: str | None = None
    task: str = ""
    pad_bias: bool = False
    adapted: bool = False
    site: int = 0
    calls: int = 0
    cycles: int = 0
    seconds: float = 0.0
    wall: float = 0.0
    mismatches: int = 0
    compared: int = 0
    max_diff: int = 0

    # ------------------------------------------------------------------ run
    def __call__(self, *arrays) -> np.ndarray:
        backend = self.owner.backend if self.owner is not None else "sim"
        t0 = time.perf_counter()
        if self.owner is not None and self.owner.progress is not None:
            self.owner.progress(self, backend)
        out = self._sim(*arrays) if backend == "sim" else self._ref(*arrays)
        self.wall += time.perf_counter() - t0
        if backend == "sim" and (self.owner is None or self.owner.check):
            self._check(out, self._ref(*arrays))
        return out

    def _check(self, out, ref) -> None:
        """Compare this call's simulator output with the reference on the same inputs."""
        out, ref = np.asarray(out), np.asarray(ref)
        self.compared += 1
        if out.shape != ref.shape:
            n, d = max(out.size, ref.size), -1
        else:
            diff = out.astype(np.int64) - ref.astype(np.int64)
            n = int(np.count_nonzero(diff))
            d = int(np.max(np.abs(diff))) if n else 0
        if n:
            self.mismatches += n
            self.max_diff = d if d < 0 else max(self.max_diff, d)
            if self.owner is not None and self.owner.first_mismatch is None:
                self.owner.first_mismatch = self

    def _inputs(self, arrays):
        sp = self.spec
        data = np.asarray(arrays[0])
        other = residual = None
        rest = list(arrays[1:])
        if sp["kind"] == "batch_matmul":
            other = np.asarray(rest.pop(0))
        if sp["residual"]:
            residual = np.asarray(rest.pop(0))
        return data, other, residual

    def _sim(self, *arrays) -> np.ndarray:
        from dcoc.targets.vta import simulate

        sp = self.spec
        data, other, residual = self._inputs(arrays)
        hw = self.owner.hw
        bias = sp["bias"]
        if bias is None and self.pad_bias:  # the tuned layer has a bias: add zeros (exact)
            co = self.workload.out_channels if sp["kind"] == "conv2d" else \
                self.workload.out_features
            bias = np.zeros(co, np.int32)
        if sp["kind"] == "conv2d":
            r = simulate(self.workload, hw, self.knobs, data=data, weight=sp["weight"],
                         bias=bias, residual=residual, epilogue=self.epilogue)
            self._account(r)
            return r.output.reshape(sp["out_shape"])
        if sp["kind"] == "dense":
            k = data.shape[-1]
            x = data.reshape(-1, k)
            w = np.ascontiguousarray(sp["weight"].T)  # [N, K]
            res = residual.reshape(x.shape[0], -1) if residual is not None else None
            r = simulate(self.workload, hw, self.knobs, data=x, weight=w, bias=bias,
                         residual=res, epilogue=self.epilogue)
            self._account(r)
            return r.output.reshape(sp["out_shape"])
        # batch_matmul: one dense run per matrix pair; weight = the second operand, transposed
        out_shape = sp["out_shape"]
        bshape = out_shape[:-2]
        a = np.broadcast_to(data, tuple(bshape) + data.shape[-2:]).reshape(-1, *data.shape[-2:])
        b = np.broadcast_to(other, tuple(bshape) + other.shape[-2:]).reshape(-1, *other.shape[-2:])
        res = residual.reshape(-1, *out_shape[-2:]) if residual is not None else None
        outs = []
        for i in range(a.shape[0]):
            r = simulate(self.workload, hw, self.knobs, data=np.ascontiguousarray(a[i]),
                         weight=np.ascontiguousarray(b[i].T),
                         residual=None if res is None else res[i], epilogue=self.epilogue)
            self._account(r)
            outs.append(r.output)
        return np.stack(outs).reshape(out_shape)

    def _account(self, r) -> None:
        if not r.valid:  # cannot happen: the schedule was checked when the kernel was made
            raise KnobError(f"{self.name}: schedule {self.knobs} became invalid: {r.reason}")
        self.calls += 1
        self.cycles += int(r.cycles)
        self.seconds += float(r.seconds)

    def _ref(self, *arrays) -> np.ndarray:
        sp = self.spec
        data, other, residual = self._inputs(arrays)
        if sp["kind"] == "conv2d":
            acc = intref.conv2d_int(data, sp["weight"], sp["strides"], sp["padding"],
                                    sp["dilation"], sp.get("groups", 1))
            axis = 1
        elif sp["kind"] == "dense":
            acc = intref.matmul_int(data, sp["weight"])
            axis = -1
        else:
            acc = intref.matmul_int(data, other)
            axis = -1
        out = intref.epilogue_int(acc, sp["bias"], residual, axis, round_=sp["round"],
                                  shift=sp["shift"], clip=sp["clip"])
        return out.reshape(sp["out_shape"])


class Offload:
    """Kernels for one model on one hardware config.

    hw: the :class:`~dcoc.targets.vta.HWConfig`; schedules: ``{task name: knobs}`` (missing ->
    :func:`dcoc.targets.vta.default_knobs`); tasks: the model's VTA :class:`~dcoc.tasks.TaskList`.
    ``kernels`` lists the accepted kernels in model order, ``refused`` the
    ``(name, kind, reason)`` of layers kept on the CPU.
    """

    def __init__(self, hw, schedules: dict | None, tasks, progress=None):
        from dcoc.targets.vta.report import model_layers

        self.hw = hw
        self.schedules = dict(schedules or {})
        self.tasks = tasks
        self.layers = model_layers(tasks)[0]
        self.backend = "sim"
        self.progress = progress
        self.check = True
        self.first_mismatch: VTAKernel | None = None
        self.kernels: list[VTAKernel] = []
        self.refused: list[tuple[str, str, str]] = []
        self._adapted: dict = {}

    def _workload(self, spec):
        from dcoc.targets.vta import Conv2DWorkload, DenseWorkload

        if spec["kind"] == "conv2d":
            n, c, h, w = spec["data_shape"]
            o, _, kh, kw = spec["weight"].shape
            return Conv2DWorkload(batch=n, height=h, width=w, in_channels=c, out_channels=o,
                                  kernel=(kh, kw), stride=tuple(spec["strides"]),
                                  padding=tuple(spec["padding"]),
                                  dilation=tuple(spec["dilation"]), groups=spec.get("groups", 1))
        wl = spec["workload"]
        return DenseWorkload(batch=wl["m"], in_features=wl["k"], out_features=wl["n"])

    def _layer(self, task, bias: bool, residual: bool):
        """``(model layer, pad_bias)``: the tuned layer of ``task`` with this epilogue; a
        bias-less call runs a layer with a bias as a zero bias (same result, the tuned
        timing); ``(None, False)`` if the tuner saw no such layer."""
        from dcoc.targets.vta.report import find_layer

        ml = find_layer(self.layers, task.name, bias, residual)
        if ml is None and not bias:
            ml = find_layer(self.layers, task.name, True, residual)
            return ml, ml is not None
        return ml, False

    def kernel(self, spec: dict) -> "VTAKernel | str":
        """A kernel for a composite's spec, or the reason it stays on the CPU."""
        from dcoc.targets.vta import Epilogue, compile_schedule, default_knobs

        kind, wl = spec["kind"], spec["workload"]
        task = find_task(self.tasks, kind, wl)
        name = task.name if task is not None else spec.get("name", kind)
        if task is None:
            return self._refuse(name, kind, "not a VTA task of this model")
        if kind == "conv2d" and (wl.get("dilation_h", 1) != 1 or wl.get("dilation_w", 1) != 1):
            return self._refuse(name, kind, "dilated conv: no VTA schedule")
        has_bias, has_res = spec["bias"] is not None, bool(spec["residual"])
        ml, pad_bias = self._layer(task, has_bias, has_res)
        notes = []
        if ml is not None:
            name = ml.name
        else:
            name = task.name + ("_res" if has_res else "") + ("" if has_bias else "_nobias")
            notes.append(f"its epilogue (bias={has_bias}, residual={has_res}) is not one the "
                         f"tuner timed for {task.name}")
        try:
            ep = Epilogue(bias=has_bias or pad_bias, residual=has_res,
                          round=bool(spec["round"]), shift=int(spec["shift"]),
                          clip=tuple(spec["clip"]))
        except Exception as exc:  # noqa: BLE001 - WorkloadError: epilogue out of the ALU's range
            return self._refuse(name, kind, f"epilogue not expressible on the ALU: {exc}")
        wobj = self._workload(spec)
        knobs = self.schedules.get(name)
        if knobs is None and ml is None:  # the tuner's nearest layer of this task
            knobs = self.schedules.get(task.name)
        default = knobs is None
        adapted_from = None
        what = "default schedule" if default else "tuned schedule"
        try:
            if knobs is None:
                knobs = default_knobs(wobj, self.hw, epilogue=ep)
            compile_schedule(wobj, self.hw, knobs, ep)
        except KnobError as exc:
            # cannot happen for a schedule tuned for this layer (the tuner's fit check
            # counts the same epilogue); a foreign schedule is re-tiled, loudly
            adapted = None
            if isinstance(knobs, dict) and (ep.residual or ep.bias) and \
                    self._fits(wobj, knobs, ep):
                adapted = self._adapt(wobj, knobs, ep)
            if adapted is None:
                return self._refuse(name, kind, f"{what} invalid on {self.hw.name}: {exc}")
            notes.append(f"{what} {knobs} does not fit with this epilogue ({exc}); adapted "
                         f"to {adapted}")
            warnings.warn(f"layer {name}: the {what} does not fit the accumulator with its "
                          f"epilogue; re-tiled to {adapted} (its time is not what was tuned)",
                          UserWarning, stacklevel=2)
            adapted_from, knobs = knobs, adapted
        k = VTAKernel(name=name, kind=kind, workload=wobj, knobs=dict(knobs), default=default,
                      spec=spec, epilogue=ep, owner=self, note="; ".join(notes) or None,
                      task=task.name, pad_bias=pad_bias, adapted=adapted_from is not None,
                      site=len(self.kernels))
        self.kernels.append(k)
        return k

    def _fits(self, wl, knobs, ep) -> bool:
        """True when ``knobs`` compile with ``ep`` minus its ACC operands (bias, residual):
        the schedule is valid as chosen, only the extra accumulator tiles do not fit."""
        from dataclasses import replace

        from dcoc.targets.vta import compile_schedule

        try:
            compile_schedule(wl, self.hw, knobs, replace(ep, residual=False, bias=False))
            return True
        except KnobError:
            return False

    def _adapt(self, wl, knobs: dict, ep) -> dict | None:
        """The fastest schedule that compiles with ``ep`` among those differing from
        ``knobs`` only in the output tiling and threads (tile_h / tile_co / threads for
        conv2d, tile_b / tile_co / threads for dense)."""
        import itertools

        from dcoc.targets.vta import compile_schedule, simulate, space_for

        key = (wl, tuple(sorted(knobs.items())), ep)
        if key in self._adapted:
            return self._adapted[key]
        space = space_for(wl, self.hw)
        free = [k for k in ("tile_h", "tile_b", "tile_co", "oc_nthread", "h_nthread")
                if k in space]
        best = None
        for vals in itertools.product(*[space[k] for k in free]):
            cand = {**{k: v for k, v in knobs.items() if k in space}, **dict(zip(free, vals))}
            try:
                compile_schedule(wl, self.hw, cand, ep)
            except KnobError:
                continue
            r = simulate(wl, self.hw, cand, epilogue=ep)
            if r.valid and (best is None or r.cycles < best[0]):
                best = (r.cycles, cand)
        self._adapted[key] = None if best is None else dict(best[1])
        return self._adapted[key]

    def _refuse(self, name, kind, reason) -> str:
        self.refused.append((name, kind, reason))
        return reason

    def reset(self) -> None:
        self.first_mismatch = None
        for k in self.kernels:
            k.calls = k.cycles = k.mismatches = k.compared = k.max_diff = 0
            k.seconds = k.wall = 0.0
