"""The DCOC core: one round engine that every DCOC entry point drives.

``dcoc.tune_task`` (the per-task tuner :class:`dcoc.tuners.dcoc_tuner.DCOCTuner`), the
MetaSchedule strategy (``tvm_plugin.metaschedule.strategy``, through the same tuner) and whole-model
co-design (:class:`dcoc.codesign.joint.DCOCCoDesign`) all call :meth:`DCOCCore.propose`;
they differ only in the :class:`Problem` adapter that says what a point is, how it is
scored and how a round's measurements are picked.

One round (docs/method.md):

1. ``problem.refit()`` -- refit the XGBoost ensembles (built by :func:`ensemble`) on
   every measurement so far;
2. the agents (:class:`dcoc.agents.MAPPO`) are built; for ``agents="clustered"`` they
   are re-formed once on knob clusters of the measurements, when enough exist and a
   bootstrap of the clustering agrees (else the fixed split stays);
3. walkers start from ``problem.starts(W)`` and walk the space, rewarded by
   ``problem.score`` (normalized throughput, measured where known); the agents learn
   from the walks (PPO, CTDE);
4. ``problem.candidates`` turns the visited points into unmeasured valid candidates;
   ``problem.predict`` gives their (mean, std) normalized throughput;
5. ``problem.select`` picks the measurements with :meth:`DCOCCore.pick` (confidence
   sampling: LCB + soft threshold + exploration quota).

Ablations are flags of :class:`DCOCConfig`, not copies of the algorithm:

* ``learn=False`` (tuner ``dcoc-frozen``): the agents walk but are never updated;
* ``proposer="surrogate"`` (``dcoc-noagents``): no agents; the candidates are every
  valid point of the space scored by the ensemble (spaces up to ``exhaustive_limit``
  points), else the points visited by simulated annealing on the ensemble's score;
* ``proposer="agents"`` (``dcoc-agents``): only the agents' walks;
* ``proposer="both"`` (opt-in, not an ablation): the agents' walks and the surrogate's
  search are pooled before the selection;
* ``select="topk"`` (``dcoc-topk``): no uncertainty, the ``n`` best predicted means.

``select=None`` (the default) takes :attr:`Problem.default_select`: confidence sampling per
task, top-k in whole-model co-design (the confidence rule was ablated there on 60 (model,
board, seed) triples and added nothing; docs/method.md §12).  ``proposer=None`` (the
default) takes the problem's :attr:`Problem.default_proposer`: the agents per task, the
surrogate in whole-model co-design (the agents were ablated there on ResNet-18,
MobileNetV2 and VGG-16 and added nothing; docs/method.md §12).  The MetaSchedule strategy
fills ``proposer="surrogate", select="topk"`` where a config leaves them unset
(``tvm_plugin.metaschedule.strategy.MS_DEFAULTS``: neither the agents nor the confidence rule showed a
gain on whole models, sessions 27, 28 and 36).  The ``surrogate`` reference tuner is
``proposer="surrogate", select="topk"``.  ``learn=None`` (the default) takes :attr:`Problem.default_learn` (True);
the MetaSchedule strategy sets False where a config leaves it unset (no gain from learning
on whole models, session 27; it matters there only with ``proposer="agents"``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from dcoc.method.mappo import MAPPOConfig
from dcoc.method.sampling import ConfidenceConfig, confidence_select

PROPOSERS = ("agents", "surrogate", "both")
SELECTS = ("confidence", "topk")
PROGRAM_MODELS = ("sum-max", "per-store")
#: DCOCConfig.replan values (docs/method.md §13)
REPLAN = (False, True, "warmup")

#: the cold-task setting (docs/method.md §13): DCOCConfig fields a MetaSchedule run with few
#: trials per task switches on (``DCOCConfig.cold_below``); values fixed in session 16
#: (00be209), on by default below 32 trials per task since session 18
COLD_SETTING = {"program_rerank": 4, "program_cold": 64, "program_cold_until": 32}


@dataclass
class CoDesignConfig:
    """The co-design-only hyperparameters of DCOC (whole-model hardware/software search)."""

    round_size: int = 16            # measurements per round (opening a new hardware config adds more)
    elite_hw_starts: float = 0.5    # share of walkers starting on the incumbent hardware
    random_hw_starts: float = 0.25  # share starting on a random feasible hardware config
    layer_weights: str = "latency"  # a walker's layer is sampled by its share of the incumbent's
                                    # latency (latency) or of its distance to the compute bound,
                                    # count x (best - bound), floored at 5% of its latency
                                    # (potential; opt-in, docs/method.md §5, §12)
    new_hw_shortlist: int = 3       # unopened configs scored in detail per round
    shortlist_by_shape: bool = False  # ... the best config of each core shape first (opt-in: it found
                                    # MobileNetV2 pynq's better core, but cost buffer refinement on
                                    # the unseen zcu104 board, p = 0.035; docs/method.md §12)
    bound: str = "padded"           # the cost model learns efficiency = bound / measured time, with
                                    # bound = the compute time of the work padded to the core's tiles
                                    # (padded) or of its useful MACs (ideal: blind to the padding an
                                    # unmeasured core shape forces; docs/method.md §3, §12)
    open_margin: float = 0.01       # open a config only if predicted >= 1% faster (LCB)
    open_ref: str = "measured"      # ... faster than the incumbent's measured latency (measured) or
                                    # than what the cost model predicts its best candidates reach
                                    # there, if lower (predicted: refined vs refined; opt-in,
                                    # docs/method.md §5, §12)
    new_shape_bonus: float = 0.03   # optimism for a compute-core shape never measured
    sweep_incumbent: bool = True    # every valid schedule of every layer on the incumbent config is
                                    # a candidate each round (scored by the cost model, like the
                                    # per-task exhaustive_limit; only if their total <= it), beside
                                    # the search's points (default since session 10, with
                                    # gain_units="layer"; docs/method.md §5, §12)
    sweep_open: bool = False        # a shortlisted unopened config is scored with every layer's best
                                    # predicted schedule over its whole space (not only the walks'
                                    # candidates, the transferred and the default one); opt-in,
                                    # docs/method.md §5, §12
    sweep_open_stalled: bool = False  # ... only on the hardware exploration rounds (no config opened for
                                    # hw_explore_every rounds): the stalled search compares refined
                                    # with refined, the early rounds keep the cheap scoring; opt-in,
                                    # docs/method.md §5, §12
    gain_units: str = "layer"       # the units of the candidates' predictions that the selection
                                    # (confidence rule or top-k) sees: the layer's normalized
                                    # throughput (layer: 1.0 = its best measured on the incumbent,
                                    # the units the rule has per task) or the model's (model, before
                                    # session 10: a layer's whole gain is a few thousandths, so the
                                    # rule's temperature made near-uniform picks); docs/method.md §5, §12
    layer_quota: int = 0            # per round, this many picks are each the cost model's best-ranked
                                    # schedule of one incumbent layer, the layers in turn (fewest such
                                    # picks first, larger latency share first): the model ranks a
                                    # layer's schedules well, its gains across layers badly; 0: off
                                    # (session 13, docs/method.md §5)
    layer_calibration: float = 0.0  # > 0: each layer's predicted schedule times are multiplied by the
                                    # geometric mean of its measured / predicted over the selection's
                                    # past picks, shrunk towards 1 by this many pseudo-picks (the
                                    # shared cost model is too optimistic on some layers, too
                                    # pessimistic on others); 0: off (session 14, docs/method.md §5)
    stale_discount: float = 0.0     # c > 0: a candidate's predicted gain (mu - 1 > 0, in the
                                    # selection's units; a predicted loss is left as it is) is
                                    # multiplied by c / (c + f), f = the measurements of its layer
                                    # on its config since that layer's best was found: a layer the
                                    # model keeps promising gains on that never come stops crowding
                                    # out the others; 0: off (session 15, docs/method.md §5)
    timing_classes: bool = False    # a schedule measured on one config is known (exactly, sd 0) on
                                    # every config that differs only in the target's fit_knobs
                                    # (VTA: buffer sizes) where it fits, and a config whose buffers
                                    # are all <= an opened one of its class is never opened (it
                                    # cannot beat it); opt-in, docs/method.md §5, §12
    hw_explore_every: int = 4       # rounds without an opening after which the most
                                    # optimistic (UCB) shortlisted config is opened anyway
    stall_rounds: int = 8           # > 0: once the incumbent's latency has not fallen for this many
                                    # rounds, such an exploration round with nothing passing the
                                    # LCB / shape / UCB rules opens the incumbent's buffer variant
                                    # that dominates it (every buffer >=, the most schedules fit),
                                    # measuring its incumbent and best predicted schedules.  0: off.
                                    # Default since session 13 (docs/method.md §5, §12)
    explore_shapes: float = 1.25    # > 0: such a round first opens a never-measured core shape whose
                                    # model compute bound is within this factor of the best shape's
                                    # (lowest bound first), at its best-estimated config: the cost
                                    # model's verdicts on a shape it never saw are the least
                                    # trustworthy (MobileNetV2/pynq: 1x8x32 predicted 47-52 ms, 33.5
                                    # ms at best).  0: off.  Default since session 12 (with the
                                    # staged opening below; docs/method.md §5, §12)
    explore_shapes_first: float = 0.5  # < 1: such an opening first measures only the layers making up
                                    # this share of the shape's predicted model time (largest first);
                                    # the next round finishes it only if measured + predicted (the
                                    # cost model refit on them) still beats the incumbent, else drops
                                    # it.  1.0: every layer at once (session 11's opt-in)
    explore_shapes_finish: str = "measured"  # ... beats the incumbent's measured latency (measured) or
                                    # its latency when it was first complete, if higher (opened:
                                    # the new shape's transferred schedules against the incumbent
                                    # before its refinement; opt-in, session 12, method.md §5)
    cluster_after: int = 64         # agents="clustered": measurements before the knobs are clustered
    # ---- warm start from other models (``prior=``, dcoc.codesign.prior; docs/method.md "Transfer")
    prior_drop_after: int = 0       # own measurements of a layer kind after which that kind's prior
                                    # data leave the cost model's training set (0: kept throughout)
    prior_hw: int = 3               # the source runs' best hardware configs always on the shortlist
    prior_agents: bool = False      # start the agents from the source run's weights (when given);
                                    # off: on the tuning set fresh agents did better (docs/method.md §11)


@dataclass
class DCOCConfig:
    """Every hyperparameter of DCOC, declared once (values and rationale in docs/method.md).

    The per-task fields (``plan_size``, ``n_init``, ``elite_starts``, ``n_elites``) are used
    by the per-task tuner; ``codesign`` by whole-model co-design; the rest by both.
    """

    agents: str = "dcoc"          # knob-to-agent split: dcoc | single | per-knob | clustered
    plan_size: int = 8            # per task: configs measured per round
    n_init: int = 8               # per task: random warm-up measurements (clustered: then cluster)
    n_models: int = 5             # cost-model ensemble members (uncertainty = their spread)
    boost_rounds: int = 80        # boosting rounds per member (fixed: no early stopping)
    elite_starts: float = 0.5     # per task: share of walkers starting from the best measured configs
    n_elites: int = 8             # per task: how many best configs walkers start from
    # ---- ablations (flags of this one algorithm; see the module docstring)
    learn: bool | None = None     # False: the agents are never updated (dcoc-frozen) | None: the
                                  # problem's default (Problem.default_learn: True; the MetaSchedule
                                  # strategy sets False, tvm_plugin.metaschedule.strategy.MS_DEFAULTS)
    proposer: str | None = None   # who proposes candidates: agents (their walks) | surrogate (the
                                  # ensemble's own search) | both (the two pooled, opt-in) | None:
                                  # the problem's default (Problem.default_proposer): agents per
                                  # task, surrogate in co-design, where the agents did not beat
                                  # it on three models (docs/method.md §12), and in MetaSchedule
                                  # (tvm_plugin.metaschedule.strategy.MS_DEFAULTS, session 36)
    select: str | None = None     # confidence | topk (dcoc-topk, surrogate) | None: the problem's
                                  # default (Problem.default_select): confidence per task, topk in
                                  # co-design, where the confidence rule showed no gain over top-k on
                                  # 60 triples (session 14, docs/method.md §12), and in MetaSchedule
                                  # (tvm_plugin.metaschedule.strategy.MS_DEFAULTS, session 36)
    cluster_bootstrap: int = 5    # agents="clustered": partitions compared on bootstrap resamples
    cluster_agreement: float = 0.8  # ... and adopted only if this share of them agree (else the
                                    # fixed split stays and clustering is retried on twice the data)
    exhaustive_limit: int = 50_000  # proposer=surrogate: score every point of spaces up to this size
    sa_steps: int = 60            # proposer=surrogate, larger spaces: annealing steps per chain
    # ---- program features (tasks that provide them, e.g. MetaSchedule; tvm_plugin.metaschedule.program)
    program_rerank: int = 0       # candidates re-scored on program features per measurement of a
                                  # round (the rest are cut by the knob-feature ensemble); 0: off.
                                  # Opt-in (4): no significant gain on whole models (method.md §13)
    program_init: int = 0         # random warm-up of a task once the shared pool holds other
                                  # tasks' rows (else n_init): the pooled model ranks from round one
    program_pool_min: int = 32    # ... pooled rows of other tasks needed for that
    program_cold: int = 0         # a task with no fitted model of its own whose program model is
                                  # fitted (from the pool): re-score this many candidates per
                                  # measurement instead (topped up with random valid points), so
                                  # the pooled model picks from a wide sample, as EvolutionarySearch
                                  # ranks its population; 0: program_rerank as on warm tasks
    program_cold_until: int = 0   # ... and a task stays cold while it has fewer own measurements
                                  # than this (0: only until its own model is fitted), for models
                                  # whose many tasks get a few trials each (method.md §13)
    program_share: bool = True    # learn also from the other tasks' pooled rows (one model per
                                  # run, as MetaSchedule's cost model); False: own rows only
    program_model: str = "sum-max"  # the program-feature model: the knob ensemble on [knob | sum
                                  # and max over stores] (sum-max), or MetaSchedule's pack-sum
                                  # XGBoost on per-store rows, a program's score the sum of its
                                  # rows' (per-store; dcoc.method.costmodel.PackSumModel, method.md §13)
    program_evolve: int = 0       # cold tasks: generations of one-knob mutations of the pooled
                                  # model's best candidates (1/8 of them, 4 mutants each), the
                                  # best program_cold x n of all kept (EvolutionarySearch's
                                  # evolution under its cost model); 0: off
    program_local: int = 0        # cold tasks: this many x n one- or two-knob mutants of the
                                  # task's best measured points join the pooled model's candidates
                                  # (kept through the random cut), as EvolutionarySearch seeds its
                                  # population with the task's measured best and mutates it; 0: off
    program_local_share: float = 0.0  # cold tasks with program_local: this share of each batch is
                                  # the program model's best of those mutants, the rest selected as
                                  # usual, so the model ranks mutants among themselves instead of
                                  # against the walks' and random points' (where it ranked them low,
                                  # session 24); a fractional count is rounded at random; 0: off
    program_pool_only: bool = False  # cold tasks: fit the program model on the other tasks'
                                  # pooled rows alone (own rows left out while cold, once the
                                  # pool holds program_pool_min rows): an offline replay ranked a
                                  # cold task's candidates better so (session 25); no gain in
                                  # its A/B (1.044, p = 1.00, session 26; method.md §13)
    replan: bool | str = False    # plan every batch with the data at hand (True): what an earlier
                                  # batch left of its plan (random warm-up points or proposals; a
                                  # plan holds max(plan_size, batch) points) is dropped. MetaSchedule
                                  # asks for batches of 2-16 and generates every task's first
                                  # batch before any result, so without it a task's whole warm-up
                                  # sample (n_init, planned while the shared pool was empty) is
                                  # measured in its next batches too (method.md §13, session 21).
                                  # "warmup": drop only a stale warm-up plan, once the task's
                                  # warm-up is no longer needed (the pool can rank: n_init() fell
                                  # to what it has measured); proposals are kept as planned
    cold_below: int = 32          # MetaSchedule: a run whose budget per task (total trials / tasks)
                                  # is below this turns COLD_SETTING on (where program_rerank is
                                  # 0), as on MobileNetV2 / ResNet-18 (8-13 trials per task):
                                  # 0.865 of the latency without it, 8/8 fresh groups, p = 0.008
                                  # (pre-registered, session 18); 0: never (method.md §13)
    mappo: MAPPOConfig = field(default_factory=MAPPOConfig)
    confidence: ConfidenceConfig = field(default_factory=ConfidenceConfig)
    codesign: CoDesignConfig = field(default_factory=CoDesignConfig)

    def __post_init__(self):
        from dcoc.errors import DcocError

        if self.proposer is not None and self.proposer not in PROPOSERS:
            raise DcocError(f"unknown DCOC proposer '{self.proposer}'; choose one of {', '.join(PROPOSERS)}")
        if isinstance(self.replan, (bool, int)) and self.replan in (0, 1):
            self.replan = bool(self.replan)  # 0 / 1 from a spec or a config file
        if self.replan not in REPLAN:
            raise DcocError(f"unknown DCOC replan '{self.replan}'; choose one of false, true, warmup")
        if self.program_model not in PROGRAM_MODELS:
            raise DcocError(f"unknown DCOC program_model '{self.program_model}'; choose one of "
                            f"{', '.join(PROGRAM_MODELS)}")
        if not isinstance(self.program_local, int) or self.program_local < 0:
            raise DcocError(f"DCOC program_local must be a whole number >= 0, got {self.program_local!r}")
        if not isinstance(self.program_local_share, (int, float)) or not 0 <= self.program_local_share <= 1:
            raise DcocError(f"DCOC program_local_share must be a number in [0, 1], got {self.program_local_share!r}")
        if self.program_local_share > 0 and self.program_local == 0:
            raise DcocError("DCOC program_local_share needs program_local > 0 (the mutants it picks from)")
        self.learn = _flag("learn", self.learn, unset_ok=True)
        self.program_pool_only = _flag("program_pool_only", self.program_pool_only)
        if self.select is not None and self.select not in SELECTS:
            raise DcocError(f"unknown DCOC selection '{self.select}'; choose one of {', '.join(SELECTS)}")


def _flag(name: str, value, unset_ok: bool = False):
    """A DCOCConfig switch as a bool (0 / 1 from a spec are fine; None kept where
    ``unset_ok``), or a one-line DcocError naming it."""
    from dcoc.errors import DcocError

    if value is None and unset_ok:
        return None
    if value not in (True, False):
        unset = ", or unset" if unset_ok else ""
        raise DcocError(f"DCOC {name} must be true or false{unset}, got {value!r}")
    return bool(value)


def program_ensemble(cfg: DCOCConfig, seed: int):
    """The program-feature cost model: :func:`ensemble` on the sum/max features, or
    MetaSchedule's pack-sum XGBoost on per-store rows (``program_model = "per-store"``)."""
    if cfg.program_model == "per-store":
        from dcoc.method.costmodel import PackSumModel

        return PackSumModel(n_models=cfg.n_models, seed=seed)
    return ensemble(cfg, seed)


