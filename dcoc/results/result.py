"""Results of tuning: one task (:class:`TaskResult`) or a whole model (:class:`TuneResult`)."""
from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field
from typing import Any


@dataclass
class TaskResult:
    """Result of tuning one task.

    best_knobs: the best config found (software knobs; plus hardware knobs in co-design).
    best_cost: its cost in seconds (``inf`` if nothing valid was found).
    trials: measurements spent.
    history: ``[(trial_index, cost_seconds, wall_seconds)]`` per trial (cost = that trial's
        measured cost, ``inf`` if it failed; wall = seconds since tuning started).
    """

    task_name: str
    tuner: str
    seed: int
    best_knobs: dict | None
    best_cost: float
    trials: int
    history: list = field(default_factory=list)
    hw_name: str | None = None
    flop: float = 0.0

    @property
    def best_gops(self) -> float:
        return self.flop / self.best_cost / 1e9 if self.best_cost and math.isfinite(self.best_cost) else 0.0

    def best_curve(self) -> list[tuple[int, float]]:
        """[(trial_index, best cost so far)]."""
        out, best = [], math.inf
        for t, c, _ in self.history:
            best = min(best, c)
            out.append((t, best))
        return out

    def trials_to_reach(self, cost: float, rtol: float = 0.0) -> int | None:
        """Trials (1-based count) needed to reach ``cost * (1 + rtol)``, or None."""
        for t, best in self.best_curve():
            if best <= cost * (1 + rtol):
                return t + 1
        return None

    def to_json(self) -> dict:
        return {
            "task": self.task_name, "tuner": self.tuner, "seed": self.seed, "hw": self.hw_name,
            "best_knobs": self.best_knobs,
            "best_cost": self.best_cost if math.isfinite(self.best_cost) else None,
            "trials": self.trials,
            "history": [[t, c if math.isfinite(c) else None, round(w, 4)] for t, c, w in self.history],
        }


