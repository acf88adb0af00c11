"""Where dcoc keeps files outside a work dir: the cache root.

``cache_root()`` is, in order: ``$DCOC_CACHE``; ``$XDG_CACHE_HOME/dcoc``; ``~/.cache/dcoc``
(the XDG Base Directory default).  Zoo models live in ``cache_root("models")``, cached
simulator tables in ``cache_root("exhaustive")`` and so on.

``ensure_writable_dir(path, what)`` creates a directory or raises a one-line
:class:`dcoc.errors.DcocError` naming it (a file in the way, no permission, read-only file
system) instead of an ``OSError`` traceback.
"""
from __future__ import annotations

import os
import tempfile

from dcoc.errors import DcocError


def cache_root(name: str | None = None) -> str:
    """``$DCOC_CACHE`` > ``$XDG_CACHE_HOME/dcoc`` > ``~/.cache/dcoc`` (joined with ``name``)."""
    root = os.environ.get("DCOC_CACHE")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME")
        # the XDG spec: a relative path is invalid and must be ignored
        base = xdg if xdg and os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "dcoc")
    return os.path.join(root, name) if name else root


def ensure_writable_dir(path: str, what: str, hint: str = "") -> str:
    """Create ``path`` (and parents) and check a file can be created in it.

    Raises :class:`DcocError` with one line (``what`` names the directory for the user,
    e.g. "work dir" or "cache directory ($DCOC_CACHE)")."""
    hint = f" ({hint})" if hint else ""
    if not os.fspath(path):
        raise DcocError(f"{what}: the path is empty{hint}")
    link_problem = _link_problem(path)
    if link_problem:
        raise DcocError(f"{what} {path} {link_problem}{hint}")
    if os.path.exists(path) and not os.path.isdir(path):
        raise DcocError(f"{what} {path} is a file, not a directory{hint}")
    try:
        os.makedirs(path, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".dcoc-write-test-", dir=path)
        os.close(fd)
        os.remove(probe)
    except OSError as exc:
        raise DcocError(f"{what} {path} is not writable: {exc.strerror or exc}{hint}") from None
    return path


def _link_problem(path) -> str | None:
    """Why ``path`` (or a directory above it) cannot be reached: a symbolic link that
    points nowhere, or a loop of them; None when it can (or does not exist at all)."""
    p = os.path.abspath(os.fspath(path))
    try:
        os.stat(p)
        return None
    except FileNotFoundError:
        pass
    except OSError as exc:
        if exc.errno == 40:  # ELOOP
            return "is a symbolic link loop"
        return None
    full = p
    while p != os.path.dirname(p):  # the nearest component that exists as a name only
        if os.path.islink(p) and not os.path.exists(p):
            where = "" if p == full else f"is under {p}, which "
            try:
                os.stat(p)
            except OSError as exc:
                if exc.errno == 40:
                    return f"{where}is a symbolic link loop"
            return f"{where}is a dangling symbolic link (to {os.readlink(p)}, which does not exist)"
        p = os.path.dirname(p)
    return None


def check_output_file(path: str, what: str = "output file") -> str:
    """Check, before any work, that ``path`` can be written (it is not a directory; its
    directory exists and is writable, or can be created under the nearest existing,
    writable ancestor -- tried with a probe file, removed at once).  Raises :class:`DcocError`."""
    full = os.path.abspath(path)
    if os.path.isdir(full):
        raise DcocError(f"{what} {path} is a directory")
    d = os.path.dirname(full)
    # missing directories are created when the file is written: the nearest existing
    # ancestor must be a directory we may write into
    anc = d
    while not os.path.exists(anc) and os.path.dirname(anc) != anc:
        anc = os.path.dirname(anc)
    if not os.path.isdir(anc):
        raise DcocError(f"cannot write {what} {path}: {anc} is not a directory")
    if os.path.exists(full) and not os.path.isfile(full):  # /dev/null, a FIFO: written in place
        if not os.access(full, os.W_OK):
            raise DcocError(f"cannot write {what} {path}: permission denied")
        return path
    if not os.access(anc, os.W_OK | os.X_OK) or (os.path.exists(full) and not os.access(full, os.W_OK)):
        raise DcocError(f"cannot write {what} {path}: permission denied")
    try:  # permission bits are not the whole story (root; /proc, read-only mounts): try it
        fd, probe = tempfile.mkstemp(prefix=".dcoc-write-test-", dir=anc)
        os.close(fd)
        os.remove(probe)
    except OSError as exc:
        raise DcocError(f"cannot write {what} {path}: cannot create files in {anc} "
                        f"({exc.strerror or exc})") from None
    return path


def _umask() -> int:
    """The process umask (read without changing it where /proc tells it)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text_atomic(path: str, text: str, what: str = "output file") -> str:
    """Write ``text`` to ``path`` through a temporary file and a rename; DcocError on failure.

    The file gets the mode a plain ``open(path, "w")`` would give it: ``0o666`` less the
    user's umask (``mkstemp`` alone creates it ``0o600``)."""
    full = os.path.abspath(path)
    tmp = None
    if os.path.exists(full) and not os.path.isfile(full) and not os.path.isdir(full):
        try:  # a device or FIFO (/dev/null, /dev/stdout): write in place, never replace it
            # (non-blocking open: a FIFO nobody reads is an error, not a hang)
            fd = os.open(full, os.O_WRONLY | os.O_NONBLOCK)
            os.set_blocking(fd, True)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as exc:
            why = "a FIFO that no process reads" if exc.errno == 6 else exc.strerror or exc  # ENXIO
            raise DcocError(f"cannot write {what} {path}: {why}") from None
        return path
    try:
        os.makedirs(os.path.dirname(full), exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".dcoc-", suffix=".tmp", dir=os.path.dirname(full))
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), 0o666 & ~_umask())
            f.write(text)
        os.replace(tmp, full)
        tmp = None
    except OSError as exc:
        raise DcocError(f"cannot write {what} {path}: {exc.strerror or exc}") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            try:
                os.remove(tmp)
            except OSError:
                pass
    return path
