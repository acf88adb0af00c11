"""dcoc tuners as MetaSchedule search strategies: :class:`TunerStrategy`, and
:func:`make_strategy`, the strategy (dcoc's or MetaSchedule's own) a tuner name runs.

:class:`TunerStrategy` is a ``PySearchStrategy`` on the knob view of design-space traces
(:mod:`tvm_plugin.metaschedule.trace_space`) that lets any dcoc tuner (the default
``surrogate``, ``dcoc``, ``dcoc-frozen``, ``xgb``, ``rl``, ``chameleon``, ``ga``,
``random``, ``grid``, ``sweep``) search inside ``ms.tune_tasks`` /
``ms.relax_integration.tune_relax``::

    db = ms.relax_integration.tune_relax(mod, {}, target, work_dir, 256,
                                         strategy=TunerStrategy(seed=0, max_trials_global=256),
                                         cost_model="random")

With few trials per task a DCOC-family tuner also ranks with program features shared
across the run's tasks (:mod:`tvm_plugin.metaschedule.program`); with a pre-trained prior
(:mod:`tvm_plugin.metaschedule.prior`) it ranks each task's warm-up.  The other way round,
a MetaSchedule task tuned by a dcoc tuner's own loop, is :mod:`tvm_plugin.metaschedule.adapter`.

MetaSchedule contract kept by :class:`TunerStrategy`:

* ``generate_measure_candidates`` returns at most ``num_trials_per_iter`` candidates and
  never more than the task's remaining ``max_trials``; ``None`` (never ``[]``) ends the task.
* With ``max_trials_global`` (``tune_model`` sets it to its ``trials``) no batch goes past
  the run's total budget either: MetaSchedule's task scheduler checks that budget only
  between batches, so after one short batch (too few distinct schedules) it would start a
  full batch at, say, 255 of 256 trials and end at 271.  All clones count against one total.
* MetaSchedule pre-tunes every task of a run before the first batch, so at its first
  batch a task knows the run's budget per task (:meth:`TunerStrategy.per_task`); below
  ``ProgramConfig.few_trials_below`` a DCOC-family tuner is given a program-feature ranker.
* The strategy never writes the database: MetaSchedule's ``AddToDatabase`` measure callback
  commits every candidate; run costs reach the tuner from ``RunnerResult.run_secs``.
* ``clone()`` returns a new decorated object (``tune_relax`` clones once per task); all
  clones share one ``state`` dict, so :attr:`TunerStrategy.results` of the object you
  passed holds every task's summary afterwards.

How a batch is made: the tuner is asked for ``n`` configs; each is replayed on its design
space with ``apply_with_policy`` + postprocs.  Configs that cannot be applied go back to
the tuner at once as ``INSTANTIATION_ERROR`` results (never built); configs whose schedule
is structurally identical to one already measured (or in this batch) get that schedule's
result without a new measurement; the tuner is asked again until ``n`` distinct new
schedules are found (or ``max_proposals x n`` proposals were made, or the tuner is
exhausted, which ends the task).

Cost model: the tuner owns it (DCOC's and XGBTuner's XGBoost on the knob features);
MetaSchedule's own cost model is not used by this strategy, so pass ``cost_model="random"``
(cheap; its ``update`` is a no-op) -- the default ``"xgb"`` would retrain an unused model
after every batch.

Resume: with ``warm_start=True`` (default) the database's existing records for the task
(same workload and target) are mapped back to configs (``TraceSpace.config_of_trace``),
given to the tuner (``load_history`` + visited), used as a cache (a proposal equal to a
recorded schedule is answered from it), and counted against ``max_trials``: rerunning a
finished run with the same work_dir and budget measures nothing again; a larger budget
continues where the records stop.  Records from other tuners (e.g. EvolutionarySearch)
warm-start the tuner the same way.

Determinism: for a fixed ``seed`` every tuner decision is a deterministic function of the
measured costs (per-task seeds are derived from ``seed`` and the task name, independent of
task order).  Measured run times are not deterministic, so model-guided tuners (dcoc, xgb,
rl, chameleon, ga) can diverge between runs after their first measured batch; random and
grid propose the same sequence every time.  MetaSchedule's design spaces are generated
with the tune context's ``rand_state`` (``tune_relax(seed=...)``).
"""
from __future__ import annotations

import math
import time
from typing import Any, Mapping

from tvm.ir.utils import derived_object  # noqa: E402 - tvm_plugin is the tvm side
from tvm.s_tir.meta_schedule.arg_info import ArgInfo
from tvm.s_tir.meta_schedule.search_strategy import MeasureCandidate, PySearchStrategy

