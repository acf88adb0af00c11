"""The result of co-designing one accelerator for a mix of models (``dcoc.tune([m1, m2, ...])``).

:class:`MixResult` holds one :class:`~dcoc.results.result.TuneResult` per model (the shared
hardware, that model's schedules, latency, baseline, CPU layers: the fields a single-model
result has), the mix objective of the design and of the baseline, and, when computed, the
single-model designs evaluated on the whole mix (:attr:`MixResult.singles`): each model's
own co-design, its hardware with every other model's schedules tuned there with the same
per-model budget.  :meth:`MixResult.summary` is the table ``dcoc tune M1 M2 ...`` prints.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Any

from dcoc.results.result import TuneResult, _hw_dict, _json_default
from dcoc.results.text import render_table


def _ratio(a, b) -> float | None:
    return a / b if a and b and math.isfinite(a) and math.isfinite(b) else None


@dataclass
class MixResult:
    """One accelerator for several models.

    models: one :class:`TuneResult` per model (same hardware), in the order given.
    weights: one per model; objective: ``"weighted"`` (sum of weight x latency) or
        ``"max"`` (the largest weight x latency).
    objective_ms / baseline_objective_ms: the objective of the design and of the board's
        baseline hardware with default schedules (accelerator latencies).
    singles: ``[{"design", "hardware", "latency_ms": {model: ms}, "objective_ms",
        "trials"}]``, one per model's own co-design evaluated on the mix (None: not run).
    """

    target: str
    board: str
    tuner: str
    seed: int
    trials: int
    objective: str
    weights: list
    hardware: Any
    objective_ms: float
    baseline_objective_ms: float
    models: list = field(default_factory=list)
    singles: list | None = None
    history: list = field(default_factory=list)
    pareto: list | None = None
    work_dir: str | None = None
    wall_seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return [str(r.model) for r in self.models]

    @property
    def speedup(self) -> float:
        return _ratio(self.baseline_objective_ms, self.objective_ms) or 0.0

    @property
    def best_single(self) -> dict | None:
        """The single-model design with the lowest mix objective (None: none ran)."""
        return min(self.singles, key=lambda s: s["objective_ms"]) if self.singles else None

    def export(self, path: str) -> dict:
        """Write one hardware config and one schedules file per model to ``path``
        (:func:`export_mix`); returns the export's metadata."""
        return export_mix(self.to_json(), self.work_dir, os.fspath(path))

    def to_json(self) -> dict:
        return {
            "mix": True, "target": self.target, "board": self.board, "tuner": self.tuner,
            "seed": self.seed, "trials": self.trials, "objective": self.objective,
            "weights": list(self.weights), "hardware": _hw_dict(self.hardware),
            "objective_ms": self.objective_ms, "baseline_objective_ms": self.baseline_objective_ms,
            "speedup": self.speedup, "models": [r.to_json() for r in self.models],
            "singles": self.singles,
            "history": [[int(t), float(v)] for t, v in self.history],
            **({"pareto": self.pareto} if self.pareto is not None else {}),
            "work_dir": self.work_dir, "wall_seconds": round(self.wall_seconds, 2),
            **({"extra": self.extra} if self.extra else {}),
        }

    def save(self, path: str) -> str:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_json(), f, indent=2, default=_json_default)
            f.write("\n")
        return path

    # ------------------------------------------------------------------ text
    def summary(self) -> str:
        """The per-model table (latency, against the preset and against every single-model
        design) and the objective lines."""
        from dcoc.targets import get

        tg = get(self.target)
        singles = self.singles or []
        head = ["model", "weight", "layers", "ms", "preset ms", "vs preset"]
        for s in singles:
            head += [f"on {s['design']}'s design", "vs it"]
        rows = []
        for r, w in zip(self.models, self.weights):
            row = [r.model, f"{w:g}", len(r.layers), f"{r.latency_ms:.3f}",
                   f"{r.baseline_latency_ms:.3f}", _x(_ratio(r.baseline_latency_ms, r.latency_ms))]
            for s in singles:
                ms = s["latency_ms"][r.model]
                row += [f"{ms:.3f}", _x(_ratio(ms, r.latency_ms))]
            rows.append(row)
        obj = "weighted sum" if self.objective == "weighted" else "max of weight x ms"
        row = [f"objective ({obj})", "", "", f"{self.objective_ms:.3f}",
               f"{self.baseline_objective_ms:.3f}", _x(self.speedup)]
        for s in singles:
            row += [f"{s['objective_ms']:.3f}", _x(_ratio(s["objective_ms"], self.objective_ms))]
        rows.append(row)
        right = set(range(1, len(head)))
        out = [render_table(head, rows, right),
               "(ms: accelerator latency on the mix design; vs: that design's latency over the mix "
               "design's, > 1: the mix design is faster)", "",
               f"hardware    {tg.describe_hw(self.hardware, self.board)}",
               f"baseline    {tg.baseline_label(self.board)}"]
        best = self.best_single
        if best is not None:
            gain = 1 - self.objective_ms / best["objective_ms"]
            out.append(f"singles     best single-model design: {best['design']}'s ({best['hardware']}), "
                       f"objective {best['objective_ms']:.3f} ms; the mix design's is "
                       f"{abs(gain) * 100:.1f}% {'lower' if gain >= 0 else 'HIGHER'}")
            out.append("            (each model's own co-design, every other model's schedules re-tuned on "
                       f"its hardware; {singles[0]['trials']} trials per design)")
        ex = self.extra or {}
        out.append(f"layers      {ex.get('layers')} distinct accelerator layers, {ex.get('shared')} in "
                   "several models (measured once)")
        out.append(f"trials      {self.trials}  tuner {self.tuner}  seed {self.seed}  "
                   f"wall {self.wall_seconds:.0f} s")
        if ex.get("search"):
            out.append(f"search      {ex['search']}")
        out.append(f"work dir    {self.work_dir}")
        return "\n".join(out)


