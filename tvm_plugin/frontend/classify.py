"""TIR block classification: the ``(kind, workload, macs)`` of a fused PrimFunc, recovered
from its anchor block (``conv2d_nchw`` / ``group_conv2d_nchw`` / ``matmul``)."""
from __future__ import annotations

import contextlib
import math
import re

from tvm_plugin.frontend.naming import _conv_kind, _conv_macs, _conv_workload, _mm_macs


def _stmt_children(s) -> list:
    out = []
    for attr in ("block", "body", "init", "then_case", "else_case"):
        c = getattr(s, attr, None)
        if c is not None and not isinstance(c, (int, float, str)):
            out.append(c)
    seq = getattr(s, "seq", None)
    if seq is not None:
        out.extend(seq)
    return out


def _blocks(func) -> list:
    """All SBlocks of a PrimFunc, in program order."""
    from tvm.s_tir.stmt import SBlock

    found, stack = [], [func.body]
    while stack:
        s = stack.pop()
        if isinstance(s, SBlock):
            found.append(s)
        stack.extend(reversed(_stmt_children(s)))
    return found


def _expr_nodes(e, cls) -> list:
    """Sub-expressions of ``e`` that are instances of ``cls`` (pre-order)."""
    from tvm.ir.expr import Expr

    out, stack = [], [e]
    while stack:
        x = stack.pop()
        if isinstance(x, cls):
            out.append(x)
        kids = []
        for attr in ("a", "b", "value", "condition", "true_value", "false_value"):
            c = getattr(x, attr, None)
            if isinstance(c, Expr):
                kids.append(c)
        for attr in ("args", "indices"):
            seq = getattr(x, attr, None)
            if seq is not None and not isinstance(seq, (str, bytes)):
                with contextlib.suppress(TypeError):
                    kids.extend(c for c in seq if isinstance(c, Expr))
        stack.extend(reversed(kids))
    return out


def _buf(load):
    """The buffer a TIR load reads (``BufferLoad.buffer`` / 0.27's ``TensorLoad.source``)."""
    b = getattr(load, "buffer", None)
    return b if b is not None else load.source


def _ints(shape) -> tuple[int, ...]:
    return tuple(int(d) for d in shape)


def _analyze_conv_block(blocks, conv) -> tuple[str, dict]:
    """Recover the conv2d workload from TOPI's ``conv2d_nchw``/``group_conv2d_nchw`` block."""
    from tvm import sym, tirx
    from tvm.ir.expr import TensorLoad

    store = conv.body
    out_shape = _ints(store.buffer.shape)
    mul = _expr_nodes(store.value, tirx.Mul)[0]
    data_load = _expr_nodes(mul.a, TensorLoad)[0]
    kern_load = _expr_nodes(mul.b, TensorLoad)[0]
    kshape = _ints(_buf(kern_load).shape)
    ry, rx = kern_load.indices[2], kern_load.indices[3]
    yy, xx = store.indices[2], store.indices[3]

    def lin(expr, v_out, v_red):
        c = sym.detect_linear_equation(expr, [v_out, v_red])
        return int(c[0]), int(c[1])

    sh, dh = lin(data_load.indices[2], yy, ry)
    sw, dw = lin(data_load.indices[3], xx, rx)
    padded = _ints(_buf(data_load).shape)
    src_shape, pt, pl = padded, 0, 0
    producer = next((b for b in blocks if b.body is not None and
                     isinstance(b.body, tirx.BufferStore) and
                     b.body.buffer.same_as(_buf(data_load))), None)
    if producer is not None:
        loads = _expr_nodes(producer.body.value, TensorLoad)
        if loads:
            src = loads[0]
            src_shape = _ints(_buf(src).shape)
            i2, i3 = producer.body.indices[2], producer.body.indices[3]
            c2 = sym.detect_linear_equation(src.indices[2], [i2])
            c3 = sym.detect_linear_equation(src.indices[3], [i3])
            pt, pl = -int(c2[1]), -int(c3[1])
    n, c, h, w = src_shape
    pb, pr = padded[2] - h - pt, padded[3] - w - pl
    g = max(1, c // kshape[1])
    wl = _conv_workload(n, c, h, w, kshape[0], kshape[2], kshape[3], sh, sw, pt, pl, pb, pr,
                        dh, dw, g, out_shape[2], out_shape[3])
    return _conv_kind(g, c), wl


def _analyze_matmul_block(mm) -> tuple[str, dict]:
    from tvm import tirx
    from tvm.ir.expr import TensorLoad

    store = mm.body
    out = _ints(store.buffer.shape)
    mul = _expr_nodes(store.value, tirx.Mul)[0]
    b_load = _expr_nodes(mul.b, TensorLoad)[0]
    k = math.prod(int(iv.dom.extent) for iv in mm.iter_vars if int(iv.iter_type) == 2)
    if len(_buf(b_load).shape) <= 2 or len(out) < 3:
        return "dense", dict(batch=1, m=math.prod(out[:-1]), n=out[-1], k=k)
    return "batch_matmul", dict(batch=math.prod(out[:-2]), m=out[-2], n=out[-1], k=k)


_CONV_BLOCK = re.compile(r"^(group_)?conv2d_nchw")
_MM_BLOCK = re.compile(r"^(matmul|T_matmul|T_batch_matmul|T_dense|dense|batch_matmul)")


def classify_primfunc(func) -> tuple[str, dict, int]:
    """``(kind, workload, macs)`` of a (fused) PrimFunc from its anchor block."""
    blocks = _blocks(func)
    for b in blocks:
        if _CONV_BLOCK.match(b.name_hint) and len(b.body.buffer.shape) == 4:
            try:
                kind, wl = _analyze_conv_block(blocks, b)
                return kind, wl, _conv_macs(wl)
            except Exception:  # noqa: BLE001 - unexpected TIR shape: keep the kind only
                return ("grouped_conv2d" if b.name_hint.startswith("group") else "conv2d"), \
                    {}, 0
    for b in blocks:
        if _MM_BLOCK.match(b.name_hint) and any(int(iv.iter_type) == 2 for iv in b.iter_vars):
            try:
                kind, wl = _analyze_matmul_block(b)
                return kind, wl, _mm_macs(wl)
            except Exception:  # noqa: BLE001
                return "dense", {}, 0
    return "other", {}, 0
