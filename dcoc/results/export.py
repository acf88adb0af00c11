"""Export what an accelerator tuning run produced, in a form that lives without dcoc.

:func:`dcoc.api.export.export` picks the kind of export: llvm / cuda runs become a TVM
shared library (:mod:`tvm_plugin.export`); accelerator runs come here.

* accelerators (vta, systolic): a directory holding the hardware config in the target's
  own format (VTA: ``vta_config.json`` with the keys of VTA's ``config/vta_config.json``),
  a resource / clock report, the per-layer schedules and the commands that reproduce the
  latency.  ``dcoc run``'s executable is not exported: its accelerator layers are Python
  packed functions registered in the running process (the simulator), so a saved library
  would not load anywhere else.

:func:`read_source` reads a :class:`~dcoc.results.result.TuneResult` or a finished run's
work dir; :func:`export_accelerator` writes the directory; :func:`check` re-simulates an
exported accelerator directory from its files alone.
"""
from __future__ import annotations

import json
import math
import os
import shlex
import shutil

from dcoc.errors import ConfigError, DcocError
from dcoc.results.export_check import EXPORT_FILE, LAYERS_FILE, REPORT_FILE, SCHEDULES_FILE, check

__all__ = ["read_source", "export_accelerator", "check", "check_export_path", "schedules_file",
           "write_hardware", "EXPORT_FILE"]

#: why ``dcoc run``'s executable is not part of an export (README text)
RUN_NOT_EXPORTED = (
    "`dcoc run`'s compiled model is not exported: its accelerator layers call packed "
    "functions that dcoc registers in the running Python process (the simulator), so a "
    "saved library would not load without dcoc.  Deploying on a real FPGA needs VTA's own "
    "runtime and a bitstream built from the hardware config.")


# ============================================================================ entry points
def check_export_path(path: str) -> str:
    """Check, before any work, that ``path`` can take an export (a ``.so`` file, or a
    directory: not an existing file; writable).  One-line DcocError otherwise."""
    from dcoc.paths import check_output_file

    p = os.fspath(path)
    if p.endswith(".so"):
        return check_output_file(p, "export file")
    if os.path.exists(p) and not os.path.isdir(p):
        raise ConfigError(f"export path {p} exists and is not a directory")
    check_output_file(os.path.join(p, EXPORT_FILE), "export directory")
    return p


# ============================================================================ sources
def read_source(source):
    """(result dict, work dir, in-memory executable or None) of a TuneResult / work dir."""
    if hasattr(source, "to_json"):
        return source.to_json(), source.work_dir, getattr(source, "executable", None)
    wd = os.fspath(source)
    if not os.path.isdir(wd):
        raise ConfigError(f"'{wd}' is not a directory (expected the work dir of a finished "
                          "`dcoc tune` run)")
    data = _read_json(os.path.join(wd, "result.json"), "work dir")
    data.setdefault("work_dir", wd)
    if not data.get("model_path") or not data.get("input_shapes"):
        ident = os.path.join(wd, "dcoc_run.json")
        if os.path.isfile(ident):  # older results: the model/shapes the work dir belongs to
            idn = _read_json(ident, "work dir")
            data.setdefault("input_shapes", idn.get("input_shapes"))
    return data, wd, None


def _read_json(path: str, what: str) -> dict:
    from dcoc.readfile import read_json

    if not os.path.lexists(path):
        hint = " (did the run finish?)" if path.endswith("result.json") else ""
        raise ConfigError(f"{what} file {path} does not exist{hint}")
    return read_json(path, f"{what} file", ConfigError)


def model_source(data: dict) -> str:
    """What :func:`tvm_plugin.frontend.load` takes to load the run's model again: the
    recorded ONNX path (``model_path``), else the model's name (a zoo name)."""
    src = data.get("model_path") or data.get("model")
    if not src:
        raise ConfigError("the result does not name its model")
    return str(src)


