"""``dcoc export --check``: re-simulate an exported accelerator directory from its files.

Every file is read by :mod:`dcoc.readfile` and every field the check uses is validated
before anything is computed; a bad one is one line naming the file and the field
(:class:`~dcoc.errors.ConfigError`, exit 2), never an internal error.
"""
from __future__ import annotations

import math
import os

from dcoc.errors import ConfigError, DcocError

EXPORT_FILE = "export.json"
REPORT_FILE = "hardware_report.json"
SCHEDULES_FILE = "schedules.json"
LAYERS_FILE = "layers.json"


def _read(path: str, name: str, expect=dict):
    from dcoc.readfile import read_json

    p = os.path.join(path, name)
    if not os.path.lexists(p):
        raise ConfigError(f"{path} has no {name} (not an export directory?)")
    return read_json(p, name, ConfigError, expect=expect)


def _number(d: dict, name: str, field: str, *, positive=True, optional=False, integer=False):
    v = d.get(field)
    if v is None and optional:
        return None
    ok = isinstance(v, int if integer else (int, float)) and not isinstance(v, bool)
    if not ok or not math.isfinite(v) or (positive and v <= 0):
        kind = "an integer" if integer else "a finite number"
        raise ConfigError(f"{name}: field {field} must be {kind}{' > 0' if positive else ''}, "
                          f"got {_show(v)}")
    return v


def _show(v) -> str:
    from dcoc.readfile import json_type

    return "nothing" if v is None else f"{json_type(v)} {str(v)[:40]!r}"


def _target(meta: dict):
    from dcoc.targets import available, get, is_accelerator

    t = meta.get("target")
    if not isinstance(t, str) or t not in available() or not is_accelerator(t):
        raise ConfigError(f"{EXPORT_FILE}: field target must name an accelerator target "
                          f"({', '.join(x for x in available() if is_accelerator(x))}), got {_show(t)}")
    return get(t)


def _config_fields(tg, config: dict, board) -> None:
    """Each field of the target's config file has the type of the one dcoc writes."""
    name = tg.config_file
    ref = tg.export_config(tg.default_hw(tg.board(board)), tg.board(board))
    for k, v in config.items():
        want = ref.get(k)
        if isinstance(want, str) or k == "name":
            if not isinstance(v, str):
                raise ConfigError(f"{name}: field {k} must be a string, got {_show(v)}")
        elif isinstance(want, int) and not isinstance(want, bool):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ConfigError(f"{name}: field {k} must be an integer >= 0, got {_show(v)}")
        elif isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            if want is not None or not isinstance(v, str):
                raise ConfigError(f"{name}: field {k} must be a number >= 0, got {_show(v)}")


def _hardware(path: str, meta: dict, tg):
    report = _read(path, REPORT_FILE)
    _number(report, REPORT_FILE, "clock_mhz")
    _number(report, REPORT_FILE, "bus_bytes", integer=True)
    config = _read(path, tg.config_file)
    board = meta.get("board") if meta.get("board") in tg.boards else tg.default_board
    _config_fields(tg, config, board)
    try:
        return tg.hw_from_export(config, report)
    except (DcocError, ValueError, TypeError, KeyError, OverflowError) as exc:
        raise ConfigError(f"{tg.config_file}: not a {tg.name} hardware config ("
                          f"{type(exc).__name__ if not isinstance(exc, DcocError) else ''}"
                          f"{': ' if not isinstance(exc, DcocError) else ''}{exc})") from None


def _layers(path: str, tg, layers_file: str = LAYERS_FILE) -> list:
    from dcoc.codesign.prior import read_layers

    p = os.path.join(path, layers_file)
    if not os.path.lexists(p):
        raise ConfigError(f"{path} has no {layers_file}: nothing to simulate")
    try:
        layers = list(read_layers(p, tg, layers_file).values())
    except DcocError as exc:
        raise ConfigError(str(exc)) from None
    if not layers:
        raise ConfigError(f"{layers_file} lists no layer: nothing to simulate")
    for layer in layers:
        if isinstance(layer.count, bool) or layer.count < 1:
            raise ConfigError(f"{layers_file}: field count of layer {layer.name} must be an "
                              f"integer >= 1, got {layer.count}")
    return layers


