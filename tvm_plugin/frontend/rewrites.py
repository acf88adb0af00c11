"""Graph rewrites applied before lowering on TVM targets (CPU/GPU), never on the VTA path
(whose quantizer sees the model as imported): what ONNX Runtime's graph optimizer and
kernels do that TVM's stock pipeline does not.

* :func:`fold_affine_into_conv`: batch norm and bias folded into the conv weights.
* :func:`fast_erf`: ``erf`` (exact GELU) as TVM's vectorizable rational approximation.
* :func:`sum_as_adds`: ONNX ``Sum`` (residual joins) as adds the conv before it can fuse.

:func:`rewrite_for_tvm` applies them all; ``lower_for_tuning`` and ``compile_model`` call it, so
task keys and compiled functions agree.
"""
from __future__ import annotations

import numpy as np

from tvm_plugin.frontend.common import _mutate_functions, _static_shape


def rewrite_for_tvm(mod):
    """Every rewrite of this module, in order, on an unfused Relax module."""
    return fast_erf(fold_affine_into_conv(sum_as_adds(mod)))


def _op_name(e):
    """The operator name of a Relax call (``"relax.add"``), else None."""
    import tvm
    from tvm import relax

    return e.op.name if isinstance(e, relax.Call) and isinstance(e.op, tvm.ir.Op) else None


def _bindings(funcs):
    """``(bound, users)`` over the dataflow of Relax functions ``funcs``: each bound var's
    value, and each var's users (the vars bound from it; ``None`` for a function's output)."""
    from tvm import relax

    bound: dict = {}
    users: dict = {}
    for f in funcs:
        if not isinstance(f, relax.Function) or not isinstance(f.body, relax.SeqExpr):
            continue
        for block in f.body.blocks:
            for b in block.bindings:
                if isinstance(b, relax.VarBinding):
                    bound[b.var] = b.value
                    for v in relax.analysis.free_vars(b.value):
                        users.setdefault(v, []).append(b.var)
        for v in relax.analysis.free_vars(f.body.body):
            users.setdefault(v, []).append(None)
    return bound, users


#: the per-channel affine steps :func:`fold_affine_into_conv` folds: (scale, shift) of
#: ``y = op(x, k)`` as ``y = scale * x + shift``
_AFFINE = {
    "relax.add": lambda k: (1.0, k),
    "relax.subtract": lambda k: (1.0, -k),
    "relax.multiply": lambda k: (k, 0.0),
    "relax.divide": lambda k: (1.0 / k, 0.0),
}
_COMMUTATIVE = {"relax.add", "relax.multiply"}


def fold_affine_into_conv(mod):
    """Fold the per-output-channel scale and shift after each constant-weight ``conv2d``
    (its bias and the batch norm that DecomposeOpsForInference spelled as
    ``subtract/divide/multiply/add``) into the conv's weights and one bias ``add``.

    ``conv2d(x, W) + B - m) / s * g + b`` becomes ``conv2d(x, W * g/s) + ((B - m) * g/s + b)``:
    what ONNX Runtime's graph optimizer does, and what leaves each fused conv kernel one
    add in its epilogue instead of four operations (one a division). Only chains whose
    intermediate results have no other use are folded; the arithmetic is done in float64
    and rounded once to the weights' dtype.
    """
    from tvm import relax
    from tvm.ir.expr import Constant

    func = mod["main"] if "main" in [gv.name_hint for gv in mod.get_global_vars()] else None
    if not isinstance(func, relax.Function) or not isinstance(func.body, relax.SeqExpr):
        return mod
    bound, users = _bindings([func])

    def const(e):
        e = bound.get(e, e) if isinstance(e, relax.Var) else e
        return e.value.numpy() if isinstance(e, Constant) else None

    def channel_vector(k, channels):
        """k as a float64 vector over the channels, or None if k is not per-channel."""
        if k is None or k.ndim > 4 or not np.issubdtype(k.dtype, np.floating):
            return None
        k4 = k.reshape((1,) * (4 - k.ndim) + k.shape)
        if k4.shape[0] != 1 or k4.shape[2:] != (1, 1) or k4.shape[1] not in (1, channels):
            return None
        return np.broadcast_to(k4.reshape(-1).astype("float64"), (channels,))

    rewrites: dict = {}  # chain end var -> (conv call, new weight, shift)
    dropped: set = set()
    for var, value in bound.items():
        if _op_name(value) != "relax.nn.conv2d":
            continue
        attrs = value.attrs
        w = const(value.args[1])
        shape = _static_shape(var.ty)
        if (w is None or w.ndim != 4 or not np.issubdtype(w.dtype, np.floating)
                or shape is None or len(shape) != 4 or str(attrs.data_layout) != "NCHW"
                or str(attrs.kernel_layout) != "OIHW" or str(attrs.out_layout) != "NCHW"
                or str(var.ty.dtype) != str(w.dtype)):
            continue
        channels = shape[1]
        scale, shift = np.ones(channels), np.zeros(channels)
        chain, cur = [], var
        while len(users.get(cur, [])) == 1 and users[cur][0] is not None:
            nxt = users[cur][0]
            call = bound.get(nxt)
            name = _op_name(call)
            if name not in _AFFINE or _static_shape(nxt.ty) != shape:
                break
            a0, a1 = call.args[0], call.args[1]
            if a0.same_as(cur):
                k = channel_vector(const(a1), channels)
            elif a1.same_as(cur) and name in _COMMUTATIVE:
                k = channel_vector(const(a0), channels)
            else:
                break
            if k is None:
                break
            with np.errstate(all="ignore"):
                s, t = _AFFINE[name](k)
                scale, shift = scale * s, shift * s + t
            chain.append(nxt)
            cur = nxt
        if len(chain) < 2 or not (np.all(np.isfinite(scale)) and np.all(np.isfinite(shift))):
            continue
        new_w = (w.astype("float64") * scale[:, None, None, None]).astype(w.dtype)
        rewrites[chain[-1]] = (value, new_w, shift.astype(w.dtype).reshape(1, channels, 1, 1))
        dropped.update([var, *chain[:-1]])
    if not rewrites:
        return mod

    @relax.expr_functor.mutator
    class _Rewrite(relax.PyExprMutator):
        def visit_var_binding_(self, binding):  # noqa: N802 - TVM visitor name
            if binding.var in dropped:
                return
            if binding.var not in rewrites:
                return super().visit_var_binding_(binding)
            conv, new_w, shift = rewrites[binding.var]
            data = self.visit_expr(conv.args[0])
            out = self.builder_.emit(relax.Call(conv.op, [data, relax.const(new_w)],
                                                conv.attrs))
            value = self.builder_.normalize(relax.op.add(out, relax.const(shift)))
            self.builder_.emit_normalized(relax.VarBinding(binding.var, value))

    return _mutate_functions(_Rewrite(mod), mod)