def _write_text(path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise DcocError(f"cannot write {path}: {exc.strerror or exc}") from None


def _write_json(path: str, obj) -> None:
    _write_text(path, json.dumps(obj, indent=2, default=_default) + "\n")


def _default(o):
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, float) and not math.isfinite(o):
        return None
    return str(o)


def _prepare_dir(path: str) -> None:
    if os.path.exists(path) and not os.path.isdir(path):
        raise ConfigError(f"export path {path} exists and is not a directory")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create export directory {path}: {exc.strerror or exc}") from None


# ============================================================================ accelerators
def _run_command(data: dict, schedules_path: str) -> str | None:
    """The ``dcoc run`` command that rebuilds the model on this hardware (targets that run
    models: :data:`dcoc.targets.registry.RUNNERS`)."""
    from dcoc.targets.registry import RUNNERS

    if data.get("target") not in RUNNERS:
        return None
    cmd = ["dcoc", "run", model_source(data), "--schedules", schedules_path,
           "--board", str(data.get("board") or "pynq")]
    for name, shape in (data.get("input_shapes") or {}).items():
        cmd += ["--input-shape", f"{name}:{','.join(str(int(d)) for d in shape)}"]
    return " ".join(shlex.quote(c) for c in cmd)


def export_accelerator(data: dict, work_dir: str | None, path: str) -> dict:
    """Write an accelerator run's export directory to ``path`` (``data``: the result's
    JSON); returns the export's metadata (what ``export.json`` holds, plus ``files``)."""
    from dcoc.targets import get

    tg = get(data["target"])
    bd = tg.board(data.get("board") or tg.default_board)
    hw = tg.parse_hw(data.get("hardware"), bd.name)
    if hw is None:
        raise ConfigError("the result holds no hardware config")
    report = write_hardware(tg, bd, hw, path)
    files = [tg.config_file, REPORT_FILE]
    _write_json(os.path.join(path, SCHEDULES_FILE), schedules_file(tg, bd, hw, data))
    files.append(SCHEDULES_FILE)
    if work_dir and os.path.isfile(os.path.join(work_dir, LAYERS_FILE)):
        shutil.copyfile(os.path.join(work_dir, LAYERS_FILE), os.path.join(path, LAYERS_FILE))
        files.append(LAYERS_FILE)

    # the commands, run from inside the export directory (it may be moved)
    check_cmd = "dcoc export --check ." if LAYERS_FILE in files else None
    run_cmd = _run_command(data, SCHEDULES_FILE)
    meta = {"target": tg.name, "board": bd.name, "model": data.get("model"),
            "model_path": data.get("model_path"), "input_shapes": data.get("input_shapes"),
            "hardware": hw.name, "latency_ms": data.get("latency_ms"),
            "trials": data.get("trials"), "tuner": data.get("tuner"), "seed": data.get("seed"),
            "work_dir": work_dir, "commands": {"check": check_cmd, "run": run_cmd},
            "dcoc_run_executable": "not exported: " + RUN_NOT_EXPORTED}
    _write_json(os.path.join(path, EXPORT_FILE), meta)
    files.append(EXPORT_FILE)
    _write_text(os.path.join(path, "README.md"),
                _accelerator_readme(tg, bd, hw, data, report, check_cmd, run_cmd))
    files.append("README.md")
    return {**meta, "path": path, "files": files}


def write_hardware(tg, bd, hw, path: str) -> dict:
    """Create the directory ``path`` and write the hardware config in the target's own
    format and the resource / clock report (dcoc's resource model) there; returns the report."""
    _prepare_dir(path)
    _write_json(os.path.join(path, tg.config_file), tg.export_config(hw, bd))
    res = tg.resources(hw, bd)
    budgets = {k: v[0] for k, v in tg.budgets(bd).items()}
    report = {"hardware": hw.name, "target": tg.name, "board": bd.name,
              "part": getattr(bd, "part", None), "clock_mhz": hw.freq_mhz,
              "bus_bytes": hw.bus_bytes, "resources": res, "budgets": budgets,
              "utilization": {k: res[k] / budgets[k] for k in budgets if k in res and budgets[k]},
              "source": "dcoc's resource and clock model (docs/vta.md), not a synthesis report"}
    report.update(tg.hardware_report(hw))
    notes = tg.hw_notes(hw, bd)  # buildable by the target's flow; what latencies rest on
    if notes:
        report["notes"] = notes
    _write_json(os.path.join(path, REPORT_FILE), report)
    return report


