"""Accelerator (VTA) task extraction: walk the unfused Relax graph, find the conv2d / dense /
batch_matmul anchors, absorb their elementwise epilogues, list the rest as CPU ops."""
from __future__ import annotations

import collections
import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from dcoc.tasks import Task, TaskList
from tvm_plugin.frontend.common import _CALL_OPS, _is_tensor, _static_shape
from tvm_plugin.frontend.naming import _conv_kind, _conv_macs, _conv_workload, _mm_macs, _uniquify, task_name


@dataclass
class _Node:
    var: Any
    op: str                       # display name, e.g. "conv2d", "max_pool2d", "add"
    relax_op: str                 # e.g. "relax.nn.conv2d"
    args: list                    # canonical tensor argument vars/consts
    call: Any
    shape: tuple | None
    const: bool
    index: int


#: elementwise ops VTA's ALU applies in a conv/dense epilogue (with a constant operand, or
#: a same-shape activation for add: the residual, DMA'd into the accumulator)
_EPILOGUE_OPS = {"relax.add", "relax.subtract", "relax.multiply", "relax.divide",
                 "relax.nn.relu", "relax.clip", "relax.maximum", "relax.minimum",
                 "relax.right_shift", "relax.left_shift", "tir:maximum", "tir:minimum",
                 "tir:clip"}


def _display_op(name: str) -> str:
    for p in ("relax.nn.", "relax.image.", "relax."):
        if name.startswith(p):
            return name[len(p):]
    return name


def _walk_graph(mod) -> tuple[list[_Node], set, list]:
    """Flatten ``main`` into op nodes in dataflow order, resolving aliases and tuples."""
    import tvm
    from tvm import relax
    from tvm.ir.expr import Constant

    func = mod["main"]
    alias: dict = {}
    tuples: dict = {}
    const_vars: set = set()
    nodes: list[_Node] = []

    def canon(e):
        while isinstance(e, relax.Var) and e in alias:
            e = alias[e]
        return e

    def is_const(e) -> bool:
        e = canon(e)
        if isinstance(e, Constant):
            return True
        if isinstance(e, relax.Var):
            return e in const_vars
        if isinstance(e, relax.Tuple):
            return all(is_const(f) for f in e.fields)
        return not _is_tensor(e)

    def tensor_args(args) -> list:
        out = []
        for a in args:
            a = canon(a)
            if isinstance(a, relax.Var) and a in tuples:
                a = tuples[a]
            if isinstance(a, relax.Tuple):
                out.extend(tensor_args(a.fields))
            elif _is_tensor(a):
                out.append(a)
        return out

    def visit_seq(seq):
        for block in seq.blocks:
            for b in block.bindings:
                visit_binding(b)
        return seq.body

    def visit_binding(b):
        var, v = b.var, b.value
        if isinstance(b, relax.MatchCast) or isinstance(v, relax.Var):
            alias[var] = v
            return
        if isinstance(v, Constant):
            const_vars.add(var)
            return
        if isinstance(v, relax.Tuple):
            tuples[var] = relax.Tuple([canon(f) for f in v.fields])
            if is_const(v):
                const_vars.add(var)
            return
        if isinstance(v, relax.TupleGetItem):
            tv = canon(v.tuple_value)
            src = tuples.get(tv) if isinstance(tv, relax.Var) else tv
            if isinstance(src, relax.Tuple):
                alias[var] = src.fields[v.index]
            elif is_const(tv):
                const_vars.add(var)
            # else: an output of a multi-output op (e.g. dropout): a plain activation
            return
        if isinstance(v, relax.If):
            visit_seq(v.true_branch) if isinstance(v.true_branch, relax.SeqExpr) else None
            visit_seq(v.false_branch) if isinstance(v.false_branch, relax.SeqExpr) else None
            nodes.append(_Node(var, "if", "relax.If", [canon(v.cond)], v, None, False,
                               len(nodes)))
            return
        if isinstance(v, relax.Call):
            if isinstance(v.op, tvm.ir.Op):
                rname = v.op.name
                if rname in _CALL_OPS and v.args and isinstance(v.args[0], relax.GlobalVar):
                    # a PrimFunc the importer emitted directly (e.g. Clip -> maximum1)
                    disp = re.sub(r"\d+$", "", v.args[0].name_hint) or v.args[0].name_hint
                    rname = "tir:" + disp
                    args = tensor_args(v.args[1:])
                else:
                    disp = _display_op(rname)
                    args = tensor_args(v.args)
            else:
                rname = disp = getattr(v.op, "name_hint", None) or "call"
                args = tensor_args(v.args)
            const = all(is_const(a) for a in args) and rname not in (
                "relax.call_pure_packed", "relax.call_dps_packed")
            if const:
                const_vars.add(var)
                return
            nodes.append(_Node(var, disp, rname, args, v, _static_shape(var.ty), False,
                               len(nodes)))
            return
        alias[var] = v  # anything else: transparent

    body = visit_seq(func.body) if isinstance(func.body, relax.SeqExpr) else func.body
    outputs = tensor_args([body]) if body is not None else []
    return nodes, const_vars, [canon(o) for o in outputs]


