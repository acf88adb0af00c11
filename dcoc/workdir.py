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
"""
from __future__ import annotations

import hashlib
import json
import os

from dcoc.errors import DcocError
from dcoc.paths import ensure_writable_dir, write_text_atomic

IDENTITY_FILE = "dcoc_run.json"


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
    path = os.path.join(work_dir, IDENTITY_FILE)
    identity = {k: v for k, v in identity.items() if v is not None}
    if os.path.exists(path):
        try:
            with open(path, encoding="utf-8") as f:
                old = json.load(f)
            if not isinstance(old, dict):
                raise ValueError("not an object")
        except (OSError, ValueError) as exc:
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
