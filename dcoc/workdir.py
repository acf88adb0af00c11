"""A work dir remembers which model and target it belongs to.

``dcoc tune`` appends records to ``WORK_DIR/records.jsonl`` (VTA) or a MetaSchedule
database (llvm/cuda) and overwrites ``WORK_DIR/result.json``.  Reusing the directory for
another model or target would mix records silently and replace the result, so the first
run writes ``WORK_DIR/dcoc_run.json``::

    {"model": "resnet18", "target": "vta", "board": "pynq"}
    {"model": "odd", "model_sha256": "9f2c...", "target": "llvm", "input_shapes": {...}}
    {"model": "resnet18", "target": "llvm ...", "timing": "cold"}   # tuned with --flush-cache

and every later run checks it: the same model (a zoo name, or the content digest of an
ONNX file), target and timing (warm by default, ``cold`` with ``--flush-cache``: the two
measure different costs, so their records must not mix) resume; anything else is refused
with one line naming both.
Tuner, seed and budget are not part of the identity (records carry them).  A work dir
from before this file existed is adopted as it is.

One run at a time: :func:`lock_work_dir` holds an OS file lock (``flock``) on
``WORK_DIR/dcoc.lock`` for the whole run (``dcoc tune``; ``dcoc tune-task --records
FILE`` locks ``FILE.lock``).  A second process is refused with one line naming the
holder's PID, or waits with ``--wait`` (``wait=True``).  The kernel releases the lock
when the holder exits in any way, kill -9 included, so a stale lock file is never in
the way (the file itself stays; only the lock on it counts).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import threading

from dcoc.errors import DcocError
from dcoc.paths import ensure_writable_dir, write_text_atomic

IDENTITY_FILE = "dcoc_run.json"
LOCK_FILE = "dcoc.lock"
#: the files a run reads and writes in its work dir (regular files only)
RUN_FILES = (IDENTITY_FILE, "result.json", "records.jsonl", "layers.json")


class WorkDirBusy(DcocError):
    """Another process holds the work dir (or records file)."""


#: locks this process holds: real path -> [fd, depth] (re-entrant within a process;
#: flock would refuse a second open file of the same process)
_held: dict[str, list] = {}
_held_lock = threading.Lock()


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return text if text.isdigit() else ""


def _who(fd) -> str:
    """The holder of the lock file ``fd``, as the busy messages name it."""
    pid = _holder(fd)
    return f"dcoc process PID {pid}" if pid else "another dcoc process"


def _flock(fd, mode, busy, wait: bool, until: str = "it") -> None:
    """``flock(fd, mode)``; when another process holds it: :class:`WorkDirBusy` with
    ``busy()`` (the phrase naming the holder), or, with ``wait``, a note on stderr and a
    blocking wait."""
    import fcntl

    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        what = busy()
        if not wait:
            raise WorkDirBusy(f"{what}; wait for {until} to finish, or rerun with --wait") from None
        print(f"dcoc: {what}; waiting for {until} to finish", file=sys.stderr, flush=True)
        fcntl.flock(fd, mode)


@contextlib.contextmanager
def lock_file(path: str, what: str, wait: bool = False):
    """Hold an exclusive ``flock`` on ``path`` (created if missing) for the ``with`` block.

    Busy: :class:`WorkDirBusy` naming the holder's PID, or, with ``wait``, a note on
    stderr and a blocking wait.  The lock file holds the holder's PID."""
    import fcntl

    key = os.path.realpath(path)
    with _held_lock:
        if key in _held:
            _held[key][1] += 1
            entered = True
        else:
            entered = False
    if entered:
        try:
            yield path
        finally:
            with _held_lock:
                _held[key][1] -= 1
        return
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as exc:
        raise DcocError(f"cannot create the lock file {path}: {exc.strerror or exc}") from None
    try:
        try:
            _flock(fd, fcntl.LOCK_EX, lambda: f"{what} is in use by {_who(fd)}", wait)
        except OSError as exc:
            raise DcocError(f"cannot lock {path}: {exc.strerror or exc}") from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass  # the PID is a courtesy; the lock is what counts
        with _held_lock:
            _held[key] = [fd, 1]
        try:
            yield path
        finally:
            with _held_lock:
                del _held[key]
            try:
                os.ftruncate(fd, 0)
            except OSError:
                pass
    finally:
        os.close(fd)  # closing the last descriptor releases the lock


def held_here(path: str) -> bool:
    """True when this process holds the lock of work dir (or records file) ``path``."""
    real = os.path.realpath(path)
    cands = (os.path.join(real, LOCK_FILE), real + ".lock")
    with _held_lock:
        return any(os.path.realpath(c) in _held for c in cands)


@contextlib.contextmanager
def lock_work_dir(work_dir: str, wait: bool = False):
    """``with lock_work_dir(d): ...``: one run at a time in ``d`` (created if missing; a
    run refused before it wrote anything leaves no directory behind)."""
    existed = os.path.isdir(work_dir)
    ensure_writable_dir(work_dir, "work dir", "choose another --work-dir")
    lock = os.path.join(os.path.realpath(work_dir), LOCK_FILE)
    with lock_file(lock, f"work dir {work_dir}", wait):
        try:
            yield work_dir
        finally:
            if not existed:
                with contextlib.suppress(OSError):
                    if os.listdir(work_dir) == [LOCK_FILE]:
                        os.remove(lock)
                        os.rmdir(work_dir)


