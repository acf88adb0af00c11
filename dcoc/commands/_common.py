"""Argument helpers shared by the commands that take a model and a target.

``add_model_arguments(parser)`` adds ``MODEL`` and ``--input-shape``;
``parse_input_shapes(args.input_shape)`` turns the repeated ``NAME:D0,D1,...`` flags into
the ``input_shapes`` dict that :func:`tvm_plugin.frontend.load` takes;
``add_target_argument(parser)`` adds ``--target``.  Nothing here imports TVM.
"""
from __future__ import annotations

import argparse
import re

from dcoc.errors import ModelError

MODEL_HELP = ("an ONNX file, a zoo model (resnet18, mobilenetv2, vgg16, transformer) or one of "
              "the light_* models shipped with onnx (e.g. light_resnet50); `dcoc models` "
              "lists them")

INPUT_SHAPE_HELP = ("static shape of a model input, e.g. --input-shape input:1,3,224,224 "
                    "(repeat for several inputs); required for inputs with dynamic dimensions "
                    "such as a symbolic batch size. Dimensions may also be separated by 'x'.")

TARGET_HELP = ("vta (the VTA-style accelerator: conv2d/dense workloads it runs plus the "
               "operators left on the CPU), llvm (this CPU: MetaSchedule tasks), cuda, or a TVM "
               "target as a JSON dict, e.g. '{\"kind\": \"llvm\", \"mcpu\": \"skylake\", "
               "\"num-cores\": 4}'")


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the positional ``model`` and the repeatable ``--input-shape NAME:D0,D1,...``."""
    parser.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    parser.add_argument("--input-shape", metavar="NAME:D0,D1,...", action="append", default=[],
                        dest="input_shape", help=INPUT_SHAPE_HELP)


def add_target_argument(parser: argparse.ArgumentParser, default: str = "vta") -> None:
    """Add ``--target`` (default ``vta``)."""
    parser.add_argument("--target", default=default, metavar="TARGET",
                        help=f"{TARGET_HELP} (default: {default})")


_DIMS = re.compile(r"^\s*\d+(\s*[,x]\s*\d+)*\s*$")


def parse_input_shape(spec: str) -> tuple[str, tuple[int, ...]]:
    """``"input:1,3,224,224"`` -> ``("input", (1, 3, 224, 224))``.

    The name is everything before the last ``:`` (ONNX names may contain ``/`` or ``:``);
    dimensions are separated by ``,`` or ``x``.  Raises :class:`ModelError` (one line).
    """
    name, sep, dims = spec.rpartition(":")
    if not sep or not name or not _DIMS.match(dims):
        raise ModelError(f"--input-shape '{spec}': expected NAME:D0,D1,... "
                         "(e.g. input:1,3,224,224)")
    shape = tuple(int(d) for d in re.split(r"[,x]", dims.replace(" ", "")))
    if any(d <= 0 for d in shape):
        raise ModelError(f"--input-shape '{spec}': dimensions must be positive integers")
    return name, shape


def parse_input_shapes(specs) -> dict[str, tuple[int, ...]] | None:
    """The repeated ``--input-shape`` values as ``{name: shape}`` (None when none given)."""
    if not specs:
        return None
    out: dict[str, tuple[int, ...]] = {}
    for spec in specs:
        name, shape = parse_input_shape(spec)
        if name in out and out[name] != shape:
            raise ModelError(f"--input-shape given twice for '{name}' with different shapes")
        out[name] = shape
    return out


def fmt_count(n: float, unit: str = "") -> str:
    """12_345_678 -> '12.35M' (k, M, G, T)."""
    for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= div:
            return f"{n / div:.2f}{suffix}{unit}"
    return f"{n:g}{unit}"


def render_table(headers: list[str], rows: list[list], right: set[int] | None = None) -> str:
    """A plain-text table; columns in ``right`` are right-aligned."""
    right = right or set()
    cells = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(headers)]

    def line(vals):
        return "  ".join(v.rjust(w) if i in right else v.ljust(w)
                         for i, (v, w) in enumerate(zip(vals, widths))).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    out.extend(line(r) for r in cells)
    return "\n".join(out)
