"""Per-layer calibration of co-design's schedule predictions (``CoDesignConfig.layer_calibration``;
docs/method.md §5, §12).

One cost model per layer kind predicts every layer's schedules.  Its errors are not the same
on every layer, and the selection takes the best predictions over thousands of candidates, so
the layers whose predictions are too optimistic are picked again and again (MobileNetV2/zcu104
seed 4: 41 simulations on a 111-point layer already at its optimum) while a layer predicted
too pessimistically is starved (6 simulations on the layer holding 19% of the model time and
the whole remaining gap).  The selection's own track record measures that error out of
sample: every pick's prediction is kept, and once it is measured the log-ratio measured /
predicted goes to its layer.  A layer's factor is ``exp(sum(log-ratios) / (n + w))`` -- the
mean log-ratio shrunk towards 1 by ``w`` pseudo-picks (``layer_calibration``) -- and the
layer's predicted times (mean and spread) are multiplied by it before the selection.

:class:`LayerCalibration` is owned by the :class:`~dcoc.codesign.joint.CoDesignProblem`,
which tells it the picks (:meth:`note_pick`) and the measurements (:meth:`note_measured`).
"""
from __future__ import annotations

import math


class LayerCalibration:
    """Out-of-sample log-ratios measured / predicted of the selection's picks, per layer."""

    def __init__(self, weight: float):
        self.w = float(weight)
        self._pending: dict = {}      # (hw name, layer, knobs key) -> predicted seconds at the pick
        self._sum: dict = {}          # layer -> sum of log(measured / predicted)
        self._n: dict = {}            # layer -> picks measured

    @property
    def on(self) -> bool:
        return self.w > 0

    def note_pick(self, hname: str, li: int, key: tuple, predicted: float) -> None:
        """A candidate selected for measurement, with the (uncalibrated) time it was predicted."""
        if self.on and math.isfinite(predicted) and predicted > 0:
            self._pending[(hname, li, key)] = predicted

    def note_measured(self, hname: str, li: int, key: tuple, seconds: float) -> None:
        """A measurement: if it was a pick, its log-ratio goes to the layer."""
        pred = self._pending.pop((hname, li, key), None)
        if pred is not None and math.isfinite(seconds) and seconds > 0:
            self._sum[li] = self._sum.get(li, 0.0) + math.log(seconds / pred)
            self._n[li] = self._n.get(li, 0) + 1

    def factor(self, li: int) -> float:
        """The layer's multiplier of predicted times (1.0 without measured picks or when off)."""
        n = self._n.get(li, 0)
        if not self.on or n == 0:
            return 1.0
        return math.exp(self._sum[li] / (n + self.w))

    def summary(self) -> dict:
        """``{layer: (measured picks, factor)}`` (diagnostics)."""
        return {li: (self._n[li], self.factor(li)) for li in sorted(self._n)}