def _shape_of(e) -> tuple | None:
    return _static_shape(getattr(e, "ty", None))


def _vta_tasks(mod, name: str = "") -> TaskList:
    """conv2d/dense/batch_matmul workloads for VTA (and the CPU), plus the CPU-only ops."""
    from tvm import relax
    from tvm.ir.expr import Constant

    nodes, const_vars, outputs = _walk_graph(mod)

    def is_const(a) -> bool:
        return isinstance(a, Constant) or (isinstance(a, relax.Var) and a in const_vars)

    users: dict = collections.defaultdict(list)
    for n in nodes:
        for a in n.args:
            if isinstance(a, relax.Var):
                users[a].append(n)
    for o in outputs:
        if isinstance(o, relax.Var):
            users[o].append(None)  # the function output is a use

    anchors = _anchors(nodes, is_const)
    absorbed, sigs = _epilogues(nodes, users, anchors, is_const)
    tasks = _aggregate(anchors, sigs)
    return TaskList(tasks, _cpu_ops(nodes, anchors, absorbed), model=name, target="vta")


def _anchors(nodes, is_const) -> dict[int, tuple[str, dict, str]]:
    """node index -> (kind, workload, device) of every conv2d / matmul the graph holds."""
    anchors: dict[int, tuple[str, dict, str]] = {}  # node index -> (kind, workload, device)
    first_conv_seen = False
    for n in nodes:
        if n.relax_op == "relax.nn.conv2d":
            a = n.call.attrs
            ds, ws, os_ = _shape_of(n.args[0]), _shape_of(n.args[1]), n.shape
            if str(a.data_layout) != "NCHW" or str(a.kernel_layout) != "OIHW" or \
                    None in (ds, ws, os_):
                continue
            pad = [int(p) for p in a.padding]
            pad = pad * 2 if len(pad) == 2 else pad
            g = int(a.groups)
            wl = _conv_workload(ds[0], ds[1], ds[2], ds[3], ws[0], ws[2], ws[3],
                                int(a.strides[0]), int(a.strides[1]), pad[0], pad[1], pad[2],
                                pad[3], int(a.dilation[0]), int(a.dilation[1]), g, os_[2], os_[3])
            kind = _conv_kind(g, ds[1])
            # any groups (VTA's group_conv2d_packed; depthwise as block-diagonal groups)
            on_vta = wl["dilation_h"] == 1 and wl["dilation_w"] == 1
            if not first_conv_seen:
                first_conv_seen = True
                on_vta = False  # VTA's quantizer skips conv layer 0: it runs in fp32 on the CPU
            anchors[n.index] = (kind, wl, "vta" if on_vta else "cpu")
        elif n.relax_op == "relax.matmul" and len(n.args) == 2:
            sa, sb = _shape_of(n.args[0]), _shape_of(n.args[1])
            if sa is None or sb is None or n.shape is None:
                continue
            ca, cb = is_const(n.args[0]), is_const(n.args[1])
            sa2 = (1,) + sa if len(sa) == 1 else sa
            sb2 = sb + (1,) if len(sb) == 1 else sb
            if cb and len(sb) <= 2:  # activation x 2-D weight: dense, rows = all leading dims
                wl = dict(batch=1, m=math.prod(sa2[:-1]), n=sb2[-1], k=sa2[-1])
                anchors[n.index] = ("dense", wl, "vta")
            elif ca and len(sa) <= 2:  # 2-D weight x activation: dense on the transpose
                wl = dict(batch=1, m=math.prod(sb2[:-2]) * sb2[-1], n=sa2[-2], k=sa2[-1])
                anchors[n.index] = ("dense", wl, "vta")
            else:  # activation x activation (attention) or batched weights
                batch = math.prod(np.broadcast_shapes(sa2[:-2], sb2[:-2])) if \
                    (len(sa2) > 2 or len(sb2) > 2) else 1
                wl = dict(batch=int(batch), m=sa2[-2], n=sb2[-1], k=sa2[-1])
                anchors[n.index] = ("batch_matmul", wl, "vta")
    return anchors


