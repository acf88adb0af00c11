"""Every hyperparameter of the search method, declared once.

Values and the evidence behind them are in docs/method.md.  The configs are frozen: a
variant is a new value (``dataclasses.replace``), never a config changed after it was
built.  This module imports nothing heavy (no torch, no xgboost).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from dcoc.errors import DcocError

PROPOSERS = ("agents", "surrogate")
SELECTS = ("confidence", "topk")


@dataclass(frozen=True)
class MAPPOConfig:
    """The agents (:mod:`dcoc.method.mappo`): MAPPO with centralized critic."""

    hidden: int = 64                 # width of the two hidden layers (actors and critic)
    n_walkers: int = 32              # parallel walks per round (also the surrogate's annealing chains)
    walk_length: int = 12            # steps per walk
    moves: tuple = (-1, 0, 1)        # per-knob move set (choice-position deltas)
    lr: float = 3e-4                 # Adam learning rate (actors and critic)
    gamma: float = 0.9               # discount
    gae_lambda: float = 0.95         # GAE lambda
    clip: float = 0.2                # PPO ratio clip
    epochs: int = 4                  # PPO epochs per update
    minibatch: int = 256             # PPO minibatch size (transitions)
    ent_coef: float = 0.01           # entropy bonus
    vf_coef: float = 0.5             # critic loss weight
    max_grad_norm: float = 0.5       # gradient clipping
    invalid_penalty: float = 0.5     # reward for a move into a constraint-violating config
    torch_threads: int = 1           # intra-op threads (small nets: 1 is fastest and deterministic)


@dataclass(frozen=True)
class ConfidenceConfig:
    """Confidence sampling (:mod:`dcoc.method.sampling`)."""

    kappa: float = 1.0           # std multiplier in the confidence bounds
    threshold: float = 0.9       # eligibility: lcb >= threshold * max(lcb)
    temperature: float = 0.02    # softmax temperature on lcb (normalized-throughput units)
    explore_frac: float = 0.125  # share of each batch chosen by the upper bound


@dataclass(frozen=True)
class CoDesignConfig:
    """Whole-model co-design (:mod:`dcoc.codesign`): how hardware configs are opened."""

    round_size: int = 16            # measurements per round (opening a new hardware config adds more)
    elite_hw_starts: float = 0.5    # share of search starts on the incumbent hardware
    random_hw_starts: float = 0.25  # share starting on a random feasible hardware config
    new_hw_shortlist: int = 3       # unopened configs scored in detail per round
    open_margin: float = 0.01       # open a config only if predicted >= 1% faster than the incumbent
    new_shape_bonus: float = 0.03   # optimism for a compute-core shape never measured
    hw_explore_every: int = 4       # rounds without an opening after which the most optimistic
                                    # shortlisted config is opened anyway
    explore_shapes: float = 1.25    # such a round first opens a never-measured core shape whose
                                    # padded compute bound is within this factor of the best
                                    # shape's (0: off)
    explore_shapes_first: float = 0.5  # ... measuring first the layers making up this share of its
                                    # predicted time, the rest only if it still beats the incumbent
    stall_rounds: int = 8           # once the incumbent has not improved for this many rounds, an
                                    # exploration round opens its dominating buffer variant (0: off)
    prior_hw: int = 3               # warm start: the source runs' best configs always shortlisted


@dataclass(frozen=True)
class DCOCConfig:
    """The search method: who proposes candidates, how a round's measurements are chosen.

    The defaults are the paper's method (agents propose, confidence sampling selects, the
    agents learn); registered tuners fix the variants (:mod:`dcoc.tuners`): ``surrogate``
    is ``proposer="surrogate", select="topk"``.
    """

    proposer: str = "agents"      # agents: the agents' walks | surrogate: the ensemble's own
                                  # search (every valid point, or simulated annealing)
    select: str = "confidence"    # confidence sampling | topk: the best predicted means
    learn: bool = True            # False: the agents walk but are never updated
    plan_size: int = 8            # per task: configs measured per round
    n_init: int = 8               # per task: random warm-up measurements
    n_models: int = 5             # cost-model ensemble members (uncertainty = their spread)
    boost_rounds: int = 80        # boosting rounds per member (fixed: no early stopping)
    elite_starts: float = 0.5     # per task: share of walks starting from the best measured configs
    n_elites: int = 8             # per task: how many best configs walks start from
    exhaustive_limit: int = 50_000  # surrogate: score every point of spaces up to this size
    sa_steps: int = 60            # surrogate, larger spaces: annealing steps per chain
    mappo: MAPPOConfig = field(default_factory=MAPPOConfig)
    confidence: ConfidenceConfig = field(default_factory=ConfidenceConfig)
    codesign: CoDesignConfig = field(default_factory=CoDesignConfig)

    def __post_init__(self):
        if self.proposer not in PROPOSERS:
            raise DcocError(f"unknown DCOC proposer '{self.proposer}'; choose one of {', '.join(PROPOSERS)}")
        if self.select not in SELECTS:
            raise DcocError(f"unknown DCOC selection '{self.select}'; choose one of {', '.join(SELECTS)}")
        if self.learn not in (True, False):
            raise DcocError(f"DCOC learn must be true or false, got {self.learn!r}")
        object.__setattr__(self, "learn", bool(self.learn))

    @property
    def uses_agents(self) -> bool:
        return self.proposer == "agents"

    @property
    def kappa(self) -> float:
        """The confidence-bound multiplier in use (0 with top-k: no uncertainty)."""
        return 0.0 if self.select == "topk" else self.confidence.kappa

    def describe(self) -> str:
        """What this config runs, in words (printed in summaries)."""
        who = ("agents (learning)" if self.learn else "agents (frozen)") if self.uses_agents \
            else "XGBoost ensemble search"
        how = "confidence sampling" if self.select == "confidence" else "top-k"
        return f"{who} + {how}"


def with_fields(cfg: DCOCConfig, overrides: dict) -> DCOCConfig:
    """``cfg`` with ``overrides``: a field of DCOCConfig or of one of its nested configs
    (``mappo``, ``confidence``, ``codesign``), by name; an unknown name is a one-line error."""
    from dataclasses import fields, replace

    top, nested = {}, {}
    own = {f.name for f in fields(DCOCConfig)}
    subs = {name: {f.name for f in fields(getattr(cfg, name))} for name in ("mappo", "confidence", "codesign")}
    for k, v in overrides.items():
        if k in own:
            top[k] = v
            continue
        sub = next((n for n, names in subs.items() if k in names), None)
        if sub is None:
            raise DcocError(f"unknown DCOC setting '{k}'")
        nested.setdefault(sub, {})[k] = v
    for sub, kv in nested.items():
        top[sub] = replace(getattr(cfg, sub), **kv)
    return replace(cfg, **top)


__all__ = ["with_fields", "CoDesignConfig", "ConfidenceConfig", "DCOCConfig", "MAPPOConfig", "PROPOSERS", "SELECTS"]
