"""DCOCTuner: DCOC on one task, and its ablations as registered tuners.

The method (DCOC, arXiv 2407.08192; our choices where the paper is silent are in
docs/method.md) runs in :class:`dcoc.method.core.DCOCCore`; this module adapts one
:class:`~dcoc.search.tuning_task.TuningTask` to it (:class:`TaskProblem`) and adds the warm-up:

1. **Warm-up**: ``n_init`` valid configs drawn at random are measured (the cost model
   needs data; for ``agents="clustered"`` these samples also decide the knob clusters).
2. **Rounds** (:meth:`dcoc.method.core.DCOCCore.propose`), each measuring ``plan_size``
   configs: refit the ensemble on every measurement; the agents walk the space from
   elite and random starts, rewarded by the predicted normalized throughput (measured
   where known); the unmeasured valid points they visited are the candidates (topped
   up with random points when the walks stayed in measured territory); confidence
   sampling picks the measurements; the agents are trained on the walks.
3. Measured results return through :meth:`update`.

The same object drives the VTA simulator and MetaSchedule tasks: only the space differs.

Registered variants (``dcoc.tuners.create(NAME, task)``), each one flag of
:class:`~dcoc.method.core.DCOCConfig`: ``dcoc-agents`` (the agents' walks only: ``dcoc`` itself per
task; the agents ablation of co-design and MetaSchedule), ``dcoc-frozen`` (agents never updated), ``dcoc-noagents``
(the ensemble scores every valid point, or anneals where the space is too large),
``dcoc-topk`` (top-k by predicted mean, no uncertainty), and the reference
``surrogate`` (ensemble + exhaustive scoring/annealing + top-k, no agents).
"""
from __future__ import annotations

from dataclasses import asdict, replace

import numpy as np

