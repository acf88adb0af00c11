"""Independent integer reference of the quantized layers (numpy only).

Written from the integer semantics in :mod:`dcoc.runtime.quantize` alone: it shares no code with
the VTA compiler, simulator or :mod:`dcoc.targets.vta.reference` (it does not import
``dcoc.targets.vta``).  ``dcoc run`` executes the whole quantized model twice -- once with every
offloaded layer on the simulator, once with this module computing them -- and compares
the outputs bit for bit.

Arithmetic: int8 x int8 products summed exactly (float64 BLAS while every sum is below
2**53, which holds for any K < 2**39, else int64), then wrapped to int32 (VTA's
accumulator); every epilogue step (bias add, residual add, rounding add) wraps to int32;
the shift is arithmetic (floor); the clip is min(hi) then max(lo); the result is int8.
"""
from __future__ import annotations

import numpy as np

__all__ = ["conv2d_int", "matmul_int", "epilogue_int", "wrap32"]


def wrap32(x: np.ndarray) -> np.ndarray:
    """Two's-complement wrap to the int32 range (kept as int64)."""
    x = np.asarray(x, np.int64)
    return (x + 2 ** 31) % 2 ** 32 - 2 ** 31


def conv2d_int(x: np.ndarray, w: np.ndarray, strides, padding, dilation,
               groups: int = 1) -> np.ndarray:
    """NCHW int8 data x OIHW int8 weights (I = channels per group) -> int32 accumulators
    (as int64, wrapped).

    Computed as an im2col matrix product per group: every output pixel's receptive field
    is gathered explicitly (zero padding), then multiplied by the group's flattened
    weights.
    """
    x = np.asarray(x, np.int64)
    w = np.asarray(w, np.int64)
    n, c, h, wd = x.shape
    o, ci, kh, kw = w.shape
    assert ci * groups == c and o % groups == 0, (x.shape, w.shape, groups)
    sh, sw = strides
    dh, dw = dilation
    pt, pl, pb, pr = padding
    xp = np.zeros((n, c, h + pt + pb, wd + pl + pr), np.int64)
    xp[:, :, pt:pt + h, pl:pl + wd] = x
    oh = (h + pt + pb - (dh * (kh - 1) + 1)) // sh + 1
    ow = (wd + pl + pr - (dw * (kw - 1) + 1)) // sw + 1
    cols = np.empty((n, c, kh, kw, oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            r0, c0 = i * dh, j * dw
            cols[:, :, i, j] = xp[:, :, r0:r0 + sh * (oh - 1) + 1:sh, c0:c0 + sw * (ow - 1) + 1:sw]
    cols = cols.reshape(n, groups, ci * kh * kw, oh * ow)
    wg = w.reshape(groups, o // groups, ci * kh * kw)
    acc = _exact_matmul(wg[None], cols)  # n, groups, o / groups, oh*ow
    return wrap32(acc.reshape(n, o, oh, ow))


def _exact_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer matmul of int8-range operands, exact: in float64 (BLAS) while every partial
    sum stays below 2**53 (|a|, |b| <= 128: K < 2**39), else in int64."""
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    k = a.shape[-1]
    bound = int(np.max(np.abs(a), initial=0)) * int(np.max(np.abs(b), initial=0)) * k
    if bound < 2 ** 53:
        return np.rint(np.matmul(a.astype(np.float64), b.astype(np.float64))).astype(np.int64)
    return np.matmul(a, b)


def matmul_int(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """int8 ``a @ b`` (numpy matmul broadcasting) -> int32 accumulators (as int64)."""
    return wrap32(_exact_matmul(a, b))


def epilogue_int(acc: np.ndarray, bias=None, residual=None, channel_axis: int = 1, *,
                 round_: bool, shift: int, clip: tuple[int, int]) -> np.ndarray:
    """Requantize int32 accumulators to int8 (see the module docstring)."""
    y = wrap32(acc)
    if bias is not None:
        shape = [1] * y.ndim
        shape[channel_axis] = -1
        y = wrap32(y + np.asarray(bias, np.int64).reshape(shape))
    if residual is not None:
        y = wrap32(y + np.asarray(residual, np.int64))
    if round_ and shift > 0:
        y = wrap32(y + (1 << (shift - 1)))
    y = np.floor_divide(y, 1 << shift) if shift >= 0 else wrap32(y * (1 << -shift))
    y = np.maximum(np.minimum(y, clip[1]), clip[0])
    return y.astype(np.int8)
