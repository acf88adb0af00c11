"""dcoc tuners as MetaSchedule search strategies, and MetaSchedule tasks as dcoc tasks.

Two adapters between MetaSchedule (TVM 0.27) and :mod:`dcoc.tuners`, both on the knob
view of design-space traces (:mod:`tvm_plugin.metaschedule.trace_space`):

* :class:`TunerStrategy` -- a ``PySearchStrategy`` that lets any dcoc tuner (the default
  ``surrogate``, ``dcoc``, ``dcoc-frozen``, ``xgb``, ``rl``, ``chameleon``, ``ga``,
  ``random``, ``grid``, ``sweep``) search inside ``ms.tune_tasks`` /
  ``ms.relax_integration.tune_relax``::

      db = ms.relax_integration.tune_relax(mod, {}, target, work_dir, 256,
                                           strategy=TunerStrategy(seed=0, max_trials_global=256),
                                           cost_model="random")

  With few trials per task a DCOC-family tuner also ranks with program features shared
  across the run's tasks (:mod:`tvm_plugin.metaschedule.program`).
* :class:`MetaScheduleMeasurer` + :func:`ms_tuning_task` -- the AutoTVM-style way round:
  a :class:`dcoc.search.TuningTask` for one MetaSchedule task and a
  :class:`dcoc.search.Measurer` that builds and runs its configs, so
  ``dcoc.tuners.create("xgb", task).tune(n, measure_option(MetaScheduleMeasurer()))``
  works on llvm.

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
from typing import Any, Sequence

from tvm.ir.utils import derived_object  # noqa: E402 - tvm_plugin is the tvm side
from tvm.s_tir.meta_schedule.arg_info import ArgInfo
from tvm.s_tir.meta_schedule.search_strategy import MeasureCandidate, PySearchStrategy

from dcoc.search.measure import MeasureErrorNo, MeasureInput, Measurer, MeasureResult
from dcoc.search.msdb import FAILED_SECS
from dcoc.search.space import Space
from dcoc.search.tuning_task import TuningTask
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
            self._warm_start(database)
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

    def _prior_warmup(self) -> None:
        """With a pre-trained prior (:mod:`tvm_plugin.metaschedule.prior`): rank ``SAMPLE``
        random valid points of the task by it and make them the tuner's warm-up, best
        first (once per task and run; a later phase reuses the ranking)."""
        seed_warmup = getattr(self.tuner, "seed_warmup", None)
        if self.prior is None or seed_warmup is None or self.ran == "grid":
            return
        import numpy as np

        from tvm_plugin.metaschedule.features import MSProgramFeatures
        from tvm_plugin.metaschedule.prior import SAMPLE

        ranked = self.state.setdefault("prior_warmup", {})
        if self.name not in ranked:
            try:
                feats = MSProgramFeatures(self.tspace, self.context, keep=SAMPLE)
            except Exception:  # noqa: BLE001 - no features for this task: the usual warm-up
                ranked[self.name] = None
                return
            pts = self.tuner.problem.random_valid(SAMPLE, exclude=set())
            if not pts:
                ranked[self.name] = None
                return
            X = feats(np.array(pts, dtype=np.int64))
            ranked[self.name] = [pts[i] for i in self.prior.rank(X)]
            self.prior_features = feats
            self.prior_seconds = feats.seconds
        if ranked[self.name]:
            seed_warmup(ranked[self.name])

    def _size_tuner(self) -> None:
        """Before the first batch every task of the run is known: with fewer trials per task
        than ``program.few_trials_below``, a DCOC-family tuner gets a program-feature ranker
        that learns from the run's shared pool."""
        self._prior_warmup()
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

    def _warm_start(self, database) -> None:
        """Replay the database's records of this task into the tuner and the caches."""
        import tvm_ffi

        mod = self.context.mod
        if not database.has_workload(mod):
            return
        wl = database.commit_workload(mod)
        want = str(self.context.target)
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
            self.recorded += 1
            cfg = self.tspace.config_of_trace(rec.trace)
            if cfg is None:
                continue
            r = record_result(rec)
            key = Space.key(cfg)
            if key in self.by_key:
                continue
            self.by_key[key] = r
            sch = self.tspace.apply(cfg)
            if sch is not None:
                self.by_hash.setdefault(schedule_hash(sch), r)
            pairs.append((MeasureInput(self.task.target, self.task, cfg), r))
            if r.valid and r.cost < self.best_cost:
                self.best_cost, self.best_config = r.cost, dict(cfg)
                self.best_trace = rec.trace
        if pairs:
            self.tuner.load_history(pairs)
            for inp, _ in pairs:
                self.tuner.mark_visited(inp.config)

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


