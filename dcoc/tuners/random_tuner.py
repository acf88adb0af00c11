"""RandomTuner and GridSearchTuner (AutoTVM's ``IndexBaseTuner`` family).

Source: ``python/tvm/autotvm/tuner/index_based_tuner.py`` (TVM <= 0.19).  Random search
draws configs uniformly without replacement; grid search walks the index in order.  Both
skip configs that fail the space's cheap constraints (when ``skip_invalid``).
"""
from __future__ import annotations

from dcoc.tuners.tuner import Tuner


class RandomTuner(Tuner):
    """Uniform random sampling without replacement."""

    name = "random"

    def __init__(self, task, seed=0, **kwargs):
        super().__init__(task, seed=seed, **kwargs)
        self._perm = None
        self._pos = 0

    def next_batch(self, batch_size):
        n = len(self.space)
        out = []
        if n <= 1_000_000:  # exact permutation: no wasted draws, ends when exhausted
            if self._perm is None:
                self._perm = self.rng.permutation(n)
            while len(out) < batch_size and self._pos < n:
                cfg = self.space.get(int(self._perm[self._pos]))
                self._pos += 1
                if self.proposable(cfg) and cfg not in out:
                    out.append(cfg)
            return out
        tries = 0
        while len(out) < batch_size and tries < 100 * batch_size:
            tries += 1
            cfg = self.space.get(int(self.rng.integers(n)))
            if self.proposable(cfg) and cfg not in out:
                out.append(cfg)
        return out

    def has_next(self):
        if self._perm is not None and self._pos >= len(self.space):
            return False
        return super().has_next()


class GridSearchTuner(Tuner):
    """Enumerate the space in index order."""

    name = "grid"

    def __init__(self, task, seed=0, **kwargs):
        super().__init__(task, seed=seed, **kwargs)
        self._pos = 0

    def next_batch(self, batch_size):
        out = []
        while len(out) < batch_size and self._pos < len(self.space):
            cfg = self.space.get(self._pos)
            self._pos += 1
            if self.proposable(cfg):
                out.append(cfg)
        return out

    def has_next(self):
        return self._pos < len(self.space) and super().has_next()