@dataclass
class TuneResult:
    """Result of tuning a whole model (``dcoc.tune``).

    hardware: the chosen HWConfig (VTA target) or None.
    schedules: ``{task name: knobs}`` (VTA) or ``{task name: trace json}`` (llvm/cuda).
    latency_ms: latency of the tuned model (accelerator targets: the accelerator's time for
        the layers it runs, on its simulator -- without the CPU layers; llvm/cuda: the
        compiled model, measured).
    cpu_latency_ms: accelerator targets: the layers left on the CPU, timed on this host
        (:mod:`dcoc.results.cpu_layers`; ``cpu_method`` says how), None if not timed.
    model_latency_ms: accelerator + CPU layers (None when the CPU layers were not timed).
    throughput: inferences per second (1000 / latency_ms).
    baseline_latency_ms: VTA: pynq preset hardware with default schedules; llvm/cuda:
        the untuned compiled model, measured.
    history: ``[[trial_index, best_latency_ms_so_far]]``.
    layers: per-layer rows for the summary table.
    """

    target: str
    tuner: str
    seed: int
    latency_ms: float
    baseline_latency_ms: float
    trials: int
    hardware: Any = None
    schedules: dict = field(default_factory=dict)
    history: list = field(default_factory=list)
    layers: list = field(default_factory=list)
    cpu_layers: list = field(default_factory=list)
    board: str | None = None
    #: what the tuner ran, in words (``dcoc.tuners.describe``), as summaries print it
    method: str | None = None
    model: str | None = None
    work_dir: str | None = None
    database_path: str | None = None
    wall_seconds: float = 0.0
    executable: Any = field(default=None, repr=False)
    extra: dict = field(default_factory=dict)
    #: accelerator targets: the CPU layers' time per inference on this host (ms), and how
    cpu_latency_ms: float | None = None
    cpu_method: str | None = None
    #: VTA with ``pareto=True``: the throughput/area front (:mod:`dcoc.results.pareto`), else None
    pareto: list | None = None
    #: ``{input name: shape}`` the model was tuned at when not its declared shapes (the
    #: task names depend on it; ``dcoc.run`` / ``run`` use it), else None
    input_shapes: dict | None = None
    #: how to load the model again: the absolute path of the ONNX file it was given as,
    #: or its zoo / ``light_*`` name (None for an in-memory ``onnx.ModelProto``)
    model_path: str | None = None
    #: llvm: ONNX Runtime's latency of the same model on the threads TVM's runtime uses
    onnxruntime_ms: float | None = None
    _runner: Any = field(default=None, repr=False)

    @property
    def throughput(self) -> float:
        return 1000.0 / self.latency_ms if self.latency_ms and math.isfinite(self.latency_ms) else 0.0

    @property
    def model_latency_ms(self) -> float | None:
        """Accelerator targets: accelerator + CPU layers, run one after the other."""
        if self.cpu_latency_ms is None:
            return None
        return self.latency_ms + self.cpu_latency_ms

    @property
    def baseline_model_latency_ms(self) -> float | None:
        """Accelerator targets: the baseline accelerator + the same CPU layers."""
        if self.cpu_latency_ms is None:
            return None
        return self.baseline_latency_ms + self.cpu_latency_ms

    @property
    def speedup(self) -> float:
        return self.baseline_latency_ms / self.latency_ms if self.latency_ms else 0.0

    def run(self, inputs: dict) -> list:
        """Run the compiled model on ``{input name: ndarray}``; numpy outputs.

        llvm/cuda: the tuned TVM executable.  VTA: the model quantized to int8 and compiled
        into one TVM executable whose VTA layers run on the simulator with these schedules
        on this hardware (built on first use; calibrated on random inputs -- use
        :func:`dcoc.run` for calibration data and the bit-exact / float comparisons).
        """
        if self._runner is None and (self.model_path or self.model):
            from dcoc.registry import load
            from dcoc.targets.registry import RUNNERS

            spec = RUNNERS.get(str(self.target))  # the targets that run models, by name
            if spec is not None:
                self._runner = load(spec)(self, input_shapes=self.input_shapes)
        if self._runner is None:
            raise RuntimeError("this result holds no compiled model")
        return self._runner(inputs)

    def export(self, path: str) -> dict:
        """Write what this run produced to ``path`` (:mod:`dcoc.api.export`): llvm/cuda
        a shared library stock TVM loads (``X.so``, or ``PATH/model.so``) with a README;
        vta/systolic a directory with the hardware config in the target's own format
        (``vta_config.json``), a resource/clock report, the schedules and the commands
        that reproduce the latency.  Returns the export's metadata (``files``, ...)."""
        from dcoc.registry import load

        return load("dcoc.api.export:export")(self, path)  # the API floor picks the kind

    def to_json(self) -> dict:
        hw = _hw_dict(self.hardware) if self.hardware is not None else None
        return {
            "model": self.model,
            **({"model_path": self.model_path} if self.model_path else {}),
            "target": self.target,
            "board": self.board,
            "hardware": hw,
            "schedules": self.schedules,
            "latency_ms": self.latency_ms,
            "throughput": self.throughput,
            "baseline_latency_ms": self.baseline_latency_ms,
            "speedup": self.speedup,
            "trials": self.trials,
            "tuner": self.tuner,
            "method": self.method,
            "seed": self.seed,
            "history": [[int(t), float(v)] for t, v in self.history],
            "layers": self.layers,
            "cpu_layers": self.cpu_layers,
            **({"accelerator_latency_ms": self.latency_ms, "cpu_latency_ms": self.cpu_latency_ms,
                "model_latency_ms": self.model_latency_ms,
                "baseline_model_latency_ms": self.baseline_model_latency_ms,
                "cpu_method": self.cpu_method} if self.cpu_method is not None else {}),
            "work_dir": self.work_dir,
            "database_path": self.database_path,
            "wall_seconds": round(self.wall_seconds, 2),
            **({"extra": self.extra} if self.extra else {}),
            **({"pareto": self.pareto} if self.pareto is not None else {}),
            **({"onnxruntime_ms": self.onnxruntime_ms} if self.onnxruntime_ms is not None else {}),
            **({"input_shapes": {k: [int(d) for d in v] for k, v in self.input_shapes.items()}}
               if self.input_shapes else {}),
        }

    def save(self, path: str) -> str:
        d = os.path.dirname(os.path.abspath(path))
        os.makedirs(d, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_json(), f, indent=2, default=_json_default)
            f.write("\n")
        return path


def _hw_dict(hw) -> dict:
    """The HWConfig fields (its constructor arguments) plus ``name``: nothing derived or private."""
    if hasattr(hw, "to_dict"):
        d = dict(hw.to_dict())
    elif dataclasses.is_dataclass(hw):
        d = {f.name: getattr(hw, f.name) for f in dataclasses.fields(hw) if f.init}
    else:
        d = {k: v for k, v in vars(hw).items() if not k.startswith("_")}
    d["name"] = hw.name
    return d


def _json_default(o):
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, float) and not math.isfinite(o):
        return None
    return str(o)
