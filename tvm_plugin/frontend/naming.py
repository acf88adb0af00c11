"""Task names and workload dicts shared by the VTA and the MetaSchedule extraction."""
from __future__ import annotations

from typing import Mapping

from dcoc.tasks import Task


def _kxs(a: int, b: int) -> str:
    return str(a) if a == b else f"{a}x{b}"


def task_name(kind: str, wl: Mapping[str, int]) -> str:
    """A stable, readable name for a workload, e.g. ``conv2d_56x56_64x64_k3s1``.

    conv kinds: ``<kind>_<H>x<W>_<Cin>x<Cout>_k<K>s<S>`` plus ``d<D>`` (dilation > 1),
    ``g<G>`` (grouped), ``b<N>`` (batch > 1); dense: ``dense_m<M>_n<N>_k<K>``;
    batch_matmul: ``batch_matmul_b<B>_m<M>_n<N>_k<K>``.
    """
    if kind in ("conv2d", "depthwise_conv2d", "grouped_conv2d") and wl:
        s = (f"{kind}_{wl['height']}x{wl['width']}_{wl['in_channels']}x{wl['out_channels']}"
             f"_k{_kxs(wl['kernel_h'], wl['kernel_w'])}s{_kxs(wl['stride_h'], wl['stride_w'])}")
        if wl["dilation_h"] != 1 or wl["dilation_w"] != 1:
            s += f"d{_kxs(wl['dilation_h'], wl['dilation_w'])}"
        if kind == "grouped_conv2d":
            s += f"_g{wl['groups']}"
        if wl["batch"] != 1:
            s += f"_b{wl['batch']}"
        return s
    if kind == "dense" and wl:
        return f"dense_m{wl['m']}_n{wl['n']}_k{wl['k']}" + \
            (f"_b{wl['batch']}" if wl.get("batch", 1) != 1 else "")
    if kind == "batch_matmul" and wl:
        return f"batch_matmul_b{wl['batch']}_m{wl['m']}_n{wl['n']}_k{wl['k']}"
    return kind


def _uniquify(tasks: list[Task]) -> None:
    seen: dict[str, int] = {}
    for t in tasks:
        if t.name in seen:
            seen[t.name] += 1
            n = seen[t.name]
            while f"{t.name}_{n}" in seen:
                n += 1
            t.name = f"{t.name}_{n}"
            seen[t.name] = 1
        else:
            seen[t.name] = 1


def _conv_kind(groups: int, in_channels: int) -> str:
    if groups == 1:
        return "conv2d"
    if groups == in_channels:
        return "depthwise_conv2d"
    return "grouped_conv2d"


def _conv_workload(n, c, h, w, o, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw, g, oh, ow) -> dict:
    return dict(batch=n, in_channels=c, out_channels=o, height=h, width=w, kernel_h=kh,
                kernel_w=kw, stride_h=sh, stride_w=sw, pad_top=pt, pad_left=pl,
                pad_bottom=pb, pad_right=pr, dilation_h=dh, dilation_w=dw, groups=g,
                out_height=oh, out_width=ow)


def _conv_macs(wl) -> int:
    return (wl["batch"] * wl["out_channels"] * wl["out_height"] * wl["out_width"]
            * (wl["in_channels"] // wl["groups"]) * wl["kernel_h"] * wl["kernel_w"])


def _mm_macs(wl) -> int:
    return wl["batch"] * wl["m"] * wl["n"] * wl["k"]
