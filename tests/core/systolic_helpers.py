"""Shared by the co-design tests (test_codesign.py, test_transfer.py): a three-layer model
on the systolic target, a measurer that counts simulator calls, and a small DCOC config."""
from __future__ import annotations

from dcoc.search import FunctionMeasurer
from dcoc.targets import Layer, get
from dcoc.targets.systolic import GemmWorkload, measure_systolic

SYS = get("systolic")
BOARD = SYS.board("arty-a7")


def systolic_layers():
    return [Layer("conv_a", GemmWorkload("conv_a", 784, 576, 64), 2, "conv2d", target="systolic"),
            Layer("conv_b", GemmWorkload("conv_b", 196, 1152, 128), 1, "conv2d", target="systolic"),
            Layer("fc", GemmWorkload("fc", 1, 512, 100), 1, "dense", target="systolic")]


class Counting(FunctionMeasurer):
    """The systolic simulator, counting the jobs it measures."""

    def __init__(self):
        super().__init__(measure_systolic, n_workers=0)
        self.calls = 0

    def measure_jobs(self, jobs):
        self.calls += len(jobs)
        return super().measure_jobs(jobs)


def small_config(tuner: str = "surrogate", **overrides):
    """A DCOC-family tuner's config with few walkers, models and boosting rounds: fast, still
    the full algorithm."""
    from dcoc.tuners import get_tuner, parse

    name, kw = parse(tuner)
    return get_tuner(name).config(**{"n_walkers": 8, "walk_length": 6, "n_models": 2,
                                     "boost_rounds": 20, "round_size": 8, **kw, **overrides})
