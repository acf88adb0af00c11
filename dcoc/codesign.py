"""Model-level tuning on the VTA target: software-only on fixed hardware, and co-design.

Data flow: model tasks -> :class:`Layer` s -> a :class:`Session` (the one place that
measures, counts trials, writes records and tracks the best model latency per hardware
config) -> a driver:

* :func:`tune_software` -- fixed hardware: one tuner per layer, driven through ask/tell,
  with the trial budget split across layers by occurrence and remaining potential.
* :class:`NestedCoDesign` -- co-design for the baseline tuners: the tuner searches the
  hardware space, and each hardware proposal is evaluated by tuning every layer's
  software with the same tuner for a fixed sub-budget (the model latency it reaches is
  the hardware's cost).
* :class:`DCOCCoDesign` -- DCOC's co-design: three agents (hardware, mapping,
  scheduling) under CTDE walk the joint space of (hardware, one layer's schedule), with
  rewards from a shared XGBoost ensemble that predicts each layer's efficiency on any
  hardware; confidence sampling picks the measurements (see docs/method.md).

A model's latency on a hardware config is the sum over its VTA layers of occurrences x
the best measured time of that layer on that config; it is known once every layer has
at least one valid measurement there (the hardware is then *complete*).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from dcoc.errors import DcocError
from dcoc.search.measure import MeasureResult, Measurer
from dcoc.search.records import Records
from dcoc.search.space import Space
from dcoc.search.vta_task import HW_KNOBS, hw_space, make_hw, sw_space, vta_task, workload_key
from dcoc.seeding import child_seed


# =============================================================================== layers
@dataclass
class Layer:
    """One distinct VTA workload of a model and how many times it runs per inference."""

    name: str
    workload: object        # Conv2DWorkload | DenseWorkload
    count: int              # occurrences x repeats (batch_matmul heads)
    kind: str               # "conv2d" | "dense"
    epilogue: object = None  # fused ALU epilogue (None: dcoc.vta.model.MODEL_EPILOGUE)

    def __post_init__(self):
        if self.epilogue is None:
            from dcoc.vta.model import MODEL_EPILOGUE

            self.epilogue = MODEL_EPILOGUE

    @property
    def key(self) -> str:
        return workload_key(self.workload, self.epilogue)

    def ideal_seconds(self, hw) -> float:
        """Compute-bound lower bound: MACs / (MACs per cycle) / clock."""
        return self.workload.macs / (hw.batch * hw.block_in * hw.block_out) / (hw.freq_mhz * 1e6)


def vta_layers(tasks) -> tuple[list[Layer], list]:
    """Split extracted tasks into VTA layers and CPU layers (``[(name, kind, count)]``)."""
    from dcoc.vta import workload_from_task

    layers, cpu = [], []
    for t in tasks:
        if getattr(t, "device", "vta") != "vta":
            cpu.append((t.name, t.kind, int(t.weight)))
            continue
        wl, reps = workload_from_task(t)
        kind = "conv2d" if t.kind == "conv2d" else "dense"
        layers.append(Layer(t.name, wl, int(t.weight) * int(reps), kind))
    for t in getattr(tasks, "cpu_ops", []) or []:
        cpu.append((t.name, t.kind, int(t.weight)))
    return layers, cpu


# ============================================================================== session
class Session:
    """Measures (layer, hardware, knobs) jobs, writes records, keeps the bests.

    Every job counts as one trial.  With ``records`` and ``resume``, jobs already in the
    records of this (tuner, seed) are answered from the file (not measured again), so a
    deterministic driver re-run after an interruption continues where it stopped.
    """

    def __init__(self, layers: list[Layer], measurer: Measurer, budget: int, tuner: str, seed: int,
                 records: Records | None = None, resume: bool = True, progress=None):
        self.layers = layers
        self.measurer = measurer
        self.budget = int(budget)
        self.tuner, self.seed = tuner, seed
        self.records = records
        self.progress = progress
        self.trials = 0
        self.replayed = 0
        self.hw: dict[str, object] = {}                 # name -> HWConfig
        self.best: dict[tuple, tuple] = {}              # (hw name, layer idx) -> (cost, knobs)
        self.measured: dict[tuple, float] = {}          # (hw name, layer idx, knobs key) -> cost|inf
        self.results: dict[tuple, MeasureResult] = {}   # same keys -> the result
        self.history: list[tuple[int, float]] = []      # (trial, best model latency s so far)
        self.best_latency = math.inf
        self.best_hw: str | None = None
        self._tasks: dict = {}
        self._t0 = time.perf_counter()
        self.known: dict = {}
        if records is not None and resume:
            keys = {l.key: i for i, l in enumerate(layers)}
            for r in records.filter(target="vta", tuner=tuner, seed=seed):
                if r["task"] in keys:
                    res = (MeasureResult((r["cost"],), 0, r.get("wall", 0.0), r.get("ts"), None, r.get("info"))
                           if r.get("valid") else
                           MeasureResult((), r.get("error_no") or 8, 0.0, r.get("ts"), r.get("error"), r.get("info")))
                    self.known[(r["hw"], keys[r["task"]], Space.key(r["knobs"]))] = res

    @property
    def remaining(self) -> int:
        return self.budget - self.trials

    def task(self, li: int, hw):
        key = (li, hw.name)
        if key not in self._tasks:
            self.hw[hw.name] = hw
            layer = self.layers[li]
            self._tasks[key] = vta_task(layer.workload, hw, name=layer.name, epilogue=layer.epilogue)
        return self._tasks[key]

    def is_measured(self, hw, li: int, knobs: dict) -> bool:
        return (hw.name, li, Space.key(knobs)) in self.measured

    def measure(self, jobs: list[tuple[int, object, dict]]) -> list[MeasureResult]:
        """Measure ``[(layer index, hw, knobs)]``; returns one result per job answered.

        A job already measured in this run is answered from memory and costs nothing; a new
        one costs a trial (jobs beyond the remaining budget are dropped from the end).  New
        jobs found in the records of an earlier run of this tuner/seed are replayed from
        the file instead of simulated (resume).
        """
        out: list = []
        new: list[int] = []
        batch_keys: set = set()
        for li, hw, knobs in jobs:
            self.task(li, hw)  # registers the hardware
            key = (hw.name, li, Space.key(knobs))
            if key in self.results or key in batch_keys:
                out.append(key)
                continue
            if len(new) >= self.remaining:
                break
            batch_keys.add(key)
            new.append(len(out))
            out.append(key)
        if not out:
            return []
        fresh = []
        for i in new:
            li, hw, knobs = jobs[i]
            hit = self.known.get(out[i])
            if hit is not None:
                self.results[out[i]] = hit
                self.replayed += 1
            else:
                fresh.append(i)
        if fresh:
            res = self.measurer.measure_jobs([(self.task(jobs[i][0], jobs[i][1]), jobs[i][2]) for i in fresh])
            for i, r in zip(fresh, res):
                self.results[out[i]] = r
        first = self.trials
        for n, i in enumerate(new):
            li, hw, knobs = jobs[i]
            r = self.results[out[i]]
            self.measured[out[i]] = r.cost
            if r.valid:
                cur = self.best.get((hw.name, li))
                if cur is None or r.cost < cur[0]:
                    self.best[(hw.name, li)] = (r.cost, dict(knobs))
            self.trials += 1
            lat = self.latency(hw.name)
            if lat is not None and lat < self.best_latency:
                self.best_latency, self.best_hw = lat, hw.name
            self.history.append((self.trials - 1, self.best_latency))
        if self.records is not None and fresh:
            rows = []
            order = {i: n for n, i in enumerate(new)}
            for i in fresh:
                li, hw, knobs = jobs[i]
                rows += _rows(self.task(li, hw), knobs, self.results[out[i]], self.tuner, self.seed,
                              first + order[i])
            self.records.append(rows)
        if self.progress is not None and new:
            self.progress(self)
        return [self.results[k] for k in out]

    def results_for(self, li: int, hw) -> list[tuple[dict, MeasureResult]]:
        """Everything measured for one layer on one hardware config in this run."""
        return [(dict(k[2]), r) for k, r in self.results.items() if k[0] == hw.name and k[1] == li]

    def latency(self, hw_name: str) -> float | None:
        """Model latency (seconds) on a hardware config, or None if not complete."""
        total = 0.0
        for li, layer in enumerate(self.layers):
            b = self.best.get((hw_name, li))
            if b is None:
                return None
            total += layer.count * b[0]
        return total

    def complete_hws(self) -> list[str]:
        return [h for h in self.hw if self.latency(h) is not None]

    def schedules(self, hw_name: str) -> dict:
        return {self.layers[li].name: dict(self.best[(hw_name, li)][1])
                for li in range(len(self.layers)) if (hw_name, li) in self.best}

    def wall(self) -> float:
        return time.perf_counter() - self._t0


def _rows(task, knobs, res, tuner, seed, trial) -> list[dict]:
    from dcoc.search.measure import MeasureInput

    tmp = Records(None)
    return tmp.log(task, [MeasureInput("vta", task, knobs)], [res], tuner=tuner, seed=seed,
                   first_trial=trial)


def fitting_default(workload, hw, space: Space) -> dict | None:
    """:func:`dcoc.vta.default_knobs` for ``workload`` on ``hw`` if it is valid in ``space``.

    The heuristic ignores the model epilogue's ACC use, so it may not fit; None then.
    """
    from dcoc.vta import default_knobs

    try:
        k = default_knobs(workload, hw)
    except DcocError:
        return None
    return k if k is not None and space.is_valid(k) else None


def default_schedules(session: Session, hw) -> list[MeasureResult]:
    """Measure every layer's default schedule (:func:`dcoc.vta.default_knobs`) on ``hw``."""
    jobs = []
    for li, layer in enumerate(session.layers):
        sp = session.task(li, hw).space
        k = fitting_default(layer.workload, hw, sp)
        if k is None:
            # take a fitting schedule instead
            rng = np.random.default_rng(child_seed(session.seed, "default", layer.key, hw.name))
            try:
                k = sp.sample(rng)
            except DcocError:
                continue
        jobs.append((li, hw, k))
    return session.measure(jobs)


