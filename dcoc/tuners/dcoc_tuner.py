"""DCOC on one task: the per-task adapter of :class:`dcoc.method.core.DCOCCore` and the
registered tuners built on it.

The method (DCOC, arXiv 2407.08192; our choices where the paper is silent are in
docs/method.md) runs in the core; this module adapts one
:class:`~dcoc.search.tuning_task.TuningTask` to it (:class:`TaskProblem`) and adds the warm-up:

1. **Warm-up**: ``n_init`` valid configs of the shared initial draw
   (:mod:`dcoc.tuners.warmup`, the same as every model-based tuner's) are measured.
2. **Rounds** (:meth:`dcoc.method.core.DCOCCore.propose`), each measuring ``plan_size``
   configs: refit the ensemble on every measurement; propose candidates (the agents'
   walks, or the ensemble's own search); select the measurements (confidence sampling or
   top-k).
3. Measured results return through :meth:`DCOCTuner.update`.

Registered tuners (one name, one algorithm, on every path: per task, co-design and
MetaSchedule):

* ``surrogate`` (:class:`SurrogateTuner`, the default): the XGBoost ensemble scores
  every valid point (simulated annealing on it where the space is larger than
  ``exhaustive_limit``) and the top-k predicted are measured;
* ``dcoc`` (:class:`DCOCTuner`): the paper's method -- hardware, mapping and scheduling
  agents (MAPPO, CTDE) propose, confidence sampling selects, the agents learn;
* ``dcoc-frozen`` (:class:`DCOCFrozenTuner`): the same agents never updated.

A task may carry a *ranker* (:meth:`DCOCTuner.attach_ranker`): MetaSchedule's program
features re-rank candidates across tasks (``tvm_plugin.metaschedule.program``).
"""
from __future__ import annotations

import time
from dataclasses import asdict

import numpy as np

from dcoc.method.config import DCOCConfig, with_fields
from dcoc.method.core import DCOCCore, Problem, ensemble
from dcoc.seeding import child_seed
from dcoc.tuners.tuner import Tuner


