import numpy as np
import pytest

from dcoc.errors import KnobError
from dcoc.search import Knob, Space, product
from dcoc.search.synthetic import synthetic_space


def test_index_point_config_roundtrip():
    s = synthetic_space()
    assert len(s) == 7 * 7 * 5 * 2
    for i in range(len(s)):
        cfg = s.get(i)
        assert s.index(cfg) == i
        assert s.config(s.point(cfg)) == cfg
    # first knob varies slowest
    assert s.get(0)["a"] == 1 and s.get(len(s) - 1)["a"] == 64
    assert s.get(1)["d"] == 2


def test_bad_knobs_are_clear_errors():
    s = synthetic_space()
    with pytest.raises(KnobError, match="invalid value 3 for knob 'a'"):
        s.point({"a": 3, "b": 1, "c": 1, "d": 1})
    with pytest.raises(KnobError, match="unknown knob"):
        s.point({"a": 1, "b": 1, "c": 1, "d": 1, "zz": 1})
    with pytest.raises(KnobError, match="missing knob 'd'"):
        s.point({"a": 1, "b": 1, "c": 1})
    assert s.check({"a": 3, "b": 1, "c": 1, "d": 1}).startswith("invalid value")
    assert "buffer overflow" in s.check({"a": 64, "b": 64, "c": 16, "d": 1})
    with pytest.raises(KnobError):
        Space([Knob("x", (1,)), Knob("x", (2,))])
    with pytest.raises(KnobError):
        s.get(len(s))


def test_sampling_respects_constraints_and_seed():
    s = synthetic_space(limit=64)
    a = [s.sample(np.random.default_rng(3)) for _ in range(5)]
    b = [s.sample(np.random.default_rng(3)) for _ in range(5)]
    assert a == b
    rng = np.random.default_rng(0)
    for _ in range(200):
        assert s.is_valid(s.sample(rng))


def test_features_match_vectorised_features():
    s = synthetic_space()
    pts = np.array([s.point_of_index(i) for i in range(0, len(s), 7)])
    f1 = s.features([s.config(p) for p in pts])
    f2 = s.point_features(pts)
    np.testing.assert_allclose(f1, f2)
    assert f1.shape[1] == len(s.feature_names) == 5
    assert f1[0, -1] == pytest.approx(12.0)  # log2(limit=4096)


def test_product_and_neighbors():
    hw = Space([Knob("blk", (8, 16), "hw")], name="hw")
    sw = synthetic_space()
    j = product(hw, sw)
    assert len(j) == 2 * len(sw) and j.names[0] == "blk"
    nb = list(j.neighbors((0, 0, 0, 0, 0)))
    assert len(nb) == 5 and all(sum(p) == 1 for p in nb)


def test_tuple_choices_features_and_extra_feature_fn():
    k = Knob("tile", ((1, 1, 64, 1), (2, 4, 8, 1), (64, 1, 1, 1)))
    s = Space([k, Knob("unroll", (0, 16, 64))],
              feature_fn=lambda sp, pts: pts[:, :1] * 10.0)
    f = s.features([{"tile": (2, 4, 8, 1), "unroll": 16}])
    assert f.shape == (1, 4 + 1 + 1)
    np.testing.assert_allclose(f[0], [1, 2, 3, 0, 4, 10])
    assert s.feature_names[:2] == ["log2_tile[0]", "log2_tile[1]"]