from dcoc.search.measure import MeasureErrorNo, MeasureInput, MeasureResult
from dcoc.search.msdb import FAILED_SECS
from dcoc.search.space import Space
from dcoc.seeding import child_seed
from dcoc.tuners import DEFAULT as DEFAULT_TUNER
from tvm_plugin.metaschedule.build import preload_tensor_intrin
from tvm_plugin.metaschedule.program import ProgramConfig
from tvm_plugin.metaschedule.trace_space import TraceSpace, schedule_hash

# every TuneContext imports tvm.s_tir.tensor_intrin; do it the fast way first
preload_tensor_intrin()


# ============================================================================ results
def runner_result(r, wall: float = 0.0) -> MeasureResult:
    """A MetaSchedule ``RunnerResult`` as a dcoc ``MeasureResult``."""
    secs = [float(x) for x in r.run_secs] if r.run_secs is not None else []
    err = r.error_msg
    if err is None and secs and all(0.0 < s < FAILED_SECS for s in secs):
        return MeasureResult(secs, MeasureErrorNo.NO_ERROR, wall)
    return MeasureResult.error(_error_code(err or "no run time"), err or "no run time", wall)


def _error_code(msg: str) -> int:
    low = msg.lower()
    builder = "builder" in low or "build" in low.split(":")[0]
    if "timeout" in low or "timed out" in low:
        return MeasureErrorNo.BUILD_TIMEOUT if builder else MeasureErrorNo.RUN_TIMEOUT
    if builder:
        return MeasureErrorNo.COMPILE_HOST
    return MeasureErrorNo.RUNTIME_DEVICE


def record_result(rec) -> MeasureResult:
    """A database TuningRecord's outcome as a MeasureResult."""
    secs = [float(x) for x in rec.run_secs] if rec.run_secs is not None else []
    if secs and all(0.0 < s < FAILED_SECS for s in secs):
        return MeasureResult(secs, MeasureErrorNo.NO_ERROR, 0.0)
    return MeasureResult.error(MeasureErrorNo.RUNTIME_DEVICE, "failed in a previous run")


def _jsonable(cfg: dict) -> dict:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in cfg.items()}


def _candidate(sch) -> Any:
    return MeasureCandidate(sch, ArgInfo.from_entry_func(sch.mod, remove_preproc=True))


