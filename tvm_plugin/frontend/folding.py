"""Constant weight arithmetic folded in numpy (BatchNorm statistics, transposed Gemm
weights, ``ConstantOfShape`` weights ...) instead of TVM's FoldConstant."""
from __future__ import annotations

import math

import numpy as np

from tvm_plugin.frontend.common import _is_tensor, _mutate_functions, _static_shape


def _np_binary(fn):
    return lambda call, xs: fn(xs[0], xs[1])


def _np_expand_dims(call, xs):
    x = xs[0]
    ndim = x.ndim + len(call.attrs.axis)
    axes = sorted(int(a) % ndim for a in call.attrs.axis)
    for a in axes:
        x = np.expand_dims(x, a)
    return x


def _np_permute(call, xs):
    axes = call.attrs.axes
    return np.transpose(xs[0], None if axes is None else [int(a) for a in axes])



_FOLDERS = {
    "relax.add": _np_binary(np.add),
    "relax.subtract": _np_binary(np.subtract),
    "relax.multiply": _np_binary(np.multiply),
    "relax.divide": _np_binary(np.divide),
    "relax.power": _np_binary(np.power),
    "relax.maximum": _np_binary(np.maximum),
    "relax.minimum": _np_binary(np.minimum),
    "relax.sqrt": lambda call, xs: np.sqrt(xs[0]),
    "relax.rsqrt": lambda call, xs: 1 / np.sqrt(xs[0]),
    "relax.negative": lambda call, xs: -xs[0],
    "relax.exp": lambda call, xs: np.exp(xs[0]),
    "relax.expand_dims": _np_expand_dims,
    "relax.permute_dims": _np_permute,
    "relax.reshape": lambda call, xs: xs[0],  # reshaped to the output shape below
    "relax.broadcast_to": lambda call, xs: xs[0],  # broadcast to the output shape below
    "relax.squeeze": lambda call, xs: xs[0],
    "relax.flatten": lambda call, xs: xs[0],
    "relax.astype": lambda call, xs: xs[0],
    "relax.isnan": lambda call, xs: np.isnan(xs[0]),
    "relax.isinf": lambda call, xs: np.isinf(xs[0]),
    "relax.where": lambda call, xs: np.where(xs[0], xs[1], xs[2]),
    "relax.equal": _np_binary(np.equal),
    "relax.not_equal": _np_binary(np.not_equal),
    "relax.less": _np_binary(np.less),
    "relax.less_equal": _np_binary(np.less_equal),
    "relax.greater": _np_binary(np.greater),
    "relax.greater_equal": _np_binary(np.greater_equal),
    "relax.logical_not": lambda call, xs: np.logical_not(xs[0]),
}
_FLOAT_ONLY = {"relax.divide", "relax.power", "relax.sqrt", "relax.rsqrt", "relax.exp"}
#: folds that produce more than this many elements are left to TVM's FoldConstant
_FOLD_LIMIT = 1 << 28


def _fold_constants_numpy(mod):
    """Fold constant weight arithmetic (BatchNorm statistics, transposed Gemm weights,
    ``ConstantOfShape`` weights ...) in numpy.

    TVM's FoldConstant compiles every distinct constant expression with LLVM first, which
    took 4 s on ResNet-18 and 12 s on light_resnet50; numpy gives the same IEEE results
    in milliseconds, leaving FoldConstant (still run by the tuning pipeline) almost nothing.
    """
    import tvm
    from tvm import relax
    from tvm.ir.expr import Constant

    @relax.expr_functor.mutator
    class _Fold(relax.PyExprMutator):
        def _const_of(self, arg):
            if isinstance(arg, Constant):
                return arg
            if isinstance(arg, relax.Var):
                b = self.lookup_binding(arg)
                if isinstance(b, Constant):
                    return b
            return None

        def visit_call_(self, call):  # noqa: N802 - TVM visitor name
            call = super().visit_call_(call)
            if not isinstance(call.op, tvm.ir.Op):
                return call
            name = call.op.name
            fn = _FOLDERS.get(name)
            if fn is None or not call.args:
                return call
            tensors = [a for a in call.args if _is_tensor(a)]
            consts = [self._const_of(a) for a in tensors]
            if not tensors or any(c is None for c in consts):
                return call
            ty = self.builder_.normalize(call).ty
            shape = _static_shape(ty)
            dtype = getattr(ty, "dtype", None)
            if shape is None or dtype is None or math.prod(shape) > _FOLD_LIMIT:
                return call
            arrays = [c.value.numpy() for c in consts]
            if name in _FLOAT_ONLY and not all(np.issubdtype(a.dtype, np.floating)
                                               for a in arrays):
                return call
            try:
                with np.errstate(all="ignore"):
                    res = np.asarray(fn(call, arrays))
                    if name in ("relax.reshape", "relax.squeeze", "relax.flatten"):
                        res = res.reshape(shape)
                    elif name == "relax.broadcast_to":
                        res = np.broadcast_to(res, shape)
                    res = res.astype(str(dtype), copy=False)
                    if not res.flags.c_contiguous:  # (ascontiguousarray makes 0-d 1-d)
                        res = res.copy(order="C")
            except Exception:  # noqa: BLE001 - leave anything unusual to TVM
                return call
            if res.shape != shape:
                return call
            return relax.const(res, str(dtype))

    return _mutate_functions(_Fold(mod), mod)
