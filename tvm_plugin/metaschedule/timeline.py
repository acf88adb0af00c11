"""Where a tuning run's wall time goes: :class:`TimeProfile`.

``tune_model`` wraps the run's builder and runner and brackets MetaSchedule's default
measure callbacks, so every second of the search lands in one part:

* ``build``: the builder compiling candidates (its worker processes, wall time);
* ``run``: the runner timing them (LocalRunner: one process, blocking);
* ``record``: MetaSchedule's default callbacks after each batch -- committing to the
  JSON database, removing artifacts and updating MetaSchedule's cost model (XGBoost
  training for EvolutionarySearch; a no-op for dcoc's strategy, whose tuner owns its model);
* ``spaces``: a dcoc strategy building each task's knob view of its design spaces
  (:class:`~tvm_plugin.metaschedule.trace_space.TraceSpace`, once per task and run);
* ``search``: a dcoc strategy proposing candidates -- its tuner's ask/tell (model fits
  under ``fit``, program features under ``features``, the rest under ``search``), replays
  and de-duplication; for MetaSchedule's own strategies this part is not separable
  from ``rest``;
* ``rest``: everything else -- MetaSchedule's scheduler, the progress callbacks, Python
  glue (for MetaSchedule's own strategies, their search too).

The parts add up to the search's wall time (``result.extra["time_profile"]``).
"""
from __future__ import annotations

import time
from collections import defaultdict

PARTS = ("build", "run", "record", "spaces", "search", "fit", "features", "rest")


class TimeProfile:
    """Seconds and counts per part of a tuning run (module docstring)."""

    def __init__(self):
        self.seconds: dict = defaultdict(float)
        self.candidates: dict = defaultdict(int)
        self._cb_start = None

    def add(self, part: str, seconds: float, candidates: int = 0) -> None:
        self.seconds[part] += float(seconds)
        self.candidates[part] += int(candidates)

    def _timed(self, part: str, call, inputs):
        """``call(inputs)``, its wall time counted as ``part`` over ``len(inputs)`` candidates."""
        t0 = time.perf_counter()
        try:
            return call(inputs)
        finally:
            self.add(part, time.perf_counter() - t0, len(inputs))

    # ------------------------------------------------------------ wrappers
    def builder(self, inner):
        """``inner`` (a MetaSchedule Builder) with its build time counted."""
        from tvm.ir.utils import derived_object
        from tvm.s_tir.meta_schedule.builder import PyBuilder

        prof = self

        @derived_object
        class TimedBuilder(PyBuilder):
            def build(self, build_inputs):
                return prof._timed("build", inner.build, build_inputs)

        return TimedBuilder()

    def runner(self, inner):
        """``inner`` (a MetaSchedule Runner) with the time of its ``run`` counted (a
        blocking runner's whole measurement; an asynchronous one's submission only)."""
        from tvm.ir.utils import derived_object
        from tvm.s_tir.meta_schedule.runner import PyRunner

        prof = self

        @derived_object
        class TimedRunner(PyRunner):
            def run(self, runner_inputs):
                return prof._timed("run", inner.run, runner_inputs)

        return TimedRunner()

    def bracket(self, callbacks: list) -> list:
        """``callbacks`` (MetaSchedule's defaults) between two stamps that count their time
        as ``record``."""
        from tvm.ir.utils import derived_object
        from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

        prof = self

        @derived_object
        class Start(PyMeasureCallback):
            def apply(self, *args):
                prof._cb_start = time.perf_counter()

        @derived_object
        class Stop(PyMeasureCallback):
            def apply(self, *args):
                if prof._cb_start is not None:
                    prof.add("record", time.perf_counter() - prof._cb_start)
                    prof._cb_start = None

        return [Start(), *callbacks, Stop()]

    # ------------------------------------------------------------ report
    def report(self, wall: float, strategy_tasks: dict | None = None) -> dict:
        """``{part: seconds}`` over the search's ``wall`` seconds, the parts of a dcoc
        strategy from its per-task summaries, plus ``per_trial_ms`` of build and run."""
        sec = {p: float(self.seconds.get(p, 0.0)) for p in ("build", "run", "record")}
        tasks = list((strategy_tasks or {}).values())
        fit = sum(float(t.get("fit_seconds", 0.0)) for t in tasks)
        feats = sum(float(t.get("feature_seconds", 0.0)) for t in tasks)
        spaces = sum(float(t.get("space_seconds", 0.0)) for t in tasks)
        strat = sum(float(t.get("strategy_seconds", 0.0)) for t in tasks)
        sec["fit"], sec["features"], sec["spaces"] = fit, feats, spaces
        sec["search"] = max(0.0, strat - fit - feats - spaces)
        sec["rest"] = max(0.0, float(wall) - sum(sec.values()))
        out = {"wall_s": round(float(wall), 2),
               "seconds": {p: round(sec[p], 2) for p in PARTS},
               "share": {p: round(sec[p] / wall, 3) if wall > 0 else None for p in PARTS},
               "built": int(self.candidates.get("build", 0)),
               "run": int(self.candidates.get("run", 0))}
        for part in ("build", "run"):
            n = self.candidates.get(part, 0)
            out[f"{part}_ms_per_candidate"] = round(1e3 * sec[part] / n, 1) if n else None
        return out


def format_profile(tp: dict) -> str:
    """One line: each part's seconds and share of the search's wall time."""
    parts = ", ".join(f"{p} {tp['seconds'][p]:.1f} s ({100 * (tp['share'][p] or 0):.0f}%)"
                      for p in PARTS if tp["seconds"].get(p))
    return f"tuning time {tp['wall_s']:.1f} s: {parts}"


__all__ = ["PARTS", "TimeProfile", "format_profile"]
