"""Distributed measurement on loopback: a real tracker and real RPC servers (subprocesses).

* the VTA simulator served by ``dcoc rpc serve`` and fanned out by
  RPCSimMeasurer; a server killed mid-run becomes an error result, tuning completes on
  the other one;
* MetaSchedule's RPCRunner (``runner="rpc://HOST:PORT/KEY"``) against TVM's own servers.

Every process is started in its own session and killed by process group at the end.
"""
from __future__ import annotations

import uuid

import numpy as np
import pytest
from rpc_cluster import Cluster


@pytest.fixture(scope="module")
def cluster():
    c = Cluster()
    try:
        yield c
    finally:
        c.close()
        assert all(p.poll() is not None for p in c.procs)


@pytest.fixture(scope="module")
def vta_task():
    import dcoc.targets.vta as vta
    from dcoc.targets.vta.spaces import vta_task as make

    wl = vta.Conv2DWorkload(batch=1, height=14, width=14, in_channels=64, out_channels=64,
                            kernel=(3, 3), stride=(1, 1), padding=(1, 1))
    return make(wl, vta.HWConfig.preset("pynq"))


def test_codec_roundtrip(vta_task):
    import json

    import dcoc.targets.vta as vta
    from tvm_plugin.rpc import decode_request, encode_request, simulate_json

    wl, hw = vta_task.payload["workload"], vta_task.payload["hw"]
    knobs = vta.default_knobs(wl, hw)
    text = encode_request(wl, hw, knobs)
    wl2, hw2, k2, kw = decode_request(text)
    assert wl2 == wl and hw2.name == hw.name and k2 == knobs and kw == {}
    out = json.loads(simulate_json(text))
    r = vta.simulate(wl, hw, knobs)
    assert out["valid"] and out["cycles"] == r.cycles and out["seconds"] == pytest.approx(r.seconds)
    bad = json.loads(simulate_json(encode_request(wl, hw, dict(knobs, tile_h=10 ** 6))))
    assert bad["valid"] is False and bad["reason"]


def test_sim_servers_fan_out_and_survive_a_kill(cluster, vta_task):
    import dcoc.tuners
    from dcoc.search import measure_option
    from dcoc.search.measure import MeasureErrorNo
    from dcoc.targets.vta.spaces import simulate_config
    from tvm_plugin.rpc import RPCSimMeasurer

    key = f"vta-sim-{uuid.uuid4().hex[:6]}"
    servers = [cluster.sim_server(key), cluster.sim_server(key)]
    cluster.wait_free(key, 2)
    m = RPCSimMeasurer(cluster.addr, key, timeout=30)
    try:
        # same numbers as the local simulator, spread over both servers
        cfgs = [vta_task.space.sample(np.random.default_rng(i)) for i in range(8)]
        res = m.measure(vta_task, cfgs)
        assert m.n_parallel == 2
        for c, r in zip(cfgs, res):
            local = simulate_config(vta_task, c)
            if local[0] is None:
                assert not r.valid
            else:
                assert r.valid and r.cost == pytest.approx(local[0])
                assert r.info["cycles"] == local[1]["cycles"]
        assert len({r.info.get("server") for r in res if r.valid}) == 2

        # tune; after the first batch one server dies (its whole process group)
        killed = []

        def kill_one(tuner, inputs, results):
            if not killed:
                cluster.kill(servers[0])
                killed.append(True)

        t = dcoc.tuners.create("ga", vta_task, seed=0)
        t.tune(24, measure_option(m), callbacks=[kill_one])
        assert t.trials == 24
        lost = [r for _, r in _pairs(t) if r is not None and not r.valid
                and r.error_no == MeasureErrorNo.RUNTIME_DEVICE]
        # the dead server's session fails on its first call of the next batch: like a
        # session the server closed while idle, that measurement goes to the live server
        # (a server that dies mid-batch turns its in-flight measurement into an error)
        assert len(m.lost) <= 1 and m.n_parallel == 1
        assert len(lost) <= 2
        assert t.best_cost < float("inf")
    finally:
        m.close()


