"""``--board`` is checked against ``--target`` before any work, and the board names the
help and the check read (:data:`dcoc.targets.registry.BOARD_NAMES`, a static table: no
target is imported for ``--help``) are the targets' own board tables."""
from __future__ import annotations

import pytest

from dcoc.targets import available, get
from dcoc.targets.registry import BOARD_NAMES


def test_board_names_are_the_targets_board_tables():
    assert list(BOARD_NAMES) == available()
    for name in available():
        tg = get(name)
        assert BOARD_NAMES[name] == tuple(tg.boards), name
        assert BOARD_NAMES[name][0] == tg.default_board, name


def _main(argv, capfd):
    from dcoc.cli import main

    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse
        rc = exc.code
    out, err = capfd.readouterr()
    return rc, out, err


@pytest.mark.parametrize("target, board", [("vta", "kv260"), ("systolic", "pynq"),
                                           ("VTA", "arty-a7"), (None, "kv260")])
def test_a_board_of_another_target_is_one_line_exit_2(target, board, capfd, monkeypatch):
    import dcoc

    def no_work(*a, **kw):
        raise AssertionError("tune() ran")

    monkeypatch.setattr(dcoc, "tune", no_work)
    argv = ["tune", "no/such/model.onnx", "--board", board] + (["--target", target] if target else [])
    rc, out, err = _main(argv, capfd)
    tname = (target or "vta").lower()
    assert rc == 2 and out == "", err
    assert err.splitlines() == [
        f"dcoc: error: argument --board: invalid choice: '{board}' for --target {tname} "
        f"(choose from {', '.join(BOARD_NAMES[tname])}) (see 'dcoc tune --help')"]


def test_a_tvm_target_takes_only_a_known_board_name(capfd):
    rc, out, err = _main(["tune", "x.onnx", "--target", "llvm", "--board", "de10"], capfd)
    assert rc == 2 and len(err.splitlines()) == 1
    assert "invalid choice: 'de10' (choose from pynq, ultra96, zcu104, arty-a7, kv260)" in err


def test_each_targets_own_boards_pass_the_check():
    from dcoc.cli import build_parser

    parser = build_parser()
    for target, names in BOARD_NAMES.items():
        for board in names:
            args = parser.parse_args(["tune", "m", "--target", target, "--board", board])
            args._check(args)  # no SystemExit
            assert args.board == board
    args = parser.parse_args(["tune", "m"])
    args._check(args)
    assert args.board is None


def test_tune_help_lists_each_targets_boards_apart(capfd):
    rc, out, _ = _main(["tune", "--help"], capfd)
    assert rc == 0
    text = " ".join(out.split())
    assert "vta: pynq (default), ultra96, zcu104; systolic: arty-a7 (default), kv260" in text


@pytest.mark.parametrize("target, board", [("vta", "kv260"), ("systolic", "pynq")])
def test_the_api_refuses_a_board_of_another_target_in_one_line(target, board, tmp_path):
    import dcoc
    from dcoc.errors import DcocError

    wd = tmp_path / "wd"
    with pytest.raises(DcocError) as ei:
        dcoc.tune("resnet18", target=target, board=board, trials=20, work_dir=str(wd))
    msg = str(ei.value)
    assert "\n" not in msg and f"unknown board '{board}'" in msg
    assert all(b in msg for b in BOARD_NAMES[target])
    assert not wd.exists()  # before any work


def test_a_target_missing_from_board_names_is_checked_against_its_own_table(capfd, monkeypatch):
    """A newly registered target needs only its REGISTRY line: --board reads its table."""
    from dcoc.cli import build_parser
    from dcoc.targets import registry

    monkeypatch.setitem(registry.REGISTRY, "toy", registry.REGISTRY["systolic"])
    monkeypatch.setattr(registry, "_CACHE", dict(registry._CACHE))  # forget "toy" afterwards
    assert "toy" not in BOARD_NAMES
    parser = build_parser()
    args = parser.parse_args(["tune", "m", "--target", "toy", "--board", "kv260"])
    args._check(args)  # no SystemExit
    rc, out, err = _main(["tune", "m", "--target", "toy", "--board", "pynq"], capfd)
    assert rc == 2 and err.splitlines() == [
        "dcoc: error: argument --board: invalid choice: 'pynq' for --target toy "
        "(choose from arty-a7, kv260) (see 'dcoc tune --help')"]
