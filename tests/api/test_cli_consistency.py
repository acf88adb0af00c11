"""One command line: the same flag spellings, -q/-v everywhere, bad input refused before
any work (a GPU target without a GPU, an unwritable --json path)."""
from __future__ import annotations

import argparse
import glob
import os

import pytest
from api_util import run_cli

from dcoc.cli import build_parser

os.environ.setdefault("DCOC_QUIET", "1")


def _leaf_parsers(parser, prefix=()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield prefix, parser
        return
    for a in subs:
        for name, p in a.choices.items():
            yield from _leaf_parsers(p, prefix + (name,))


LEAVES = list(_leaf_parsers(build_parser()))


def test_every_command_is_covered():
    names = {" ".join(n) for n, _ in LEAVES}
    assert {"tune", "run", "simulate", "tune-task", "tasks", "models", "rpc serve", "rpc status"} <= names


@pytest.mark.parametrize("name,parser", LEAVES, ids=[" ".join(n) for n, _ in LEAVES])
def test_quiet_and_verbose_everywhere(name, parser):
    flags = {s for a in parser._actions for s in a.option_strings}
    assert {"-q", "--quiet", "-v", "--verbose"} <= flags, name


@pytest.mark.parametrize("name,parser", LEAVES, ids=[" ".join(n) for n, _ in LEAVES])
def test_hardware_is_spelled_one_way(name, parser):
    flags = {s for a in parser._actions for s in a.option_strings}
    text = parser.format_help()
    assert "--hw " not in text and "--hw," not in text and "--hw\n" not in text, name
    if "--hw" in flags:  # the old spelling: hidden, and the same setting as --hardware
        assert "--hardware" in flags
        hw = next(a for a in parser._actions if "--hw" in a.option_strings)
        new = next(a for a in parser._actions if "--hardware" in a.option_strings)
        assert hw.dest == new.dest == "hardware" and hw.help == argparse.SUPPRESS


def test_old_hw_spelling_still_works_with_a_warning(capsys):
    args = build_parser().parse_args(["simulate", "resnet18", "--hw", "pynq_4x8"])
    assert args.hardware == "pynq_4x8"
    assert "--hw is deprecated; use --hardware" in capsys.readouterr().err


def _has_gpu() -> bool:
    return bool(glob.glob("/dev/nvidia[0-9]*")) or os.path.exists("/dev/kfd")


@pytest.mark.skipif(_has_gpu(), reason="this machine has a GPU")
@pytest.mark.parametrize("target", ["cuda", '{"kind": "cuda", "arch": "sm_80"}'])
def test_gpu_target_without_a_gpu_is_one_line(tmp_path, target):
    wd = tmp_path / "wd"
    r = run_cli("tune", "light_squeezenet", "--target", target, "--trials", "4", "--work-dir", str(wd))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dcoc: error: target cuda: this machine has no cuda device")
    assert not wd.exists()  # refused before any work


@pytest.mark.parametrize("cmd", [
    ("tune", "resnet18", "--trials", "4"),
    ("run", "resnet18"),
    ("simulate", "resnet18"),
    ("tune-task", "C2", "--trials", "2"),
])
@pytest.mark.parametrize("path", ["/proc/dcoc-x.json", "DIR"])
def test_json_path_checked_before_work(tmp_path, cmd, path):
    path = str(tmp_path) if path == "DIR" else path
    wd = tmp_path / "wd"
    extra = ("--work-dir", str(wd)) if cmd[0] == "tune" else ()
    r = run_cli(*cmd, *extra, "--json", path)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dcoc: error:") and "--json file" in lines[0], r.stderr
    assert not wd.exists()