# ======================================================================= software only
class SoftwareTuning:
    """Tune every layer's schedule on one hardware config with one tuner per layer.

    Budget split (``step``): each layer first gets ``warmup`` trials; then every chunk of
    ``chunk`` trials goes to the layer with the largest remaining potential
    ``count * (best_time - ideal_time)`` (ideal = compute-bound time), i.e. where a
    relative improvement buys the most end-to-end latency.  Layers whose tuner has no
    proposals left are skipped.
    """

    def __init__(self, session: Session, hw, tuner: str, seed: int, chunk: int = 8, warmup: int = 8,
                 tuner_kwargs: dict | None = None):
        from dcoc.tuners import create

        self.s, self.hw, self.chunk, self.warmup = session, hw, chunk, warmup
        self.tuners = []
        for li, layer in enumerate(session.layers):
            task = session.task(li, hw)
            t = create(tuner, task, seed=child_seed(seed, "sw", layer.key, hw.name), **(tuner_kwargs or {}))
            prior = [(k, r) for k, r in session.results_for(li, hw) if task.space.check(k) is None]
            if prior:  # what this run already measured here is known, not proposed again
                t.tell([k for k, _ in prior], [r for _, r in prior])
            self.tuners.append(t)
        self.spent = [0] * len(session.layers)
        self.exhausted: set[int] = set()  # layers whose tuner has nothing new to propose

    def _priority(self, li: int) -> float:
        t = self.tuners[li]
        if li in self.exhausted or not t.has_next():
            return -math.inf
        if self.spent[li] < self.warmup:
            return math.inf
        b = self.s.best.get((self.hw.name, li))
        if b is None:
            return math.inf
        layer = self.s.layers[li]
        return layer.count * max(b[0] - layer.ideal_seconds(self.hw), 0.0)

    def step(self, n: int) -> int:
        """Spend up to ``n`` trials; returns how many were spent."""
        spent = 0
        while spent < n and self.s.remaining > 0:
            pri = [self._priority(li) for li in range(len(self.tuners))]
            li = int(np.argmax(pri))
            if pri[li] == -math.inf:
                break
            k = min(self.chunk, n - spent, self.s.remaining)
            if self.spent[li] < self.warmup:
                k = min(k, self.warmup - self.spent[li])
            tuner = self.tuners[li]
            configs = tuner.ask(k)
            if not configs:
                self.spent[li] = 10 ** 9  # exhausted
                self.exhausted.add(li)  # (a layer without a best result kept priority inf: a hang)
                continue
            before = self.s.trials
            res = self.s.measure([(li, self.hw, c) for c in configs])
            tuner.tell(configs[: len(res)], res)
            self.spent[li] += len(res)
            spent += self.s.trials - before
            if len(res) < len(configs):
                break
            if self.s.trials == before:  # only repeats: the tuner is going in circles
                self.spent[li] = 10 ** 9
                self.exhausted.add(li)
        return spent