# ============================================================================ adapter
def ms_tuning_task(task, target=None, name: str | None = None, seed: int = 0,
                   num_threads: int | None = None) -> TuningTask:
    """A :class:`dcoc.search.TuningTask` over one MetaSchedule task's knob view.

    ``task``: a :class:`dcoc.tasks.Task` with ``ms_task`` (from
    :func:`tvm_plugin.frontend.extract_tasks`), a MetaSchedule ``ExtractedTask``, or an
    IRModule / PrimFunc (then ``target`` is required).  ``payload`` is the
    :class:`~tvm_plugin.metaschedule.trace_space.TraceSpace`.
    """
    ms_task = getattr(task, "ms_task", None)
    if ms_task is not None:
        name = name or task.name
        task = ms_task
    if hasattr(task, "dispatched"):  # ExtractedTask
        mod, target, name = task.dispatched[0], target or task.target, name or task.task_name
    else:
        mod = task
    if target is None:
        raise ValueError("ms_tuning_task needs a target for a bare module")
    from tvm_plugin.metaschedule.build import resolve_tvm_target

    if not hasattr(target, "kind"):
        target = resolve_tvm_target(target)
    ts = TraceSpace.from_mod(mod, target, name or "task", seed=seed, num_threads=num_threads)
    return ts.tuning_task()


class MetaScheduleMeasurer(Measurer):
    """Build and run configs of a :func:`ms_tuning_task` with MetaSchedule's builder/runner.

    builder: ``"persistent"`` (default, :class:`tvm_plugin.metaschedule.build.PersistentBuilder` with
        ``fast_build``), ``"local"`` or a Builder.
    runner: ``"local"``, ``"rpc://HOST:PORT/KEY"`` or a Runner.
    database: optional MetaSchedule Database; every measurement is committed to it (so a
        run through this adapter compiles with ``compile_model`` like a tune_relax run).
    n_parallel: batch size the tuner's ``tune()`` uses (builds run in parallel).
    Identical schedules (structural hash) are measured once; repeats get the first result
    with ``info["cached"] = True``.
    """

    def __init__(self, builder: Any = "persistent", runner: Any = "local", database=None,
                 n_parallel: int = 16, timeout_sec: float = 30.0):
        from tvm_plugin.metaschedule.build import make_builder, make_runner

        self._own_builder = isinstance(builder, str)
        self.builder = make_builder(builder) if isinstance(builder, str) else builder
        self.runner = make_runner(runner, timeout_sec=timeout_sec)
        self.database = database
        self.n_parallel = int(n_parallel)
        self._cache: dict = {}

    def measure(self, task: TuningTask, configs: Sequence[dict]) -> list[MeasureResult]:
        from tvm.s_tir.meta_schedule.builder import BuilderInput
        from tvm.s_tir.meta_schedule.runner import RunnerInput

        from tvm_plugin.metaschedule.build import device_type, remove_artifact

        ts: TraceSpace = task.payload
        t0 = time.perf_counter()
        out: list = [None] * len(configs)
        todo = []  # (index, sch, hash, args_info)
        first: dict = {}
        for i, cfg in enumerate(configs):
            sch = ts.apply(cfg)
            if sch is None:
                out[i] = MeasureResult.error(MeasureErrorNo.INSTANTIATION_ERROR,
                                             "decisions cannot be applied to the design space")
                continue
            h = schedule_hash(sch)
            if h in self._cache:
                r = self._cache[h]
                out[i] = MeasureResult(r.costs, r.error_no, 0.0, None, r.error_msg,
                                       {**r.info, "cached": True})
                continue
            if h in first:
                todo.append((i, None, h, None))
                continue
            first[h] = i
            todo.append((i, sch, h, ArgInfo.from_entry_func(sch.mod, remove_preproc=True)))
        fresh = [t for t in todo if t[1] is not None]
        if fresh:
            built = self.builder.build([BuilderInput(s.mod, ts.target) for _, s, _, _ in fresh])
            run_idx, run_inputs = [], []
            for (i, s, h, args), b in zip(fresh, built):
                if b.error_msg is not None:
                    out[i] = MeasureResult.error(_error_code("builder " + b.error_msg),
                                                 b.error_msg)
                else:
                    run_idx.append((i, s, h, args, b.artifact_path))
                    run_inputs.append(RunnerInput(b.artifact_path, device_type(ts.target), args))
            if run_inputs:
                futures = self.runner.run(run_inputs)
                for (i, s, h, args, path), fut in zip(run_idx, futures):
                    out[i] = runner_result(fut.result())
                    remove_artifact(path)
            wall = (time.perf_counter() - t0) / max(1, len(fresh))
            for i, s, h, args in fresh:
                r = out[i]
                out[i] = r = MeasureResult(r.costs, r.error_no, wall, r.timestamp, r.error_msg,
                                           r.info)
                self._cache[h] = r
                if self.database is not None:
                    self._commit(ts, s, args, r)
        for i, s, h, args in todo:
            if s is None:
                r = self._cache[h]
                out[i] = MeasureResult(r.costs, r.error_no, 0.0, None, r.error_msg,
                                       {**r.info, "cached": True})
        return out

    def _commit(self, ts: TraceSpace, sch, args, r: MeasureResult) -> None:
        from tvm.s_tir import meta_schedule as ms

        wl = self.database.commit_workload(ts.mod)
        secs = list(r.costs) if r.valid else [1e10]
        self.database.commit_tuning_record(
            ms.database.TuningRecord(sch.trace, wl, secs, ts.target, args))

    def close(self) -> None:
        if self._own_builder:
            from tvm_plugin.metaschedule.build import close_builder

            close_builder(self.builder)


__all__ = ["TunerStrategy", "MetaScheduleMeasurer", "ms_tuning_task",
           "runner_result", "record_result"]