def schedules_file(tg, bd, hw, data: dict) -> dict:
    """A `dcoc run --schedules` file of a model's result ``data``: hardware + per-layer knobs."""
    sched = {"target": tg.name, "board": bd.name, "hardware": _hw_fields(hw),
             "schedules": data.get("schedules") or {}, "layers": data.get("layers") or [],
             "cpu_layers": data.get("cpu_layers") or [], "latency_ms": data.get("latency_ms")}
    if data.get("input_shapes"):
        sched["input_shapes"] = data["input_shapes"]
    return sched


def _hw_fields(hw) -> dict:
    """A hardware config's constructor fields plus ``name`` (as ``result.json`` has them)."""
    import dataclasses

    return {**{f.name: getattr(hw, f.name) for f in dataclasses.fields(hw) if f.init}, "name": hw.name}


def _accelerator_readme(tg, bd, hw, data, report, check_cmd, run_cmd) -> str:
    r = report["resources"]
    lat = data.get("latency_ms")
    lines = [f"# {data.get('model')} on {hw.name} ({tg.name}, {bd.name})", "",
             f"Exported by dcoc from a tuning run ({data.get('trials')} trials, tuner "
             f"{data.get('tuner')}, seed {data.get('seed')}).  Accelerator latency "
             f"{lat:.3f} ms per inference on dcoc's simulator (the layers the accelerator runs; "
             "the CPU layers are not included)." if lat is not None else "", "",
             "| file | what |", "|---|---|"]
    lines.append(f"| `{tg.config_file}` | {tg.config_file_description} |")
    lines += [f"| `{REPORT_FILE}` | resources (BRAM36, DSP, LUT) against the board, clock, bus |",
              f"| `{SCHEDULES_FILE}` | the hardware and every layer's schedule (knobs), per-layer "
              "cycles and time |"]
    if check_cmd:
        lines.append(f"| `{LAYERS_FILE}` | the layers' workloads, for `dcoc export --check` |")
    lines += [f"| `{EXPORT_FILE}` | this export's metadata and commands |", "",
              "## Hardware", "",
              f"- {report.get('part') or bd.name}: clock {hw.freq_mhz:g} MHz, bus {hw.bus_bytes} B",
              f"- BRAM36 {r.get('bram36')}, DSP {r.get('dsp')}, LUT {r.get('lut')} "
              f"(budgets: {', '.join(f'{k} {v:g}' for k, v in report['budgets'].items())})",
              "- these are dcoc's resource and clock model estimates, not synthesis results", ""]
    lines += tg.build_notes(hw, bd)
    lines += ["## Reproducing the latency", "", "From this directory:", ""]
    if check_cmd:
        lines += ["Re-simulate every layer from the files here (timing only):", "", "```bash",
                  check_cmd, "```", ""]
    if run_cmd:
        lines += ["Quantize the model to int8 and run it on the simulator with these schedules, "
                  "bit-exact against an integer reference (prints the accelerator time):", "",
                  "```bash", run_cmd, "```", "",
                  "`dcoc run` times each layer with the epilogue the quantized model has (with or "
                  "without a bias, plus residual adds) -- the same epilogue the tuner timed -- so "
                  "its accelerator time equals the tuned latency to the cycle (docs/run.md).", ""]
    lines += ["## Not exported", "", RUN_NOT_EXPORTED, ""]
    return "\n".join(lines)