def _epilogues(nodes, users, anchors, is_const) -> tuple[set[int], dict[int, tuple[bool, bool]]]:
    """Absorb each anchor's elementwise epilogue (bias, folded BN, ReLU/clip, residual add):
    (the absorbed node indices, anchor -> (bias, residual) of its epilogue)."""
    absorbed: set[int] = set()
    sigs: dict[int, tuple[bool, bool]] = {}  # anchor -> (bias, residual) of its epilogue
    for idx in sorted(anchors):
        cur = nodes[idx]
        # the epilogue's structure as the quantizer absorbs it (relax_quantize.find_layers):
        # constant adds before the residual are the bias; a same-shape activation add
        # before the activation is the residual; anything later ends it
        bias = residual = False
        stage, tracking = 0, anchors[idx][0] != "batch_matmul"
        while True:
            us = users.get(cur.var, [])
            if len(us) != 1 or us[0] is None:
                break
            u = us[0]
            if u.relax_op not in _EPILOGUE_OPS or u.index in anchors or u.index in absorbed:
                break
            if u.shape != cur.shape:
                break
            others = [a for a in u.args if not a.same_as(cur.var)]
            if u.relax_op in ("relax.add",):
                ok = all(is_const(a) or _shape_of(a) == cur.shape for a in others)
            else:
                ok = all(is_const(a) for a in others)
            if not ok:
                break
            if tracking:
                if u.relax_op in ("relax.add", "relax.subtract") and others and \
                        all(is_const(a) for a in others):
                    tracking = stage == 0
                    bias = bias or tracking
                elif u.relax_op == "relax.add" and stage == 0:
                    residual, stage = True, 1
                elif u.relax_op in ("relax.multiply", "relax.divide"):
                    tracking = stage == 0
                elif u.relax_op in ("relax.nn.relu", "relax.clip", "relax.maximum",
                                    "relax.minimum", "tir:maximum", "tir:minimum", "tir:clip"):
                    stage = 2
                else:
                    tracking = False
            absorbed.add(u.index)
            cur = u
        sigs[idx] = (bias, residual)
    return absorbed, sigs


def _aggregate(anchors, sigs) -> list[Task]:
    """One task per distinct (kind, device, workload), counting occurrences and epilogues."""
    agg: dict[tuple, Task] = {}
    for idx in sorted(anchors):
        kind, wl, device = anchors[idx]
        key = (kind, device, tuple(sorted(wl.items())))
        if key not in agg:
            macs = _conv_macs(wl) if "conv" in kind else _mm_macs(wl)
            agg[key] = Task(name=task_name(kind, wl), kind=kind, workload=dict(wl), weight=0,
                            macs=int(macs), device=device)
        t = agg[key]
        t.weight += 1
        if device == "vta":
            bias, residual = sigs.get(idx, (False, False))
            for e in t.epilogues:
                if (e["bias"], e["residual"]) == (bias, residual):
                    e["count"] += 1
                    break
            else:
                t.epilogues.append({"bias": bias, "residual": residual, "count": 1})
    tasks = list(agg.values())
    _uniquify(tasks)
    return tasks


def _cpu_ops(nodes, anchors, absorbed) -> list[Task]:
    """The operators left on the CPU, one task per op kind (count, mean elements)."""
    counts: dict[str, list[int]] = {}
    for n in nodes:
        if n.index in anchors or n.index in absorbed:
            continue
        elems = math.prod(n.shape) if n.shape else 0
        c = counts.setdefault(n.op, [0, 0])
        c[0] += 1
        c[1] += elems
    return [Task(name=op, kind="other", workload={"elements": tot // cnt}, weight=cnt,
            macs=0, device="cpu") for op, (cnt, tot) in counts.items()]
