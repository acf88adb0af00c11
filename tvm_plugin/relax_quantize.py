"""Relax side of ``dcoc run``'s post-training quantization.

1. :func:`find_layers` walks the unfused Relax module (``Model.mod``) and finds every
   layer VTA runs -- the frontend's policy: conv2d (any groups, depthwise included;
   dilation 1; not the first conv), MatMul/Gemm with a constant 2-D weight (dense), activation x activation MatMul
   (batch_matmul) -- together with the elementwise ops VTA's ALU absorbs after it
   (bias / BatchNorm affine, residual add, ReLU / ReLU6 / Clip), as records built by the
   caller's ``make_layer`` (the API floor passes the quantizer's ``LayerSpec``).  Layers
   that match no VTA task of the model (the caller's ``task_name`` says which) stay in
   float on the CPU.
2. :func:`calibrate` compiles the float module with every tensor a quantized layer reads
   or writes as an extra output, runs it on the calibration inputs and returns each
   tensor's max |x|.
3. :func:`rewrite` replaces each layer by its integer form, given as :class:`IntLayer`
   (plain data the API floor fills from dcoc's power-of-two quantizer):
   ``quantize -> conv2d/matmul (int8 x int8 -> int32) -> add bias -> add residual ->
   add round -> right_shift -> clip -> astype int8 -> dequantize``.  Consecutive
   quantized layers pass int8 tensors directly (the dequantize/quantize pair between them
   is exact with power-of-two scales and is not emitted).  The integer chain is what
   :mod:`tvm_plugin.byoc` partitions by pattern and hands to the accelerator.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from dcoc.errors import ModelError
from tvm_plugin.frontend.common import _static_shape
from tvm_plugin.frontend.naming import _conv_workload

__all__ = ["Graph", "IntLayer", "find_layers", "calibrate", "rewrite", "prepare",
           "conv_workload_dict", "matmul_workload_dict"]

_CLIP_LO = {"relax.maximum", "tir:maximum"}
_CLIP_HI = {"relax.minimum", "tir:minimum"}


def conv_workload_dict(data_shape, weight_shape, out_shape, strides, padding, dilation,
                       groups=1) -> dict:
    """The conv2d task workload (the frontend's ``Task.workload`` keys)."""
    n, c, h, w = (int(v) for v in data_shape)
    o, _, kh, kw = (int(v) for v in weight_shape)
    pt, pl, pb, pr = (int(v) for v in padding)
    return _conv_workload(n, c, h, w, o, kh, kw, int(strides[0]), int(strides[1]), pt, pl, pb, pr,
                          int(dilation[0]), int(dilation[1]), int(groups), int(out_shape[2]),
                          int(out_shape[3]))


def matmul_workload_dict(a_shape, b_shape, const_b: bool) -> tuple[str, dict] | None:
    """(kind, workload) of ``a @ b`` as the frontend names it, or None (unsupported)."""
    sa, sb = tuple(int(v) for v in a_shape), tuple(int(v) for v in b_shape)
    if len(sa) < 2 or len(sb) < 2:
        return None
    if const_b:
        if len(sb) != 2:
            return None
        return "dense", dict(batch=1, m=int(np.prod(sa[:-1])), n=sb[-1], k=sa[-1])
    try:
        bshape = np.broadcast_shapes(sa[:-2], sb[:-2])
    except ValueError:
        return None
    return "batch_matmul", dict(batch=int(np.prod(bshape)) if bshape else 1, m=sa[-2],
                                n=sb[-1], k=sa[-1])


@dataclass(frozen=True, eq=False)
class IntLayer:
    """The integer form of one found layer (``Graph.layers[index]``), as :func:`rewrite`
    emits it: int8 weights, int32 bias, the epilogue's shift / rounding / clip bounds, the
    residual's shift and the output's exponent (scale ``2**-e_y``)."""

    index: int
    qweight: np.ndarray | None
    qbias: np.ndarray | None
    shift: int
    round: bool
    clip_lo: int
    clip_hi: int
    e_y: int
    res_shift: int = 0


def _op_name(call) -> str | None:
    import tvm
    from tvm import relax

    if not isinstance(call, relax.Call):
        return None
    if isinstance(call.op, tvm.ir.Op):
        name = call.op.name
        if name == "relax.call_tir" and call.args and isinstance(call.args[0], relax.GlobalVar):
            base = call.args[0].name_hint.rstrip("0123456789").rstrip("_")
            return "tir:" + base
        return name
    return None


def _call_args(call) -> list:
    from tvm import relax

    if _op_name(call).startswith("tir:"):
        a = call.args[1]
        return list(a.fields) if isinstance(a, relax.Tuple) else [a]
    return list(call.args)


def _shape(e):
    return _static_shape(getattr(e, "ty", None))


def _dtype(e):
    return str(getattr(getattr(e, "ty", None), "dtype", ""))


def prepare(mod):
    """The module with ``main``'s dataflow blocks turned into plain binding blocks (every
    intermediate can then be a function output)."""
    from tvm import relax

    return relax.transform.ToNonDataflow()(mod)


@dataclass
class Graph:
    """``main`` of a prepared module, flattened: bindings, producers, users, constants."""

    mod: object
    bindings: list
    index: dict = field(default_factory=dict)     # var -> binding index
    users: dict = field(default_factory=dict)     # binding index / "p<i>" -> [user index|-1]
    consts: dict = field(default_factory=dict)    # binding index -> Constant
    alias: dict = field(default_factory=dict)     # binding index -> aliased var
    params: list = field(default_factory=list)
    # filled by find_layers
    layers: list = field(default_factory=list)    # the records make_layer built
    anchor: dict = field(default_factory=dict)    # layer index -> anchor binding index
    end: dict = field(default_factory=dict)       # end binding index -> layer index
    skip: set = field(default_factory=set)        # absorbed bindings (not the end)
    vars: dict = field(default_factory=dict)      # tensor id -> var

    @classmethod
    def of(cls, mod) -> "Graph":
        from tvm import relax
        from tvm.ir.expr import Constant

        func = mod["main"]
        bindings = [b for blk in func.body.blocks for b in blk.bindings]
        g = cls(mod=mod, bindings=bindings, params=list(func.params))
        for i, p in enumerate(func.params):
            g.index[p] = f"p{i}"
            g.vars[f"p{i}"] = p
        for i, b in enumerate(bindings):
            g.index[b.var] = i
            g.vars[f"b{i}"] = b.var
            if isinstance(b.value, Constant):
                g.consts[i] = b.value
            elif isinstance(b.value, relax.Var):
                g.alias[i] = b.value
        for i, b in enumerate(bindings):
            for v in relax.analysis.free_vars(b.value):
                k = g.key(v)
                if k is not None:
                    g.users.setdefault(k, []).append(i)
        for v in relax.analysis.free_vars(func.body.body):
            k = g.key(v)
            if k is not None:
                g.users.setdefault(k, []).append(-1)
        return g

    def key(self, v):
        """Binding index (or ``"p<i>"``) of a var, aliases followed; None if unknown."""
        k = self.index.get(v)
        seen = 0
        while isinstance(k, int) and k in self.alias and seen < 64:
            k = self.index.get(self.alias[k])
            seen += 1
        return k

    def tid(self, v) -> str:
        k = self.key(v)
        return k if isinstance(k, str) else f"b{k}"

    def const(self, e):
        """numpy value of a constant expression (inline or bound), else None."""
        from tvm import relax
        from tvm.ir.expr import Constant

        if isinstance(e, Constant):
            return e.value.numpy()
        if isinstance(e, relax.Var):
            k = self.key(e)
            if isinstance(k, int) and k in self.consts:
                return self.consts[k].value.numpy()
        return None


def _chan_vector(arr, ndim: int, axis: int, c: int):
    """A per-channel vector (length c) from a constant that varies only along ``axis``."""
    a = np.asarray(arr, np.float64)
    if a.ndim > ndim:
        return None
    shape = (1,) * (ndim - a.ndim) + a.shape
    axis %= ndim
    if any(s != 1 for i, s in enumerate(shape) if i != axis) or shape[axis] not in (1, c):
        return None
    return np.broadcast_to(a.reshape(-1), (c,)).copy()


def _absorb(g: Graph, i: int, kind: str, out_shape, ch_axis: int, claimed: set):
    """Walk the single-user chain after the layer anchored at binding ``i`` and absorb the
    elementwise ops VTA's ALU computes: ``(scale, shift, lo, hi, residual, chain, end)`` --
    the per-channel affine, the clip bounds, the residual operand (or None), the absorbed
    binding indices and the last binding of the layer."""
    from tvm import relax

    c = out_shape[ch_axis]
    scale, shift = np.ones(c), np.zeros(c)
    lo, hi = -math.inf, math.inf
    residual, stage, chain = None, 0, []
    cur = i
    while True:
        us = g.users.get(cur, [])
        if len(us) != 1 or us[0] == -1:
            break
        j = us[0]
        if j in claimed:  # absorbed by an earlier layer (e.g. its residual add)
            break
        ub = g.bindings[j]
        uop = _op_name(ub.value)
        if uop is None or _shape(ub.var) != out_shape or _dtype(ub.var) != "float32":
            break
        args = _call_args(ub.value)
        mine = [k for k, a_ in enumerate(args) if g.key(a_) == cur]
        if len(mine) != 1:
            break
        others = [a_ for k, a_ in enumerate(args) if k != mine[0]]
        cv = g.const(others[0]) if len(others) == 1 else None
        vec = _chan_vector(cv, len(out_shape), ch_axis, c) if cv is not None else None
        affine_ok = stage == 0 and kind != "batch_matmul"
        if uop == "relax.add" and vec is not None and affine_ok:
            shift = shift + vec
        elif uop == "relax.subtract" and vec is not None and affine_ok and mine[0] == 0:
            shift = shift - vec
        elif uop == "relax.multiply" and vec is not None and affine_ok:
            scale, shift = scale * vec, shift * vec
        elif uop == "relax.divide" and vec is not None and affine_ok and mine[0] == 0:
            scale, shift = scale / vec, shift / vec
        elif uop == "relax.add" and cv is None and len(others) == 1 and affine_ok and \
                _shape(others[0]) == out_shape and _dtype(others[0]) == "float32" and \
                isinstance(others[0], relax.Var):
            residual, stage = others[0], 1
        elif uop == "relax.nn.relu":
            lo, stage = max(lo, 0.0), 2
        elif uop == "relax.clip" and len(args) == 3 and len(mine) == 1 and mine[0] == 0:
            try:
                lo = max(lo, float(getattr(args[1].value, "value", args[1].value)))
                hi = min(hi, float(getattr(args[2].value, "value", args[2].value)))
            except AttributeError:
                break
            stage = 2
        elif uop in _CLIP_LO | _CLIP_HI and cv is not None and np.size(cv) == 1:
            v = float(np.asarray(cv).reshape(-1)[0])
            if uop in _CLIP_LO:
                lo = max(lo, v)
            else:
                hi = min(hi, v)
            stage = 2
        else:
            break
        chain.append(j)
        cur = j
    return scale, shift, lo, hi, residual, chain, cur


def find_layers(mod, task_name, make_layer) -> Graph:
    """The quantizable layers of a prepared module (:func:`prepare`), in dataflow order.

    task_name: ``(kind, workload dict) -> name`` of the accelerator task running such a
        layer, or None (the layer stays in float on the CPU).
    make_layer: builds one layer's record from keywords (``index, name, kind, workload,
        weight, scale, shift, data, output, other, residual, clip, attrs, absorbed``); the
        records are ``Graph.layers``, read back by :func:`calibrate` and :func:`rewrite`.
    """
    g = Graph.of(mod)
    first_conv = True
    claimed: set[int] = set()
    for i, b in enumerate(g.bindings):
        call = b.value
        op = _op_name(call)
        if op == "relax.nn.conv2d":
            is_first, first_conv = first_conv, False
            a = call.attrs
            x, w = call.args[0], g.const(call.args[1])
            ds, os_ = _shape(x), _shape(b.var)
            if is_first or w is None or ds is None or os_ is None or \
                    str(a.data_layout) != "NCHW" or str(a.kernel_layout) != "OIHW" or \
                    _dtype(x) != "float32":
                continue
            pad = [int(p) for p in a.padding]
            pad = pad * 2 if len(pad) == 2 else pad
            wl = conv_workload_dict(ds, w.shape, os_, a.strides, pad, a.dilation, a.groups)
            kind, ch_axis = "conv2d", 1
            attrs = dict(strides=tuple(int(s) for s in a.strides), padding=tuple(pad),
                         dilation=tuple(int(d) for d in a.dilation), groups=int(a.groups))
            other = None
        elif op == "relax.matmul" and len(call.args) == 2:
            x, y = call.args
            sa, sb = _shape(x), _shape(y)
            if sa is None or sb is None or _dtype(x) != "float32" or _dtype(y) != "float32" \
                    or g.const(x) is not None:
                continue
            w = g.const(y)
            res = matmul_workload_dict(sa, sb, w is not None)
            if res is None:
                continue
            kind, wl = res
            ch_axis, attrs = -1, {}
            other = None if w is not None else y
        else:
            continue
        name = task_name(kind, wl)
        if name is None:
            continue
        out_shape = _shape(b.var)
        scale, shift, lo, hi, residual, chain, cur = _absorb(g, i, kind, out_shape, ch_axis,
                                                             claimed)
        li = len(g.layers)
        spec = make_layer(
            index=li, name=name, kind=kind, workload=dict(wl),
            weight=None if kind == "batch_matmul" else np.asarray(w, np.float32),
            scale=scale, shift=shift, data=g.tid(x), output=f"b{cur}",
            other=g.tid(other) if other is not None else None,
            residual=g.tid(residual) if residual is not None else None,
            clip=None if (lo == -math.inf and hi == math.inf) else (lo, hi), attrs=attrs,
            absorbed=[_op_name(g.bindings[j].value) for j in chain])
        g.layers.append(spec)
        g.anchor[li] = i
        g.end[cur] = li
        claimed.update(chain)
        g.skip.update([i] + chain[:-1] if chain else [])
    return g


# ============================================================================ calibration
def _with_outputs(g: Graph, ids: list[str]):
    """A copy of the module whose ``main`` returns the tensors ``ids`` (a tuple)."""
    import tvm
    from tvm import relax

    func = g.mod["main"]
    outs = [g.vars[t] for t in ids]
    body = relax.SeqExpr(func.body.blocks, relax.Tuple(outs))
    new = relax.Function(func.params, body, relax.TupleType([v.ty for v in outs]),
                         func.is_pure, func.attrs)
    mod = tvm.IRModule({gv: f for gv, f in g.mod.functions.items() if gv.name_hint != "main"})
    mod["main"] = new
    return relax.transform.Normalize()(mod)


def _target():
    import tvm

    return tvm.target.Target({"kind": "llvm"})


def compile_module(mod):
    """``tvm.compile`` for this CPU (llvm, default pipeline); errors become ModelError."""
    import tvm
    from tvm import relax

    from tvm_plugin.frontend import resolve_target

    try:
        target = resolve_target("llvm").tvm
        mod = relax.transform.ConvertToDataflow()(mod)
        return tvm.compile(mod, target=target)
    except Exception as exc:  # noqa: BLE001
        msg = " ".join(str(exc).split())[:300]
        raise ModelError(f"TVM failed to compile the model for the CPU: {type(exc).__name__}: "
                         f"{msg}") from None


def calibrate(g: Graph, samples: list[dict], input_names: list[str]) -> dict[str, float]:
    """max |x| of every tensor a quantized layer reads or writes, over ``samples``."""
    import tvm
    from tvm import relax

    ids: list[str] = []
    for sp in g.layers:
        for t in (sp.data, sp.other, sp.residual, sp.output):
            if t is not None and t not in ids:
                ids.append(t)
    if not ids:
        return {}
    ex = compile_module(_with_outputs(g, ids))
    vm = relax.VirtualMachine(ex, tvm.cpu())
    ranges = {t: 0.0 for t in ids}
    for s in samples:
        outs = vm["main"](*[tvm.runtime.tensor(s[n]) for n in input_names])
        for t, o in zip(ids, outs):
            a = o.numpy()
            if a.size:
                ranges[t] = max(ranges[t], float(np.max(np.abs(a))))
    return ranges


# ============================================================================ rewrite
def _const(v, dtype):
    from tvm import relax

    return relax.const(np.asarray(v, dtype=dtype), dtype)


def rewrite(g: Graph, qlayers: list[IntLayer], exps: dict[str, int]):
    """The integer module (dataflow blocks restored); see the module docstring.
    ``exps``: every quantized tensor id's exponent (scale ``2**-e``)."""
    import tvm
    from tvm import relax

    R = relax.op
    by_layer = {q.index: q for q in qlayers}

    @relax.expr_functor.mutator
    class _Rewriter(relax.PyExprMutator):
        def __init__(self, mod):
            super().__init__(mod)
            self.ints: dict[str, object] = {}  # tensor id -> int8 var (at exps[id])

        def quant(self, tid: str):
            if tid in self.ints:
                return self.ints[tid]
            x = self.visit_expr(g.vars[tid])
            e = exps[tid]
            y = R.multiply(x, _const(2.0 ** e, "float32"))
            y = R.clip(R.round(y), -128, 127)
            q = self.builder_.emit(R.astype(y, "int8"))
            self.ints[tid] = q
            return q

        def layer(self, q: IntLayer):
            sp = g.layers[q.index]
            qx = self.quant(sp.data)
            if sp.kind == "conv2d":
                acc = R.nn.conv2d(qx, _const(q.qweight, "int8"), strides=sp.attrs["strides"],
                                  padding=sp.attrs["padding"], dilation=sp.attrs["dilation"],
                                  groups=sp.attrs.get("groups", 1), out_dtype="int32")
                bshape = (1, -1, 1, 1)
            elif sp.kind == "dense":
                acc = R.matmul(qx, _const(q.qweight, "int8"), out_dtype="int32")
                bshape = (-1,)
            else:
                acc = R.matmul(qx, self.quant(sp.other), out_dtype="int32")
                bshape = None
            acc = self.builder_.emit(acc)
            if q.qbias is not None:
                acc = self.builder_.emit(R.add(acc, _const(q.qbias.reshape(bshape), "int32")))
            if sp.residual is not None:
                r = self.builder_.emit(R.astype(self.quant(sp.residual), "int32"))
                k = q.res_shift
                if k > 0:
                    r = self.builder_.emit(R.left_shift(r, _const(k, "int32")))
                elif k < 0:
                    r = self.builder_.emit(R.add(r, _const(1 << (-k - 1), "int32")))
                    r = self.builder_.emit(R.right_shift(r, _const(-k, "int32")))
                acc = self.builder_.emit(R.add(acc, r))
            if q.round:
                acc = self.builder_.emit(R.add(acc, _const(1 << (q.shift - 1), "int32")))
            acc = self.builder_.emit(R.right_shift(acc, _const(q.shift, "int32")))
            acc = self.builder_.emit(R.clip(acc, q.clip_lo, q.clip_hi))
            out = self.builder_.emit(R.astype(acc, "int8"))
            self.ints[sp.output] = out
            deq = R.multiply(R.astype(out, "float32"), _const(2.0 ** -q.e_y, "float32"))
            return self.builder_.emit(deq)

        def visit_var_binding_(self, binding):
            k = g.index.get(binding.var)
            if k in g.skip:
                return
            li = g.end.get(k)
            if li is None or li not in by_layer:
                return super().visit_var_binding_(binding)
            new = self.layer(by_layer[li])
            self.set_var_remap(binding.var.vid if hasattr(binding.var, "vid") else binding.var,
                               new)

    rw = _Rewriter(g.mod)
    func = rw.visit_expr(g.mod["main"])
    mod = tvm.IRModule({gv: f for gv, f in g.mod.functions.items() if gv.name_hint != "main"})
    mod["main"] = func
    mod = relax.transform.Normalize()(mod)
    mod = relax.transform.ConvertToDataflow()(mod)
    return relax.transform.DeadCodeElimination()(mod)
