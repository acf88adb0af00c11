"""Straightforward numpy references for the functional checks (int arithmetic only).

These do not share code with the compiler or simulator: they compute conv2d / dense
directly on NCHW / [N, K] int8 data with int64 accumulation, wrap to int32 (VTA's
accumulator), then apply the epilogue exactly as VTA's ALU does.
"""
from __future__ import annotations

import numpy as np

from dcoc.targets.vta.workloads import Conv2DWorkload, DenseWorkload, Epilogue

__all__ = ["reference_conv2d", "reference_dense", "apply_epilogue", "wrap_int32"]


def wrap_int32(x: np.ndarray) -> np.ndarray:
    """Two's-complement wrap of an integer array to int32."""
    return ((np.asarray(x, dtype=np.int64) + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)


def apply_epilogue(acc: np.ndarray, ep: Epilogue | None, bias=None, residual=None,
                   channel_axis: int = 1) -> np.ndarray:
    """int32 accumulators -> int8 (or the int32 input itself when ``ep`` is None)."""
    if ep is None:
        return wrap_int32(acc)
    y = np.asarray(acc, dtype=np.int64)
    if ep.bias:
        b = np.zeros(y.shape[channel_axis], np.int64) if bias is None else np.asarray(bias, np.int64)
        shape = [1] * y.ndim
        shape[channel_axis] = -1
        y = wrap_int32(y + b.reshape(shape)).astype(np.int64)
    if ep.residual:
        r = np.zeros_like(y) if residual is None else np.asarray(residual, np.int64)
        y = wrap_int32(y + r).astype(np.int64)
    if ep.round and ep.shift and ep.shift > 0:
        y = wrap_int32(y + (1 << (ep.shift - 1))).astype(np.int64)
    if ep.shift is not None:
        s = ep.shift
        y = wrap_int32(y >> s if s >= 0 else y << (-s)).astype(np.int64)
    if ep.clip is not None:
        lo, hi = ep.clip
        y = np.minimum(y, hi)
        y = np.maximum(y, lo)
    return y.astype(np.int32).astype(np.int8)  # VTA stores the low 8 bits


def reference_conv2d(wl: Conv2DWorkload, data, weight) -> np.ndarray:
    """int32 accumulators of conv2d (NCHW x OIHW, I = in channels per group), computed
    with explicit loops over the kernel window and the groups, and int64 sums."""
    x = np.asarray(data, dtype=np.int64)
    w = np.asarray(weight, dtype=np.int64)
    pt, pl, pb, pr = wl.padding
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    sh, sw = wl.stride
    dh, dw = wl.dilation
    OH, OW = wl.out_height, wl.out_width
    out = np.zeros((x.shape[0], w.shape[0], OH, OW), dtype=np.int64)
    cin, cout = w.shape[1], w.shape[0] // wl.groups
    for g in range(wl.groups):
        xg, wg = xp[:, g * cin:(g + 1) * cin], w[g * cout:(g + 1) * cout]
        for kh in range(wl.kernel[0]):
            for kw in range(wl.kernel[1]):
                win = xg[:, :, kh * dh: kh * dh + (OH - 1) * sh + 1: sh,
                         kw * dw: kw * dw + (OW - 1) * sw + 1: sw]        # N, CI/G, OH, OW
                out[:, g * cout:(g + 1) * cout] += np.einsum("nchw,oc->nohw", win, wg[:, :, kh, kw])
    return wrap_int32(out)


def reference_dense(wl: DenseWorkload, data, weight) -> np.ndarray:
    """int32 accumulators of data[N, K] @ weight[M, K]^T."""
    x = np.asarray(data, dtype=np.int64)
    w = np.asarray(weight, dtype=np.int64)
    return wrap_int32(x @ w.T)