class TaskProblem(Problem):
    """One tuning task as a :class:`~dcoc.method.core.Problem`: points are the space's points."""

    def __init__(self, tuner: "DCOCTuner"):
        self.t = tuner
        space = tuner.space
        self.agent_space = space
        self.dims = np.array(space.dims, dtype=np.int64)
        knob_feat = space.point_features(np.zeros((1, len(self.dims)), np.int64))[0]
        self.knob_dim = len(knob_feat)   # width of the knob features (fixed per space)
        desc = knob_feat[len(space.knobs):]
        self.context = (np.asarray(desc, np.float32) / 16.0) if len(desc) else np.zeros(0, np.float32)
        self.context_dim = len(self.context)
        self.model = ensemble(tuner.cfg, child_seed(tuner.seed, "dcoc", "costmodel"))
        self.points: list[tuple] = []     # measured points
        self.thr: list[float] = []        # measured throughput (1/cost; 0 if failed)
        self.stale = True
        self._valid_cache: dict = {}
        self._measured: dict = {}
        self._best = 0.0
        self._cache: dict = {}
        self.ranker = None                # a re-ranker of candidates (attach_ranker), or None
        self.fit_seconds = 0.0            # spent fitting models (this one and the ranker's)

    def n_init(self) -> int:
        """Random warm-up size (a ranker that can already rank may shorten it)."""
        n = self.t.cfg.n_init
        return self.ranker.n_init(n) if self.ranker is not None else n

    # ------------------------------------------------------------------ data
    def observe(self, point: tuple, cost: float | None) -> None:
        self.points.append(point)
        self.thr.append(1.0 / cost if cost is not None and cost > 0 else 0.0)
        self.stale = True

    def n_measured(self) -> int:
        return len(self.points)

    def is_valid(self, point: tuple) -> bool:
        v = self._valid_cache.get(point)
        if v is None:
            v = self.t.space.is_valid(self.t.space.config(point))
            self._valid_cache[point] = v
        return v

    def fresh(self, point: tuple) -> bool:
        """Not measured, not visited by the tuner, and valid."""
        return (point not in self._measured and not self.t.is_visited(self.t.space.config(point))
                and self.is_valid(point))

    def random_valid(self, n: int, exclude: set) -> list[tuple]:
        t = self.t
        out, tries = [], 0
        while len(out) < n and tries < 200 * max(n, 1):
            tries += 1
            p = t.space.sample_point(t.rng)
            if p in exclude or p in out or not self.is_valid(p):
                continue
            if t.is_visited(t.space.config(p)):
                continue
            out.append(p)
        return out

    # ------------------------------------------------------------------ Problem
    def refit(self) -> None:
        self._measured = {p: v for p, v in zip(self.points, self.thr)}
        self._best = max(self.thr) if self.thr else 0.0
        self._cache = {}
        if self.stale and self._best > 0:
            t0 = time.perf_counter()
            X = self.t.space.point_features(np.array(self.points, dtype=np.int64))
            self.model.fit(X, np.array(self.thr))
            self.stale = False
            self.fit_seconds += time.perf_counter() - t0
        if self.ranker is not None:
            self.ranker.refit()

    def starts(self, W: int):
        cfg = self.t.cfg
        order = np.argsort(-np.array(self.thr)) if self.thr else []
        elites = [self.points[i] for i in order[: cfg.n_elites] if self.thr[i] > 0]
        n_elite = int(round(cfg.elite_starts * W)) if elites else 0
        starts = [elites[i % len(elites)] for i in range(n_elite)]
        starts += self.random_valid(W - n_elite, exclude=set())
        while len(starts) < W:  # tiny spaces: repeat what we have
            starts.append(starts[len(starts) % max(len(starts), 1)] if starts
                          else self.t.space.sample_point(self.t.rng))
        return self.dims, np.array(starts), self.context

    def score(self, points, walkers=None):
        points = np.asarray(points)
        out = np.empty(len(points))
        todo = []
        best = self._best
        for i, p in enumerate(map(tuple, points)):
            if p in self._measured:
                out[i] = self._measured[p] / best if best > 0 else 0.0
            elif p in self._cache:
                out[i] = self._cache[p]
            else:
                todo.append(i)
        if todo:
            if self.model.fitted:
                mu = self.model.predict(self.t.space.point_features(points[todo]))
            else:
                mu = np.zeros(len(todo))
            for i, m in zip(todo, mu):
                self._cache[tuple(points[i])] = out[i] = float(m)
        return out

    def valid(self, point, walker=None) -> bool:
        return self.is_valid(tuple(point))

    def all_points(self, limit: int):
        sp = self.t.space
        if sp.size > limit:
            return None
        pts = [sp.point_of_index(i) for i in range(sp.size)]
        pts = [p for p in pts if self.is_valid(p)]
        if not pts:
            return None
        return np.array(pts, dtype=np.int64), np.zeros(len(pts), dtype=np.int64)

    def candidates(self, points, walkers, n: int) -> list:
        cands = list(dict.fromkeys(p for p in (tuple(int(x) for x in q) for q in points)
                                   if self.fresh(p)))
        if self.ranker is not None:
            return self.ranker.candidates(cands, n)
        if len(cands) < n:  # walks stuck in measured territory: random points
            cands += self.random_valid(n - len(cands), exclude=set(cands))
        return cands

    def predict(self, items):
        if self.ranker is not None:
            out = self.ranker.predict(items)
            if out is not None:
                return out
        if self.model.fitted:
            return self.model.predict_with_uncertainty(self.t.space.point_features(np.array(items)))
        return np.zeros(len(items)), np.ones(len(items))


