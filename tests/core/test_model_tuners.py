"""Cost model, model-based tuner machinery, SA, PPO exploration and CHAMELEON's sampler."""
import math

import numpy as np
import pytest

from dcoc.method.costmodel import XGBCostModel, average_recall
from dcoc.search import FunctionMeasurer, Knob, MeasureInput, MeasureResult, Space, TuningTask
from dcoc.search.synthetic import exhaustive_optimum, synthetic_cost, synthetic_task
from dcoc.tuners import create
from dcoc.tuners.model_based import (
    PointCodec,
    PointModel,
    SimulatedAnnealingOptimizer,
    TopK,
    submodular_pick,
)

MODEL_TUNERS = ["xgb", "rl", "chameleon"]


# ----------------------------------------------------------------------- fixtures
def _f(X):
    return np.sin(6 * X[:, 0]) + X[:, 1] ** 2 + 1.5


def _six_knob_space():
    """6 knobs, 10*8*8*6*6*4 = 92,160 points."""
    return Space([Knob(f"k{i}", tuple(2 ** j for j in range(n))) for i, n in enumerate([10, 8, 8, 6, 6, 4])],
                 name="six")


class _BowlModel:
    """A fixed "cost model" over points, highest at TARGET (a known argmax).

    ``positive``: a throughput-like score in (0, 1] (what a "reg" model predicts, the PPO
    rewards); otherwise minus the weighted squared distance (a rank-like margin).
    """

    TARGET = np.array([7, 2, 5, 1, 4, 3])

    def __init__(self, positive=False):
        self.positive = positive

    def predict(self, points):
        points = np.asarray(points).reshape(-1, 6)
        dist = ((points - self.TARGET) ** 2 * np.array([1, 2, 1, 3, 1, 2])).sum(1).astype(float)
        return np.exp(-dist / 20.0) if self.positive else -dist


# ---------------------------------------------------------------------- cost model
@pytest.mark.parametrize("loss", ["reg", "rank"])
def test_cost_model_fits_known_function(loss):
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (300, 2))
    m = XGBCostModel(loss, seed=1).fit(X, _f(X))
    assert m.fitted and m.n_samples == 300
    Xt = rng.uniform(0, 1, (2000, 2))
    pred = m.predict(Xt)
    # rank loss predicts a relative score: compare ranks
    rho = np.corrcoef(np.argsort(np.argsort(pred)), np.argsort(np.argsort(_f(Xt))))[0, 1]
    assert rho > 0.9


def test_cost_model_normalizes_and_handles_failures():
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 1, (200, 2))
    y = _f(X) * 1e9  # throughput-scale numbers
    y[:20] = 0.0
    y[20] = np.inf  # a non-finite score counts as a failure
    m = XGBCostModel("reg", seed=0).fit(X, y)
    pred = m.predict(X)
    assert 0.0 <= np.median(pred) <= 1.0  # normalized by max(y)
    assert np.mean(pred[:20]) < np.mean(pred[21:])


def test_uncertainty_larger_far_from_data():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (400, 2))
    X = X[(X[:, 0] < 0.5) | (rng.random(len(X)) < 0.05)]  # dense left half, sparse right half
    y = np.sin(6 * X[:, 0]) + np.cos(5 * X[:, 1]) + 2
    m = XGBCostModel("reg", n_models=8, seed=0).fit(X, y)
    near = rng.uniform(0, 1, (2000, 2)) * [0.5, 1]
    far = near + [0.5, 0]
    _, sd_near = m.predict_with_uncertainty(near)
    _, sd_far = m.predict_with_uncertainty(far)
    assert sd_far.mean() > 1.5 * sd_near.mean()
    # a single booster has no spread
    _, sd1 = XGBCostModel("reg", n_models=1).fit(X, y).predict_with_uncertainty(far)
    assert np.all(sd1 == 0)


def test_cost_model_deterministic_per_seed_and_update():
    rng = np.random.default_rng(2)
    X = rng.uniform(0, 1, (150, 3))
    y = _f(X)
    Xt = rng.uniform(0, 1, (500, 3))
    a = XGBCostModel("reg", n_models=4, seed=5).fit(X, y).predict_with_uncertainty(Xt)
    b = XGBCostModel("reg", n_models=4, seed=5).fit(X, y).predict_with_uncertainty(Xt)
    c = XGBCostModel("reg", n_models=4, seed=6).fit(X, y).predict_with_uncertainty(Xt)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])
    r1 = XGBCostModel("rank", seed=3).fit(X, y).predict(Xt)
    r2 = XGBCostModel("rank", seed=3).fit(X, y).predict(Xt)
    assert np.array_equal(r1, r2)
    m = XGBCostModel("reg", seed=0)
    with pytest.raises(RuntimeError):
        m.predict(Xt)
    m.update(X[:100], y[:100])
    m.update(X[100:], y[100:])
    assert m.n_samples == 150
    assert np.allclose(m.predict(Xt), XGBCostModel("reg", seed=0).fit(X, y).predict(Xt))