def _schedules(path: str, tg, layers, hw, schedules_file: str = SCHEDULES_FILE) -> dict:
    from dcoc.targets.hooks import knobs_problem

    sched = _read(path, schedules_file).get("schedules")
    if not isinstance(sched, dict):
        raise ConfigError(f"{schedules_file}: field schedules must be an object {{layer: "
                          f"knobs}}, got {_show(sched)}")
    for layer in layers:
        k = sched.get(layer.name)
        if k is None:
            raise ConfigError(f"{schedules_file}: field schedules has no schedule for layer "
                              f"{layer.name}")
        if not isinstance(k, dict):
            raise ConfigError(f"{schedules_file}: field schedules.{layer.name} must be an "
                              f"object of knobs, got {_show(k)}")
        why = knobs_problem(tg.sw_space(layer, hw), k, True)
        if why:
            raise ConfigError(f"{schedules_file}: field schedules.{layer.name}: {why} the "
                              f"schedule space of {layer.name} on {hw.name}")
    return sched


def _simulate(tg, hw, layers, sched) -> tuple[float, list]:
    """(seconds, per-layer rows) of ``layers`` with the checked schedules ``sched`` on ``hw``."""
    m = tg.measurer(n_workers=0)
    rows, total = [], 0.0
    try:
        for layer in layers:
            r = m.measure(tg.task(layer, hw), [sched[layer.name]])[0]
            if not r.valid:
                raise DcocError(f"layer {layer.name}: the exported schedule is not valid on "
                                f"{hw.name} ({r.error_msg or r.error_no})")
            total += layer.count * r.cost
            rows.append({"layer": layer.name, "count": layer.count, "ms": r.cost * 1e3})
    finally:
        m.close()
    return total, rows


def _mix_models(meta: dict) -> list:
    """The ``models`` entries of a model mix's export.json, each field checked."""
    models = meta.get("models")
    if not isinstance(models, list) or not models:
        raise ConfigError(f"{EXPORT_FILE}: field models must be a non-empty list, got {_show(models)}")
    if meta.get("objective") not in ("weighted", "max"):
        raise ConfigError(f"{EXPORT_FILE}: field objective must be 'weighted' or 'max', got "
                          f"{_show(meta.get('objective'))}")
    for i, m in enumerate(models):
        if not isinstance(m, dict) or not isinstance(m.get("model"), str):
            raise ConfigError(f"{EXPORT_FILE}: field models[{i}] must be an object with a model name")
        _number(m, EXPORT_FILE, "weight")
        for f in ("schedules_file", "layers_file"):
            v = m.get(f)
            if not isinstance(v, str) or not v or os.path.basename(v) != v or v.startswith("."):
                raise ConfigError(f"{EXPORT_FILE}: field models[{i}].{f} must be a file name in "
                                  f"the export directory, got {_show(v)}")
    return models


def check(path: str) -> dict:
    """Re-simulate an exported accelerator directory from its files alone (hardware config,
    schedules, layer workloads): ``{"latency_ms", "exported_latency_ms", "layers"}`` (a
    model mix: its objective, and every model's layers and latency under ``models``).
    Every field is checked before anything is computed."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise ConfigError(f"--check {path}: not a directory (expected an export directory)")
    meta = _read(path, EXPORT_FILE)
    tg = _target(meta)
    hw = _hardware(path, meta, tg)
    if meta.get("models") is None:
        exported = _number(meta, EXPORT_FILE, "latency_ms", optional=True)
        layers = _layers(path, tg)
        sched = _schedules(path, tg, layers, hw)
        total, rows = _simulate(tg, hw, layers, sched)
        return {"latency_ms": total * 1e3, "exported_latency_ms": exported,
                "hardware": hw.name, "layers": rows}
    from dcoc.codesign.mix import combine

    models = _mix_models(meta)
    exported = _number(meta, EXPORT_FILE, "objective_ms", optional=True)
    checked = []
    for m in models:  # every model's files checked before any simulation
        layers = _layers(path, tg, m["layers_file"])
        checked.append((layers, _schedules(path, tg, layers, hw, m["schedules_file"])))
    lats, rows = [], []
    for m, (layers, sched) in zip(models, checked):
        total, r = _simulate(tg, hw, layers, sched)
        lats.append(total * 1e3)
        rows += [{"model": m["model"], **row} for row in r]
    return {"latency_ms": combine(lats, [m["weight"] for m in models], meta["objective"]),
            "exported_latency_ms": exported, "hardware": hw.name, "layers": rows,
            "models": {m["model"]: lat for m, lat in zip(models, lats)}}