class DCOCTuner(Tuner):
    """DCOC on one task (software knobs; hardware knobs too if the space has them).

    ``config``: a :class:`~dcoc.method.config.DCOCConfig` (default: :meth:`config`, this
    tuner's own); its proposer (and, for ``dcoc-frozen``, ``learn``) must be the tuner's --
    a name always means one algorithm -- while the selection rule and the other fields
    may vary (ablations such as ``surrogate:select=confidence``).
    """

    name = "dcoc"
    #: the DCOCConfig fields this registered tuner is defined by (defaults of :meth:`config`)
    variant: dict = {"proposer": "agents"}
    #: fields of :attr:`variant` a config may not change (they are the name's algorithm)
    fixed: tuple = ("proposer",)

    def __init__(self, task, seed=0, config: DCOCConfig | None = None, **kwargs):
        self.cfg = self.check_config(config) if config is not None else self.config()
        super().__init__(task, seed=seed, **kwargs)
        self.problem = TaskProblem(self)
        self.core = DCOCCore(self.problem, self.cfg, self.rng,
                             agent_seed=lambda n: child_seed(self.seed, "dcoc", "agents"))
        self.plan: list[tuple] = []

    @classmethod
    def config(cls, **overrides) -> DCOCConfig:
        """This tuner's config: :attr:`variant` with ``overrides`` (a nested config's fields
        may be given by name, e.g. ``explore_frac=0`` or ``round_size=8``)."""
        return cls.check_config(with_fields(DCOCConfig(**cls.variant), overrides))

    @classmethod
    def check_config(cls, cfg: DCOCConfig) -> DCOCConfig:
        """``cfg`` if it runs this tuner's algorithm, else a one-line DcocError."""
        from dcoc.errors import DcocError

        for k in cls.fixed:
            if getattr(cfg, k) != cls.variant[k]:
                raise DcocError(f"tuner '{cls.name}' runs {k}={cls.variant[k]!r}, not {getattr(cfg, k)!r} "
                                "(a tuner name always means one algorithm; choose the tuner that runs it)")
        return cfg

    @property
    def model(self):
        return self.problem.model

    @property
    def agents(self):
        return self.core.agents

    @property
    def log(self) -> list[dict]:
        return self.core.log

    @property
    def rounds(self) -> int:
        return self.core.rounds

    def attach_ranker(self, ranker) -> None:
        """Let ``ranker`` shape this task's candidates and predictions (see the module docstring)."""
        self.problem.ranker = ranker

    # ------------------------------------------------------------ Tuner API
    def next_batch(self, batch_size):
        n_meas = self.problem.n_measured
        out: list[dict] = []
        planned_at = None
        while len(out) < batch_size:
            if not self.plan:
                if planned_at is not None and len(out) == planned_at:
                    break  # the last plan added nothing new: the space is (nearly) exhausted
                planned_at = len(out)
                n_init = self.problem.n_init()
                if n_meas() + len(out) < n_init:
                    k = n_init - n_meas() - len(out)
                    taken = {self.space.point(c) for c in out}
                    self.plan = self._warmup_points(k, taken)
                else:
                    self.plan = self.core.propose(max(self.cfg.plan_size, batch_size - len(out)))
                if not self.plan:
                    break
            p = self.plan.pop(0)
            cfg = self.space.config(p)
            if self.proposable(cfg) and cfg not in out:
                out.append(cfg)
        return out

    def seed_warmup(self, points) -> None:
        """Measure these points first, in this order, as the warm-up (instead of the shared
        initial draw; e.g. ranked by a pre-trained model); random valid points follow if
        they run out."""
        self._warmup = [tuple(int(x) for x in p) for p in points]

    def _warmup_points(self, k: int, taken: set) -> list[tuple]:
        """The shared initial sample (:func:`dcoc.tuners.warmup.initial_points`: the same
        draw as xgb/rl/chameleon for the same seed and task), then random valid points."""
        from dcoc.tuners.warmup import initial_points

        if getattr(self, "_warmup", None) is None:
            self._warmup = initial_points(self.space, self.seed, self.cfg.n_init,
                                          self.task.workload_key,
                                          valid=lambda p: self.problem.is_valid(tuple(p)))
        out = []
        for p in self._warmup:
            if len(out) >= k:
                break
            if p in taken or p in out or self.is_visited(self.space.config(p)):
                continue
            out.append(p)
        if len(out) < k:
            out += self.problem.random_valid(k - len(out), exclude=taken | set(out))
        return out

    def update(self, inputs, results):
        for inp, res in zip(inputs, results):
            try:
                p = self.space.point(inp.config)
            except Exception:  # noqa: BLE001 - a foreign config (load_history)
                continue
            self.problem.observe(p, res.cost if res.valid else None)
        if self.problem.ranker is not None:
            self.problem.ranker.publish()

    def load_history(self, data_set, min_seed_records: int = 0):
        inputs, results = zip(*data_set) if data_set else ((), ())
        self.update(list(inputs), list(results))

    def describe(self) -> dict:
        return {"method": self.cfg.describe(), "config": asdict(self.cfg),
                "agents": dict(zip(self.core.agent_names or [], self.core.groups or []))}


class DCOCFrozenTuner(DCOCTuner):
    """Ablation: the paper's agents walk but never learn (no PPO updates)."""

    name = "dcoc-frozen"
    variant = {"proposer": "agents", "learn": False}
    fixed = ("proposer", "learn")


class SurrogateTuner(DCOCTuner):
    """The default: no agents, no uncertainty.  The XGBoost ensemble scores every valid
    point (simulated annealing on it where the space is too large) and the top-k by
    predicted mean are measured, after the same warm-up as DCOC."""

    name = "surrogate"
    variant = {"proposer": "surrogate", "select": "topk"}


__all__ = ["DCOCConfig", "DCOCFrozenTuner", "DCOCTuner", "SurrogateTuner", "TaskProblem"]
