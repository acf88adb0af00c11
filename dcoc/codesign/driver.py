"""The DCOC co-design driver: it decides, the :class:`~dcoc.codesign.session.Session` measures.

Each ask is one round of :class:`~dcoc.method.core.DCOCCore` on the
:class:`~dcoc.codesign.problem.CoDesignProblem`; the first ask measures every layer's
default schedule on the board's default hardware (the same start every tuner gets).
"""
from __future__ import annotations

import numpy as np

from dcoc.codesign.problem import CoDesignProblem
from dcoc.errors import DcocError
from dcoc.method.config import DCOCConfig
from dcoc.method.core import DCOCCore
from dcoc.seeding import child_seed


class DCOCCoDesign:
    """DCOC's co-design driver: ask = a round of :class:`~dcoc.method.core.DCOCCore`, tell = nothing
    to learn beyond what the session recorded (the problem reads the session).

    First ask: every layer's default schedule on the board's default hardware (the same
    start as every baseline).  When a round finds nothing new, the search widens around
    the incumbent with a few random schedules (``fill``); when that finds nothing either,
    the driver is done.
    """

    def __init__(self, session, board, seed: int, config: DCOCConfig | None = None,
                 hw_ranges: dict | None = None, prior=None):
        cfg = config if config is not None else DCOCConfig()
        self.cfg = cfg
        self.s, self.seed = session, seed
        self.board = session.target.board(board)
        self.rng = np.random.default_rng(child_seed(seed, "codesign"))
        from dcoc.codesign.prior import as_prior

        self.prior = as_prior(prior, session.target.name, self.board)
        self.problem = CoDesignProblem(session, self.board, seed, cfg, self.rng, hw_ranges, prior=self.prior)
        self.core = DCOCCore(self.problem, cfg, self.rng,
                             agent_seed=lambda n: child_seed(seed, "codesign", "agents", n))
        self.log: list[dict] = []
        self._phase = "start"
        self._fill = None
        self._asked = None
        #: trials spent per phase: the default hardware's default schedules, DCOC rounds,
        #: random fill around the incumbent (when the walks find nothing new)
        self.spent = {"default": 0, "round": 0, "fill": 0}
        self._trials_at_ask = 0

    @property
    def agents(self):
        return self.core.agents

    def ask(self) -> list[tuple]:
        self._trials_at_ask = self.s.trials
        return self._ask()

    def _ask(self) -> list[tuple]:
        s = self.s
        if self._phase == "start":
            from dcoc.codesign.software import default_jobs

            default = s.target.default_hw(self.board)
            self.problem.opening.shapes_opened.add(self.problem.enc.shape(default))
            self._phase = "check"
            self._asked = ("default", default)
            return default_jobs(s, default)
        while True:
            if self._fill is not None:
                st = self._fill
                jobs = st.ask()
                if jobs:
                    self._asked = ("fill", None)
                    return jobs
                self._fill = None
                if st.used == 0:
                    return []
            jobs = self.core.propose(min(self.cfg.codesign.round_size, s.remaining))
            if jobs:
                self._asked = ("round", None)
                return jobs
            # the walks found nothing new: widen the search around the incumbent
            from dcoc.codesign.software import SoftwareTuning

            inc = s.hw[s.best_hw]
            self._fill = SoftwareTuning(s, inc, "random", child_seed(self.seed, "fill", s.trials),
                                        budget=min(8, s.remaining))

    def tell(self, jobs, results) -> None:
        s = self.s
        what, hw = self._asked
        self.spent[what] += s.trials - self._trials_at_ask
        if what == "default":
            if s.latency(hw.name) is None:
                raise DcocError(f"no default schedule fits {hw.name} for every layer")
            self._phase = "rounds"
        elif what == "fill":
            self._fill.tell(jobs, results)
            if self._fill.used >= self._fill.budget:
                self._fill = None
        else:
            self.log.append({"round": len(self.log) + 1, "trials": s.trials,
                             "candidates": self.core.log[-1]["candidates"],
                             "new_hw": list(self.problem.opening.new_hw), "best_latency_ms": s.best_latency * 1e3,
                             **{k: v for k, v in self.core.log[-1].items() if k not in ("round", "candidates")}})

    def run(self) -> None:
        self.s.run(self)

    def describe_run(self) -> str:
        """What ran, in words, with the trials each part spent (summaries print it)."""
        parts = [f"{len(self.log)} DCOC round{'s' if len(self.log) != 1 else ''} ({self.spent['round']} trials"
                 + (", agents " + ("learning" if self.cfg.learn else "frozen") if self.core.uses_agents else "")
                 + ")", f"default schedules on the start hardware ({self.spent['default']})"]
        if self.spent["fill"]:
            parts.append(f"random schedules around the incumbent when the round found nothing new "
                         f"({self.spent['fill']})")
        if self.prior is not None and len(self.prior):
            parts.append(f"warm start: {len(self.prior)} measurements of {len(self.prior.sources)} earlier run(s)")
        return "co-design: " + ", ".join(parts)


def config_tag(cfg: DCOCConfig | None = None) -> str:
    """8 hex digits naming a co-design config (default: :class:`DCOCConfig`): cached
    benchmark runs are keyed by it, so a changed default never reuses runs made under the
    old one."""
    import hashlib

    cfg = cfg if cfg is not None else DCOCConfig()
    return hashlib.sha256(repr(cfg).encode()).hexdigest()[:8]