def test_average_recall_prefers_good_rankings():
    y = np.arange(100, dtype=float)
    assert average_recall(y, y, 32) > 0.85  # sum(i / (i + 1)) / 32 for a perfect ranking
    assert average_recall(-y, y, 32) == 0.0


# ------------------------------------------------------------- tuner machinery
def _reference_submodular_pick(scores, knobs, n_pick, knob_weight=1.0):
    """AutoTVM's loop version, verbatim in spirit."""
    sets = [set() for _ in range(len(knobs[0]))]
    ret, remain = [], list(range(len(scores)))
    for _ in range(n_pick):
        max_x, max_delta = -1, -1e9
        for x in remain:
            delta = scores[x] + sum(knob_weight for i in range(len(sets)) if knobs[x][i] not in sets[i])
            if delta > max_delta:
                max_delta, max_x = delta, x
        ret.append(max_x)
        remain.remove(max_x)
        for i in range(len(sets)):
            sets[i].add(knobs[max_x][i])
    return ret


def test_submodular_pick_matches_autotvm():
    rng = np.random.default_rng(0)
    for _ in range(5):
        knobs = rng.integers(0, 5, (40, 4))
        scores = rng.normal(size=40)
        assert submodular_pick(scores, knobs, 12) == _reference_submodular_pick(scores, knobs, 12)
        assert submodular_pick(0 * scores, knobs, 12) == _reference_submodular_pick(0 * scores, knobs, 12)
    # pure diversity: the first picks cover every value of every knob
    knobs = np.array([[0, 0], [0, 0], [1, 1], [1, 1], [2, 2]])
    assert sorted(submodular_pick(np.zeros(5), knobs, 3)) == [0, 2, 4]


def test_codec_topk_and_point_model_cache():
    space = _six_knob_space()
    codec = PointCodec(space)
    idx = np.array([0, 1, 12345, space.size - 1])
    pts = codec.points(idx)
    assert [space.index(space.config(p)) for p in pts] == idx.tolist()
    assert np.array_equal(codec.index(pts), idx)
    top = TopK(2, exclusive={5})
    top.push([1.0, 3.0, 2.0, 9.0], [1, 2, 3, 5])
    assert top.result()[0].tolist() == [2, 3]

    calls = []

    class Counting:
        def predict(self, X):
            calls.append(len(X))
            return X.sum(1)

    pm = PointModel(Counting(), space, codec)
    a = pm.predict(pts)
    b = pm.predict(np.concatenate([pts, pts]))
    assert np.array_equal(np.concatenate([a, a]), b) and calls == [4]


def test_sa_finds_argmax_of_known_model():
    space = _six_knob_space()
    codec = PointCodec(space)
    sa = SimulatedAnnealingOptimizer(codec, np.random.default_rng(0))
    best = sa.find_maximums(_BowlModel(), 8, exclusive=set())
    assert codec.points(best[:1])[0].tolist() == _BowlModel.TARGET.tolist()
    assert len(set(best.tolist())) == 8
    # an excluded point is never returned; the next best is
    target = int(codec.index(_BowlModel.TARGET)[0])
    again = sa.find_maximums(_BowlModel(), 8, exclusive={target})
    assert target not in again.tolist()
    assert _BowlModel().predict(codec.points(again[:1]))[0] == -1.0


def test_ppo_walks_beat_random_on_fixed_model():
    pytest.importorskip("torch")
    from dcoc.tuners.rl_tuner import PPOConfig, RLOptimizer

    space = _six_knob_space()
    codec = PointCodec(space)
    model = _BowlModel(positive=True)
    opt = RLOptimizer(codec, seed=0, cfg=PPOConfig(n_starts=32, max_steps=60, n_envs=16))
    rewards = []
    for _ in range(6):
        top = opt.find_maximums(model, 16, exclusive=set())
        rewards.append(opt.stats["charts/mean_reward"])
    rng = np.random.default_rng(0)
    random_pts = codec.points(codec.sample(rng, 2000))
    random_mean = model.predict(random_pts).mean()
    # the walks learn to head for high predicted scores
    assert np.mean(rewards[-3:]) > max(1.5 * random_mean, 1.5 * rewards[0])
    # the plan beats the best 16 of as many random points as the walks visited
    n_visited = opt.stats["charts/steps"] + 32
    rand_best = np.sort(model.predict(codec.points(codec.sample(rng, n_visited))))[-16:]
    assert model.predict(codec.points(top)).mean() >= rand_best.mean()


def test_chameleon_sampler_returns_distinct_reduced_configs():
    from dcoc.tuners.chameleon_tuner import AdaptiveSampler

    space = _six_knob_space()
    codec = PointCodec(space)
    rng = np.random.default_rng(0)
    # 64 candidates around three modes
    centers = np.array([[2, 2, 2, 1, 1, 1], [8, 6, 6, 4, 4, 2], [5, 1, 7, 2, 3, 3]])
    cand = np.clip(centers[rng.integers(0, 3, 64)] + rng.integers(-1, 2, (64, 6)), 0, codec.dims - 1)
    cand = np.unique(cand, axis=0)
    rejected = {tuple(cand[0])}
    sampler = AdaptiveSampler(codec.dims, 64, np.random.default_rng(1))
    out = sampler.sample(cand, accept=lambda p: tuple(p) not in rejected)
    assert 1 <= len(out) <= 64 and len(out) == sampler.last_k
    assert len({tuple(p) for p in out}) == len(out)
    assert all(tuple(p) not in rejected for p in out)
    assert np.all((out >= 0) & (out < codec.dims))
    assert sampler.last_k < len(cand)  # the knee reduces three tight modes to few clusters
    # projected knobs carry the centroid values: k0 and k1/k2 are the largest-cardinality knobs
    assert list(sampler.cardinal) == [0, 1]


