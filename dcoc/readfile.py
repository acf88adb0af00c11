"""The one way dcoc reads a file it is given: regular files only, a size cap, UTF-8, JSON
nesting.

Every file a user can point dcoc at (records, ``--knobs``, ``--schedules``, a work dir's
``result.json`` / ``dcoc_run.json``, an export directory's files, a warm start's
``layers.json``) is read by :func:`read_bytes`, :func:`read_text` or :func:`read_json`,
and every file a library reads for dcoc (an ONNX model, an ``.npz``) is checked by
:func:`check_regular` first.  Each refusal is one line naming the file and the problem:

* not a regular file: a FIFO (it would block forever), a device (``/dev/zero`` would be
  read until memory runs out), a directory, a socket, a dangling or looping symbolic link;
* over the size cap of its kind (:data:`LIMITS`; the limit is in the message);
* not UTF-8 (the byte offset), not JSON (the line), nested deeper than
  :data:`MAX_DEPTH` levels.

A symbolic link to a regular file is read like the file.  Schema checks belong to each
reader (they name the file and the field or line); this module knows bytes and JSON.
"""
from __future__ import annotations

import json
import os
import stat

from dcoc.errors import DcocError

#: size caps per kind of file (bytes)
LIMITS = {
    "json": 64 << 20,        # a config, a schedules / knobs / result file
    "records": 1 << 30,      # a JSONL records file (one line per trial)
    "model": 4 << 30,        # an ONNX model (weights may be inline)
    "inputs": 4 << 30,       # an .npz of model inputs
}
#: the deepest JSON nesting accepted (dcoc's own files nest at most 6 levels)
MAX_DEPTH = 64


def human_bytes(n: int) -> str:
    """``1 GiB``, ``64 MiB``, ``512 KiB``, ``17 bytes``."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} bytes"


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def check_regular(path, what: str, kind: str | None = None, error=DcocError) -> os.stat_result:
    """``os.stat`` of ``path`` when it is a regular file (following symbolic links) within
    the size cap of ``kind``; ``error`` (one line naming ``what`` and ``path``) otherwise."""
    p = os.fspath(path)
    if not p:
        raise error(f"{what}: the path is empty")
    try:
        st = os.stat(p)
    except FileNotFoundError:
        if os.path.islink(p):
            raise error(f"{what} {p} is a dangling symbolic link (to "
                        f"{os.readlink(p)}, which does not exist)") from None
        raise error(f"{what} {p} does not exist") from None
    except OSError as exc:
        if exc.errno == 40:  # ELOOP
            raise error(f"{what} {p} is a symbolic link loop") from None
        raise error(f"cannot read {what} {p}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        what_it_is = _kind(st.st_mode)
        raise error(f"{what} {p} is {what_it_is}, not a regular file")
    limit = LIMITS.get(kind or "", 0)
    if limit and st.st_size > limit:
        raise error(f"{what} {p} is {st.st_size} bytes, over the {human_bytes(limit)} limit "
                    f"for {what}")
    return st


def read_bytes(path, what: str, kind: str = "json", error=DcocError) -> bytes:
    """The bytes of a regular file of at most ``LIMITS[kind]`` bytes (see the module
    docstring); ``error`` with one line otherwise."""
    p = os.fspath(path)
    check_regular(p, what, kind, error)
    limit = LIMITS[kind]
    try:  # O_NONBLOCK: a file swapped for a FIFO after the check must not block the open
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise error(f"cannot read {what} {p}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{what} {p} is {_kind(st.st_mode)}, not a regular file")
        chunks, n = [], 0
        while n <= limit:
            b = os.read(fd, min(1 << 24, limit + 1 - n))
            if not b:
                break
            chunks.append(b)
            n += len(b)
    except OSError as exc:
        raise error(f"cannot read {what} {p}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if n > limit:
        raise error(f"{what} {p} is over the {human_bytes(limit)} limit for {what}")
    return b"".join(chunks)


def decode_utf8(data: bytes, what: str, path, error=DcocError) -> str:
    """``data`` as text; ``error`` naming the first byte that is not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise error(f"{what} {os.fspath(path)} is not UTF-8 text (byte {exc.start}, line "
                    f"{line})") from None


def read_text(path, what: str, kind: str = "json", error=DcocError) -> str:
    """A regular file's UTF-8 text (see :func:`read_bytes`)."""
    return decode_utf8(read_bytes(path, what, kind, error), what, path, error)


def too_deep(obj, limit: int = MAX_DEPTH) -> bool:
    """Whether a parsed JSON value nests more than ``limit`` levels."""
    stack = [(obj, 1)]
    while stack:
        o, d = stack.pop()
        if isinstance(o, (dict, list)):
            if d > limit:
                return True
            stack.extend((v, d + 1) for v in (o.values() if isinstance(o, dict) else o))
    return False


def json_type(v) -> str:
    """``an object``, ``a list``, ``a string``, ``a number``, ``a boolean``, ``null``."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    return {dict: "an object", list: "a list", str: "a string"}.get(
        type(v), "a number" if isinstance(v, (int, float)) else type(v).__name__)


def parse_json(text: str, what: str, path, error=DcocError):
    """``json.loads`` with one-line errors naming the file and line; nesting capped."""
    p = os.fspath(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{what} {p} is not valid JSON: {exc.msg} (line {exc.lineno})") from None
    except RecursionError:
        raise error(f"{what} {p} nests JSON deeper than {MAX_DEPTH} levels") from None
    if too_deep(data):
        raise error(f"{what} {p} nests JSON deeper than {MAX_DEPTH} levels")
    return data


def read_json(path, what: str, error=DcocError, expect: type | None = dict):
    """A regular file's JSON value (an object unless ``expect`` says otherwise; None: any)."""
    data = parse_json(read_text(path, what, "json", error), what, path, error)
    if expect is not None and not isinstance(data, expect):
        raise error(f"{what} {os.fspath(path)} holds {json_type(data)}, not "
                    f"{json_type(expect())}")
    return data