def fast_erf(mod):
    """Replace each float32 ``erf`` (the exact GELU of BERT-style FFNs) by TVM's
    ``topi.fast_erf``, a rational approximation (abs error < 4e-7 on float32).

    TVM's LLVM backend otherwise calls libm's scalar ``erff`` once per element, which keeps
    the fused matmul's epilogue from vectorizing; ONNX Runtime's Erf/Gelu kernels use a
    vectorized approximation too.
    """
    import tvm
    from tvm import relax, topi

    @relax.expr_functor.mutator
    class _FastErf(relax.PyExprMutator):
        def visit_call_(self, call):  # noqa: N802 - TVM visitor name
            call = super().visit_call_(call)
            if (isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.erf"
                    and str(getattr(call.args[0].ty, "dtype", "")) == "float32"):
                return self.builder_.call_te(topi.fast_erf, call.args[0],
                                             primfunc_name_hint="fast_erf")
            return call

    erf = tvm.ir.Op.get("relax.erf")
    found = []
    for f in mod.functions.values():
        if isinstance(f, relax.Function):
            relax.analysis.post_order_visit(
                f, lambda e: found.append(1) if isinstance(e, relax.Call) and e.op.same_as(erf)
                else None)
    if not found:
        return mod
    return _mutate_functions(_FastErf(mod), mod)


def sum_as_adds(mod):
    """Replace ``sum(stack((broadcast_to(a, S), broadcast_to(b, S), ...)), axis=0)`` -- how
    TVM's ONNX importer spells ONNX ``Sum``, e.g. the residual join of Caffe2-exported
    ResNets -- by ``a + b + ...``.

    The stacked form copies every operand into a new tensor and reduces it in a kernel of
    its own, and the ``broadcast_to`` ends the fusion group of the conv before it; as adds,
    the join (and the ReLU after it) fuse into that conv's epilogue, as ONNX Runtime fuses
    ``Conv + Sum + Relu``.  Only stacks whose single use is that sum are rewritten; the
    result is broadcast to ``S`` where the operands alone would not reach it.
    """
    from tvm import relax

    bound, users = _bindings(mod.functions.values())

    rewrites: dict = {}  # sum var -> (operands, output shape)
    dropped: set = set()
    for var, value in bound.items():
        if _op_name(value) != "relax.sum" or not isinstance(value.args[0], relax.Var):
            continue
        stacked = value.args[0]
        stack = bound.get(stacked)
        axis = value.attrs.axis
        if (_op_name(stack) != "relax.stack" or users.get(stacked) != [var]
                or axis is None or [int(a) for a in axis] != [0] or bool(value.attrs.keepdims)
                or int(stack.attrs.axis) != 0 or not isinstance(stack.args[0], relax.Tuple)):
            continue
        out_shape = _static_shape(var.ty)
        dtype = str(var.ty.dtype)
        operands, gone = [], []
        for t in stack.args[0].fields:
            src = bound.get(t) if isinstance(t, relax.Var) else None
            if _op_name(src) == "relax.broadcast_to":
                operands.append(src.args[0])
                if users.get(t) == [stacked]:
                    gone.append(t)
            else:
                operands.append(t)
        if (out_shape is None or len(operands) < 2
                or any(str(getattr(o.ty, "dtype", "")) != dtype for o in operands)):
            continue
        rewrites[var] = (operands, out_shape)
        dropped.update([stacked, *gone])
    if not rewrites:
        return mod

    @relax.expr_functor.mutator
    class _SumAsAdds(relax.PyExprMutator):
        def visit_var_binding_(self, binding):  # noqa: N802 - TVM visitor name
            if binding.var in dropped:
                return
            if binding.var not in rewrites:
                return super().visit_var_binding_(binding)
            operands, shape = rewrites[binding.var]
            acc = self.visit_expr(operands[0])
            for o in operands[1:]:
                acc = self.builder_.normalize(relax.op.add(acc, self.visit_expr(o)))
                if o is not operands[-1]:
                    acc = self.builder_.emit(acc)
            if _static_shape(acc.ty) != shape:
                acc = self.builder_.normalize(relax.op.broadcast_to(acc, relax.ShapeExpr(shape)))
            self.builder_.emit_normalized(relax.VarBinding(binding.var, acc))

    return _mutate_functions(_SumAsAdds(mod), mod)