# ============================================================================ strategy
class _TunerStrategy(PySearchStrategy):
    """Implementation of :class:`TunerStrategy` (use the decorated class)."""

    def __init__(self, tuner: str = DEFAULT_TUNER, seed: int = 0, tuner_kwargs: dict | None = None,
                 warm_start: bool = True, max_proposals: int = 8, state: dict | None = None,
                 max_trials_global: int | None = None, program: ProgramConfig | None = None,
                 prior=None):
        self.tuner_name = tuner
        self.prior = prior
        self.seed = int(seed)
        self.tuner_kwargs = dict(tuner_kwargs or {})
        self.program = program if program is not None else ProgramConfig()
        self.warm_start = bool(warm_start)
        self.max_proposals = int(max_proposals)
        self.state = state if state is not None else {}
        self.state.setdefault("tasks", {})
        self.state.setdefault("used", 0)  # trials measured or recorded, over every task
        if max_trials_global is not None:
            self.state["max_trials_global"] = int(max_trials_global)
        self.context = None
        self.tspace: TraceSpace | None = None
        self.tuner = None
        self.features = None
        self.pending = None

    # ------------------------------------------------------------ results
    @property
    def results(self) -> dict:
        """``{task name: summary}`` of every task tuned by this strategy or its clones."""
        return self.state["tasks"]

    def limit_total(self, max_trials_global: int) -> None:
        """Start a run whose batches, over all tasks, stop at ``max_trials_global``."""
        self.state["max_trials_global"] = int(max_trials_global)
        self.state["used"] = 0

    # ------------------------------------------------------ MetaSchedule API
    def _initialize_with_tune_context(self, context) -> None:
        self.context = context

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None,
                   cost_model=None) -> None:
        import dcoc.tuners

        t0 = time.perf_counter()
        if self.state.get("generating"):  # a new run (MetaSchedule pre-tunes every task first)
            self.state["generating"] = False
            self.state["run_tasks"] = 0
        self.state["run_tasks"] = self.state.get("run_tasks", 0) + 1
        self.name = str(self.context.task_name or "task")
        self.task_seed = child_seed(self.seed, "metaschedule", self.name)
        # seconds of an earlier phase of the same run (tune_model's second tune_tasks)
        prev = self.state["tasks"].get(self.name) or {}
        self._before = {k: float(prev.get(k) or 0.0) for k in
                        ("strategy_seconds", "space_seconds", "fit_seconds", "feature_seconds")}
        self.tspace = self._trace_space(list(design_spaces))
        self.space_seconds = time.perf_counter() - t0
        self.task = self.tspace.tuning_task()
        self.ran = self.tuner_name
        if not self.tspace.space.knobs:  # nothing to decide: one schedule, measured once
            self.ran = "grid"
            self.tuner = dcoc.tuners.create("grid", self.task, seed=self.task_seed)
        else:
            self.tuner = dcoc.tuners.create(self.tuner_name, self.task, seed=self.task_seed,
                                            **self.tuner_kwargs)
        self.features = None      # program features, once a ranker is attached (first batch)
        self.prior_features = None  # program features of the prior's warm-up sample
        self.sized = False        # told the tuner the run's trials per task (first batch)
        self.max_trials = int(max_trials)
        self.per_iter = max(1, int(num_trials_per_iter))
        self.by_key: dict = {}    # config key -> MeasureResult (measured, recorded or invalid)
        self.by_hash: dict = {}   # schedule structural hash -> MeasureResult
        self.pending = None
        self.measured = 0         # candidates measured in this session
        self.recorded = 0         # records already in the database (resume)
        self.n_invalid = self.n_dup = self.n_proposed = 0
        self.best_cost, self.best_config, self.best_trace = math.inf, None, None
        self.history: list = []   # (trial, cost s, wall s) per measured candidate
        self._t0 = time.perf_counter()
        if self.warm_start and database is not None:
            _warm_start(self, database)
        self.budget = max(0, self.max_trials - self.recorded)
        self.state["used"] += self.recorded
        self.overhead = time.perf_counter() - t0
        self._publish()

    def post_tuning(self) -> None:
        self._publish(done=True)

    def generate_measure_candidates(self):
        t0 = time.perf_counter()
        try:
            return self._generate()
        finally:
            self.overhead += time.perf_counter() - t0

    def notify_runner_results(self, measure_candidates, results) -> None:
        t0 = time.perf_counter()
        batch, dups = self.pending or ([], [])
        self.pending = None
        res = [runner_result(r) for r in results]
        cfgs, outs = [], []
        for (cfg, key, h, sch), r in zip(batch, res):
            self.by_key[key] = r
            self.by_hash[h] = r
            cfgs.append(cfg)
            outs.append(r)
            self.history.append((self.recorded + self.measured, r.cost,
                                 time.perf_counter() - self._t0))
            self.measured += 1
            self.state["used"] += 1
            if r.valid and r.cost < self.best_cost:
                self.best_cost, self.best_config = r.cost, dict(cfg)
                self.best_trace = sch.trace
        for cfg, i in dups:
            cfgs.append(cfg)
            outs.append(res[i])
        if cfgs:
            self.tuner.tell(cfgs, outs)
        self.overhead += time.perf_counter() - t0
        self._publish()

    def clone(self):
        outer = self._outer() if getattr(self, "_outer", None) is not None else None
        cls = type(outer) if outer is not None else TunerStrategy
        return cls(**self._ctor_kwargs())

    def _ctor_kwargs(self) -> dict:
        return {"tuner": self.tuner_name, "seed": self.seed, "tuner_kwargs": self.tuner_kwargs,
                "warm_start": self.warm_start, "max_proposals": self.max_proposals,
                "state": self.state, "program": self.program, "prior": self.prior}

    # -------------------------------------------------------------- helpers
    def _trace_space(self, design_spaces: list) -> TraceSpace:
        """The task's knob view, built once per run: a later phase of the same run
        (``tune_model``'s second ``tune_tasks``) reuses it when its design spaces have the
        same instructions (building one replays every design space and probes every
        compute location: seconds per task)."""
        shape = tuple(tuple(str(i.kind.name) for i in s.trace.insts) for s in design_spaces)
        cache = self.state.setdefault("spaces", {})
        hit = cache.get(self.name)
        if hit is not None and hit[0] == shape and hit[1].seed == self.task_seed:
            return hit[1]
        ts = TraceSpace.from_context(self.context, design_spaces, seed=self.task_seed)
        cache[self.name] = (shape, ts)
        return ts

    def _generate(self):
        if self.tuner is None:
            return None
        self.state["generating"] = True
        if not self.sized:
            self.sized = True
            self._size_tuner()
        remaining = self.budget - self.measured
        if remaining <= 0:
            return None
        total = self.state.get("max_trials_global")
        if total is not None:
            remaining = min(remaining, total - self.state["used"])
            if remaining <= 0:
                return None
        n = min(self.per_iter, remaining)
        cands, batch, dups = [], [], []
        pend_key: dict = {}
        pend_hash: dict = {}
        limit = max(64, self.max_proposals * n)
        proposed = 0
        while len(cands) < n and proposed < limit and self.tuner.has_next():
            configs = self.tuner.ask(n - len(cands))
            if not configs:
                break
            told_cfg, told_res = [], []
            for cfg in configs:
                proposed += 1
                key = Space.key(cfg)
                if key in self.by_key:  # measured, recorded or known invalid
                    told_cfg.append(cfg)
                    told_res.append(self.by_key[key])
                    self.n_dup += 1
                    continue
                if key in pend_key:
                    dups.append((cfg, pend_key[key]))
                    self.n_dup += 1
                    continue
                sch = None
                for f in (self.features, self.prior_features):
                    if sch is None and f is not None:
                        sch = f.schedule(cfg)
                if sch is None:
                    sch = self.tspace.apply(cfg)
                if sch is None:
                    r = MeasureResult.error(MeasureErrorNo.INSTANTIATION_ERROR,
                                            "decisions cannot be applied to the design space")
                    self.by_key[key] = r
                    told_cfg.append(cfg)
                    told_res.append(r)
                    self.n_invalid += 1
                    continue
                h = schedule_hash(sch)
                if h in self.by_hash:  # same schedule as a measured one
                    self.by_key[key] = self.by_hash[h]
                    told_cfg.append(cfg)
                    told_res.append(self.by_hash[h])
                    self.n_dup += 1
                    continue
                if h in pend_hash:
                    dups.append((cfg, pend_hash[h]))
                    self.n_dup += 1
                    continue
                pend_key[key] = pend_hash[h] = len(batch)
                batch.append((cfg, key, h, sch))
                cands.append(_candidate(sch))
            if told_cfg:  # invalid / already known: back to the tuner without building
                self.tuner.tell(told_cfg, told_res)
        self.n_proposed += proposed
        if not cands:
            return None
        self.pending = (batch, dups)
        return cands

    def per_task(self) -> float:
        """The run's budget per task: its total (``max_trials_global``, else this task's
        ``max_trials``) over the tasks pre-tuned for the run, at most ``max_trials``."""
        total = self.state.get("max_trials_global", self.max_trials)
        return min(float(self.max_trials), total / max(1, self.state.get("run_tasks", 1)))

    def _size_tuner(self) -> None:
        """Before the first batch every task of the run is known: with fewer trials per task
        than ``program.few_trials_below``, a DCOC-family tuner gets a program-feature ranker
        that learns from the run's shared pool."""
        _prior_warmup(self)
        attach = getattr(self.tuner, "attach_ranker", None)
        if attach is None or not self.per_task() < self.program.few_trials_below:
            return
        from tvm_plugin.metaschedule.features import MSProgramFeatures
        from tvm_plugin.metaschedule.program import ProgramRanker, SharedPool

        try:
            feats = MSProgramFeatures(self.tspace, self.context)
        except Exception:  # noqa: BLE001 - no features for this task: knob features only
            return
        pool = self.state.setdefault("pool", SharedPool())
        attach(ProgramRanker(self.tuner.problem, feats, pool, self.name, self.program))
        self.features = feats
        self._publish()

    def _publish(self, done: bool = False) -> None:
        if self.tspace is None:
            return
        self.state["tasks"][self.name] = {
            "task": self.name, "tuner": self.tuner_name, "ran": self.ran, "seed": self.task_seed,
            "model_rounds": _model_rounds(self.tuner),
            "space_size": int(self.tspace.space.size), "knobs": self.tspace.space.names,
            "design_spaces": len(self.tspace.traces), "flop": self.tspace.flop,
            "trials": self.measured, "recorded": self.recorded, "budget": self.budget,
            "proposed": self.n_proposed, "invalid": self.n_invalid, "duplicates": self.n_dup,
            "best_cost": self.best_cost if math.isfinite(self.best_cost) else None,
            "best_config": _jsonable(self.best_config) if self.best_config else None,
            "per_task": self.per_task(), "program_features": self.features is not None,
            "history": list(self.history),
            "strategy_seconds": round(self._before["strategy_seconds"] + self.overhead, 3),
            "feature_seconds": round(self._before["feature_seconds"]
                                     + (self.features.seconds if self.features is not None else 0.0)
                                     + getattr(self, "prior_seconds", 0.0), 3),
            "prior": self.prior is not None and self.ran != "grid",
            "space_seconds": round(self._before["space_seconds"] + self.space_seconds, 3),
            "fit_seconds": round(self._before["fit_seconds"] + float(getattr(
                getattr(self.tuner, "problem", None), "fit_seconds", 0.0)), 3),
            "done": done,
        }


