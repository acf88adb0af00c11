"""The knob view of MetaSchedule design-space traces (tvm_plugin.metaschedule.trace_space)."""
from __future__ import annotations

import math

import numpy as np
import pytest


@pytest.fixture(scope="module")
def tspace(conv_task, llvm):
    from tvm_plugin.metaschedule.trace_space import TraceSpace

    et = conv_task.ms_task
    return TraceSpace.from_mod(et.dispatched[0], llvm.tvm, et.task_name, seed=0, num_threads=2)


def test_knobs_are_trace_decisions(tspace):
    from tvm_plugin.metaschedule.trace_space import COMPUTE_AT, TILE

    sp = tspace.space
    groups = {k.name: k.group for k in sp.knobs}
    tiles = [k for k in sp.knobs if k.group == "tile"]
    assert tiles and all(k.kind == TILE for k in tiles)
    # conv2d nchw: 4 spatial tiles (n, c, h, w) of 4 factors, 3 reduction tiles of 2
    assert sorted(len(k.choices[0]) for k in tiles) == [2, 2, 2, 4, 4, 4, 4]
    assert groups.get("unroll_explicit") == "schedule"
    if len(tspace.traces) > 1:
        assert sp.knobs[0].name == "design_space" and len(sp.knobs[0]) == len(tspace.traces)
    for k in sp.knobs:
        if k.kind == COMPUTE_AT:
            assert all(isinstance(c, int) and c >= -2 for c in k.choices)
    # every tile choice is a perfect tiling of its loop
    for k in tiles:
        prods = {math.prod(c) for c in k.choices}
        assert len(prods) == 1 and len(set(k.choices)) == len(k.choices)
    assert np.isfinite(sp.features([sp.sample(np.random.default_rng(0))])).all()


def test_perfect_tiles_rule():
    from tvm_plugin.metaschedule.trace_space import perfect_tiles

    t = perfect_tiles(64, 4, 64)
    assert len(t) == 84 and all(math.prod(x) == 64 for x in t)
    assert len(perfect_tiles(56, 4, 64)) == 80
    assert perfect_tiles(3, 2, 64) == [(1, 3), (3, 1)]
    assert all(x[-1] <= 4 for x in perfect_tiles(16, 2, 4))


def test_apply_roundtrip_and_dedupe(tspace):
    from tvm_plugin.metaschedule.trace_space import schedule_hash

    for di in range(len(tspace.traces)):
        cfg = tspace.default_config(di)
        sch = tspace.apply(cfg)
        assert sch is not None
        assert tspace.config_of_trace(sch.trace) is not None
        again = tspace.apply(tspace.config_of_trace(sch.trace))
        assert schedule_hash(again) == schedule_hash(sch)
    rng = np.random.default_rng(1)
    hashes = {schedule_hash(tspace.apply(tspace.space.sample(rng))) for _ in range(12)}
    assert len(hashes) >= 10  # distinct configs give (almost always) distinct schedules
    bad = dict(tspace.default_config(0), design_space=len(tspace.traces) + 5)
    assert tspace.apply(bad) is None


def test_space_is_deterministic(tspace):
    from tvm_plugin.metaschedule.trace_space import TraceSpace

    other = TraceSpace.from_context(tspace.context, tspace.context.space_generator
                                    .generate_design_space(tspace.context.mod), seed=0) \
        if hasattr(tspace, "context") else None
    assert other is not None
    # same design spaces generator state -> same knob names and choice counts
    assert other.space.names == tspace.space.names
    assert [len(k) for k in other.space.knobs if k.group == "tile"] == \
        [len(k) for k in tspace.space.knobs if k.group == "tile"]
