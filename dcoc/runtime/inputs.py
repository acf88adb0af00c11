"""What ``dcoc run`` reads: input and calibration arrays (``.npz`` or in memory, split into
samples, checked), tuned schedules (``dcoc tune --json`` / ``result.json``), the input sizes
a result was tuned at, and the hardware to run on."""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from dcoc.errors import ConfigError, DcocError


class InputError(DcocError):
    """Model inputs (or calibration inputs) with a wrong name, shape or dtype."""


# ============================================================================ inputs
def load_inputs(source, what: str = "--inputs") -> dict:
    """``{name: array}`` from a dict or an ``.npz`` file (one-line InputError otherwise)."""
    if isinstance(source, dict):
        out = {}
        for k, v in source.items():
            try:
                out[str(k)] = np.asarray(v)
            except (ValueError, TypeError) as exc:  # ragged lists, objects
                raise InputError(f"{what}: input '{k}' is not an array "
                                 f"({' '.join(str(exc).split())[:100]})") from None
            if out[str(k)].dtype == object:
                raise InputError(f"{what}: input '{k}' is not a numeric array")
        return out
    if not isinstance(source, (str, os.PathLike)):
        raise InputError(f"{what} must be a dict of arrays or an .npz file path, got "
                         f"{type(source).__name__}")
    from dcoc.readfile import check_regular

    path = os.fspath(source)
    if not os.path.lexists(path):
        raise InputError(f"{what} file '{path}' does not exist")
    check_regular(path, f"{what} file", "inputs", InputError)
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except Exception as exc:  # noqa: BLE001 - zipfile/pickle/format errors
        raise InputError(f"{what} file '{path}' is not a numpy .npz archive "
                         f"({type(exc).__name__}: {' '.join(str(exc).split())[:120]})") from None


def split_samples(arrays: dict, shapes: dict, dtypes: dict, what: str = "--inputs") -> list[dict]:
    """Check names/shapes/dtypes and split into samples.

    Each array has the model input's exact shape (one sample) or an extra leading axis of
    samples ``(N, *shape)``; every input must carry the same N.
    """
    names = list(shapes)
    missing = [n for n in names if n not in arrays]
    extra = [n for n in arrays if n not in shapes]
    if extra or missing:
        parts = []
        if extra:
            parts.append(f"unknown input name(s) {', '.join(map(repr, extra))}")
        if missing:
            parts.append(f"missing {', '.join(map(repr, missing))}")
        raise InputError(f"{what}: {'; '.join(parts)}; the model's inputs are "
                         + ", ".join(f"{n}:{'x'.join(map(str, shapes[n]))} {dtypes[n]}"
                                     for n in names))
    counts = {}
    for n in names:
        a = arrays[n]
        want = tuple(shapes[n])
        if a.dtype != np.dtype(dtypes[n]):
            raise InputError(f"{what}: input '{n}' has dtype {a.dtype}, the model expects "
                             f"{dtypes[n]} (convert with .astype('{dtypes[n]}'))")
        if tuple(a.shape) == want:
            counts[n] = None
        elif a.ndim == len(want) + 1 and tuple(a.shape[1:]) == want and a.shape[0] > 0:
            counts[n] = a.shape[0]
        else:
            raise InputError(f"{what}: input '{n}' has shape {'x'.join(map(str, a.shape))}, "
                             f"the model expects {'x'.join(map(str, want))} (or N x that for "
                             f"N samples)")
    ns = {c for c in counts.values()}
    if len(ns) > 1:
        raise InputError(f"{what}: inputs carry different numbers of samples "
                         f"({', '.join(f'{n}: {c or 1}' for n, c in counts.items())})")
    n = ns.pop()
    if n is None:
        return [{k: np.ascontiguousarray(arrays[k]) for k in names}]
    return [{k: np.ascontiguousarray(arrays[k][i]) for k in names} for i in range(n)]


def int_input_high(onnx_model, names) -> dict:
    """For integer inputs feeding a Gather (embedding lookup): the table's row count."""
    sizes = {t.name: list(t.dims) for t in onnx_model.graph.initializer}
    out = {}
    for node in onnx_model.graph.node:
        if node.op_type == "Gather" and len(node.input) > 1 and node.input[1] in names and \
                node.input[0] in sizes and sizes[node.input[0]]:
            out[node.input[1]] = min(out.get(node.input[1], 1 << 30), sizes[node.input[0]][0])
    return out


# ============================================================================ schedules
def load_schedules(source) -> tuple[dict, Any]:
    """``(schedules, hardware or None)`` from a dict, a TuneResult or a JSON file (a
    ``dcoc tune --json`` / ``result.json`` file, or a plain ``{task: knobs}`` map)."""

    if source is None:
        return {}, None
    if hasattr(source, "schedules") and hasattr(source, "hardware"):
        return dict(source.schedules or {}), source.hardware
    if isinstance(source, dict):
        data = source
    else:
        if not isinstance(source, (str, os.PathLike)):
            raise ConfigError(f"--schedules must be a dict, a TuneResult or a JSON file path, "
                              f"got {type(source).__name__}")
        from dcoc.readfile import read_json

        data = read_json(source, "--schedules file", ConfigError, expect=None)
    hw = None
    if isinstance(data, dict) and "schedules" in data:
        if data.get("target") not in (None, "vta"):
            raise ConfigError(f"--schedules: a result for target {data.get('target')!r} has no "
                              "VTA schedules")
        hw = data.get("hardware")
        data = data["schedules"]
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ConfigError("--schedules must map task names to knob dicts (or be a dcoc tune "
                          "result JSON)")
    return {str(k): dict(v) for k, v in data.items()}, hw


def result_input_shapes(source) -> dict | None:
    """The ``input_shapes`` a TuneResult / ``dcoc tune`` JSON was tuned at, else None."""
    if hasattr(source, "schedules") and hasattr(source, "hardware"):
        shapes = getattr(source, "input_shapes", None)
    elif isinstance(source, dict):
        shapes = source.get("input_shapes")
    elif isinstance(source, (str, os.PathLike)):
        from dcoc.readfile import read_json

        try:
            data = read_json(source, "--schedules file", expect=None)
        except DcocError:
            return None  # load_schedules reports it
        shapes = data.get("input_shapes") if isinstance(data, dict) else None
    else:
        return None
    if not isinstance(shapes, dict) or not shapes:
        return None
    try:
        return {str(k): tuple(int(d) for d in v) for k, v in shapes.items()}
    except (TypeError, ValueError):
        return None  # not shapes: the caller's own checks apply


def resolve_hw(hardware, board):
    from dcoc.targets import get
    from dcoc.targets.vta import HWConfig

    tg = get("vta")
    if board is not None and (not isinstance(board, str) or board.strip().lower() not in tg.boards):
        raise ConfigError(f"unknown board (--board) {str(board)[:40]!r} for dcoc run on vta; "
                          f"choose one of {', '.join(tg.boards)}")
    if hardware is None:
        return HWConfig.preset("pynq" if board in (None, "pynq") else board.strip().lower())
    return tg.parse_hw(hardware, board)