def tune_software(session: Session, hw, tuner: str, budget: int, seed: int, **kw) -> SoftwareTuning:
    st = SoftwareTuning(session, hw, tuner, seed, **kw)
    st.step(budget)
    return st


# ==================================================================== nested co-design
class NestedCoDesign:
    """Co-design with a baseline tuner: outer search over hardware, inner over software.

    The board's default hardware is evaluated first (same start for every tuner); each
    later hardware proposal gets ``per_hw`` trials of software tuning; its cost is the
    model latency reached.
    """

    def __init__(self, session: Session, board, tuner: str, seed: int, per_hw: int | None = None,
                 hw_ranges: dict | None = None):
        from dcoc.search.task import TuningTask
        from dcoc.tuners import create

        self.s, self.board, self.tuner_name, self.seed = session, board, tuner, seed
        T = len(session.layers)
        if per_hw is None:
            per_layer = int(min(16, max(4, session.budget // max(3 * T, 1))))
            per_hw = per_layer * T
        self.per_hw = per_hw
        space = hw_space(board, hw_ranges)
        self.hw_task = TuningTask("hardware", space, "vta", "vta:hardware", hw_name=None)
        self.hw_tuner = create(tuner, self.hw_task, seed=child_seed(seed, "hw"))

    def run(self):
        from dcoc.search.measure import MeasureErrorNo

        default = self.board.default_hw()
        queue = [{k: getattr(default, k) for k in HW_KNOBS}]
        while self.s.remaining > 0:
            cfgs = queue or self.hw_tuner.ask(1)
            queue = []
            if not cfgs:
                break
            cfg = cfgs[0]
            hw = make_hw(cfg, self.board)
            before = self.s.trials
            default_schedules(self.s, hw)
            tune_software(self.s, hw, self.tuner_name, self.per_hw - (self.s.trials - before),
                          child_seed(self.seed, "nested", hw.name))
            lat = self.s.latency(hw.name)
            res = (MeasureResult((lat,)) if lat is not None else
                   MeasureResult.error(MeasureErrorNo.INSTANTIATION_ERROR, "incomplete"))
            self.hw_tuner.tell([cfg], [res])


# ====================================================================== DCOC co-design
@dataclass
class CoDesignConfig:
    """Hyperparameters of DCOC's co-design loop (docs/method.md)."""

    round_size: int = 16            # measurements per round (opening a new hardware config adds more)
    n_models: int = 5               # ensemble members of each cost model
    boost_rounds: int = 80          # boosting rounds per member (fixed: no early stopping)
    elite_hw_starts: float = 0.5    # share of walkers starting on the incumbent hardware
    random_hw_starts: float = 0.25  # share starting on a random feasible hardware config
    new_hw_shortlist: int = 3       # unopened configs scored in detail per round
    open_margin: float = 0.01       # open a config only if predicted >= 1% faster (LCB)
    new_shape_bonus: float = 0.03   # optimism for a GEMM core shape never measured
    hw_explore_every: int = 4       # rounds without an opening after which the most
                                    # optimistic (UCB) shortlisted config is opened anyway
    cluster_after: int = 64         # agents="clustered": measurements before the knobs are clustered
    mappo: object = None            # MAPPOConfig (default: MAPPOConfig())
    confidence: object = None       # ConfidenceConfig (default: explore_frac 0.125)


#: software slots of the joint state; dense knobs map onto the conv slots
_SLOTS = ("tile_h", "tile_w", "tile_ci", "tile_co", "oc_nthread", "h_nthread")
_DENSE_SLOT = {"tile_b": 0, "tile_ci": 2, "tile_co": 3, "oc_nthread": 4}


class DCOCCoDesign:
    """DCOC: hardware agent + mapping agent + scheduling agent, one centralized critic.

    State of a walker: (hardware knob positions, the software knob positions of one layer
    -- over the union of that knob's choices across hardware options).  The hardware
    agent moves the hardware knobs, the mapping agent the tiling knobs, the scheduling
    agent the virtual threads.  Reward = estimated model throughput normalized by the best
    measured one, where the estimate combines the walker's layer at its schedule
    (predicted, or measured when known) with every other layer's best time on that
    hardware (measured, or predicted for a schedule transferred from the incumbent).
    """

    def __init__(self, session: Session, board, seed: int, agents: str = "dcoc",
                 config: CoDesignConfig | None = None, hw_ranges: dict | None = None):
        from dcoc.agents import MAPPOConfig, make_groups
        from dcoc.costmodel import XGBCostModel
        from dcoc.sampling import ConfidenceConfig
        from dcoc.search.space import Knob
        from dcoc.vta import space_for

        self.s, self.board, self.seed = session, board, seed
        self.cfg = config or CoDesignConfig()
        self.mcfg = self.cfg.mappo or MAPPOConfig()
        self.ccfg = self.cfg.confidence or ConfidenceConfig()
        self.rng = np.random.default_rng(child_seed(seed, "codesign"))
        self.hs = hw_space(board, hw_ranges)
        self.hw_choices = [np.array(k.choices) for k in self.hs.knobs]
        L = session.layers
        # union of each layer's software choices over the hardware options
        self.union = []
        for layer in L:
            u = [set() for _ in _SLOTS]
            for b in self.hs.knob("batch").choices:
                for bi in self.hs.knob("block_in").choices:
                    for bo in self.hs.knob("block_out").choices:
                        core = SimpleNamespace(batch=b, block_in=bi, block_out=bo)
                        for name, vals in space_for(layer.workload, core).items():
                            u[self._slot(layer, name)].update(vals)
            self.union.append([tuple(sorted(s)) if s else (1,) for s in u])
        self.dims = np.array([[len(c) for c in self.hw_choices] + [len(c) for c in un] for un in self.union])
        # one joint space only to name the knobs for the agent split
        joint = Space([Knob(k.name, k.choices, "hw") for k in self.hs.knobs] +
                      [Knob(n, (0,), "tile" if n.startswith("tile") else "thread") for n in _SLOTS])
        self.joint = joint
        self.agent_mode = agents
        self._clustered = False
        self.context_dim = 18
        # "clustered" starts with the fixed split and re-forms the agents once
        # cluster_after measurements exist (see _maybe_cluster)
        self._build_agents(make_groups(joint, "dcoc" if agents == "clustered" else agents))
        self.models = {k: XGBCostModel(loss="reg", n_models=self.cfg.n_models,
                                       seed=child_seed(seed, "codesign", "model", k),
                                       num_boost_round=self.cfg.boost_rounds, early_stopping_rounds=None)
                       for k in ("conv2d", "dense")}
        self.ymax = {"conv2d": 1.0, "dense": 1.0}
        self.data = {"conv2d": ([], []), "dense": ([], [])}   # features, efficiency
        self._seen_data: set = set()
        self._hw_cache: dict = {}
        self._space_cache: dict = {}
        self._fit_cache: dict = {}
        self._transfer: dict = {}
        self._pred_cache: dict = {}
        self._defaults: dict = {}
        self._shapes_opened: set = set()
        self._rounds_since_open = 0
        self.version = 0
        self.log: list[dict] = []

    # ------------------------------------------------------------------ encodings
    @staticmethod
    def _slot(layer: Layer, name: str) -> int:
        return _DENSE_SLOT[name] if layer.kind == "dense" else _SLOTS.index(name)

    def hw_of(self, hpos: tuple):
        if hpos not in self._hw_cache:
            vals = {k: int(self.hw_choices[i][p]) for i, (k, p) in enumerate(zip(HW_KNOBS, hpos))}
            reason = self.hs.check(vals)
            self._hw_cache[hpos] = None if reason else make_hw(vals, self.board)
        return self._hw_cache[hpos]

    def hw_pos(self, hw) -> tuple:
        return tuple(int(np.flatnonzero(self.hw_choices[i] == getattr(hw, k))[0]) for i, k in enumerate(HW_KNOBS))

    def space(self, li: int, hw) -> Space:
        key = (li, hw.name)
        if key not in self._space_cache:
            self._space_cache[key] = sw_space(self.s.layers[li].workload, hw, self.s.layers[li].epilogue)
        return self._space_cache[key]

    def knobs_of(self, li: int, hw, spos: tuple) -> dict | None:
        """Union positions -> knobs valid for ``hw`` (None if a value is not a choice or does not fit)."""
        layer = self.s.layers[li]
        sp = self.space(li, hw)
        knobs = {}
        for k in sp.knobs:
            v = self.union[li][self._slot(layer, k.name)][spos[self._slot(layer, k.name)]]
            if v not in k.choices:
                return None
            knobs[k.name] = v
        key = (li, hw.name, Space.key(knobs))
        if key not in self._fit_cache:
            self._fit_cache[key] = sp.is_valid(knobs)
        return knobs if self._fit_cache[key] else None

    def sw_pos(self, li: int, knobs: dict) -> tuple:
        layer = self.s.layers[li]
        pos = [0] * len(_SLOTS)
        for name, v in knobs.items():
            sl = self._slot(layer, name)
            pos[sl] = self.union[li][sl].index(v)
        return tuple(pos)

    def context(self, li: int) -> np.ndarray:
        layer = self.s.layers[li]
        wl = layer.workload
        if layer.kind == "conv2d":
            d = [wl.height, wl.width, wl.in_channels, wl.out_channels, wl.kernel[0], wl.kernel[1],
                 wl.stride[0], wl.out_height, wl.out_width]
        else:
            d = [wl.batch, 1, wl.in_features, wl.out_features, 1, 1, 1, wl.batch, 1]
        total = sum(l.count * l.workload.macs for l in self.s.layers)
        share = layer.count * layer.workload.macs / total
        c = [math.log2(max(v, 1)) / 10.0 for v in d] + [float(layer.kind == "dense"), share,
                                                         math.log2(layer.count + 1) / 4.0]
        return np.array(c + [0.0] * (self.context_dim - len(c)), dtype=np.float32)

    # ------------------------------------------------------------------ cost model
    def _features(self, li: int, hw, knob_list: list[dict]) -> np.ndarray:
        sp = self.space(li, hw)
        pts = np.array([sp.point(k) for k in knob_list], dtype=np.int64).reshape(len(knob_list), -1)
        return sp.point_features(pts)

    def refit(self):
        """Add new measurements to the training sets and refit the cost models."""
        new = False
        for (hname, li, key), cost in self.s.measured.items():
            if (hname, li, key) in self._seen_data:
                continue
            self._seen_data.add((hname, li, key))
            hw = self.s.hw[hname]
            layer = self.s.layers[li]
            X = self._features(li, hw, [dict(key)])
            eff = layer.ideal_seconds(hw) / cost if math.isfinite(cost) and cost > 0 else 0.0
            self.data[layer.kind][0].append(X[0])
            self.data[layer.kind][1].append(eff)
            new = True
        if not new:
            return
        for kind, (Xs, ys) in self.data.items():
            if ys and max(ys) > 0:
                self.models[kind].fit(np.array(Xs), np.array(ys))
                self.ymax[kind] = max(ys)
        self.version += 1
        self._pred_cache.clear()

    def predict_many(self, items: list) -> tuple[np.ndarray, np.ndarray]:
        """(mean, std) predicted seconds of ``[(layer index, hw, knobs)]``, one model call per kind."""
        n = len(items)
        mu, sd = np.empty(n), np.empty(n)
        by_kind: dict = {}
        for i, (li, hw, k) in enumerate(items):
            by_kind.setdefault(self.s.layers[li].kind, []).append(i)
        for kind, idx in by_kind.items():
            model = self.models[kind]
            ideal = np.array([self.s.layers[items[i][0]].ideal_seconds(items[i][1]) for i in idx])
            if not model.fitted:
                mu[idx], sd[idx] = ideal * 4.0, ideal * 4.0
                continue
            groups: dict = {}
            for j, i in enumerate(idx):
                groups.setdefault((items[i][0], items[i][1].name), []).append(j)
            parts, order = [], []
            for (li, _), js in groups.items():
                hw = items[idx[js[0]]][1]
                parts.append(self._features(li, hw, [items[idx[j]][2] for j in js]))
                order += js
            X = np.empty((len(idx), parts[0].shape[1]), dtype=np.float32)
            X[order] = np.concatenate(parts)
            m, d = model.predict_with_uncertainty(X)
            eff = np.maximum(m * self.ymax[kind], 1e-3)
            mu[idx] = ideal / eff
            sd[idx] = ideal * d * self.ymax[kind] / eff ** 2
        return mu, sd

    def predict_time(self, li: int, hw, knob_list: list[dict]) -> tuple[np.ndarray, np.ndarray]:
        """(mean, std) predicted seconds of a layer's schedules on ``hw``."""
        return self.predict_many([(li, hw, k) for k in knob_list])

    # ------------------------------------------------------------- transferred schedules
    def transfer(self, li: int, hw) -> dict | None:
        """A valid schedule for layer ``li`` on ``hw`` derived from its incumbent best."""
        key = (li, hw.name)
        if key in self._transfer:
            return self._transfer[key]
        from dcoc.vta import default_knobs

        layer = self.s.layers[li]
        src = None
        if self.s.best_hw is not None and (self.s.best_hw, li) in self.s.best:
            src_hw = self.s.hw[self.s.best_hw]
            src = self.s.best[(self.s.best_hw, li)][1]
        out = None
        if src is not None:
            sp = self.space(li, hw)
            k = {}
            for knob in sp.knobs:
                v = src.get(knob.name, knob.choices[0])
                if knob.name == "tile_ci":
                    v = v * src_hw.block_in / hw.block_in
                elif knob.name == "tile_co":
                    v = v * src_hw.block_out / hw.block_out
                elif knob.name == "tile_b":
                    v = v * src_hw.batch / hw.batch
                ch = np.array(knob.choices, dtype=float)
                k[knob.name] = int(ch[np.argmin(np.abs(np.log2(ch) - math.log2(max(v, 1e-9))))])
            for _ in range(12):  # shrink the largest tile until the schedule fits
                if sp.is_valid(k):
                    out = k
                    break
                for name in ("tile_h", "tile_co", "tile_w", "tile_b", "tile_ci"):
                    if name in k:
                        ch = sp.knob(name).choices
                        i = ch.index(k[name])
                        if i > 0:
                            k = dict(k, **{name: ch[i - 1]})
                            break
        if out is None:
            try:
                out = default_knobs(layer.workload, hw)
            except DcocError:
                out = None
        self._transfer[key] = out
        return out

    def ensure_estimates(self, hws) -> None:
        """Predict (batched) every layer's transferred-schedule time on each of ``hws``."""
        need = []
        for hw in {h.name: h for h in hws}.values():
            for li in range(len(self.s.layers)):
                key = (li, hw.name)
                if (hw.name, li) in self.s.best or key in self._pred_cache:
                    continue
                k = self.transfer(li, hw)
                if k is None:
                    self._pred_cache[key] = math.inf
                else:
                    need.append((li, hw, k))
        if need:
            mu, _ = self.predict_many(need)
            for (li, hw, _), m in zip(need, mu):
                self._pred_cache[(li, hw.name)] = float(m)

    def layer_estimate(self, li: int, hw) -> float:
        """Best known (measured) or predicted (transferred schedule) seconds of a layer on ``hw``."""
        b = self.s.best.get((hw.name, li))
        if b is not None:
            return b[0]
        key = (li, hw.name)
        if key not in self._pred_cache:
            self.ensure_estimates([hw])
        return self._pred_cache[key]

    def model_estimate(self, hw) -> float:
        return sum(l.count * self.layer_estimate(li, hw) for li, l in enumerate(self.s.layers))

    # -------------------------------------------------------------------------- round
    def _starts(self, W: int):
        L = self.s.layers
        inc = self.s.hw[self.s.best_hw]
        weights = np.array([l.count * self.layer_estimate(i, inc) for i, l in enumerate(L)])
        weights = weights / weights.sum()
        lis = self.rng.choice(len(L), size=W, p=weights)
        opened = self.s.complete_hws()
        feasible = None
        starts, out_li = [], []
        for w, li in enumerate(lis):
            r = self.rng.random()
            if r < self.cfg.elite_hw_starts or len(opened) == 0:
                hw = inc
            elif r < 1 - self.cfg.random_hw_starts:
                hw = self.s.hw[opened[int(self.rng.integers(len(opened)))]]
            else:
                if feasible is None:
                    feasible = [c for c in (self.hs.sample(self.rng) for _ in range(16))]
                hw = make_hw(feasible[int(self.rng.integers(len(feasible)))], self.board)
            b = self.s.best.get((hw.name, li))
            knobs = b[1] if b is not None else self.transfer(li, hw)
            if knobs is None:
                hw, knobs = inc, self.s.best[(inc.name, li)][1]
            starts.append(self.hw_pos(hw) + self.sw_pos(li, knobs))
            out_li.append(int(li))
        return np.array(starts, dtype=np.int64), np.array(out_li)

    def _build_agents(self, groups_names):
        from dcoc.agents import MAPPO

        self.groups, self.names = groups_names
        self.agents = MAPPO(self.groups, len(self.joint.knobs), self.context_dim, self.mcfg,
                            seed=child_seed(self.seed, "codesign", "agents", len(self.groups)),
                            names=self.names)

    def _maybe_cluster(self):
        """``agents="clustered"``: group the joint knobs by correlation on the measurements.

        The points are the joint positions (hardware, layer schedule) of every valid
        measurement, the score its efficiency (compute-bound time / measured time);
        :func:`dcoc.agents.clustering.make_groups` does the rest (docs/method.md §2).
        """
        from dcoc.agents import make_groups

        if self.agent_mode != "clustered" or self._clustered or len(self.s.measured) < self.cfg.cluster_after:
            return
        pts, ys = [], []
        for (hname, li, key), cost in self.s.measured.items():
            hw = self.s.hw[hname]
            pts.append(self.hw_pos(hw) + self.sw_pos(li, dict(key)))
            ys.append(self.s.layers[li].ideal_seconds(hw) / cost if math.isfinite(cost) and cost > 0 else 0.0)
        self._build_agents(make_groups(self.joint, "clustered", np.array(pts), np.array(ys)))
        self._clustered = True

    def round(self):
        from dcoc.sampling import confidence_select

        self.refit()
        self._maybe_cluster()
        s = self.s
        L = s.layers
        nh = len(HW_KNOBS)
        W = self.mcfg.n_walkers
        starts, lis = self._starts(W)
        dims = self.dims[lis]
        ctx = np.stack([self.context(li) for li in lis])
        best_lat = s.best_latency

        def decode(p, w):
            hw = self.hw_of(tuple(int(x) for x in p[:nh]))
            if hw is None:
                return None, None
            return hw, self.knobs_of(int(lis[w]), hw, tuple(int(x) for x in p[nh:]))

        def valid(p, w):
            hw, k = decode(np.asarray(p), w)
            return k is not None

        def score(points, walkers):
            out = np.zeros(len(points))
            decoded = [(i, int(lis[w]), *decode(p, w)) for i, (p, w) in enumerate(zip(points, walkers))]
            decoded = [d for d in decoded if d[3] is not None]
            self.ensure_estimates([d[2] for d in decoded])
            todo, rests = [], []
            for i, li, hw, k in decoded:
                c = s.measured.get((hw.name, li, Space.key(k)))
                rest = self.model_estimate(hw) - L[li].count * self.layer_estimate(li, hw)
                if c is not None:
                    out[i] = best_lat / (rest + L[li].count * c) if math.isfinite(c) else 0.0
                else:
                    todo.append((i, li, hw, k))
                    rests.append(rest)
            if todo:
                mu, _ = self.predict_many([(li, hw, k) for _, li, hw, k in todo])
                for (i, li, _, _), rest, m in zip(todo, rests, mu):
                    out[i] = best_lat / (rest + L[li].count * m)
            return out

        walk = self.agents.rollout(dims, starts, ctx, score, valid)
        metrics = self.agents.update()

        # candidates: unmeasured valid (layer, hw, knobs) the walks visited
        cands, seen = [], set()
        for p, w in zip(walk.points, walk.walkers):
            hw, k = decode(p, w)
            li = int(lis[w])
            if k is None or s.is_measured(hw, li, k):
                continue
            key = (li, hw.name, Space.key(k))
            if key not in seen:
                seen.add(key)
                cands.append((li, hw, k))
        if not cands:
            return 0
        self.ensure_estimates([c[1] for c in cands])
        m, d = self.predict_many(cands)
        cnt = np.array([L[li].count for li, _, _ in cands], dtype=float)
        rest = np.array([self.model_estimate(hw) - L[li].count * self.layer_estimate(li, hw)
                         for li, hw, _ in cands])
        lat = rest + cnt * m
        mu = best_lat / lat
        sd = best_lat * cnt * d / lat ** 2
        budget = min(self.cfg.round_size, s.remaining)
        complete = set(s.complete_hws())
        jobs, new_hw = [], []
        # 1. open at most one new hardware config, and only when it is predicted, with
        #    confidence, to beat the incumbent's measured latency by open_margin
        explore = self._rounds_since_open >= self.cfg.hw_explore_every
        opening = self._choose_new_hw(cands, complete, best_lat, explore)
        self._rounds_since_open += 1
        if opening is not None and len(opening[1]) <= s.remaining:
            hw, plan = opening
            new_hw.append(hw.name)
            self._rounds_since_open = 0
            jobs += plan
        # 2. a newly opened config that became the incumbent: its default-heuristic
        #    schedules too (a floor under the cost model's choice at opening)
        inc = s.hw[s.best_hw]
        for li in range(len(L)):
            k = self._default(li, inc)
            if k is not None and not s.is_measured(inc, li, k) and len(jobs) < budget:
                jobs.append((li, inc, k))
        # 3. the rest of the round: confident candidates on complete hardware configs
        idx = [i for i, c in enumerate(cands) if c[1].name in complete]
        if idx and budget > len(jobs):
            pick = confidence_select(mu[idx], sd[idx], budget - len(jobs), self.rng, self.ccfg)
            jobs += [cands[idx[j]] for j in pick]
        # dedupe (a completion job may coincide with a pick)
        uniq, keys = [], set()
        for li, hw, k in jobs:
            key = (li, hw.name, Space.key(k))
            if key not in keys and not s.is_measured(hw, li, k):
                keys.add(key)
                uniq.append((li, hw, k))
        res = s.measure(uniq)
        self.log.append({"round": len(self.log) + 1, "trials": s.trials, "candidates": len(cands),
                         "new_hw": new_hw, "best_latency_ms": s.best_latency * 1e3,
                         "mean_reward": walk.mean_reward, **metrics})
        return len(res)

    def _default(self, li: int, hw) -> dict | None:
        key = (li, hw.name)
        if key not in self._defaults:
            self._defaults[key] = fitting_default(self.s.layers[li].workload, hw, self.space(li, hw))
        return self._defaults[key]

    def _choose_new_hw(self, cands, complete, best_lat, explore: bool = False):
        """(hw, jobs) of the most promising unopened hardware config, or None.

        The few unopened configs the walks reached with the best cheap estimate (every
        layer at a schedule transferred from the incumbent) are scored properly: for each
        layer, the best predicted among the walks' candidates on that config, the
        transferred schedule and the default heuristic.  A config is opened only if the
        lower confidence bound of its predicted model throughput beats the incumbent's
        measured throughput by ``open_margin``; opening measures that schedule for every
        layer (so the config's model latency becomes known).

        ``explore`` (no config opened for ``hw_explore_every`` rounds): if none passes the
        LCB rule, the shortlisted config with the highest *upper* confidence bound is
        opened, provided that bound beats the incumbent -- the hardware counterpart of the
        candidates' exploration quota (the cost model has never seen the unopened
        hardware, so its confident verdicts there are the least trustworthy).
        """
        L = self.s.layers
        by_hw: dict = {}
        for i, (li, hw, k) in enumerate(cands):
            if hw.name not in complete:
                by_hw.setdefault(hw.name, (hw, []))[1].append(i)
        if not by_hw:
            return None
        ranked = sorted(by_hw.values(), key=lambda v: self.model_estimate(v[0]))[: self.cfg.new_hw_shortlist]
        best, best_ucb = None, None
        for hw, idx in ranked:
            mu_lat, var_lat, plan = 0.0, 0.0, []
            for lj, layer in enumerate(L):
                b = self.s.best.get((hw.name, lj))
                if b is not None:
                    mu_lat += layer.count * b[0]
                    continue
                opts = [cands[i][2] for i in idx if cands[i][0] == lj]
                opts += [k for k in (self.transfer(lj, hw), self._default(lj, hw)) if k is not None]
                opts = list({Space.key(k): k for k in opts}.values())
                if not opts:
                    mu_lat = math.inf
                    break
                m, d = self.predict_time(lj, hw, opts)
                j = int(np.argmin(m))
                mu_lat += layer.count * m[j]
                var_lat += (layer.count * d[j]) ** 2
                plan.append((lj, hw, opts[j]))
            if not math.isfinite(mu_lat) or not plan:
                continue
            thr = best_lat / mu_lat
            half = self.ccfg.kappa * best_lat * math.sqrt(var_lat) / mu_lat ** 2
            lcb, ucb = thr - half, thr + half
            shape = (hw.batch, hw.block_in, hw.block_out)
            if shape not in self._shapes_opened:  # optimism for never-measured GEMM cores
                lcb += self.cfg.new_shape_bonus
                ucb += self.cfg.new_shape_bonus
            if lcb > 1.0 + self.cfg.open_margin and (best is None or lcb > best[0]):
                best = (lcb, hw, plan)
            if ucb > 1.0 and (best_ucb is None or ucb > best_ucb[0]):
                best_ucb = (ucb, hw, plan)
        if best is None and explore:
            best = best_ucb
        if best is None:
            return None
        hw = best[1]
        self._shapes_opened.add((hw.batch, hw.block_in, hw.block_out))
        return hw, best[2]

    def run(self):
        default = self.board.default_hw()
        self._shapes_opened.add((default.batch, default.block_in, default.block_out))
        default_schedules(self.s, default)
        if self.s.latency(default.name) is None:
            raise DcocError(f"no default schedule fits {default.name} for every layer")
        while self.s.remaining > 0:
            if self.round() == 0:
                # the walks found nothing new: widen the search around the incumbent
                inc = self.s.hw[self.s.best_hw]
                st = SoftwareTuning(self.s, inc, "random", child_seed(self.seed, "fill", self.s.trials))
                if st.step(min(8, self.s.remaining)) == 0:
                    break