def _pairs(tuner):
    """(config, result) of every trial of a dcoc Tuner (from its history hook)."""
    return list(getattr(tuner, "_dcoc_test_pairs", []))


@pytest.fixture(autouse=True)
def _record_pairs(monkeypatch):
    """Keep every (config, result) a Tuner observes (test-only hook)."""
    from dcoc.tuners.tuner import Tuner

    orig = Tuner._observe

    def observe(self, inputs, results):
        store = self.__dict__.setdefault("_dcoc_test_pairs", [])
        store.extend((i.config, r) for i, r in zip(inputs, results))
        return orig(self, inputs, results)

    monkeypatch.setattr(Tuner, "_observe", observe)


def test_metaschedule_rpc_runner(cluster, conv_task, builder, tmp_path):
    """runner="rpc://HOST:PORT/KEY" measures through TVM's RPC servers; records land in the
    database; killing one server mid-run leaves tuning to the other."""
    from tvm.s_tir import meta_schedule as ms

    from tests.tvm.conftest import count_records, tune_context
    from tvm_plugin.metaschedule.build import make_runner
    from tvm_plugin.metaschedule.strategy import TunerStrategy

    key = f"cpu-{uuid.uuid4().hex[:6]}"
    servers = [cluster.tvm_server(key), cluster.tvm_server(key)]
    cluster.wait_free(key, 2)
    runner = make_runner(f"rpc://{cluster.addr}/{key}", timeout_sec=30)

    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

    seen = []

    @derived_object
    class KillAfterFirst(PyMeasureCallback):
        def apply(self, task_scheduler, task_id, cands, builder_results, runner_results):
            seen.append([r.error_msg for r in runner_results])
            if len(seen) == 1:
                Cluster.kill(servers[0])

    strat = TunerStrategy(tuner="random", seed=0)
    ctx = tune_context(conv_task, strat)
    db = ms.database.JSONDatabase(work_dir=str(tmp_path))
    cbs = list(ms.measure_callback.MeasureCallback.create("default")) + [KillAfterFirst()]
    ms.tune_tasks(tasks=[ctx], task_weights=[1.0], work_dir=str(tmp_path), max_trials_global=12,
                  num_trials_per_iter=4, builder=builder, runner=runner, database=db,
                  cost_model="random", measure_callbacks=cbs)
    summary = strat.results[str(ctx.task_name)]
    assert summary["trials"] == 12 and count_records(db, ctx.mod) == 12
    first_ok = sum(e is None for e in seen[0])
    later_ok = sum(e is None for batch in seen[1:] for e in batch)
    assert first_ok >= 1 and later_ok >= 1  # tuning went on after the kill
    assert summary["best_cost"] is not None


def test_an_item_put_back_after_the_other_workers_left_ends_the_batch():
    """Session a answers its item and, finding the queue empty, its worker leaves; session b
    then fails on its first call (closed while idle) and puts its item back.  No worker is
    left to take it: the batch must end (and report one item to retry), not wait forever."""
    import collections
    import threading
    import time

    from tvm_plugin.rpc.client import RPCSimMeasurer, _Session

    def quick(text):
        time.sleep(0.1)  # long enough for b's worker to take the second item
        return '{"valid": true, "seconds": 0.001}'

    def closed(text):
        time.sleep(0.3)
        raise ConnectionError("session closed")

    m = RPCSimMeasurer("127.0.0.1:9")
    m.sessions = [_Session(None, quick, "a"), _Session(None, closed, "b")]
    queue = collections.deque([(0, "x"), (1, "y")])
    results: list = [None, None]
    out: dict = {}
    t = threading.Thread(target=lambda: out.update(n=m._run_queue(queue, results, retry=True)),
                         daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "the batch waited for a worker that had left"
    assert out["n"] == 1 and list(queue) == [(1, "y")]
    assert results[0] is not None and results[0].error_no == 0 and results[1] is None
    assert [s.name for s in m.sessions] == ["a"]