@contextlib.contextmanager
def reading_work_dir(work_dir: str, wait: bool = False):
    """``with reading_work_dir(d): ...``: read what a finished run left in ``d`` (``dcoc
    export``) while no run writes it: a shared ``flock`` on ``d/dcoc.lock`` (symbolic links
    resolved).  A run in progress: :class:`WorkDirBusy` naming its PID, or, with ``wait``,
    a note on stderr and a blocking wait.  Nothing to hold when no run ever locked ``d``,
    or this process is the one running there (``dcoc tune --export``)."""
    import fcntl

    lock = os.path.join(os.path.realpath(work_dir), LOCK_FILE)
    with _held_lock:
        mine = os.path.realpath(lock) in _held
    try:
        fd = -1 if mine else os.open(lock, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        fd = -1
    if fd < 0:
        yield work_dir
        return
    try:
        _flock(fd, fcntl.LOCK_SH, lambda: f"work dir {work_dir} is being written by {_who(fd)}",
               wait, until="its run")
        yield work_dir
    finally:
        os.close(fd)


@contextlib.contextmanager
def lock_records(records_path: str, wait: bool = False):
    """``with lock_records(path): ...``: one run at a time appending to ``path``, whatever
    name it is reached by: the lock is ``REAL.lock`` of the path with its symbolic links
    resolved, plus a lock on the records file itself (a hard link is another name of it)."""
    real = os.path.realpath(records_path)
    ensure_writable_dir(os.path.dirname(real), "records directory")
    what = f"records file {records_path}"
    with lock_file(real + ".lock", what, wait), _lock_inode(real, what, wait):
        yield records_path


@contextlib.contextmanager
def _lock_inode(path: str, what: str, wait: bool):
    """An exclusive ``flock`` on the existing regular file ``path`` itself (nothing when it
    does not exist yet: then it has no other name)."""
    import fcntl
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        yield path
        return
    try:
        st = os.fstat(fd)
        key = f"inode:{st.st_dev}:{st.st_ino}"
        with _held_lock:
            mine = key in _held
        if mine or not stat.S_ISREG(st.st_mode):
            yield path
            return
        _flock(fd, fcntl.LOCK_EX, lambda: f"{what} is in use by another dcoc process (through "
               "another name of the same file: a hard link)", wait)
        with _held_lock:
            _held[key] = [fd, 1]
        try:
            yield path
        finally:
            with _held_lock:
                _held.pop(key, None)
    finally:
        os.close(fd)


def _sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def model_identity(model, input_shapes=None) -> dict:
    """``{"model": name}`` for a zoo/light name, plus ``model_sha256`` of the content for an
    ONNX file or ModelProto; ``input_shapes`` when given."""
    out: dict = {}
    if isinstance(model, (str, os.PathLike)) and os.path.isfile(os.fspath(model)):
        p = os.fspath(model)
        out["model"] = os.path.splitext(os.path.basename(p))[0]
        out["model_sha256"] = _sha256_file(p)
    elif hasattr(model, "SerializeToString"):  # onnx.ModelProto
        out["model"] = getattr(getattr(model, "graph", None), "name", None) or "model"
        out["model_sha256"] = hashlib.sha256(model.SerializeToString()).hexdigest()
    else:
        out["model"] = str(getattr(model, "name", None) or model)
    if input_shapes:
        out["input_shapes"] = {str(k): [int(d) for d in v] for k, v in dict(input_shapes).items()}
    return out


def _describe(ident: dict) -> str:
    s = f"model {ident.get('model')}"
    if ident.get("model_sha256"):
        s += f" (sha256 {ident['model_sha256'][:12]})"
    if ident.get("input_shapes"):
        s += " with input shapes " + ", ".join(
            f"{k}:{'x'.join(map(str, v))}" for k, v in ident["input_shapes"].items())
    s += f" on target {ident.get('target')}"
    if ident.get("board"):
        s += f"/{ident['board']}"
    if ident.get("timing"):
        s += f", timed {ident['timing']}"
    return s


def claim_work_dir(work_dir: str, identity: dict) -> str:
    """Create ``work_dir`` (one-line error if it is a file or not writable) and check or
    record which model and target it belongs to.  Raises :class:`DcocError` on a mismatch."""
    ensure_writable_dir(work_dir, "work dir", "choose another --work-dir")
    from dcoc.readfile import check_regular

    for name in RUN_FILES:  # a FIFO there would block the run when it writes its result
        p = os.path.join(work_dir, name)
        if os.path.lexists(p):
            check_regular(p, f"{name} of the work dir")
    path = os.path.join(work_dir, IDENTITY_FILE)
    identity = {k: v for k, v in identity.items() if v is not None}
    if os.path.lexists(path):
        from dcoc.readfile import read_json

        try:
            old = read_json(path, IDENTITY_FILE)
        except DcocError as exc:
            raise DcocError(f"work dir {work_dir}: cannot read {IDENTITY_FILE} ({exc}); "
                            "choose another --work-dir") from None
        if old != identity:
            raise DcocError(f"work dir {work_dir} belongs to {_describe(old)}, not "
                            f"{_describe(identity)}; its records would mix: choose another "
                            "--work-dir (or the default one)")
        return work_dir
    write_text_atomic(path, json.dumps(identity, indent=2, sort_keys=True) + "\n",
                      f"{IDENTITY_FILE} in the work dir")
    return work_dir
