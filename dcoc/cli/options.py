"""Argument helpers shared by the commands that take a model and a target.

``add_model_arguments(parser)`` adds ``MODEL`` and ``--input-shape``;
``parse_input_shapes(args.input_shape)`` turns the repeated ``NAME:D0,D1,...`` flags into
the ``input_shapes`` dict that :func:`tvm_plugin.frontend.load` takes;
``add_target_argument(parser)`` adds ``--target`` and ``add_board_argument(parser, help)``
``--board``, checked against it.  Nothing here imports TVM, numpy or a target.

Output conventions shared by every command (reuse them in new commands):

* ``add_output_arguments(parser)`` adds ``--json [PATH|-]`` (``-`` or no value: JSON on
  stdout and nothing else there; a PATH: the usual report on stdout and the JSON written
  to PATH, atomically), ``-q/--quiet`` (no progress display) and ``-v/--verbose`` (TVM's own
  logs and native warnings on the console instead of the work dir's log file).
* ``out = Output(args)`` right at the start of ``run(args)``: it checks that a ``--json``
  PATH can be written *before* any work starts (one-line error, exit 2).  Then
  ``out.print(...)`` for the human-readable report (skipped when the JSON goes to
  stdout), ``out.emit_json(obj)`` for the result, ``out.progress`` (False with ``-q``) and
  ``out.verbose``.
* Progress: :class:`dcoc.progress.Progress` (a bar on a terminal, a plain line every N
  trials otherwise).
"""
from __future__ import annotations

import argparse
import json
import re
import sys

from dcoc.errors import ModelError
from dcoc.results.text import render_table  # noqa: F401 - the commands' table format
from dcoc.targets.registry import BOARD_NAMES, DEFAULT_TARGET, REGISTRY, get

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


def add_model_arguments(parser: argparse.ArgumentParser, several: str | None = None) -> None:
    """Add the positional ``model`` and the repeatable ``--input-shape NAME:D0,D1,...``;
    ``several``: the positional takes one or more models (a list), this help added."""
    if several:
        parser.add_argument("model", metavar="MODEL", nargs="+", help=f"{MODEL_HELP}; {several}")
    else:
        parser.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    parser.add_argument("--input-shape", metavar="NAME:D0,D1,...", action="append", default=[],
                        dest="input_shape", help=INPUT_SHAPE_HELP)


def add_target_argument(parser: argparse.ArgumentParser, default: str = DEFAULT_TARGET) -> None:
    """Add ``--target`` (default: the default accelerator target)."""
    parser.add_argument("--target", default=default, metavar="TARGET",
                        help=f"{TARGET_HELP} (default: {default})")


def add_board_argument(parser: argparse.ArgumentParser, help: str) -> None:
    """Add ``--board BOARD``, checked against ``--target`` right after parsing (one-line
    error naming the target's boards, exit 2; :func:`check_board`).  The names come from
    :data:`dcoc.targets.registry.BOARD_NAMES`: no target is imported."""
    boards = "; ".join(f"{t}: {names[0]} (default), {', '.join(names[1:])}" if len(names) > 1
                       else f"{t}: {names[0]}" for t, names in BOARD_NAMES.items())
    parser.add_argument("--board", default=None, metavar="BOARD", help=f"{help} ({boards})")

    def check(args):  # run by dcoc.cli.main right after parsing
        msg = check_board(args)
        if msg:
            parser.error(msg)  # "dcoc: error: ... (see 'dcoc tune --help')", exit 2

    parser.set_defaults(_check=check)


def check_board(args) -> str | None:
    """``--board`` against ``--target``: an accelerator target takes its own boards (from
    :data:`~dcoc.targets.registry.BOARD_NAMES`, else its board table); another target
    (llvm, cuda) ignores the board but takes only a name some accelerator has."""
    board = getattr(args, "board", None)
    if board is None:
        return None
    target = str(getattr(args, "target", DEFAULT_TARGET)).strip().lower()
    if target in REGISTRY:  # a target missing from BOARD_NAMES: read its own table
        names = BOARD_NAMES.get(target) or tuple(get(target).boards)
        whose = f" for --target {target}"
    else:
        names, whose = tuple(dict.fromkeys(b for n in BOARD_NAMES.values() for b in n)), ""
    if board in names:
        return None
    return f"argument --board: invalid choice: '{board}'{whose} (choose from {', '.join(names)})"