# ---------------------------------------------------------------- tuner contracts
def _tiny_task():
    """3 x 3 x 3 x 2 = 54 points, a constraint removes some; cost known."""
    knobs = [Knob("x", (1, 2, 4)), Knob("y", (1, 2, 4)), Knob("z", (1, 2, 4)), Knob("t", (1, 2))]

    def fits(cfg):
        return "too big" if cfg["x"] * cfg["y"] * cfg["z"] > 32 else None

    return TuningTask("tiny", Space(knobs, [fits], {}, "tiny"), "synthetic", "tiny(v1)", flop=1.0)


def _tiny_cost(task, cfg):
    if task.space.check(cfg):
        return None, {"reason": "invalid"}
    return 1.0 + abs(math.log2(cfg["x"]) - 1) + abs(math.log2(cfg["y"]) - 2) + cfg["t"] + 0.1 * cfg["z"], {}


@pytest.mark.parametrize("name", MODEL_TUNERS)
def test_exhausts_space_gracefully(name):
    task = _tiny_task()
    n_valid = sum(task.space.is_valid(c) for c in task.space)
    kw = {"plan_size": 8}
    if name != "xgb":
        kw["ppo"] = {"n_starts": 8, "max_steps": 20, "n_envs": 8}
    t = create(name, task, seed=0, **kw)
    seen = []
    t.tune(200, FunctionMeasurer(_tiny_cost), callbacks=[lambda tu, i, r: seen.extend(x.config for x in i)])
    assert len(seen) == n_valid == t.trials  # every valid config once, no invalid one
    assert len({task.space.key(c) for c in seen}) == len(seen)
    assert all(task.space.is_valid(c) for c in seen)
    assert not t.has_next() and t.next_batch(4) == []
    assert t.train_ct > 0  # the model path ran, not only random proposals


@pytest.mark.parametrize("name", MODEL_TUNERS)
def test_model_path_is_deterministic_and_batched(name):
    kw = {"plan_size": 16}
    if name != "xgb":
        kw["ppo"] = {"n_starts": 16, "max_steps": 30}
    seqs = []
    for seed in (3, 3, 4):
        t = create(name, synthetic_task(), seed=seed, **kw)
        seq = []
        while t.trials < 70 and t.has_next():
            cfgs = t.ask(5)  # batches > 1: no duplicates inside or across batches
            res = [MeasureResult((c,)) if c else MeasureResult.error(1, "invalid")
                   for c in (synthetic_cost(t.task, cfg)[0] for cfg in cfgs)]
            t.tell(cfgs, res)
            seq.extend(cfgs)
        assert t.train_ct >= 2
        assert len({t.space.key(c) for c in seq}) == len(seq)
        seqs.append(seq)
    assert seqs[0] == seqs[1]
    assert seqs[0] != seqs[2]


def test_xgb_load_history_warm_starts():
    task = synthetic_task()
    _, opt = exhaustive_optimum(task)
    hist = []
    rng = np.random.default_rng(0)
    for i in rng.permutation(len(task.space))[:300]:
        cfg = task.space.get(int(i))
        cost, _ = synthetic_cost(task, cfg)
        res = MeasureResult((cost,)) if cost else MeasureResult.error(1, "invalid")
        hist.append((MeasureInput(task.target, task, cfg), res))
    t = create("xgb", task, seed=0)
    assert t.load_history(hist, min_seed_records=500) is False  # too few: ignored (AutoTVM)
    assert t.load_history(hist, min_seed_records=100) is True
    assert len(t.plan) == t.plan_size and t.cost_model.base_model is not None
    t.tune(20, FunctionMeasurer(synthetic_cost))
    assert t.best_cost <= 1.05 * opt  # the base model's plan is good from the first trial
    # records rows work too
    rows = [{"knobs": inp.config, "cost": res.cost if res.valid else None, "valid": res.valid}
            for inp, res in hist]
    assert create("xgb", task, seed=0).load_history(rows, min_seed_records=100) is True


def test_subclass_proposable_filter_is_honoured():
    from dcoc.tuners.xgb_tuner import XGBTuner

    class OnlyD2(XGBTuner):
        def proposable(self, config):
            return config["d"] == 2 and super().proposable(config)

    t = OnlyD2(synthetic_task(), seed=0, plan_size=16)
    t.tune(120, FunctionMeasurer(synthetic_cost))
    assert t.train_ct > 0 and t.trials > 0
    assert all(inp_cfg["d"] == 2 for inp_cfg in (t.space.config(p) for p in t.xs))

