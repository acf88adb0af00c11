"""The ``dcoc`` command line.

Each sub-command lives in its own module ``dcoc.cli.cmd_NAME`` and exposes
``NAME``, ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``.  This file only
builds the parser and turns errors into one clear line with a non-zero exit status:

* :class:`dcoc.errors.DcocError` -> ``dcoc: error: <message>``, exit 2
* Ctrl-C -> ``dcoc: interrupted`` (records already written are kept), exit 130
"""
from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading

from dcoc.errors import DcocError

#: sub-command modules, in the order ``dcoc --help`` lists them
COMMANDS = (
    "models",
    "tasks",
    "simulate",
    "tune_task",
    "tune",
    "run",
    "export",
    "plot",
    "records",
    "rpc",
)

DESCRIPTION = """\
dcoc: hardware/software co-optimizing autotuner for Apache TVM.

Accelerator architects: `dcoc tune MODEL --target vta --board pynq` searches a VTA-style
accelerator (GEMM core, buffer sizes) and per-layer schedules together on the bundled
simulator.  Compiler engineers: `dcoc tune MODEL --target llvm` tunes with TVM
MetaSchedule using the DCOC search strategy.  MODEL is an ONNX file or a zoo name
(`dcoc models`)."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage block): ``dcoc: error: ...``, exit 2."""

    def error(self, message):
        self.exit(2, f"dcoc: error: {' '.join(message.split())} (see '{self.prog} --help')\n")


def _load(name: str):
    return importlib.import_module(f"dcoc.cli.cmd_{name}")


def _description(mod) -> str:
    text = getattr(mod, "DESCRIPTION", mod.HELP)
    if "{tuners}" in text:
        from dcoc.cli.options import tuner_table

        text = text.replace("{tuners}", tuner_table())
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="dcoc",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from dcoc import __version__

    parser.add_argument("--version", action="version", version=f"dcoc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            mod = _load(name)
        except ModuleNotFoundError as exc:  # a command not built yet
            if exc.name == f"dcoc.cli.cmd_{name}":
                continue
            raise
        p = sub.add_parser(
            mod.NAME,
            help=mod.HELP,
            description=_description(mod),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    got_sigint: list[int] = []

    def on_sigint(signum, frame):
        # remember it: a KeyboardInterrupt raised while a finalizer or a callback runs is
        # swallowed by Python ("Exception ignored in ..."), and the run would end with 0
        got_sigint.append(signum)
        signal.default_int_handler(signum, frame)

    # only where Ctrl-C raises KeyboardInterrupt already (not in threads, not where SIGINT
    # is ignored, e.g. background jobs of a non-interactive shell)
    old = None
    if threading.current_thread() is threading.main_thread() \
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        old = signal.signal(signal.SIGINT, on_sigint)
    try:
        rc = int(args._run(args) or 0)
        if got_sigint:
            raise KeyboardInterrupt
        return rc
    except DcocError as exc:
        print(f"dcoc: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("dcoc: interrupted (measured records are kept; rerun the same command to resume)",
              file=sys.stderr)
        return 130
    except BrokenPipeError:  # `dcoc tasks x | head`
        return 0
    finally:
        if old is not None:
            signal.signal(signal.SIGINT, old)
