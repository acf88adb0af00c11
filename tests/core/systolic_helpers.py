"""Shared by the co-design tests (test_codesign.py, test_transfer.py): a three-layer model
on the systolic target, a measurer that counts simulator calls, and a small DCOC config."""
from __future__ import annotations

from dcoc import codesign as cd
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


def small_config():
    """DCOC with few walkers, models and boosting rounds: fast, still the full algorithm."""
    cfg = cd.DCOCConfig()
    cfg.mappo.n_walkers, cfg.mappo.walk_length = 8, 6
    cfg.n_models, cfg.boost_rounds = 2, 20
    cfg.codesign.round_size = 8
    return cfg
