"""Co-design for a mix of models: one hardware config for several networks, schedules per model.

The models' layers are merged into one layer list: a layer that occurs in several models
(the same records key: workload and epilogue) is one layer, measured once, whose count is
the weighted sum of its occurrences, ``sum over models of weight x count``.  The session's
model latency over the merged layers is then exactly the mix's weighted objective
``sum over models of weight x latency``, so every co-design driver
(:func:`dcoc.codesign.make_driver`) searches the mix unchanged, and a layer's best
schedule on a config serves every model that has it (its time does not depend on the model).

:class:`MixSession` is that :class:`~dcoc.codesign.session.Session` plus the map from each
model's layers to the merged ones.  With ``objective="max"`` its latency is the largest
``weight x latency`` of any model (the slowest model, at equal weights): the incumbent, the
best design and the result follow it.  The drivers' estimates are linear in the layer
counts, so for ``max`` the counts are the linearization at the incumbent: the slowest
model's weighted counts plus :data:`OTHERS` of the other models' (kept above zero so their
layers are still tuned), updated whenever another model becomes the slowest.
"""
from __future__ import annotations

from dcoc.codesign.session import Session
from dcoc.errors import DcocError
from dcoc.targets.base import Layer

OBJECTIVES = ("weighted", "max")
#: ``objective="max"``: the share of the models other than the slowest in the layer counts
OTHERS = 0.05


def merge_layers(per_model: list[list[Layer]], weights: list[float]) -> tuple[list[Layer], list[list[int]]]:
    """``(merged layers, index)``: one layer per distinct records key over all models (the
    first model's name; a name taken by another key gets a ``@N`` suffix), count = the
    weighted sum of the models' counts; ``index[m][i]`` is the merged position of model
    ``m``'s layer ``i``."""
    by_key: dict[str, int] = {}
    names: set[str] = set()
    merged: list[Layer] = []
    counts: list[float] = []
    index: list[list[int]] = []
    for layers, w in zip(per_model, weights):
        idx = []
        for layer in layers:
            key = layer.key
            if key not in by_key:
                name, n = layer.name, 2
                while name in names:
                    name, n = f"{layer.name}@{n}", n + 1
                names.add(name)
                by_key[key] = len(merged)
                merged.append(Layer(name, layer.workload, 0, layer.kind, epilogue=layer.epilogue,
                                    target=layer.target))
                counts.append(0.0)
            counts[by_key[key]] += float(w) * layer.count
            idx.append(by_key[key])
        index.append(idx)
    for layer, c in zip(merged, counts):
        layer.count = c
    return merged, index


def check_objective(objective) -> str:
    if objective not in OBJECTIVES:
        raise DcocError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    return objective


class MixSession(Session):
    """A :class:`Session` over the merged layers of several models (:func:`merge_layers`).

    ``per_model``: each model's layers; ``weights``: one positive number per model;
    ``objective``: ``"weighted"`` (sum of weight x latency) or ``"max"`` (the largest).
    The other arguments are :class:`Session`'s.
    """

    def __init__(self, per_model: list[list[Layer]], weights: list[float], objective: str,
                 measurer, budget: int, tuner: str, seed: int, records=None, resume: bool = True,
                 progress=None, target=None):
        layers, self.index = merge_layers(per_model, weights)
        self.per_model = per_model
        self.weights = [float(w) for w in weights]
        self.objective = check_objective(objective)
        self._focus: int | None = None
        super().__init__(layers, measurer, budget, tuner, seed, records, resume, progress=progress,
                         target=target)

    def measure(self, jobs: list) -> list:
        out = super().measure(jobs)
        if self.objective == "max" and self.best_hw is not None:
            self._focus_on_slowest()
        return out

    def _focus_on_slowest(self) -> None:
        """``max``: the layer counts of the linearization at the incumbent (module docstring)."""
        terms = [w * self.model_latency(self.best_hw, m) for m, w in enumerate(self.weights)]
        slow = max(range(len(terms)), key=terms.__getitem__)
        if slow == self._focus:
            return
        self._focus = slow
        counts = [0.0] * len(self.layers)
        for m, (layers, idx) in enumerate(zip(self.per_model, self.index)):
            share = self.weights[m] * (1.0 if m == slow else OTHERS)
            for layer, li in zip(layers, idx):
                counts[li] += share * layer.count
        for layer, c in zip(self.layers, counts):
            layer.count = c

    def model_latency(self, hw_name: str, m: int) -> float | None:
        """Model ``m``'s accelerator latency (seconds) on a config, or None if not complete."""
        total = 0.0
        for layer, li in zip(self.per_model[m], self.index[m]):
            b = self.best.get((hw_name, li))
            if b is None:
                return None
            total += layer.count * b[0]
        return total

    def latency(self, hw_name: str) -> float | None:
        """The mix objective on a config (seconds), or None if not complete."""
        if self.objective == "weighted":
            return super().latency(hw_name)
        lats = [self.model_latency(hw_name, m) for m in range(len(self.per_model))]
        if any(lat is None for lat in lats):
            return None
        return max(w * lat for w, lat in zip(self.weights, lats))

    def model_schedules(self, hw_name: str, m: int) -> dict:
        """``{model m's layer name: knobs}`` on a config (its layers' best schedules)."""
        return {layer.name: dict(self.best[(hw_name, li)][1])
                for layer, li in zip(self.per_model[m], self.index[m]) if (hw_name, li) in self.best}

    def model_best(self, hw_name: str, m: int) -> list[tuple]:
        """Model ``m``'s ``(cost, knobs)`` per layer on a config (complete configs only)."""
        return [self.best[(hw_name, li)] for li in self.index[m]]

    @property
    def shared(self) -> int:
        """Merged layers that occur in more than one model."""
        users: dict[int, int] = {}
        for idx in self.index:
            for li in set(idx):
                users[li] = users.get(li, 0) + 1
        return sum(1 for n in users.values() if n > 1)


def combine(latencies: list[float], weights: list[float], objective: str) -> float:
    """The mix objective of per-model latencies (any unit)."""
    terms = [float(w) * lat for w, lat in zip(weights, latencies)]
    return max(terms) if objective == "max" else sum(terms)


__all__ = ["MixSession", "OBJECTIVES", "OTHERS", "check_objective", "combine", "merge_layers"]