from dcoc.method.core import COLD_SETTING, DCOCConfig, DCOCCore, Problem, ensemble, program_ensemble
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
        self._knob_dim = len(knob_feat)   # width of the knob features (fixed per space)
        desc = knob_feat[len(space.knobs):]
        self.context = (np.asarray(desc, np.float32) / 16.0) if len(desc) else np.zeros(0, np.float32)
        self.context_dim = len(self.context)
        self.cluster_after = tuner.cfg.n_init
        self.model = ensemble(tuner.cfg, child_seed(tuner.seed, "dcoc", "costmodel"))
        self.points: list[tuple] = []     # measured points
        self.thr: list[float] = []        # measured throughput (1/cost; 0 if failed)
        self.stale = True
        self._valid_cache: dict = {}
        self._measured: dict = {}
        self._best = 0.0
        self._cache: dict = {}
        # program features (set_program; tvm_plugin.metaschedule.program): None = knob features only
        self.program = None
        self.pool = None
        self.pool_key = tuner.task.name
        self.prog_model = None
        self._pfeat: dict = {}
        self._pstore: dict = {}           # per-store rows (program_model = "per-store")
        self._prog_fit_key = None         # (own rows, pooled rows) at the last program refit
        self._local: set = set()          # this round's local mutants (program_local)

    # ------------------------------------------------------------------ program features
    def set_program(self, features, pool=None, key: str | None = None) -> None:
        """Re-score each round's best candidates on task-independent program features
        (``features``: a :class:`tvm_plugin.metaschedule.program.ProgramFeatures`), learning also from
        the other tasks' rows in ``pool`` (a :class:`~tvm_plugin.metaschedule.program.SharedPool`)."""
        self.program = features
        self.pool = pool
        if key is not None:
            self.pool_key = str(key)
        self.prog_model = program_ensemble(self.t.cfg, child_seed(self.t.seed, "dcoc", "program-model"))
        self._pfeat = {}
        self._pstore = {}
        self._prog_fit_key = None

    @property
    def program_on(self) -> bool:
        return self.program is not None and self.t.cfg.program_rerank > 0

    @property
    def per_store(self) -> bool:
        return self.t.cfg.program_model == "per-store"

    def program_features(self, points) -> np.ndarray:
        """Program features of points (cached per point; per-store rows too when used)."""
        pts = [tuple(int(x) for x in p) for p in points]
        todo = [p for p in dict.fromkeys(pts) if p not in self._pfeat]
        if todo:
            arr = np.array(todo, dtype=np.int64)
            if self.per_store:
                F, rows = self.program.with_stores(arr)
                self._pstore.update(zip(todo, rows))
            else:
                F = self.program(arr)
            for p, f in zip(todo, np.asarray(F, dtype=np.float32)):
                self._pfeat[p] = f
        if not pts:
            return np.zeros((0, int(self.program.dim)), np.float32)
        return np.stack([self._pfeat[p] for p in pts])

    def program_stores(self, points) -> list:
        """Per-store rows of points (``[0, f]`` where a point does not build)."""
        self.program_features(points)
        return [self._pstore[tuple(int(x) for x in p)] for p in points]

    def _joint_features(self, points) -> np.ndarray:
        pts = np.asarray(points, dtype=np.int64).reshape(-1, len(self.dims))
        return np.concatenate([self.t.space.point_features(pts), self.program_features(pts)], axis=1)

    def pooled_rows(self) -> int:
        return self.pool.n_rows(exclude=self.pool_key) if self.pool is not None else 0

    def n_init(self) -> int:
        """Random warm-up size: shorter once other tasks' pooled rows can rank candidates."""
        cfg = self.t.cfg
        if self.program_on and self.pooled_rows() >= cfg.program_pool_min:
            return min(cfg.program_init, cfg.n_init)
        return cfg.n_init

    def publish(self) -> None:
        """Put own measurements (program features, throughput / own best) in the pool."""
        best = max(self.thr) if self.thr else 0.0
        if self.pool is not None and self.program_on and best > 0:
            X = self.program_stores(self.points) if self.per_store else self.program_features(self.points)
            self.pool.put(self.pool_key, X, np.array(self.thr) / best)

    def cold(self) -> bool:
        """A cold task (``program_cold``): no knob model of its own yet, or fewer own
        measurements than ``program_cold_until``."""
        cfg = self.t.cfg
        return self.program_on and cfg.program_cold > 0 and (
            not self.model.fitted or self.n_measured() < cfg.program_cold_until)

    def pool_only(self) -> bool:
        """``program_pool_only``: a cold task's program model learns from the other tasks'
        pooled rows alone, once they are enough to rank (``program_pool_min``)."""
        return (self.t.cfg.program_pool_only and self.cold()
                and self.pooled_rows() >= self.t.cfg.program_pool_min)

    def _refit_program(self) -> None:
        """Fit the program-feature ensemble on own rows ([knob | program]) and the other
        tasks' pooled rows ([missing | program]). Skipped when neither changed since the
        last fit (pooled rows only grow, so the two counts identify the data)."""
        own = not self.pool_only()
        key = (len(self.points) if own else 0, self.pooled_rows())
        if key == self._prog_fit_key:
            return
        if self.per_store:
            return self._refit_per_store(key, own)
        Xs, ys = [], []
        if own and self.points and self._best > 0:
            Xs.append(self._joint_features(self.points))
            ys.append(np.array(self.thr) / self._best)
        other = self.pool.others(self.pool_key) if self.pool is not None else None
        if other is not None:
            Xp, yp = other
            Xs.append(np.concatenate([np.full((len(Xp), self._knob_dim), np.nan, np.float32), Xp],
                                     axis=1))
            ys.append(yp)
        if not ys or max(float(np.max(y)) for y in ys) <= 0:
            return
        self.prog_model.fit(np.concatenate(Xs), np.concatenate(ys))
        self._prog_fit_key = key

    def _refit_per_store(self, key, own: bool = True) -> None:
        """program_model = "per-store": the pack-sum model on per-store rows only (own
        measurements and the other tasks' pooled ones alike; no knob columns)."""
        xs, ys = [], []
        if own and self.points and self._best > 0:
            for x, v in zip(self.program_stores(self.points), self.thr):
                if len(x):
                    xs.append(x)
                    ys.append(v / self._best)
        other = self.pool.others(self.pool_key) if self.pool is not None else None
        if other is not None:
            xs += list(other[0])
            ys += list(other[1])
        if not ys or max(ys) <= 0:
            return
        self.prog_model.fit(xs, np.array(ys))
        self._prog_fit_key = key

    # ------------------------------------------------------------------ data
    def observe(self, point: tuple, cost: float | None) -> None:
        self.points.append(point)
        self.thr.append(1.0 / cost if cost is not None and cost > 0 else 0.0)
        self.stale = True

    def n_measured(self) -> int:
        return len(self.points)

    def cluster_data(self):
        return np.array(self.points, dtype=np.int64), np.array(self.thr)

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
            X = self.t.space.point_features(np.array(self.points, dtype=np.int64))
            self.model.fit(X, np.array(self.thr))
            self.stale = False
        if self.program_on:
            self._refit_program()

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
        cfg = self.t.cfg
        # cold task, warm pool: the pooled model ranks a wide sample (program_cold x n)
        cold = self.cold() and self.prog_model.fitted
        keep = (cfg.program_cold if cold else cfg.program_rerank) * max(int(n), 1)
        want = keep if cold else n
        if len(cands) < want:  # walks stuck in measured territory (or cold): random points
            cands += self.random_valid(want - len(cands), exclude=set(cands))
        if self.program_on and len(cands) > keep:  # only the best go on to program features
            if self.model.fitted and not cold:  # a cold task's few rows do not steer the cut
                mu = self.model.predict(self.t.space.point_features(np.array(cands)))
                order = np.argsort(-mu, kind="stable")[:keep]
            else:
                order = np.sort(self.t.rng.choice(len(cands), size=keep, replace=False))
            cands = [cands[i] for i in order]
        self._local = set()
        if cold and cfg.program_local > 0:
            local = self.local_mutants(min(cfg.program_local * max(int(n), 1), keep), set(cands))
            self._local = set(local)
            if local:  # the tail of cands is the random top-up: it makes room first
                cands = local + cands[: max(keep - len(local), 0)]
        if cold and cfg.program_evolve > 0:
            cands = self.evolve(cands, keep)
        return cands

    def select(self, items, mu, sd, n, pick) -> list:
        """``program_local_share`` of the batch: the best local mutants by the model's mean;
        the rest by the core's rule among the other candidates."""
        share = self.t.cfg.program_local_share
        loc = [i for i, p in enumerate(items) if p in self._local] if share > 0 else []
        k = min(len(loc), int(np.floor(share * n + self.t.rng.random()))) if loc else 0
        if k == 0:
            return super().select(items, mu, sd, n, pick)
        mu = np.asarray(mu, dtype=np.float64)
        chosen = [loc[j] for j in np.argsort(-mu[loc], kind="stable")[:k]]
        rest = np.setdiff1d(np.arange(len(items)), chosen)
        more = pick(mu[rest], np.asarray(sd)[rest], n - k) if n > k and len(rest) else []
        return [items[i] for i in chosen] + [items[rest[j]] for j in more]

    def local_mutants(self, m: int, exclude: set) -> list:
        """Up to ``m`` fresh points one or two knobs away from the task's best measured ones
        (parents drawn among the ``n_elites`` best in proportion to their throughput)."""
        t = self.t
        order = np.argsort(-np.array(self.thr), kind="stable")[: t.cfg.n_elites] if self.thr else []
        top = [i for i in order if self.thr[i] > 0]
        if not top:
            return []
        parents = [self.points[i] for i in top]
        w = np.array([self.thr[i] for i in top], float)
        w /= w.sum()
        out, seen = [], set(exclude)
        for _ in range(4 * m):
            if len(out) >= m:
                break
            q = self.mutate(parents[int(t.rng.choice(len(parents), p=w))])
            if q is not None and t.rng.random() < 0.5:
                q = self.mutate(q) or q
            if q is not None and q not in seen:
                seen.add(q)
                out.append(q)
        return out

    def evolve(self, cands: list, keep: int) -> list:
        """``program_evolve`` generations: the best eighth of the candidates by the program
        model's mean each get 4 one-knob mutants (valid, unmeasured, new); the best
        ``keep`` of everything seen go on to selection."""
        seen, pool = set(cands), list(cands)
        mu = self.predict(pool)[0] if pool else np.zeros(0)
        for _ in range(self.t.cfg.program_evolve):
            parents = [pool[i] for i in np.argsort(-mu, kind="stable")[: max(1, keep // 8)]]
            kids = []
            for p in parents:
                for _ in range(4):
                    q = self.mutate(p)
                    if q is not None and q not in seen:
                        seen.add(q)
                        kids.append(q)
            if not kids:
                break
            pool += kids
            mu = np.concatenate([mu, self.predict(kids)[0]])  # scores are per row: only the new
        return [pool[i] for i in np.argsort(-mu, kind="stable")[:keep]]

    def mutate(self, point: tuple, tries: int = 8) -> tuple | None:
        """``point`` with one knob set to another choice (valid and not yet measured)."""
        t, dims = self.t, self.dims
        for _ in range(tries):
            k = int(t.rng.integers(len(dims)))
            if dims[k] <= 1:
                continue
            v = int(t.rng.integers(dims[k] - 1))
            v += v >= point[k]
            q = point[:k] + (v,) + point[k + 1:]
            if self.fresh(q):
                return q
        return None

    def predict(self, items):
        if self.program_on and self.prog_model.fitted and self.per_store:
            rows = self.program_stores(items)
            bad = np.array([len(x) == 0 for x in rows], bool)  # does not build
            mu, sd = self.prog_model.predict_with_uncertainty(
                [x if len(x) else np.zeros((1, x.shape[1]), np.float32) for x in rows])
            mu[bad], sd[bad] = -1.0, 0.0
            return mu, sd
        if self.program_on and self.prog_model.fitted:
            X = self._joint_features(items)
            mu, sd = self.prog_model.predict_with_uncertainty(X)
            bad = ~np.isfinite(X[:, -int(self.program.dim):]).all(axis=1)  # does not build
            mu[bad], sd[bad] = -1.0, 0.0
            return mu, sd
        if self.model.fitted:
            return self.model.predict_with_uncertainty(self.t.space.point_features(np.array(items)))
        return np.zeros(len(items)), np.ones(len(items))


class DCOCTuner(Tuner):
    """DCOC on one task (software knobs; hardware knobs too if the space has them).

    ``config``: a :class:`~dcoc.method.core.DCOCConfig`; ``agents``: shortcut for its ``agents``.
    Subclasses set :attr:`variant` (config fields) to define the registered ablations.
    """

    name = "dcoc"
    #: DCOCConfig fields this variant overrides (the registered ablations)
    variant: dict = {}

    def __init__(self, task, seed=0, agents: str | None = None, config: DCOCConfig | None = None,
                 **kwargs):
        cfg = replace(config) if config is not None else DCOCConfig()
        if self.variant:
            cfg = replace(cfg, **self.variant)
        if agents is not None:
            cfg.agents = agents
        self.cfg = cfg
        super().__init__(task, seed=seed, **kwargs)
        self.problem = TaskProblem(self)
        self.core = DCOCCore(self.problem, self.cfg, self.rng,
                             agent_seed=lambda n: child_seed(self.seed, "dcoc", "agents"))
        self.plan: list[tuple] = []
        self._plan_warmup = False  # the plan is random warm-up points (replan='warmup')

    # compatibility views
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

    def few_trials(self, per_task: float) -> bool:
        """Told by a MetaSchedule run its budget per task before the first batch: below
        ``cfg.cold_below`` (and with program features off) switch ``COLD_SETTING`` on.
        True when it did (the caller then provides the program features)."""
        cfg = self.cfg
        if cfg.cold_below <= 0 or per_task >= cfg.cold_below or cfg.program_rerank > 0:
            return False
        for k, v in COLD_SETTING.items():
            setattr(cfg, k, v)
        return True

    # ------------------------------------------------------------ Tuner API
    def next_batch(self, batch_size):
        n_meas = self.problem.n_measured
        if self.cfg.replan is True:  # plan this batch with the data at hand: drop an earlier plan's rest
            self.plan = []
        elif self.cfg.replan == "warmup" and self._plan_warmup and n_meas() >= self.problem.n_init():
            self.plan = []  # a warm-up planned while the pool was empty, no longer needed
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
                    self._plan_warmup = True
                else:
                    self.plan = self.core.propose(max(self.cfg.plan_size, batch_size - len(out)))
                    self._plan_warmup = False
                if not self.plan:
                    break
            p = self.plan.pop(0)
            cfg = self.space.config(p)
            if self.proposable(cfg) and cfg not in out:
                out.append(cfg)
        return out

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
        self.problem.publish()

    def load_history(self, data_set, min_seed_records: int = 0):
        inputs, results = zip(*data_set) if data_set else ((), ())
        self.update(list(inputs), list(results))

    def describe(self) -> dict:
        return {"config": asdict(self.cfg),
                "agents": dict(zip(self.core.agent_names or [], self.core.groups or []))}


class DCOCFrozenTuner(DCOCTuner):
    """Ablation: DCOC whose agents walk but never learn (no PPO updates)."""

    name = "dcoc-frozen"
    variant = {"learn": False, "proposer": "agents"}


class DCOCAgentsTuner(DCOCTuner):
    """DCOC whose candidates come from the agents' walks only.  Per task this is ``dcoc``;
    in whole-model co-design and in MetaSchedule, where ``dcoc`` uses the surrogate's search
    (docs/method.md §12, §13), it is the agents ablation."""

    name = "dcoc-agents"
    variant = {"proposer": "agents"}


class DCOCNoAgentsTuner(DCOCTuner):
    """Ablation: no agents; the ensemble scores every valid point (or anneals), confidence sampling picks."""

    name = "dcoc-noagents"
    variant = {"proposer": "surrogate"}


class DCOCTopKTuner(DCOCTuner):
    """Ablation: DCOC without uncertainty: the top-k candidates by predicted mean."""

    name = "dcoc-topk"
    variant = {"select": "topk"}


class SurrogateTuner(DCOCTuner):
    """Reference without agents or uncertainty: the XGBoost ensemble scores every valid
    point (simulated annealing on it where the space is too large) and the top-k by
    predicted mean are measured, after the same random warm-up as DCOC."""

    name = "surrogate"
    variant = {"proposer": "surrogate", "select": "topk"}


__all__ = ["DCOCAgentsTuner", "DCOCConfig", "DCOCFrozenTuner", "DCOCNoAgentsTuner", "DCOCTopKTuner", "DCOCTuner",
           "SurrogateTuner", "TaskProblem"]