def ensemble(cfg: DCOCConfig, seed: int):
    """The cost model of DCOC: a bootstrap ensemble of XGBoost regressors."""
    from dcoc.method.costmodel import XGBCostModel

    return XGBCostModel(loss="reg", n_models=cfg.n_models, seed=seed,
                        num_boost_round=cfg.boost_rounds, early_stopping_rounds=None)


class Problem:
    """What :class:`DCOCCore` needs to know about a search problem (the space adapter).

    A *point* is an int vector of choice positions (one per knob of ``agent_space``); a
    walker may carry its own ``dims`` and context (co-design: one layer per walker).
    Items returned by :meth:`candidates` are opaque to the core.
    """

    #: a :class:`dcoc.search.space.Space` naming the knobs (and their groups) of a point
    agent_space = None
    context_dim: int = 0
    #: measurements after which ``agents="clustered"`` clusters the knobs
    cluster_after: int = 0
    #: the proposer when ``DCOCConfig.proposer`` is None
    default_proposer: str = "agents"
    #: the selection when ``DCOCConfig.select`` is None
    default_select: str = "confidence"
    #: whether the agents learn when ``DCOCConfig.learn`` is None
    default_learn: bool = True

    def refit(self) -> None:
        """Fit the cost model(s) on every measurement so far (no-op when nothing is new)."""

    def n_measured(self) -> int:
        raise NotImplementedError

    def cluster_data(self) -> tuple[np.ndarray, np.ndarray]:
        """(points, score) of the measurements, for knob clustering."""
        raise NotImplementedError

    def starts(self, n_walkers: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(dims [K] or [W, K], start points [W, K], context [C] or [W, C])."""
        raise NotImplementedError

    def score(self, points: np.ndarray, walkers: np.ndarray) -> np.ndarray:
        """Normalized throughput of points (1.0 = best measured), measured where known."""
        raise NotImplementedError

    def valid(self, point: tuple, walker: int) -> bool:
        raise NotImplementedError

    def all_points(self, limit: int):
        """Every valid point as (points [n, K], walkers [n]), or None if more than ``limit``."""
        return None

    def candidates(self, points: np.ndarray, walkers: np.ndarray, n: int) -> list:
        """Unmeasured valid items among the visited points (deduplicated)."""
        raise NotImplementedError

    def predict(self, items: list) -> tuple[np.ndarray, np.ndarray]:
        """(mean, std) normalized throughput of the items."""
        raise NotImplementedError

    def select(self, items: list, mu, sd, n: int, pick: Callable) -> list:
        """The items to measure; ``pick(mu, sd, n) -> indices`` is the core's rule."""
        return [items[i] for i in pick(mu, sd, n)]


class DCOCCore:
    """Runs DCOC's rounds on a :class:`Problem` (ask = :meth:`propose`).

    Parameters
    ----------
    problem: the space adapter.
    cfg: the one :class:`DCOCConfig`.
    rng: the generator of the core's random choices (shared with the problem's starts).
    agent_seed: ``n_groups -> seed`` of the agents (callers keep their seed paths).
    """

    def __init__(self, problem: Problem, cfg: DCOCConfig, rng: np.random.Generator,
                 agent_seed: Callable[[int], int]):
        self.p = problem
        self.cfg = cfg
        self.proposer = cfg.proposer or problem.default_proposer  # agents | surrogate | both
        self.select = cfg.select or problem.default_select        # confidence | topk
        self.learn = problem.default_learn if cfg.learn is None else bool(cfg.learn)
        self.rng = rng
        self.agent_seed = agent_seed
        self.agents = None
        self.groups = None
        self.agent_names = None
        self._clustered = False
        self._cluster_tries = 0
        self._stable_cache = None
        self.cluster_checks: list[dict] = []   # agents="clustered": each stability check
        self.rounds = 0
        self.log: list[dict] = []
        self.agent_init: dict | None = None    # weights the agents start from (warm start)
        self.agent_init_used = False

    # ------------------------------------------------------------------ agents
    def ensure_agents(self) -> None:
        """Build the agents; ``clustered`` re-forms them once enough data exists."""
        from dcoc.method.agent_groups import make_groups; from dcoc.method.mappo import MAPPO

        if self.proposer == "surrogate":
            return
        mode = self.cfg.agents
        want_cluster = (mode == "clustered" and not self._clustered
                        and self.p.n_measured() >= self._cluster_at)
        if self.agents is not None and not want_cluster:
            return
        if want_cluster and self._stable_clusters() is not None:
            self.groups, self.agent_names = self._stable_clusters()
            self._clustered = True
        elif self.agents is not None:
            return  # unstable: keep the agents, retry on twice the data
        else:
            self.groups, self.agent_names = make_groups(
                self.p.agent_space, "dcoc" if mode == "clustered" else mode)
        self.agents = MAPPO(self.groups, len(self.p.agent_space.knobs), self.p.context_dim,
                            self.cfg.mappo, seed=self.agent_seed(len(self.groups)),
                            names=self.agent_names)
        if self.agent_init is not None:
            self.agent_init_used = self.load_agent_state(self.agent_init)

    @property
    def uses_agents(self) -> bool:
        """Whether agents propose in this run (the resolved proposer is agents or both)."""
        return self.proposer != "surrogate"

    def agent_state(self) -> dict | None:
        """The agents' weights (actors, critic, knob groups), for a later warm start."""
        if self.agents is None:
            return None
        return {"groups": [list(map(int, g)) for g in self.groups],
                "actors": self.agents.actors.state_dict(), "critic": self.agents.critic.state_dict()}

    def load_agent_state(self, state: dict) -> bool:
        """Load saved weights into the agents if their layout matches (else keep the fresh ones)."""
        if self.agents is None or [list(map(int, g)) for g in state.get("groups", [])] != \
                [list(map(int, g)) for g in self.groups]:
            return False
        try:
            self.agents.actors.load_state_dict(state["actors"])
            self.agents.critic.load_state_dict(state["critic"])
        except (RuntimeError, KeyError):
            return False
        return True

    @property
    def _cluster_at(self) -> int:
        return max(1, self.p.cluster_after) * (2 ** self._cluster_tries)

    def _stable_clusters(self):
        """The knob clusters of the measurements, if a bootstrap agrees on them; else None.

        Clustering on a few dozen points gives a different partition on almost every
        resample (scripts/cluster_stability.py); such a partition is noise, not structure.
        """
        from dcoc.method.agent_groups import make_groups

        if getattr(self, "_stable_cache", None) is not None and self._stable_cache[0] == self.p.n_measured():
            return self._stable_cache[1]
        pts, y = self.p.cluster_data()
        full = make_groups(self.p.agent_space, "clustered", pts, y)
        rng = np.random.default_rng(len(pts))
        agree = 0
        for _ in range(self.cfg.cluster_bootstrap):
            idx = rng.integers(0, len(pts), size=len(pts))
            g, _ = make_groups(self.p.agent_space, "clustered", pts[idx], y[idx])
            agree += [list(x) for x in g] == [list(x) for x in full[0]]
        # adopt only a partition that differs from the fixed split (below the clustering
        # gate, dcoc.method.agent_groups.MIN_POINTS, make_groups returns the fixed split)
        ok = (agree >= self.cfg.cluster_agreement * self.cfg.cluster_bootstrap
              and [list(x) for x in full[0]] != [list(x) for x in make_groups(self.p.agent_space, "dcoc")[0]])
        if not ok:
            self._cluster_tries += 1
        self._stable_cache = (self.p.n_measured(), full if ok else None)
        self.cluster_checks.append({"measured": int(len(pts)), "agreement": agree / max(self.cfg.cluster_bootstrap, 1),
                                    "adopted": bool(ok)})
        return full if ok else None

    # ------------------------------------------------------------------ selection
    def pick(self, mu, sd, n: int) -> np.ndarray:
        """Indices of the ``n`` candidates to measure (confidence sampling, or top-k by mean)."""
        if self.select == "topk":
            return np.argsort(-np.asarray(mu, dtype=np.float64), kind="stable")[: max(int(n), 0)]
        return confidence_select(mu, sd, n, self.rng, self.cfg.confidence)

    @property
    def kappa(self) -> float:
        """The confidence-bound multiplier in use (0: no uncertainty, ``select="topk"``)."""
        return 0.0 if self.select == "topk" else self.cfg.confidence.kappa

    # ------------------------------------------------------------------ proposals
    def _surrogate_search(self, dims, starts, ctx) -> tuple[np.ndarray, np.ndarray]:
        """Points the surrogate looks at: all valid points, or simulated annealing."""
        allp = self.p.all_points(self.cfg.exhaustive_limit)
        if allp is not None:
            return allp
        dims = np.asarray(dims, dtype=np.int64)
        pos = np.array(starts, dtype=np.int64)
        W, K = pos.shape
        dims = np.broadcast_to(dims, (W, K))
        walkers = np.arange(W)
        cur = np.asarray(self.p.score(pos, walkers), dtype=np.float64)
        seen: dict = {(int(w), tuple(p)): None for w, p in zip(walkers, pos)}
        steps = max(1, self.cfg.sa_steps)
        for t in range(steps):
            temp = 0.1 * (1.0 - t / steps) + 1e-3     # normalized-throughput units
            new = pos.copy()
            d = self.rng.integers(K, size=W)
            step = self.rng.choice((-2, -1, 1, 2), size=W)
            rows = np.arange(W)
            new[rows, d] = np.clip(pos[rows, d] + step, 0, dims[rows, d] - 1)
            ok = np.array([self.p.valid(tuple(p), w) for w, p in enumerate(new)])
            new[~ok] = pos[~ok]
            sc = np.asarray(self.p.score(new, walkers), dtype=np.float64)
            accept = ok & (self.rng.random(W) < np.exp(np.minimum((sc - cur) / temp, 0.0)))
            pos[accept], cur[accept] = new[accept], sc[accept]
            for w in np.flatnonzero(ok):
                seen[(int(w), tuple(new[w]))] = None
        keys = list(seen)
        return (np.array([k[1] for k in keys], dtype=np.int64).reshape(-1, K),
                np.array([k[0] for k in keys], dtype=np.int64))

    def propose(self, n: int) -> list:
        """One round: the items to measure next (empty when nothing new was found)."""
        p = self.p
        p.refit()
        self.ensure_agents()
        dims, starts, ctx = p.starts(self.cfg.mappo.n_walkers)
        metrics: dict = {}
        extra: dict = {}
        parts = []
        if self.proposer in ("agents", "both"):
            walk = self.agents.rollout(dims, starts, ctx, p.score, p.valid)
            if self.learn:
                metrics = self.agents.update()
            else:
                self.agents.buffer.clear()  # frozen: the walks teach nothing
            parts.append((walk.points, walk.walkers))
            extra = {"invalid_moves": walk.invalid_moves, "mean_reward": walk.mean_reward}
        if self.proposer in ("surrogate", "both"):
            # "both": the surrogate's search from the same starts joins the agents' walks;
            # the cost model's selection then decides between them
            parts.append(self._surrogate_search(dims, starts, ctx))
        K = np.shape(dims)[-1]
        points = np.concatenate([np.asarray(pt, dtype=np.int64).reshape(-1, K) for pt, _ in parts])
        walkers = np.concatenate([np.asarray(w, dtype=np.int64) for _, w in parts])
        if len(parts) == 2:
            extra["from_agents"], extra["from_surrogate"] = (int(len(pt)) for pt, _ in parts)
        cands = p.candidates(points, walkers, n)
        if not cands:
            return []
        mu, sd = p.predict(cands)
        out = p.select(cands, mu, sd, n, self.pick)
        self.rounds += 1
        self.log.append({"round": self.rounds, "candidates": len(cands),
                         "pred_best": float(np.max(mu)) if len(mu) else 0.0, **extra, **metrics})
        return out


__all__ = ["CoDesignConfig", "DCOCConfig", "DCOCCore", "Problem", "ensemble"]
