"""The simulator RPC server serves simulations only.

A real tracker and a real ``dcoc rpc serve`` process on loopback:

* a session can call the simulator, and nothing else: TVM's upload / load_module /
  module loaders / PopenSession are gone from the session process;
* a request above the size cap, and a simulation above the time limit, are answered as
  invalid results (the server stays usable);
* ``dcoc rpc status`` against a dead tracker is one line and exit 2 within seconds.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from rpc_cluster import ROOT, Cluster, free_port


@pytest.fixture(scope="module")
def server():
    c, key = Cluster(), f"sec{os.getpid()}"
    try:
        c.sim_server(key, "--time-limit", "2")
        c.wait_free(key, 1, timeout=60)
        yield c.addr, key
    finally:
        c.close()


def _session(addr, key):
    from tvm import rpc

    host, port = addr.split(":")
    return rpc.connect_tracker(host, int(port)).request(key, priority=1, session_timeout=60)


def test_only_the_simulator_is_callable(server):
    from dcoc.targets.vta import Conv2DWorkload, HWConfig
    from tvm_plugin.rpc import SIM_FUNC, encode_request

    sess = _session(*server)
    f = sess.get_function(SIM_FUNC)
    wl = Conv2DWorkload(1, 14, 14, 256, 256, (3, 3), (1, 1), (1, 1))
    knobs = {"tile_h": 14, "tile_w": 14, "tile_ci": 1, "tile_co": 1, "oc_nthread": 1,
             "h_nthread": 1}
    out = json.loads(str(f(encode_request(wl, HWConfig.preset("pynq"), knobs))))
    assert out["valid"] and out["cycles"] > 0, out
    for name in ("tvm.rpc.server.upload", "tvm.rpc.server.load_module",
                 "tvm.rpc.server.download", "ffi.ModuleLoadFromFile", "rpc.PopenSession",
                 "ffi.SystemLib", "runtime.SaveParamsToFile"):
        with pytest.raises(Exception):
            g = sess.get_function(name)
            g("x")  # should never get here
    with pytest.raises(Exception):
        sess.upload(b"\x7fELF not a library", "evil.so")
    # the session still serves simulations after the refused calls
    f = sess.get_function(SIM_FUNC)
    assert json.loads(str(f(encode_request(wl, HWConfig.preset("pynq"), knobs))))["valid"]


def test_size_cap_and_time_limit(server):
    from dcoc.targets.vta import Conv2DWorkload, HWConfig
    from tvm_plugin.rpc import MAX_REQUEST_BYTES, SIM_FUNC, encode_request

    f = _session(*server).get_function(SIM_FUNC)
    out = json.loads(str(f("x" * (MAX_REQUEST_BYTES + 1))))
    assert not out["valid"] and "limit" in out["reason"]
    # ~300 bytes that would keep a server busy for minutes: 1x1 tiles of a huge layer
    wl = Conv2DWorkload(1, 2048, 2048, 256, 256, (1, 1), (1, 1), (0, 0))
    knobs = {"tile_h": 1, "tile_w": 1, "tile_ci": 1, "tile_co": 1, "oc_nthread": 1,
             "h_nthread": 1}
    t0 = time.monotonic()
    out = json.loads(str(f(encode_request(wl, HWConfig.preset("pynq"), knobs))))
    took = time.monotonic() - t0
    assert not out["valid"] and "time limit" in out["reason"], out
    assert took < 30, took


def test_status_of_a_dead_tracker_is_one_line():
    port = free_port()  # nothing listens there
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "dcoc.cli", "rpc", "status", "--tracker",
                        f"127.0.0.1:{port}"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("dcoc: error: RPC tracker"), r.stderr
    assert "Traceback" not in r.stderr
    assert time.monotonic() - t0 < 20