def _warm_start(st, database) -> None:
    """Replay the database's records of the task of ``st`` (a strategy) into its tuner and
    caches."""
    import tvm_ffi

    mod = st.context.mod
    if not database.has_workload(mod):
        return
    wl = database.commit_workload(mod)
    want = str(st.context.target)
    mod_hash = tvm_ffi.structural_hash(mod)
    same: dict = {}  # workload handle -> is it this task's workload
    pairs = []
    for rec in database.get_all_tuning_records():
        w = rec.workload
        k = w.__chandle__()
        if k not in same:
            same[k] = bool(w.same_as(wl) or tvm_ffi.structural_hash(w.mod) == mod_hash)
        if not same[k]:
            continue
        if rec.target is not None and str(rec.target) != want:
            continue
        st.recorded += 1
        cfg = st.tspace.config_of_trace(rec.trace)
        if cfg is None:
            continue
        r = record_result(rec)
        key = Space.key(cfg)
        if key in st.by_key:
            continue
        st.by_key[key] = r
        sch = st.tspace.apply(cfg)
        if sch is not None:
            st.by_hash.setdefault(schedule_hash(sch), r)
        pairs.append((MeasureInput(st.task.target, st.task, cfg), r))
        if r.valid and r.cost < st.best_cost:
            st.best_cost, st.best_config = r.cost, dict(cfg)
            st.best_trace = rec.trace
    if pairs:
        st.tuner.load_history(pairs)
        for inp, _ in pairs:
            st.tuner.mark_visited(inp.config)


