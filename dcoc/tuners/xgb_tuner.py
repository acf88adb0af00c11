"""XGBTuner: AutoTVM's XGBoost + simulated-annealing tuner.

Source: ``python/tvm/autotvm/tuner/xgboost_tuner.py``, ``xgboost_cost_model.py``,
``sa_model_optimizer.py`` and ``model_based_tuner.py`` (TVM <= 0.19); method: Chen et al.,
"Learning to Optimize Tensor Programs", NeurIPS 2018 (AutoTVM).

* Cost model: XGBoost with the pairwise **rank** loss (``loss_type="rank"``, AutoTVM's
  default) on knob features (``feature_type="knob"``: here the log2 knob values plus the
  task/hardware descriptor, :meth:`dcoc.search.space.Space.point_features`), refit every
  ``plan_size`` measurements (:class:`dcoc.method.costmodel.XGBCostModel`).  AutoTVM uses 64; the
  default here is 8, chosen on the tuning set (ResNet-18 C2, C5, C8, C11 x 3 seeds, 200
  trials: median trials to 99% of the optimum 23 with plan 8, 33 with 16, 50 with 64;
  docs/method.md, "Tried and not kept"), never on the evaluation set.
* Warm-up: the shared initial sample of :mod:`dcoc.tuners.warmup` (8 random valid configs,
  the same DCOC and every model-based tuner measure first); ``n_init=None``: AutoTVM's
  ``plan_size`` random trials.
* Optimizer: parallel **simulated annealing** over the model
  (:class:`~dcoc.tuners.model_based.SimulatedAnnealingOptimizer`: 128 persistent chains,
  up to 500 iterations, temperature 1 -> 0, early stop after 50 iterations without a new
  top point, neighbour = one knob changed).
* Batch selection: the top ``plan_size * diversity_filter_ratio`` points of the model,
  reduced to ``plan_size`` by the diversity-aware greedy ``submodular_pick``; the last
  5% of each plan are random (epsilon-greedy).  AutoTVM's default ``diversity_filter_ratio``
  is None; the AutoTVM paper's diversity-aware selection is on here by default (ratio 2).
  Pass ``diversity_filter_ratio=None`` for AutoTVM's plain top-k.
"""
from __future__ import annotations

from dcoc.seeding import child_rng, child_seed
from dcoc.tuners.model_based import (
    ModelBasedTuner,
    ModelOptimizer,
    SimulatedAnnealingOptimizer,
    default_cost_model,
)


class XGBTuner(ModelBasedTuner):
    """XGBoost rank model + simulated annealing + diversity-aware epsilon-greedy batches.

    Parameters
    ----------
    task, seed: see :class:`~dcoc.tuners.tuner.Tuner`.
    plan_size: measurements per model refit (AutoTVM: 64; 8 chosen on the tuning set).
    loss_type: ``"rank"`` (default, AutoTVM) or ``"reg"``.
    optimizer: ``"sa"`` or a :class:`~dcoc.tuners.model_based.ModelOptimizer`.
    diversity_filter_ratio: see :class:`~dcoc.tuners.model_based.ModelBasedTuner` (default 2).
    eps: random fraction of each plan (0.05).
    num_threads: xgboost threads (1: deterministic and fastest for a few hundred samples).
    sa_params: overrides of the SA optimizer's arguments (``n_iter``, ``parallel_size``, ...).
    """

    name = "xgb"

    def __init__(self, task, seed=0, plan_size=8, loss_type="rank", optimizer="sa",
                 diversity_filter_ratio=2, eps=0.05, num_threads=1, sa_params=None, **kwargs):
        super().__init__(task, seed=seed, plan_size=plan_size,
                         diversity_filter_ratio=diversity_filter_ratio, eps=eps, **kwargs)
        self.cost_model = default_cost_model(loss_type, child_seed(self.seed, "xgb", "model"),
                                             self.plan_size, num_threads)
        if optimizer == "sa":
            optimizer = SimulatedAnnealingOptimizer(
                self.codec,
                child_rng(self.seed, "xgb", "sa", task.workload_key), **(sa_params or {}))
        elif not isinstance(optimizer, ModelOptimizer):
            raise TypeError("optimizer must be 'sa' or a ModelOptimizer")
        self.optimizer = optimizer