class _DeprecatedAlias(argparse.Action):
    """A hidden old spelling of a flag: stores into the new one's dest, with a warning."""

    def __init__(self, option_strings, dest, new: str = "", **kw):
        self.new = new
        super().__init__(option_strings, dest, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"dcoc: warning: {option_string} is deprecated; use {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_hardware_argument(parser: argparse.ArgumentParser, help: str, metavar: str = "HW") -> None:
    """Add ``--hardware HW`` (the one spelling every command uses; ``args.hardware``) and the
    old ``--hw`` as a hidden, deprecated alias."""
    parser.add_argument("--hardware", default=None, metavar=metavar, help=help)
    parser.add_argument("--hw", dest="hardware", action=_DeprecatedAlias, new="--hardware",
                        help=argparse.SUPPRESS)


def tuner_table() -> str:
    """The registered tuner names and what each runs (``--help`` and the README print it)."""
    from dcoc.tuners import DEFAULT, DESCRIPTIONS

    width = max(len(n) for n in DESCRIPTIONS)
    return "\n".join(f"  {n:<{width}}  {d}" for n, d in DESCRIPTIONS.items()) + (
        f"\n  (default: {DEFAULT}, on every target; NAME:key=value,... sets a DCOC-family "
        "setting,\n  e.g. surrogate:select=confidence or dcoc:explore_frac=0)")


def add_tuner_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--tuner NAME[:key=value,...]`` (checked by :func:`dcoc.tuners.tuner_kwargs`)."""
    from dcoc.tuners import DEFAULT

    parser.add_argument("--tuner", default=DEFAULT, metavar="NAME",
                        help=f"search method (default: {DEFAULT}); the names are listed below")


#: the largest input dimension accepted (a signed 32-bit extent)
MAX_DIM = 2**31 - 1
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
        raise ModelError(f"--input-shape '{spec[:80]}': dimensions must be positive integers")
    if any(d > MAX_DIM for d in shape):
        raise ModelError(f"--input-shape '{spec[:80]}': a dimension above {MAX_DIM} (the "
                         "largest a tensor dimension may be)")
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


# ------------------------------------------------------------------ range-checked types
# argparse ``type=`` callables: a bad value is argparse's one-line error, exit 2
# ("dcoc: error: argument --port: ...").
def port_number(text: str) -> int:
    """A TCP port, 1-65535."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a port number") from None
    if not 1 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"port {v} is out of range (1-65535)")
    return v


def seconds(text: str) -> float:
    """A duration in seconds: finite and > 0 (``nan``, ``inf``, 0 and negatives refused)."""
    import math

    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds") from None
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"{text} seconds: expected a finite number > 0")
    return v


#: the most trials one run takes (dcoc.api.checks.MAX_TRIALS, repeated so that building
#: the parser imports no library module)
MAX_TRIALS = 1_000_000


def int_at_least(low: int, high: int | None = None):
    """An ``int`` type in ``[low, high]`` (``high`` None: no ceiling)."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
        if v < low or (high is not None and v > high):
            rng = f">= {low}" if high is None else f"in {low}..{high}"
            shown = str(v) if len(str(v)) <= 20 else f"a {len(str(v).lstrip('-'))}-digit number"
            raise argparse.ArgumentTypeError(f"{shown} is out of range (expected {rng})")
        return v

    parse.__name__ = "integer"
    return parse


def max_workers() -> int:
    """The ceiling for ``--workers``: 4 per CPU core (each worker process holds a model)."""
    import os

    return 4 * (os.cpu_count() or 1)


def worker_count(text: str) -> int:
    """``--workers N``: 0 (in-process) .. 4 x the CPU cores."""
    return int_at_least(0, max_workers())(text)


def fmt_count(n: float, unit: str = "") -> str:
    """12_345_678 -> '12.35M' (k, M, G, T)."""
    for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= div:
            return f"{n / div:.2f}{suffix}{unit}"
    return f"{n:g}{unit}"


# ------------------------------------------------------------------ output conventions
JSON_HELP = ("write {what} as JSON: to stdout with '-' (or no value; stdout then carries "
             "only the JSON), or to the file PATH (checked before any work starts)")


VERBOSE_HELP = ("more detail: TVM's own logs and native warnings on the console "
                "(default: in the work dir's log file)")


def add_output_arguments(parser: argparse.ArgumentParser, what: str = "the result",
                         progress: bool = True, verbose_help: str | None = None) -> None:
    """Add ``--json [PATH|-]``, ``-q/--quiet`` and ``-v/--verbose`` (see the module docstring)."""
    parser.add_argument("--json", nargs="?", const="-", default=None, metavar="PATH|-",
                        help=JSON_HELP.format(what=what))
    g = parser.add_mutually_exclusive_group()
    g.add_argument("-q", "--quiet", action="store_true",
                   help="no progress display" if progress else "print less")
    g.add_argument("-v", "--verbose", action="store_true",
                   help=verbose_help or (VERBOSE_HELP if progress else
                                         "more detail where the command has any (every command takes -v)"))


class Output:
    """Where a command's report and JSON go, per :func:`add_output_arguments`'s flags."""

    def __init__(self, args):
        from dcoc.paths import check_output_file

        self.json_path = getattr(args, "json", None)
        if self.json_path is True:  # a caller that still uses a plain flag
            self.json_path = "-"
        self.quiet = bool(getattr(args, "quiet", False))
        self.verbose = bool(getattr(args, "verbose", False))
        if self.json_path not in (None, "-"):
            check_output_file(self.json_path, "--json file")

    @property
    def json_to_stdout(self) -> bool:
        return self.json_path == "-"

    @property
    def progress(self) -> bool:
        return not self.quiet

    def print(self, *parts, **kw) -> None:
        """The human-readable report: stdout, unless stdout carries the JSON."""
        if not self.json_to_stdout:
            print(*parts, **kw)

    def note(self, text: str) -> None:
        """A status line for people (stderr), silenced by ``-q``."""
        if not self.quiet:
            print(text, file=sys.stderr)

    def emit_json(self, obj, default=None) -> None:
        """Write ``obj`` to stdout (``--json -``) or the ``--json`` PATH; no-op without --json."""
        if self.json_path is None:
            return
        text = json.dumps(obj, indent=2, default=default or _json_default) + "\n"
        if self.json_to_stdout:
            sys.stdout.write(text)
            sys.stdout.flush()
            return
        from dcoc.paths import write_text_atomic

        write_text_atomic(self.json_path, text, "--json file")


def _json_default(o):
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "to_json"):
        return o.to_json()
    if isinstance(o, (set, tuple)):
        return list(o)
    return str(o)
