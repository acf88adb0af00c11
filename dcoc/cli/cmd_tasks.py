"""``dcoc tasks``: the tuning tasks of a model for a target."""
from __future__ import annotations

import time

from dcoc.cli.options import (
    Output,
    add_model_arguments,
    add_output_arguments,
    add_target_argument,
    parse_input_shapes,
    render_table,
)

NAME = "tasks"
HELP = "show the tuning tasks (conv2d/dense workloads, weights, MACs) of a model"
DESCRIPTION = """\
Import MODEL (after preflight checks) and print its tasks for TARGET: one row per distinct
workload with its kind, full shape, how often it occurs (weight), MACs per occurrence and
total GFLOP.

--target vta: the conv2d (grouped and depthwise included)/dense/batch_matmul workloads
  VTA runs (device vta) and the ones that stay on the CPU (device cpu: the network's first
  conv, which VTA's quantizer keeps in fp32, and dilated convs), then the other operators left on the CPU
  (pooling, softmax, layer_norm, ...) with their counts.  Elementwise ops fused into a
  conv/dense epilogue (bias, BatchNorm, ReLU, residual add) are part of their task.
--target llvm / cuda / JSON: the MetaSchedule tasks of the fused model (what
  `dcoc tune --target llvm` tunes), including non-conv tasks (kind other).

examples:
  dcoc tasks resnet18
  dcoc tasks light_resnet50 --target llvm
  dcoc tasks model.onnx --input-shape input:1,3,224,224
  dcoc tasks transformer --target '{"kind": "llvm", "mcpu": "skylake", "num-cores": 4}'"""


def add_arguments(parser) -> None:
    add_model_arguments(parser)
    add_target_argument(parser)
    add_output_arguments(parser, "the tasks (name, kind, workload, weight, macs, device; "
                                 "cpu_ops for vta)", progress=False)


def workload_summary(kind: str, wl: dict) -> str:
    """A compact one-line description of a workload."""
    if not wl:
        return "-"
    if "conv" in kind:
        pads = (wl["pad_top"], wl["pad_left"], wl["pad_bottom"], wl["pad_right"])
        p = str(pads[0]) if len(set(pads)) == 1 else "(" + ",".join(map(str, pads)) + ")"

        def pair(a, b):
            return str(a) if a == b else f"{a}x{b}"

        s = (f"{wl['batch']}x{wl['in_channels']}x{wl['height']}x{wl['width']} -> "
             f"{wl['out_channels']}x{wl['out_height']}x{wl['out_width']}  "
             f"k{pair(wl['kernel_h'], wl['kernel_w'])} s{pair(wl['stride_h'], wl['stride_w'])} "
             f"p{p}")
        if wl["dilation_h"] != 1 or wl["dilation_w"] != 1:
            s += f" d{pair(wl['dilation_h'], wl['dilation_w'])}"
        if wl["groups"] != 1:
            s += f" g{wl['groups']}"
        return s
    if kind in ("dense", "batch_matmul"):
        b = f"B={wl['batch']} " if kind == "batch_matmul" or wl.get("batch", 1) != 1 else ""
        return f"{b}M={wl['m']} N={wl['n']} K={wl['k']}"
    return ", ".join(f"{k}={v}" for k, v in wl.items())


def _to_json(tl) -> dict:
    def task(t):
        d = {"name": t.name, "kind": t.kind, "workload": t.workload, "weight": t.weight,
             "macs": t.macs, "device": t.device}
        if t.ms_task is not None:
            d["ms_task"] = t.ms_task.task_name
        return d

    return {"model": tl.model, "target": tl.target, "tasks": [task(t) for t in tl],
            "cpu_ops": [task(t) for t in tl.cpu_ops]}


def run(args) -> int:
    from tvm_plugin.frontend import model_tasks, resolve_target

    out = Output(args)
    shapes = parse_input_shapes(args.input_shape)
    spec = resolve_target(args.target)
    t0 = time.perf_counter()
    tl = model_tasks(args.model, spec, input_shapes=shapes)
    secs = time.perf_counter() - t0
    out.emit_json(_to_json(tl))
    if out.json_to_stdout:
        return 0
    print = out.print  # noqa: A001 - the report goes where --json leaves room for it

    ms = not spec.is_vta
    headers = ["#", "task", "kind", "workload", "weight", "MMACs", "GFLOP", "device"]
    if ms:
        headers.append("MetaSchedule task")
    rows = []
    for i, t in enumerate(tl, 1):
        row = [i, t.name, t.kind, workload_summary(t.kind, t.workload), t.weight,
               f"{t.macs / 1e6:.1f}" if t.macs else "-",
               f"{2 * t.macs * t.weight / 1e9:.3f}" if t.macs else "-", t.device]
        if ms:
            row.append(t.ms_task.task_name if t.ms_task is not None else "-")
        rows.append(row)
    where = "VTA" if spec.is_vta else spec.kind
    print(f"{tl.model}: {len(tl)} tasks for {where} (imported and extracted in {secs:.1f} s)")
    if ms:
        print(f"target: {tl.target}")
    print()
    print(render_table(headers, rows, right={0, 4, 5, 6}))
    total = sum(2 * t.macs * t.weight for t in tl)
    occ = sum(t.weight for t in tl)
    if spec.is_vta:
        on_vta = [t for t in tl if t.device == "vta"]
        vta_fl = sum(2 * t.macs * t.weight for t in on_vta)
        print()
        if tl.cpu_ops:
            ops = ", ".join(f"{t.name} x{t.weight}" for t in
                            sorted(tl.cpu_ops, key=lambda t: (-t.weight, t.name)))
            print(f"CPU ops (outside any task): {ops}")
        else:
            print("CPU ops (outside any task): none")
        print(f"total: {len(tl)} tasks ({len(on_vta)} on VTA, {len(tl) - len(on_vta)} on CPU), "
              f"{occ} occurrences, {total / 1e9:.3f} GFLOP ({vta_fl / 1e9:.3f} on VTA, "
              f"{(total - vta_fl) / 1e9:.3f} on CPU); {sum(t.weight for t in tl.cpu_ops)} other "
              f"CPU ops of {len(tl.cpu_ops)} kinds")
    else:
        kinds = {}
        for t in tl:
            kinds[t.kind] = kinds.get(t.kind, 0) + 1
        kind_s = ", ".join(f"{n} {k}" for k, n in kinds.items())
        print()
        print(f"total: {len(tl)} MetaSchedule tasks ({kind_s}), {occ} calls, "
              f"{total / 1e9:.3f} GFLOP in conv/dense/matmul")
    return 0
