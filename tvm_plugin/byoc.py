"""BYOC-style offload of the quantized layers to dcoc's VTA simulator.

The integer module from :mod:`tvm_plugin.relax_quantize` is partitioned the way TVM partitions
for an external accelerator:

1. :func:`partition` -- ``relax.transform.FuseOpsByPattern`` with the patterns of
   :func:`patterns` (``conv2d | matmul`` (int8 -> int32) ``[+ bias] [+ residual]
   [+ round] >> shift -> clip -> astype int8``: exactly what VTA's GEMM core and ALU
   epilogue compute) groups each layer into a composite function
   (``Composite = "dcoc_vta.conv2d" | "dcoc_vta.dense" | "dcoc_vta.batch_matmul"``), its
   constants (int8 weights, int32 bias) bound inside.
2. :func:`offload` -- the codegen: each composite is read back into a kernel spec
   (workload, weights, bias, epilogue: plain Python / numpy), handed to the kernel factory
   the caller passes in (``dcoc run``: dcoc's offload policy, which compiles the layer with
   its tuned schedule for the hardware), registered as a TVM global packed function
   ``dcoc_vta.<build>.<n>``, and the call is replaced by
   ``R.call_dps_packed("dcoc_vta.<build>.<n>", args)``.  A composite the factory refuses
   (no valid schedule, not a VTA task) is turned back into an ordinary function and
   runs on the CPU through TVM.
3. :func:`build` -- ``tvm.compile`` (llvm) of the result: one executable; the Relax VM
   runs the CPU operators and calls the packed functions, which run the layers on the
   simulator.

:class:`Executable` wraps the VM: ``run({name: array}) -> [outputs]``.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

__all__ = ["patterns", "partition", "offload", "build", "Executable", "COMPOSITES"]

COMPOSITES = ("dcoc_vta.conv2d", "dcoc_vta.dense", "dcoc_vta.batch_matmul")
_BUILDS = itertools.count()
_KEEP: dict[str, object] = {}  # packed functions registered by this process (kept alive)


def patterns():
    """The FuseOpsByPattern patterns, most specific first."""
    from tvm.relax import dpl
    from tvm.relax.transform import FusionPattern

    anchors = [
        ("dcoc_vta.conv2d", lambda: dpl.is_op("relax.nn.conv2d")(dpl.wildcard(), dpl.is_const())),
        ("dcoc_vta.dense", lambda: dpl.is_op("relax.matmul")(dpl.wildcard(), dpl.is_const())),
        ("dcoc_vta.batch_matmul",
         lambda: dpl.is_op("relax.matmul")(dpl.wildcard(), dpl.wildcard())),
    ]
    out = []
    for name, mk in anchors:
        for bias, res, rnd in sorted(itertools.product((1, 0), repeat=3),
                                     key=lambda t: -sum(t)):
            if name == "dcoc_vta.batch_matmul" and bias:
                continue
            anchor = mk()
            p = anchor
            if bias:
                p = dpl.is_op("relax.add")(p, dpl.is_const())
            if res:
                p = dpl.is_op("relax.add")(p, dpl.wildcard())
            if rnd:
                p = dpl.is_op("relax.add")(p, dpl.is_const())
            p = dpl.is_op("relax.right_shift")(p, dpl.is_const())
            p = dpl.is_op("relax.clip")(p, dpl.wildcard(), dpl.wildcard())
            p = dpl.is_op("relax.astype")(p)
            out.append(FusionPattern(name, p, {"anchor": anchor}, _check_int8))
    return out


def _check_int8(ctx) -> bool:
    """Only integer layers: int8 x int8 -> int32 anchors ending in an int8 cast."""
    anchor = ctx.annotated_expr["anchor"]
    try:
        ins = [str(a.ty.dtype) for a in anchor.args]
        return all(d == "int8" for d in ins) and str(anchor.ty.dtype) == "int32" and \
            str(ctx.matched_expr.ty.dtype) == "int8"
    except AttributeError:
        return False


def partition(mod):
    """Group every integer layer into a composite function (step 1)."""
    from tvm import relax

    return relax.transform.FuseOpsByPattern(patterns(), bind_constants=True,
                                            annotate_codegen=False)(mod)


def _ints(xs) -> tuple[int, ...]:
    return tuple(int(x) for x in xs)


def kernel_spec(func, composite: str) -> dict:
    """Read a composite function back into a kernel spec (plain Python / numpy)."""
    from tvm.ir.expr import Constant

    from tvm_plugin.relax_quantize import conv_workload_dict, matmul_workload_dict

    params = list(func.params)
    binds = [b for blk in func.body.blocks for b in blk.bindings]
    spec: dict = {"composite": composite, "bias": None, "residual": False, "round": False,
                  "shift": 0, "clip": (-128, 127)}
    anchor = binds[0].value
    spec["out_shape"] = _ints(func.ret_ty.shape)
    x = anchor.args[0]
    spec["data_shape"] = _ints(x.ty.shape)
    order = ["data"]
    if composite == "dcoc_vta.conv2d":
        a = anchor.attrs
        w = anchor.args[1].value.numpy()
        pad = _ints(a.padding)
        pad = pad * 2 if len(pad) == 2 else pad
        spec.update(kind="conv2d", weight=w, strides=_ints(a.strides), padding=pad,
                    dilation=_ints(a.dilation), groups=int(a.groups))
        spec["workload"] = conv_workload_dict(spec["data_shape"], w.shape,
                                              _ints(binds[0].var.ty.shape), a.strides, pad,
                                              a.dilation, a.groups)
    elif composite == "dcoc_vta.dense":
        w = anchor.args[1].value.numpy()
        spec.update(kind="dense", weight=w)
        spec["workload"] = matmul_workload_dict(spec["data_shape"], w.shape, True)[1]
    else:
        o = anchor.args[1]
        spec.update(kind="batch_matmul", weight=None, other_shape=_ints(o.ty.shape))
        spec["workload"] = matmul_workload_dict(spec["data_shape"], spec["other_shape"], False)[1]
        order.append("other")
    for b in binds[1:]:
        v = b.value
        op = v.op.name
        if op == "relax.add":
            c = v.args[1]
            if isinstance(c, Constant):
                arr = c.value.numpy()
                if arr.ndim == 0:
                    spec["round"] = True
                else:
                    spec["bias"] = arr.reshape(-1).astype(np.int32)
            else:
                spec["residual"] = True
                order.append("residual")
        elif op == "relax.right_shift":
            spec["shift"] = int(v.args[1].value.numpy())
        elif op == "relax.clip":
            spec["clip"] = (_prim(v.args[1]), _prim(v.args[2]))
    # the composite's parameters in the order the layer reads them
    spec["inputs"] = order
    spec["param_index"] = _param_order(params, binds, order)
    return spec


def _prim(e) -> int:
    """int of a PrimValue argument (``R.clip`` bounds)."""
    v = e.value
    return int(getattr(v, "value", v))


def _param_order(params, binds, order) -> list[int]:
    """Index into the composite's params of data (/ other) (/ residual)."""
    from tvm import relax

    anchor = binds[0].value
    found = {"data": anchor.args[0]}
    if "other" in order:
        found["other"] = anchor.args[1]
    for b in binds[1:]:
        v = b.value
        if v.op.name == "relax.add" and isinstance(v.args[1], relax.Var) and \
                any(v.args[1].same_as(p) for p in params):
            found["residual"] = v.args[1]
    out = []
    for name in order:
        e = found[name]
        out.append(next(i for i, p in enumerate(params) if p.same_as(e)))
    return out


