"""Helpers shared by the frontend modules: TVM output hygiene (C++ warnings captured,
exceptions folded to one line) and small Relax expression helpers."""
from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile

_CALL_OPS = {"relax.call_tir", "relax.call_tir_inplace", "relax.call_dps_packed",
             "relax.call_pure_packed", "relax.call_tir_with_grad"}


_NATIVE_NOISE = re.compile(r"^\[\d\d:\d\d:\d\d\] \S+: Warning: ")


@contextlib.contextmanager
def _quiet_native_stderr():
    """Capture what TVM's C++ side writes to fd 2; drop its warnings, forward the rest."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real fd 2 (embedded interpreters)
        yield
        return
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode("utf-8", "replace")
            rest = [ln for ln in text.splitlines() if ln.strip() and not _NATIVE_NOISE.match(ln)]
            if rest:
                print("\n".join(rest), file=sys.stderr)


def _first_line(exc: BaseException) -> str:
    """A one-line summary of an exception: ``Type: message`` with newlines folded.

    TVM errors carry a C++/Python traceback before the message; only the message is kept.
    """
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if any(ln.startswith("Traceback") for ln in lines):
        frames = [i for i, ln in enumerate(lines)
                  if ln.startswith(("File ", "Traceback")) or re.match(r"^\d+: ", ln)]
        lines = lines[frames[-1] + 1:] if frames else lines
        lines = [ln for ln in lines if not ln.startswith("^")]
    msg = " ".join(lines) or type(exc).__name__
    if len(msg) > 400:
        msg = msg[:397] + "..."
    name = type(exc).__name__
    return msg if msg.startswith(name) else f"{name}: {msg}"



def _is_tensor(e) -> bool:
    """True for tensor-typed Relax expressions (not shapes, strings, functions)."""
    from tvm import relax

    return isinstance(getattr(e, "ty", None), relax.TensorType)


def _static_shape(ty) -> tuple[int, ...] | None:
    shape = getattr(ty, "shape", None)
    if shape is None:
        return None
    try:
        return tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        return None


def _mutate_functions(mutator, mod):
    """``mod`` with every Relax function visited by ``mutator`` (a PyExprMutator built on
    ``mod``); PrimFuncs are kept as they are."""
    from tvm import relax

    for gv, func in list(mod.functions.items()):
        if isinstance(func, relax.Function):
            mutator.builder_.update_func(gv, mutator.visit_expr(func))
    return mutator.builder_.get()
