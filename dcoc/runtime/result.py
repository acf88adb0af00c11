"""What ``dcoc run`` returns: :class:`RunResult`, its JSON and its text summary (plain data).

The pipeline that fills it (load through TVM, quantize, partition, build, execute) is the
API floor's :mod:`dcoc.api.run`; this module knows nothing of TVM.
"""
from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["RunResult"]


@dataclass
class RunResult:
    """What :func:`dcoc.run` returns (``to_json`` is what ``--json`` writes)."""

    model: str
    hardware: str
    outputs: list
    reference_outputs: list
    float_outputs: list | None
    bit_exact: bool
    mismatches: int
    cosine: float | None
    top1_agreement: float | None
    latency_ms: float
    layers: list
    cpu_layers: list
    samples: int
    quantization: list = field(default_factory=list)
    wall_seconds: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    per_layer: list = field(default_factory=list)
    first_mismatch: dict | None = None
    adapted: list = field(default_factory=list)

    def to_json(self) -> dict:
        return {"model": self.model, "hardware": self.hardware, "bit_exact": self.bit_exact,
                "mismatches": self.mismatches, "first_mismatch": self.first_mismatch,
                "cosine": self.cosine,
                "top1_agreement": self.top1_agreement, "latency_ms": self.latency_ms,
                "samples": self.samples, "layers": self.layers, "per_layer": self.per_layer,
                "adapted": self.adapted, "cpu_layers": self.cpu_layers,
                "quantization": self.quantization,
                "wall_seconds": {k: round(v, 3) for k, v in self.wall_seconds.items()},
                "notes": self.notes}

    def summary(self) -> str:
        from dcoc.results.text import render_table
        from dcoc.targets.vta.report import layer_table

        out = [f"{self.model} on VTA {self.hardware}: {len(self.layers)} layer call(s) on the "
               f"simulator, {self.samples} input sample(s)", layer_table(self.per_layer)]
        if self.cpu_layers:
            out.append("")
            out.append("on the CPU (TVM llvm):")
            out.append(render_table(["layer", "kind", "count", "why"],
                                    [[c["layer"], c["kind"], c["count"], c["reason"]]
                                     for c in self.cpu_layers], {2}))
        out.append("")
        out.append(f"accelerator time  {self.latency_ms:.3f} ms per inference (simulated)")
        n_calls = len(self.layers)
        if self.bit_exact:
            out.append(f"bit-exact         yes vs the independent integer reference (model "
                       f"outputs, and each of the {n_calls} layer calls on its own inputs)")
        else:
            what = []
            fm = self.first_mismatch
            if fm is not None:
                what.append(f"layer {fm['layer']} (call #{fm['call']}) differs first: "
                            f"{fm['mismatches']} value(s), up to {fm['max_diff']} LSB")
            if self.mismatches:
                what.append(f"{self.mismatches} model output value(s) differ")
            else:
                what.append("the model outputs agree")
            out.append("bit-exact         NO vs the independent integer reference: "
                       + "; ".join(what))
        if self.cosine is not None:
            t1 = "" if self.top1_agreement is None else \
                f", top-1 agreement {self.top1_agreement * 100:.1f}%"
            out.append(f"vs float (ORT)    cosine {self.cosine:.4f}{t1}")
        w = self.wall_seconds
        out.append("wall              " + ", ".join(f"{k} {v:.1f} s" for k, v in w.items()))
        if self.adapted:
            out.append(f"WARNING: {len(self.adapted)} layer(s) re-tiled because their schedule "
                       f"does not fit the accumulator with their epilogue: "
                       f"{', '.join(self.adapted)}; their time is not the tuned one (see "
                       "--json layers[].note)")
        for n in self.notes:
            out.append(f"note: {n}")
        return "\n".join(out)
