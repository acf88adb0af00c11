"""SweepTuner: a non-learning reference -- the target's default schedule, then its neighbours.

Order of proposals:

1. the task's default config(s) (``TuningTask.defaults()``: for VTA the TOPI-VTA
   heuristic of :func:`dcoc.targets.vta.default_knobs`), when valid;
2. the unvisited neighbours of the best measured config (one knob moved by one, then by
   two choice positions), nearest first, re-centred whenever a better config is found;
3. uniformly random unvisited configs once the neighbourhood is exhausted.

No model and no learning: it shows what a good heuristic plus local search reaches.
"""
from __future__ import annotations

from dcoc.tuners.tuner import Tuner


class SweepTuner(Tuner):
    name = "sweep"

    def __init__(self, task, seed=0, **kwargs):
        super().__init__(task, seed=seed, **kwargs)
        self._queue: list[dict] = []
        defaults = getattr(task, "defaults", None)
        for cfg in (defaults() if defaults is not None else []) or []:
            if cfg is not None and cfg in self.space and self.proposable(cfg):
                self._queue.append(dict(cfg))
        self._centre = None
        self._random_left = True

    def _neighbours(self, cfg: dict) -> list[dict]:
        p = self.space.point(cfg)
        out = []
        for step in (1, 2):
            for q in self.space.neighbors(p, step):
                c = self.space.config(q)
                if self.proposable(c):
                    out.append(c)
        return out

    def next_batch(self, batch_size):
        out: list[dict] = []
        tries = 0
        while len(out) < batch_size:
            if self.best_config is not None and self.best_config != self._centre:
                self._centre = dict(self.best_config)
                self._queue = self._neighbours(self._centre) + self._queue
            if self._queue:
                cfg = self._queue.pop(0)
            else:
                tries += 1
                if tries > 200 * batch_size:
                    break
                try:
                    cfg = self.space.sample(self.rng, valid=self.skip_invalid, max_tries=200)
                except Exception:  # noqa: BLE001 - no valid config left to draw
                    break
            if self.proposable(cfg) and cfg not in out:
                out.append(cfg)
        return out
