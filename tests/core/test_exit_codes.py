"""The CLI's exit codes: 0 ok, 1 check failed, 2 bad input, 3 internal error, 130 Ctrl-C.

Ctrl-C is sent to a real ``dcoc`` process at several moments of its start-up (while it
imports its command modules, TVM, the model) and of its run: every time one line and
exit 130.  (Python itself ends with SIGINT instead of 130 when the interrupt landed in
code a C extension ran at import time; a shell reports that as 130 too.)
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _env():
    return dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))


def test_help_documents_the_exit_codes():
    from dcoc.cli import EXIT_CODES, build_parser

    text = build_parser().format_help()
    assert "exit status:" in text
    for code in EXIT_CODES:
        assert f"  {code} " in text
    assert sorted(EXIT_CODES) == [0, 1, 2, 3, 130]


def _fake_parser(run):
    def build():
        p = argparse.ArgumentParser()
        p.add_argument("-v", "--verbose", action="store_true")
        p.set_defaults(_run=run)
        return p
    return build


def test_internal_error_is_one_line_exit_3(monkeypatch, capsys):
    import dcoc.cli as cli

    def run(args):
        return {}["missing"]  # a bug: KeyError

    monkeypatch.setattr(cli, "build_parser", _fake_parser(run))
    assert cli.main([]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("dcoc: internal error: KeyError"), err
    assert "-v" in err and "Traceback" not in err
    assert cli.main(["-v"]) == 3  # -v: the traceback, then the line
    err = capsys.readouterr().err
    assert "Traceback" in err and err.rstrip().splitlines()[-1].startswith("dcoc: internal error")


def test_check_failed_is_1_and_bad_input_is_2(monkeypatch, capsys):
    import dcoc.cli as cli
    from dcoc.errors import ConfigError

    monkeypatch.setattr(cli, "build_parser", _fake_parser(lambda a: 1))
    assert cli.main([]) == 1

    def bad(args):
        raise ConfigError("bad\nconfig")

    monkeypatch.setattr(cli, "build_parser", _fake_parser(bad))
    assert cli.main([]) == 2
    assert capsys.readouterr().err == "dcoc: error: bad config\n"


def test_ctrl_c_wrapped_by_a_library_is_still_exit_130(monkeypatch, capsys):
    """Ctrl-C during a class body's ``__set_name__`` reaches dcoc as a RuntimeError."""
    import dcoc.cli as cli

    def run(args):
        class Field:
            def __set_name__(self, owner, name):
                raise KeyboardInterrupt

        class Base:  # noqa: F841 - defining it is what raises
            contexts = Field()

    monkeypatch.setattr(cli, "build_parser", _fake_parser(run))
    assert cli.main([]) == 130
    assert capsys.readouterr().err == cli.INTERRUPTED + "\n"


@pytest.mark.parametrize("delay", [0.25, 0.3, 0.4, 0.5, 0.7, 0.9, 1.5, 3.0])
def test_ctrl_c_at_any_moment_is_one_line_exit_130(tmp_path, delay):
    p = subprocess.Popen([sys.executable, "-m", "dcoc.cli", "tune", "resnet18", "--trials", "3000",
                          "--tuner", "random", "--workers", "0", "--work-dir", str(tmp_path / "wd"),
                          "-q"], cwd=ROOT, env=_env(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         # as in a terminal: a test worker may run with SIGINT ignored
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        time.sleep(delay)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    if p.returncode == 0:  # finished before the signal: nothing to check
        pytest.skip("the run ended before Ctrl-C")
    assert p.returncode in (130, -signal.SIGINT), (p.returncode, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("dcoc: interrupted"), err


def test_ctrl_c_swallowed_by_a_finalizer_reaches_the_run(monkeypatch, capsys):
    """A KeyboardInterrupt raised in ``__del__`` goes to ``sys.unraisablehook``; main()
    delivers it again to the run (not inside the hook, where Python would print
    "Exception ignored in sys.unraisablehook" and lose it)."""
    import dcoc.cli as cli

    class Finalizer:
        def __del__(self):
            raise KeyboardInterrupt

    def run(args):
        Finalizer()  # collected at once: Ctrl-C lands in a finalizer
        for _ in range(500):  # the run goes on; Ctrl-C must still end it
            time.sleep(0.01)
        return 0

    monkeypatch.setattr(cli, "build_parser", _fake_parser(run))
    old = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
    try:
        assert cli.main([]) == 130
    finally:
        signal.signal(signal.SIGINT, old)
    assert capsys.readouterr().err == cli.INTERRUPTED + "\n"


def test_ctrl_c_inside_the_unraisable_hook_is_deferred():
    import sys

    from dcoc.cli import _runs

    def hook():
        return _runs(sys._getframe(), hook.__code__)

    assert hook() is True
    assert _runs(sys._getframe(), hook.__code__) is False


def test_ctrl_c_inside_a_c_extension_init_is_deferred():
    # onnx's pybind11 module crashes (SIGSEGV) when KeyboardInterrupt is raised while it
    # initialises; main() delivers Ctrl-C again once the extension is loaded
    import sys
    from importlib.machinery import ExtensionFileLoader

    from dcoc.cli import _in_extension_init

    class Loader(ExtensionFileLoader):
        def create_module(self, spec):
            return _in_extension_init(sys._getframe())

    assert Loader("x", "x.so").create_module(None) is True
    assert _in_extension_init(sys._getframe()) is False
