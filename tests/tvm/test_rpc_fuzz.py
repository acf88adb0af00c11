"""Malformed bytes cannot take the simulator server down.

A real tracker and a real ``dcoc rpc serve`` on loopback.  Before the legitimate request
the test sends: bad magic numbers, zero / negative / huge key lengths, a non-UTF-8 key,
truncated handshakes, seeded random byte streams, idle sockets (more than the server's
connection slots), a slow sender, a mismatched key, and -- after a valid handshake with a
key the tracker handed out -- random bytes, a 1 TiB packet length and a packet above the
request cap.  Then:

* the server process is alive and a simulation through the tracker succeeds;
* the key the tracker gave out *before* the junk still matches (the server did not
  re-register because of bad connections);
* a peer that accepts and never answers makes ``dcoc rpc status --timeout 2`` fail in
  about 2 s with one line (exit 2).
"""
from __future__ import annotations

import json
import os
import random
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest
from rpc_cluster import ROOT, Cluster, env

MAGIC = 0xFF271


@pytest.fixture(scope="module")
def cluster():
    c, key = Cluster(), f"fuzz{os.getpid()}"
    try:
        proc = c.sim_server(key, "--time-limit", "5")
        c.wait_free(key, 1, timeout=90, watch=[proc])
        yield c.addr, key, proc.port, proc
    finally:
        c.close()


def _tracker_request(addr: str, key: str) -> str:
    """Ask the tracker for a server of ``key`` as a client would: its match key."""
    from tvm_plugin.rpc import TrackerConnection

    t = TrackerConnection(addr, timeout=10)
    try:
        reply = t.call([4, key, "fuzz", 1])  # TrackerCode.REQUEST
    finally:
        t.close()
    assert reply[0] == 0, reply
    return reply[1][2]


def _send(port: int, data: bytes, wait: float = 0.3, expect: int = 0) -> bytes:
    """Send ``data``; return what came back before the server closed or went quiet for
    ``wait`` s -- waiting up to 10 s for the first ``expect`` bytes (a reply the server owes)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(data)
        out = b""
        try:
            while True:
                s.settimeout(10 if len(out) < expect else wait)
                chunk = s.recv(4096)
                if not chunk:
                    break
                out += chunk
        except OSError:
            pass
        return out
    finally:
        s.close()


def _handshake(key: str) -> bytes:
    k = f"client:{key}".encode()
    return struct.pack("<ii", MAGIC, len(k)) + k


def _simulate(addr: str, key: str, matchkey: str | None = None, port: int | None = None) -> dict:
    from tvm import rpc

    from dcoc.targets.vta import Conv2DWorkload, HWConfig
    from tvm_plugin.rpc import SIM_FUNC, encode_request

    host, tport = addr.split(":")
    if matchkey is None:
        sess = rpc.connect_tracker(host, int(tport)).request(key, priority=1, session_timeout=60)
    else:
        sess = rpc.connect("127.0.0.1", port, key=matchkey, session_timeout=60)
    f = sess.get_function(SIM_FUNC)
    wl = Conv2DWorkload(1, 14, 14, 256, 256, (3, 3), (1, 1), (1, 1))
    knobs = {"tile_h": 14, "tile_w": 14, "tile_ci": 1, "tile_co": 1, "oc_nthread": 1,
             "h_nthread": 1}
    return json.loads(str(f(encode_request(wl, HWConfig.preset("pynq"), knobs))))


def _junk_cases(seed: int = 0) -> list[tuple[str, bytes]]:
    rng = random.Random(seed)
    cases = [
        ("bad magic", struct.pack("<ii", 0x12345, 0)),
        ("magic, key length 0", struct.pack("<ii", MAGIC, 0)),
        ("magic, negative key length", struct.pack("<ii", MAGIC, -5)),
        ("magic, key length 2^31-1", struct.pack("<ii", MAGIC, 0x7FFFFFFF)),
        ("magic, non-UTF-8 key", struct.pack("<ii", MAGIC, 4) + b"\xff\xfe\xfd\xfc"),
        ("magic, whitespace key", struct.pack("<ii", MAGIC, 3) + b"   "),
        ("magic, bad timeout option", _handshake("x -timeout=nan")),
        ("truncated magic", b"\x71\xf2"),
        ("magic only", struct.pack("<i", MAGIC)),
        ("key shorter than its length", struct.pack("<ii", MAGIC, 100) + b"client:"),
        ("empty", b""),
    ]
    for i in range(20):
        cases.append((f"random bytes #{i}", rng.randbytes(rng.randint(1, 2000))))
    return cases


def test_malformed_streams_do_not_kill_the_server(cluster):
    from tvm_plugin.rpc import MAX_CONNECTIONS, MAX_PACKET_BYTES, tracker_servers

    addr, key, sport, proc = cluster
    t0 = time.monotonic()
    # a key the tracker hands out now must still be valid after all the junk below
    early = _tracker_request(addr, key)
    for name, data in _junk_cases():
        reply = _send(sport, data)
        assert reply in (b"", struct.pack("<i", MAGIC + 2)), (name, reply[:16])
        assert proc.poll() is None, f"server died on: {name}"
    # a wrong key of the right form: "mismatch", and the server keeps its registration
    assert _send(sport, _handshake(f"{key}:0.123"), expect=4) == struct.pack("<i", MAGIC + 2)
    # the key handed out before the junk still opens a session (no re-registration)
    assert _simulate(addr, key, matchkey=early, port=sport)["valid"]

    # more idle sockets than connection slots, plus a slow sender: all held while a
    # legitimate client connects through the tracker; it must get through
    idle = [socket.create_connection(("127.0.0.1", sport)) for _ in range(MAX_CONNECTIONS + 4)]
    slow_stop = threading.Event()

    def slow():
        s = socket.create_connection(("127.0.0.1", sport))
        try:
            for b in struct.pack("<ii", MAGIC, 20):
                if slow_stop.wait(0.7):
                    break
                s.send(bytes([b]))
        except OSError:
            pass
        finally:
            s.close()

    th = threading.Thread(target=slow, daemon=True)
    th.start()
    t1 = time.monotonic()
    out = _simulate(addr, key)
    waited = time.monotonic() - t1
    for s in idle:
        s.close()
    slow_stop.set()
    th.join(5)
    assert out["valid"] and out["cycles"] > 0, out
    assert waited < 15, waited  # at most one handshake deadline (5 s) behind the idle ones

    # after a valid handshake: garbage, a 1 TiB packet length, a packet above the cap
    rng = random.Random(1)
    after = [("random bytes after the handshake", rng.randbytes(3000)),
             ("1 TiB packet length", struct.pack("<Q", 1 << 40)),
             ("packet above the cap", struct.pack("<Q", MAX_PACKET_BYTES + 1) + b"x" * 1000),
             ("truncated packet", struct.pack("<Q", 100) + b"abc")]
    for name, data in after:
        mk = _tracker_request(addr, key)
        reply = _send(sport, _handshake(mk) + data, expect=4)
        assert reply.startswith(struct.pack("<i", MAGIC)), (name, reply[:16])
        assert proc.poll() is None, f"server died on: {name}"

    # still registered and serving
    deadline = time.monotonic() + 20
    while tracker_servers(addr, key)["free"] < 1:
        assert time.monotonic() < deadline, "the server did not offer itself again"
        time.sleep(0.3)
    assert _simulate(addr, key)["valid"]
    assert proc.poll() is None
    assert time.monotonic() - t0 < 120  # no hang: ~15 s here


def test_status_times_out_on_a_silent_peer():
    """A peer that accepts and never answers: one line, exit 2, within the timeout."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(4)
    port = lsock.getsockname()[1]
    held = []
    stop = threading.Event()

    def accept():
        lsock.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(lsock.accept()[0])
            except OSError:
                pass

    th = threading.Thread(target=accept, daemon=True)
    th.start()
    try:
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "dcoc.cli", "rpc", "status", "--tracker",
                            f"127.0.0.1:{port}", "--timeout", "2"], cwd=ROOT, env=env(),
                           capture_output=True, text=True, timeout=60)
        took = time.monotonic() - t0
    finally:
        stop.set()
        th.join(2)
        for c in held:
            c.close()
        lsock.close()
    assert r.returncode == 2, r
    assert r.stderr.count("\n") == 1 and "did not answer" in r.stderr, r.stderr
    assert took < 15, took


