"""The ``dcoc`` command line.

Each sub-command lives in its own module ``dcoc.cli.cmd_NAME`` and exposes
``NAME``, ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``.  This file only
builds the parser and turns every outcome into an exit status (:data:`EXIT_CODES`):

* 0: done;  1: a check failed (``dcoc run`` not bit-exact, ``dcoc simulate`` invalid, no
  valid schedule found);
* 2: bad input -- :class:`dcoc.errors.DcocError` -> ``dcoc: error: <message>`` (argparse's
  own errors too);
* 3: internal error -- any other exception: one line naming it, and the traceback with
  ``-v``;
* 130: Ctrl-C at any moment, start-up imports included -> ``dcoc: interrupted``
  (records already written are kept).
"""
from __future__ import annotations

import _thread
import argparse
import importlib
import signal
import sys
import threading

from dcoc.errors import DcocError, caused_by_ctrl_c

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

EXIT_OK, EXIT_CHECK_FAILED, EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
EXIT_CODES = {EXIT_OK: "ok", EXIT_CHECK_FAILED: "a check failed (e.g. `dcoc run` not bit-exact)",
              EXIT_BAD_INPUT: "bad input (one line on stderr)",
              EXIT_INTERNAL: "internal error (one line; rerun with -v for the traceback)",
              EXIT_INTERRUPTED: "interrupted (Ctrl-C; records already written are kept)"}
EPILOG = "exit status:\n" + "\n".join(f"  {c:<3}  {t}" for c, t in EXIT_CODES.items())
INTERRUPTED = "dcoc: interrupted (measured records are kept; rerun the same command to resume)"


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
        epilog=EPILOG,
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


def _internal_error(exc: BaseException, verbose: bool) -> int:
    if verbose:
        import traceback

        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    msg = " ".join(str(exc).split())[:300]
    print(f"dcoc: internal error: {type(exc).__name__}{': ' + msg if msg else ''} (a bug in dcoc "
          "or its libraries; rerun with -v for the traceback)", file=sys.stderr)
    return EXIT_INTERNAL


def _verbose(argv) -> bool:
    args = sys.argv[1:] if argv is None else argv
    return any(a in ("-v", "--verbose") for a in args)


def main(argv: list[str] | None = None) -> int:
    got_sigint: list[int] = []
    active = [True]

    def deliver_later():
        def deliver():
            if active[0]:
                _thread.interrupt_main()
        threading.Timer(0.02, deliver).start()

    def on_sigint(signum, frame):
        if _in_extension_init(frame) or _runs(frame, unraisable.__code__):
            # an exception raised while a C extension initialises can crash the interpreter
            # (onnx's pybind11 module does, SIGSEGV), one raised in the hook below is printed
            # as "Exception ignored in sys.unraisablehook" and lost: deliver Ctrl-C again a
            # moment later
            deliver_later()
            return
        # remember it: a KeyboardInterrupt raised while a finalizer or a callback runs is
        # swallowed by Python ("Exception ignored in ..."), and the run would end with 0
        got_sigint.append(signum)
        signal.default_int_handler(signum, frame)

    # only where Ctrl-C raises KeyboardInterrupt already (not in threads, not where SIGINT
    # is ignored, e.g. background jobs of a non-interactive shell)
    def unraisable(info):
        # Ctrl-C landed in a finalizer or a weakref callback (e.g. importlib's module-lock
        # callback): Python would print "Exception ignored ..." and go on; deliver it
        # again, to the main code
        if isinstance(info.exc_value, KeyboardInterrupt):
            deliver_later()
            return
        old_hook(info)

    old = None
    old_hook = sys.unraisablehook
    if threading.current_thread() is threading.main_thread() \
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        old = signal.signal(signal.SIGINT, on_sigint)
        sys.unraisablehook = unraisable
    args = None
    try:
        parser = build_parser()  # imports every command module: Ctrl-C may land here
        args = parser.parse_args(argv)
        if not getattr(args, "_run", None):
            parser.print_help()
            return EXIT_BAD_INPUT
        if getattr(args, "_check", None):  # flags checked against each other (--board vs --target)
            args._check(args)
        rc = int(args._run(args) or 0)
        if got_sigint:
            raise KeyboardInterrupt
        return rc
    except DcocError as exc:
        print(f"dcoc: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(INTERRUPTED, file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `dcoc tasks x | head`
        _quiet_stdout()
        return EXIT_OK
    except SystemExit:
        raise  # argparse: --help, --version, usage errors (exit 2)
    except MemoryError as exc:
        print(f"dcoc: error: out of memory ({exc or 'allocation failed'}); reduce --workers or "
              "the model size", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:  # noqa: BLE001 - never a bare traceback
        if got_sigint or caused_by_ctrl_c(exc):
            # Ctrl-C inside code that wraps what it raises (e.g. a class body's __set_name__
            # wraps it in a RuntimeError): the user stopped the run, dcoc has no bug
            print(INTERRUPTED, file=sys.stderr)
            return EXIT_INTERRUPTED
        return _internal_error(exc, bool(getattr(args, "verbose", False)) or _verbose(argv))
    finally:
        active[0] = False
        if old is not None:
            signal.signal(signal.SIGINT, old)
            sys.unraisablehook = old_hook


def _stack(frame):
    """``frame`` and the frames that called it."""
    while frame is not None:
        yield frame
        frame = frame.f_back


def _runs(frame, code) -> bool:
    """Whether ``code`` is on the stack of ``frame``."""
    return any(f.f_code is code for f in _stack(frame))


def _in_extension_init(frame) -> bool:
    """Whether ``frame`` runs inside the initialisation of a C extension module."""
    from importlib.machinery import ExtensionFileLoader

    return any(f.f_code.co_name in ("create_module", "exec_module")
               and isinstance(f.f_locals.get("self"), ExtensionFileLoader) for f in _stack(frame))


def _quiet_stdout() -> None:
    """After a broken pipe: send the rest of stdout nowhere (no error at interpreter exit)."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