def _register(name: str, kernel, perm: list[int]):
    import tvm_ffi

    def packed(*args):
        ins, out = args[:-1], args[-1]
        arrays = [ins[i].numpy() for i in perm]
        res = kernel(*arrays)
        out.copyfrom(np.ascontiguousarray(res.astype(np.int8, copy=False)))

    tvm_ffi.register_global_func(name, packed, override=True)
    _KEEP[name] = packed


def offload(mod, factory):
    """Replace every composite call by a packed call to the kernel ``factory(spec)``
    returns (step 2).  Returns ``(module, [(composite, kernel or refusal reason)])``."""
    import tvm
    from tvm import relax

    build_id = next(_BUILDS)
    decided: dict = {}
    report = []
    plain = {}

    @relax.expr_functor.mutator
    class _Offload(relax.PyExprMutator):
        def visit_call_(self, call):  # noqa: N802 - TVM visitor name
            call = super().visit_call_(call)
            if not isinstance(call.op, relax.GlobalVar):
                return call
            f = mod[call.op]
            comp = f.attrs["Composite"] if f.attrs is not None and "Composite" in f.attrs \
                else None
            if comp is None or str(comp) not in COMPOSITES:
                return call
            spec = kernel_spec(f, str(comp))
            k = factory(spec)
            report.append((str(comp), k))
            if isinstance(k, str):  # refused: an ordinary function, run on the CPU
                plain[call.op] = True
                return call
            name = f"dcoc_vta.{build_id}.{len(decided)}"
            decided[name] = k
            _register(name, k, spec["param_index"])
            return relax.call_dps_packed(name, relax.Tuple(list(call.args)), f.ret_ty)

    func = _Offload(mod).visit_expr(mod["main"])
    new = tvm.IRModule()
    for gv, f in mod.functions.items():
        if gv.name_hint == "main":
            continue
        if isinstance(f, relax.Function) and f.attrs is not None and "Composite" in f.attrs:
            if gv not in plain:
                continue
            f = f.without_attr("Composite").without_attr("Primitive")
        new[gv] = f
    new["main"] = func
    new = relax.transform.DeadCodeElimination()(new)
    return new, report


@dataclass
class Executable:
    """One TVM executable: the CPU operators compiled for llvm, the offloaded layers as
    packed calls into the simulator."""

    exe: object
    input_names: list
    kernels: list = field(default_factory=list)
    refused: list = field(default_factory=list)
    _vm: object = None

    def run(self, inputs: dict) -> list:
        import tvm
        from tvm import relax

        if self._vm is None:
            self._vm = relax.VirtualMachine(self.exe, tvm.cpu())
        out = self._vm["main"](*[tvm.runtime.tensor(np.ascontiguousarray(inputs[n]))
                                 for n in self.input_names])
        return _flatten(out)


def _flatten(out) -> list:
    if hasattr(out, "numpy"):
        return [out.numpy()]
    res = []
    for o in out:
        res.extend(_flatten(o))
    return res


def build(qmod, factory, input_names) -> Executable:
    """Partition, offload and compile the integer module (steps 1-3)."""
    from tvm_plugin.relax_quantize import compile_module

    part = partition(qmod)
    mod, report = offload(part, factory)
    exe = compile_module(mod)
    kernels = [k for _, k in report if not isinstance(k, str)]
    refused = [(c, k) for c, k in report if isinstance(k, str)]
    return Executable(exe, list(input_names), kernels, refused)