def test_measurer_deadline_on_a_silent_tracker():
    """RPCSimMeasurer's tracker queries have a deadline too (no hang)."""
    from dcoc.errors import DcocError
    from tvm_plugin.rpc import tracker_servers

    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(4)
    try:
        t0 = time.monotonic()
        with pytest.raises(DcocError, match="did not answer"):
            tracker_servers(lsock.getsockname(), "k", timeout=1.0)
        assert time.monotonic() - t0 < 5
    finally:
        lsock.close()


@pytest.mark.parametrize("argv", [
    ["rpc", "serve", "--tracker", "127.0.0.1:9190", "--port", "99999"],
    ["rpc", "serve", "--tracker", "127.0.0.1:9190", "--port", "0"],
    ["rpc", "serve", "--tracker", "127.0.0.1:9190", "--time-limit", "nan"],
    ["rpc", "serve", "--tracker", "127.0.0.1:9190", "--time-limit", "-1"],
    ["rpc", "status", "--tracker", "127.0.0.1:9190", "--timeout", "-1"],
    ["rpc", "status", "--tracker", "127.0.0.1:9190", "--timeout", "inf"],
    ["rpc", "status", "--tracker", "127.0.0.1:99999"],
])
def test_rpc_flags_are_range_checked(argv, capsys):
    from dcoc.cli import cmd_rpc
    from tvm_plugin import rpc

    assert (cmd_rpc.DEFAULT_KEY, cmd_rpc.DEFAULT_TIME_LIMIT) == (rpc.DEFAULT_KEY, rpc.DEFAULT_TIME_LIMIT)
    from dcoc.cli import main

    try:
        rc = main(argv)
    except SystemExit as e:  # argparse's own one-line error
        rc = e.code
    assert rc == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("dcoc: error:"), err


@pytest.mark.parametrize("kw", [dict(timeout=float("nan")), dict(timeout=-1), dict(timeout=0),
                                dict(connect_timeout=float("inf")), dict(max_sessions=0),
                                dict(tracker="127.0.0.1:99999"), dict(tracker="host:port")])
def test_measurer_arguments_are_checked(kw):
    from dcoc.errors import DcocError
    from tvm_plugin.rpc import RPCSimMeasurer

    kw = {"tracker": "127.0.0.1:9190", **kw}
    with pytest.raises(DcocError):
        RPCSimMeasurer(**kw)
