"""Each baseline runs with its documented settings, and every model-based tuner gets the
same warm-up (docs/method.md, "Software-only tuning and the baselines")."""
import pytest

from dcoc.search.measure import FunctionMeasurer
from dcoc.search.synthetic import synthetic_cost, synthetic_task
from dcoc.tuners import create
from dcoc.tuners.warmup import WARMUP_SIZE, initial_configs, initial_points


def test_documented_settings():
    task = synthetic_task()
    xgb = create("xgb", task, seed=0)
    assert xgb.plan_size == 8                       # chosen on the tuning set (AutoTVM: 64)
    assert xgb.n_init == WARMUP_SIZE == 8
    assert xgb.cost_model.loss == "rank"
    assert xgb.diversity_filter_ratio == 2 and xgb.eps == 0.05
    sa = xgb.optimizer
    assert (sa.parallel_size, sa.n_iter, sa.early_stop, sa.persistent) == (128, 500, 50, True)

    for name in ("rl", "chameleon"):
        t = create(name, task, seed=0)
        assert t.plan_size == 64 and t.n_init == 8
        assert t.cost_model.loss == "reg"
        # CHAMELEON's walk budget: 128 walks of up to 500 steps per plan
        assert (t.ppo.n_starts, t.ppo.max_steps) == (128, 500)
        assert (t.ppo.learning_rate, t.ppo.gamma, t.ppo.gae_lambda, t.ppo.clip_coef) == (1e-3, 0.9, 0.99, 0.2)
        assert (t.ppo.ent_coef, t.ppo.vf_coef, t.ppo.update_epochs, t.ppo.minibatch_size) == (0.3, 1.0, 3, 32)
    ch = create("chameleon", task, seed=0)
    assert ch.adaptive_updates == 16
    assert (ch.sampler.step, ch.sampler.threshold, len(ch.sampler.cardinal)) == (8, 2.5, 2)

    ga = create("ga", task, seed=0)
    assert (ga.pop_size, ga.elite_num, ga.mutation_prob) == (100, 3, 0.1)


@pytest.mark.parametrize("name", ["xgb", "rl", "chameleon"])
def test_model_based_tuners_share_the_warmup(name):
    """The first 8 proposals are the shared initial sample; then the model acts."""
    task = synthetic_task()
    want = initial_configs(task, seed=7)
    assert len(want) == WARMUP_SIZE
    kw = {} if name == "xgb" else {"ppo": {"n_starts": 16, "max_steps": 20}}  # the walks are not tested here
    t = create(name, task, seed=7, **kw)
    first = t.ask(WARMUP_SIZE)
    assert first == want
    assert t.train_ct == 0
    _tell(t, task, first)
    assert t.train_ct == 1  # the model was fitted right after the warm-up


def _tell(t, task, cfgs):
    from dcoc.search.measure import MeasureResult

    res = []
    for c in cfgs:
        cost, _ = synthetic_cost(task, c)
        res.append(MeasureResult((cost,)) if cost else MeasureResult.error(1, "invalid"))
    t.tell(cfgs, res)


def test_warmup_depends_on_seed_and_task_not_on_tuner():
    task = synthetic_task()
    a = initial_points(task.space, 3, 8, task.workload_key)
    assert a == initial_points(task.space, 3, 8, task.workload_key)
    assert a != initial_points(task.space, 4, 8, task.workload_key)
    assert len(set(a)) == 8 and all(task.space.is_valid(task.space.config(p)) for p in a)
    other = synthetic_task(limit=2048)
    assert initial_points(other.space, 3, 8, "another-workload") != a


@pytest.mark.parametrize("name", ["xgb", pytest.param("rl", marks=pytest.mark.slow),
                                  pytest.param("chameleon", marks=pytest.mark.slow), "ga", "random"])
def test_baseline_runs_with_its_documented_settings(name):
    """Every baseline tunes the synthetic task with its defaults (rl/chameleon: the full
    128 x 500 walk budget) and beats the warm-up's best."""
    task = synthetic_task()
    t = create(name, task, seed=1)
    t.tune(40, FunctionMeasurer(synthetic_cost))
    assert t.trials == 40
    assert len(t.visited) == 40  # no config measured twice
    if name in ("xgb", "rl", "chameleon"):
        warm = min(c for c in (synthetic_cost(task, cfg)[0] for cfg in initial_configs(task, 1)) if c)
        assert t.best_cost <= warm
        assert t.train_ct >= (4 if name == "xgb" else 1)  # fitted after the warm-up, then every plan


def test_dcoc_and_xgb_measure_the_same_shared_warmup():
    """DCOC's first n_init configs are the shared draw of dcoc.tuners.warmup (as xgb's)."""
    from dcoc.search.synthetic import synthetic_task
    from dcoc.tuners import create

    task = synthetic_task()
    first = {}
    for name in ("dcoc", "xgb"):
        t = create(name, task, seed=3)
        first[name] = [sorted(c.items()) for c in t.next_batch(8)]
    assert len(first["dcoc"]) == 8 and first["dcoc"] == first["xgb"]