def _prior_warmup(st) -> None:
    """With a pre-trained prior (:mod:`tvm_plugin.metaschedule.prior`): rank ``SAMPLE``
    random valid points of the task of ``st`` (a strategy) by it and make them its tuner's
    warm-up, best first (once per task and run; a later phase reuses the ranking)."""
    seed_warmup = getattr(st.tuner, "seed_warmup", None)
    if st.prior is None or seed_warmup is None or st.ran == "grid":
        return
    import numpy as np

    from tvm_plugin.metaschedule.features import MSProgramFeatures
    from tvm_plugin.metaschedule.prior import SAMPLE

    ranked = st.state.setdefault("prior_warmup", {})
    if st.name not in ranked:
        try:
            feats = MSProgramFeatures(st.tspace, st.context, keep=SAMPLE)
        except Exception:  # noqa: BLE001 - no features for this task: the usual warm-up
            ranked[st.name] = None
            return
        pts = st.tuner.problem.random_valid(SAMPLE, exclude=set())
        if not pts:
            ranked[st.name] = None
            return
        X = feats(np.array(pts, dtype=np.int64))
        ranked[st.name] = [pts[i] for i in st.prior.rank(X)]
        st.prior_features = feats
        st.prior_seconds = feats.seconds
    if ranked[st.name]:
        seed_warmup(ranked[st.name])


def _model_rounds(tuner) -> int | None:
    """How often the tuner's model chose what to measure (DCOC family: proposal rounds;
    AutoTVM-style model-based tuners: model fits), None for tuners without a model."""
    for attr in ("rounds", "train_ct"):
        v = getattr(tuner, attr, None)
        if isinstance(v, int):
            return v
    return None


TunerStrategy = derived_object(_TunerStrategy)
TunerStrategy.__doc__ = """A MetaSchedule search strategy driven by a dcoc tuner.

Parameters
----------
tuner: a :mod:`dcoc.tuners` name or ``NAME:key=value`` spec (default ``surrogate``), or a
    Tuner subclass.
seed: the one seed (per-task tuner seeds are derived from it and the task name).
tuner_kwargs: extra keyword arguments of the tuner's constructor.
warm_start: replay the database's records of each task (resume; see module docstring).
max_proposals: proposals per wanted candidate before a batch is cut short.
state: a dict shared by the clones (``results`` reads ``state["tasks"]``).
max_trials_global: the run's total budget (pass the same number as to ``tune_relax`` /
    ``tune_tasks``): the last batch is cut so the run ends there.  MetaSchedule's scheduler
    checks its total only between batches and would otherwise overshoot by up to one batch.
    ``tune_model`` sets it.
program: :class:`~tvm_plugin.metaschedule.program.ProgramConfig` -- when a DCOC-family
    tuner ranks with program features shared across tasks (default: below 32 trials per
    task; ``ProgramConfig(few_trials_below=0)``: never).
"""