def _x(r) -> str:
    return f"{r:.2f}x" if r is not None else "-"


def slug(text: str) -> str:
    """A file-name-safe form of a model name (as :func:`dcoc.api.tune.default_work_dir` makes it)."""
    import re

    return re.sub(r"[^A-Za-z0-9_.-]+", "-", str(text)).strip("-") or "model"


def layers_file(name: str) -> str:
    """A model's layers file in a mix's work dir and export (``dcoc export --check`` reads it)."""
    return f"layers-{slug(name)}.json"


def schedules_file_name(name: str) -> str:
    """A model's ``dcoc run --schedules`` file in a mix's export."""
    return f"schedules-{slug(name)}.json"


def export_mix(data: dict, work_dir: str | None, path: str) -> dict:
    """Write a mix run's export directory (``data``: its ``result.json``): the hardware
    config in the target's own format and the resource report once, a schedules file and a
    layers file per model, ``export.json`` (every model's ``dcoc run`` command) and a
    README; returns the export's metadata plus ``files``."""
    import shutil

    from dcoc.results.export import (
        EXPORT_FILE,
        REPORT_FILE,
        _run_command,
        _write_json,
        _write_text,
        schedules_file,
        write_hardware,
    )
    from dcoc.targets import get

    tg = get(data["target"])
    bd = tg.board(data["board"])
    hw = tg.parse_hw(data["hardware"], bd.name)
    report = write_hardware(tg, bd, hw, path)
    files, models = [tg.config_file, REPORT_FILE], []
    for m, w in zip(data["models"], data["weights"]):
        name = str(m["model"])
        sf, lf = schedules_file_name(name), layers_file(name)
        _write_json(os.path.join(path, sf), schedules_file(tg, bd, hw, m))
        files.append(sf)
        src = os.path.join(work_dir or "", lf)
        if work_dir and os.path.isfile(src):
            shutil.copyfile(src, os.path.join(path, lf))
            files.append(lf)
        models.append({"model": name, "model_path": m.get("model_path"), "weight": w,
                       "latency_ms": m.get("latency_ms"), "schedules_file": sf, "layers_file": lf,
                       "commands": {"run": _run_command(m, sf)}})
    check_cmd = "dcoc export --check ." if all(m["layers_file"] in files for m in models) else None
    meta = {"target": tg.name, "board": bd.name, "model": "+".join(m["model"] for m in models),
            "hardware": hw.name, "objective": data["objective"], "objective_ms": data["objective_ms"],
            "models": models, "trials": data.get("trials"), "tuner": data.get("tuner"),
            "seed": data.get("seed"), "work_dir": work_dir, "commands": {"check": check_cmd}}
    _write_json(os.path.join(path, EXPORT_FILE), meta)
    files.append(EXPORT_FILE)
    _write_text(os.path.join(path, "README.md"), _readme(tg, bd, hw, meta, report))
    files.append("README.md")
    return {**meta, "path": path, "files": files}


def _readme(tg, bd, hw, meta, report) -> str:
    from dcoc.results.export import REPORT_FILE

    r = report["resources"]
    lines = [f"# {len(meta['models'])} models on one {tg.name} design: {hw.name} ({bd.name})", "",
             f"Exported by dcoc from a model-mix co-design ({meta['trials']} trials, tuner {meta['tuner']}, "
             f"seed {meta['seed']}; objective {meta['objective']}: {meta['objective_ms']:.3f} ms).  "
             f"`{tg.config_file}` is the one hardware config ({tg.config_file_description}); "
             f"`{REPORT_FILE}` its resources (BRAM36 {r.get('bram36')}, DSP {r.get('dsp')}, LUT {r.get('lut')}; "
             "dcoc's model, not synthesis).  Per model:", "",
             "| model | weight | accelerator ms | schedules | run it |", "|---|---|---|---|---|"]
    for m in meta["models"]:
        run = f"`{m['commands']['run']}`" if m["commands"]["run"] else "-"
        lines.append(f"| {m['model']} | {m['weight']:g} | {m['latency_ms']:.3f} | `{m['schedules_file']}` | {run} |")
    lines += ["", "Run the commands from this directory; each runs its model quantized to int8 on the "
              "simulator with its schedules, bit-exact against an integer reference."]
    if meta["commands"]["check"]:
        lines += ["", f"`{meta['commands']['check']}` re-simulates every model's layers from the files here."]
    return "\n".join(lines) + "\n"


def model_result(data: dict) -> TuneResult:
    """A model's :class:`TuneResult` from its entry of a mix's ``result.json``."""
    keep = {"model", "model_path", "target", "board", "hardware", "schedules", "latency_ms",
            "baseline_latency_ms", "trials", "tuner", "seed", "layers", "cpu_layers",
            "cpu_latency_ms", "cpu_method", "input_shapes", "work_dir", "database_path", "method"}
    return TuneResult(**{k: v for k, v in data.items() if k in keep})


__all__ = ["MixResult", "export_mix", "layers_file", "model_result", "schedules_file_name", "slug"]
