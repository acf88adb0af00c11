"""DCOCTuner: multi-agent RL exploration + XGBoost confidence sampling on one task.

The method (DCOC, arXiv 2407.08192; our choices where the paper is silent are in
docs/method.md):

1. **Warm-up**: ``n_init`` valid configs drawn at random are measured (the cost model
   needs data; for ``agents="clustered"`` these samples also decide the knob clusters).
2. **Rounds**, each measuring ``plan_size`` configs:
   a. refit the cost model (:class:`dcoc.costmodel.XGBCostModel`, a bootstrap ensemble
      of XGBoost regressors on the space features) on every measurement so far;
   b. the agents (:class:`dcoc.agents.MAPPO`, one actor per knob group, a centralized
      critic) walk the space from elite and random starts; rewards are the normalized
      throughput predicted by the cost model (measured values where known); invalid
      moves are penalized and never measured;
   c. every config the walks visited that is valid and not yet measured is a
      candidate; :func:`dcoc.sampling.confidence_select` keeps the ones predicted good
      with confidence (LCB with a soft threshold) plus a small exploration quota;
   d. the agents are trained (PPO, CTDE) on the round's walks.
3. Measured results return through :meth:`update`; they become training data and, on
   the next round, the normalization of the reward (1.0 = best measured so far).

The same object drives the VTA simulator and MetaSchedule tasks: only the space differs.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from dcoc.agents.clustering import make_groups
from dcoc.agents.mappo import MAPPO, MAPPOConfig
from dcoc.sampling import ConfidenceConfig, confidence_select
from dcoc.seeding import child_seed
from dcoc.tuners.base import Tuner


@dataclass
class DCOCConfig:
    """Hyperparameters of the DCOC tuner (values and rationale in docs/method.md)."""

    agents: str = "dcoc"          # knob-to-agent split: dcoc | single | per-knob | clustered
    plan_size: int = 8            # configs measured per round
    n_init: int = 8               # random warm-up measurements before the cost model is used
    n_models: int = 5             # cost-model ensemble members (uncertainty = their spread)
    boost_rounds: int = 80        # boosting rounds per member (fixed: no early stopping)
    elite_starts: float = 0.5     # share of walkers starting from the best measured configs
    n_elites: int = 8             # how many best configs walkers start from
    mappo: MAPPOConfig = field(default_factory=MAPPOConfig)
    confidence: ConfidenceConfig = field(default_factory=ConfidenceConfig)


class DCOCTuner(Tuner):
    """DCOC on one task (software knobs; hardware knobs too if the space has them)."""

    name = "dcoc"

    def __init__(self, task, seed=0, agents: str | None = None, config: DCOCConfig | None = None,
                 **kwargs):
        self.cfg = config or DCOCConfig()
        if agents is not None:
            self.cfg.agents = agents
        super().__init__(task, seed=seed, **kwargs)
        from dcoc.costmodel import XGBCostModel

        self.model = XGBCostModel(loss="reg", n_models=self.cfg.n_models,
                                  seed=child_seed(self.seed, "dcoc", "costmodel"),
                                  num_boost_round=self.cfg.boost_rounds, early_stopping_rounds=None)
        self.dims = np.array(self.space.dims, dtype=np.int64)
        desc = self.space.point_features(np.zeros((1, len(self.dims)), np.int64))[0, len(self.space.knobs):]
        self.context = (np.asarray(desc, np.float32) / 16.0) if len(desc) else np.zeros(0, np.float32)
        self.points: list[tuple] = []     # measured points
        self.thr: list[float] = []        # measured throughput (1/cost; 0 if failed)
        self.plan: list[tuple] = []
        self.agents: MAPPO | None = None
        self.groups = None
        self.agent_names = None
        self._valid_cache: dict = {}
        self._stale = True
        self.rounds = 0
        self.log: list[dict] = []         # per-round metrics (for docs/plots)

    # ------------------------------------------------------------------ helpers
    def _valid(self, point: tuple) -> bool:
        v = self._valid_cache.get(point)
        if v is None:
            v = self.space.is_valid(self.space.config(point))
            self._valid_cache[point] = v
        return v

    def _random_valid(self, n: int, exclude: set) -> list[tuple]:
        out, tries = [], 0
        while len(out) < n and tries < 200 * max(n, 1):
            tries += 1
            p = self.space.sample_point(self.rng)
            if p in exclude or p in out or not self._valid(p):
                continue
            if self.is_visited(self.space.config(p)):
                continue
            out.append(p)
        return out

    def _build_agents(self):
        pts = np.array(self.points, dtype=np.int64) if self.points else None
        y = np.array(self.thr) if self.thr else None
        self.groups, self.agent_names = make_groups(self.space, self.cfg.agents, pts, y)
        self.agents = MAPPO(self.groups, len(self.dims), len(self.context), self.cfg.mappo,
                            seed=child_seed(self.seed, "dcoc", "agents"), names=self.agent_names)

    # -------------------------------------------------------------- the round
    def _round(self, n: int) -> list[tuple]:
        measured = {p: t for p, t in zip(self.points, self.thr)}
        best_thr = max(self.thr) if self.thr else 0.0
        if self._stale and best_thr > 0:
            X = self.space.point_features(np.array(self.points, dtype=np.int64))
            self.model.fit(X, np.array(self.thr))
            self._stale = False
        if self.agents is None:
            self._build_agents()

        cache: dict = {}

        def score(points: np.ndarray, walkers=None) -> np.ndarray:
            out = np.empty(len(points))
            todo = []
            for i, p in enumerate(map(tuple, points)):
                if p in measured:
                    out[i] = measured[p] / best_thr if best_thr > 0 else 0.0
                elif p in cache:
                    out[i] = cache[p]
                else:
                    todo.append(i)
            if todo:
                if self.model.fitted:
                    mu = self.model.predict(self.space.point_features(points[todo]))
                else:
                    mu = np.zeros(len(todo))
                for i, m in zip(todo, mu):
                    cache[tuple(points[i])] = out[i] = float(m)
            return out

        # walker starts: elites (best measured) and random valid points
        W = self.cfg.mappo.n_walkers
        order = np.argsort(-np.array(self.thr)) if self.thr else []
        elites = [self.points[i] for i in order[: self.cfg.n_elites] if self.thr[i] > 0]
        n_elite = int(round(self.cfg.elite_starts * W)) if elites else 0
        starts = [elites[i % len(elites)] for i in range(n_elite)]
        starts += self._random_valid(W - n_elite, exclude=set())
        while len(starts) < W:  # tiny spaces: repeat what we have
            starts.append(starts[len(starts) % max(len(starts), 1)] if starts else self.space.sample_point(self.rng))
        walk = self.agents.rollout(self.dims, np.array(starts), self.context, score,
                                   lambda p, w: self._valid(p))
        metrics = self.agents.update()

        cands = list(dict.fromkeys(
            tuple(p) for p in walk.points if tuple(p) not in measured
            and not self.is_visited(self.space.config(tuple(p))) and self._valid(tuple(p))))
        if len(cands) < n:  # walks stuck in measured territory: top up with random points
            cands += self._random_valid(n - len(cands), exclude=set(cands))
        if not cands:
            return []
        if self.model.fitted:
            mu, sd = self.model.predict_with_uncertainty(self.space.point_features(np.array(cands)))
        else:
            mu, sd = np.zeros(len(cands)), np.ones(len(cands))
        pick = confidence_select(mu, sd, n, self.rng, self.cfg.confidence)
        self.rounds += 1
        self.log.append({
            "round": self.rounds, "measured": len(self.points), "candidates": len(cands),
            "invalid_moves": walk.invalid_moves, "mean_reward": walk.mean_reward,
            "pred_best": float(mu.max()) if len(mu) else 0.0, **metrics,
        })
        return [cands[i] for i in pick]

    # ------------------------------------------------------------ Tuner API
    def next_batch(self, batch_size):
        out: list[dict] = []
        while len(out) < batch_size:
            if not self.plan:
                if len(self.points) + len(out) < self.cfg.n_init:
                    k = self.cfg.n_init - len(self.points) - len(out)
                    taken = {self.space.point(c) for c in out}
                    self.plan = self._random_valid(k, exclude=taken)
                else:
                    self.plan = self._round(max(self.cfg.plan_size, batch_size - len(out)))
                if not self.plan:
                    break
            p = self.plan.pop(0)
            cfg = self.space.config(p)
            if self.proposable(cfg) and cfg not in out:
                out.append(cfg)
        return out

    def update(self, inputs, results):
        for inp, res in zip(inputs, results):
            try:
                p = self.space.point(inp.config)
            except Exception:  # noqa: BLE001 - a foreign config (load_history)
                continue
            self.points.append(p)
            self.thr.append(1.0 / res.cost if res.valid and res.cost > 0 else 0.0)
        self._stale = True
        if self.cfg.agents == "clustered" and self.agents is None and len(self.points) >= self.cfg.n_init:
            self._build_agents()

    def load_history(self, data_set, min_seed_records: int = 0):
        inputs, results = zip(*data_set) if data_set else ((), ())
        self.update(list(inputs), list(results))

    def describe(self) -> dict:
        return {"config": asdict(self.cfg), "agents": dict(zip(self.agent_names or [], self.groups or []))}