# ============================================================================ choice
#: how MetaSchedule's own strategies run -- the names are :data:`dcoc.tuners.METASCHEDULE`'s
#: (the one name table; every other name is a dcoc tuner): (their class in
#: ``ms.search_strategy``, the cost model they want, what they run in words)
MS_STRATEGIES = {
    "evolutionary": ("EvolutionarySearch", "xgb",
                     "MetaSchedule EvolutionarySearch (its defaults) + XGBoost cost model"),
    "replay-trace": ("ReplayTrace", "random",
                     "MetaSchedule ReplayTrace: random traces, no cost model"),
}


def make_strategy(tuner: str = DEFAULT_TUNER, seed: int = 0,
                  tuner_kwargs: Mapping | None = None, population: int | None = None,
                  prior=False):
    """The MetaSchedule strategy for a ``tuner`` name, and the cost model it wants.

    dcoc tuners (names or specs) -> (TunerStrategy, ``"random"``: the tuner owns its model).
    ``"evolutionary"`` -> (EvolutionarySearch at its defaults, ``population_size=population``
    if given; ``"xgb"``: MetaSchedule's XGBoost cost model).
    ``"replay-trace"`` -> (ReplayTrace, ``"random"``: it uses no cost model).
    """
    name = str(tuner).lower()
    if name in MS_STRATEGIES:
        from tvm.s_tir import meta_schedule as ms

        cls, cost_model, _ = MS_STRATEGIES[name]
        kw = {"population_size": int(population)} if population and name == "evolutionary" else {}
        return getattr(ms.search_strategy, cls)(**kw), cost_model
    return TunerStrategy(tuner=str(tuner), seed=seed, tuner_kwargs=dict(tuner_kwargs or {}),
                         prior=_load_prior(tuner, prior)), "random"


def _load_prior(tuner, prior):
    """The pre-trained start for a DCOC-family tuner (``prior``: True = the shipped one, a
    path, or False), None for the others (they have their own warm-up)."""
    from dcoc.tuners import DCOC_FAMILY, parse

    if prior is False or prior is None or parse(tuner)[0] not in DCOC_FAMILY:
        return None
    from tvm_plugin.metaschedule.prior import load_prior

    return load_prior(prior)


def describe_method(tuner, tasks: dict) -> str:
    """What ran, in words: the tuner's algorithm, whether its model ever chose what to
    measure, on how many tasks program features ranked, and the tasks with nothing to
    tune (one fixed schedule)."""
    name = str(tuner).lower()
    if name in MS_STRATEGIES:
        return MS_STRATEGIES[name][2]
    from dcoc.tuners import describe

    text = describe(tuner)
    searched = [t for t in tasks.values() if t.get("ran", t.get("tuner")) != "grid"
                and t.get("trials", 0) + t.get("recorded", 0) > 0]
    fixed = sum(1 for t in tasks.values() if t.get("ran") == "grid" and t.get("trials", 0)
                + t.get("recorded", 0) > 0)
    parts = []
    rounds = [t.get("model_rounds") for t in searched]
    if searched and all(r is not None for r in rounds):
        guided = sum(1 for r in rounds if r)
        parts.append("its model never chose a trial (every trial was the initial sample)"
                     if not guided else f"model-guided on {guided} of {len(searched)} searched tasks")
    n_prior = sum(1 for t in tasks.values() if t.get("prior"))
    if n_prior:
        parts.append(f"pre-trained start on {n_prior} of {len(tasks)} tasks")
    n = sum(1 for t in tasks.values() if t.get("program_features"))
    if n:
        parts.append(f"program features on {n} of {len(tasks)} tasks")
    if fixed:
        parts.append(f"{fixed} task{'s' if fixed > 1 else ''} with one fixed schedule")
    return text + ("; " + ", ".join(parts) if parts else "")


__all__ = ["TunerStrategy", "MS_STRATEGIES", "make_strategy", "describe_method",
           "runner_result", "record_result"]
