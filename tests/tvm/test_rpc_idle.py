"""A simulator session cannot be held hostage: every server stage has a deadline.

* handshake: a connection that sends nothing is closed after the handshake timeout;
* matched idle: a client the tracker matched that completes the handshake and then sends
  nothing (or goes quiet between requests) is closed after ``--idle-timeout`` seconds,
  and the next client is served; a request the server is working on is never cut;
* body: a packet whose length arrived but whose body does not is closed after the packet
  timeout; a declared length above the cap closes at once.

The stages run in-process on socket pairs with short deadlines (table-driven); one real
tracker + ``dcoc rpc serve --idle-timeout 2`` checks the scenario end to end, and that
:class:`RPCSimMeasurer` reconnects when its idle session was closed.
"""
from __future__ import annotations

import os
import socket
import struct
import threading
import time

import pytest
from rpc_cluster import Cluster
from test_rpc_fuzz import _handshake, _simulate, _tracker_request

IDLE = 2.0


def _relay(idle=0.4, packet=0.4, limit=1024):
    """(client end, server end, relay thread) of a :func:`_relay_session` on socket pairs."""
    from tvm_plugin.rpc.server import _relay_session

    client, conn = socket.socketpair()
    inner, server = socket.socketpair()
    t = threading.Thread(target=_relay_session, args=(conn, inner, limit, packet, idle), daemon=True)
    t.start()
    return client, server, t


def _closed_after(sock, within: float) -> float | None:
    """Seconds until ``sock``'s peer closed (None: still open after ``within`` s)."""
    t0 = time.monotonic()
    sock.settimeout(within)
    try:
        while sock.recv(4096):
            pass
    except (TimeoutError, socket.timeout):
        return None
    except OSError:
        pass
    return time.monotonic() - t0


def _stage_silent(client, server):
    return None


def _stage_header_no_body(client, server):
    client.sendall(struct.pack("<Q", 100))


def _stage_oversize(client, server):
    client.sendall(struct.pack("<Q", 1 << 40))


def _stage_quiet_after_answer(client, server):
    client.sendall(struct.pack("<Q", 3) + b"abc")
    assert server.recv(64) == struct.pack("<Q", 3) + b"abc"
    server.sendall(b"answer")
    assert client.recv(64) == b"answer"


# (stage, what the client does, closed within (s): the deadline that applies)
STAGES = [
    ("matched, then nothing", _stage_silent, 0.4),
    ("packet length, then no body", _stage_header_no_body, 0.4),
    ("packet length above the cap", _stage_oversize, 0.0),
    ("answered, then nothing", _stage_quiet_after_answer, 0.4),
]


@pytest.mark.parametrize("stage", range(len(STAGES)), ids=[s[0] for s in STAGES])
def test_each_session_stage_has_a_deadline(stage):
    name, act, deadline = STAGES[stage]
    client, server, t = _relay()
    t0 = time.monotonic()
    act(client, server)
    took = _closed_after(client, 5.0)
    assert took is not None, f"{name}: still open after 5 s"
    assert time.monotonic() - t0 <= deadline + 1.0, (name, took)
    t.join(2.0)
    assert not t.is_alive()


def test_a_request_being_served_is_not_cut_by_the_idle_deadline():
    client, server, t = _relay(idle=0.3)
    client.sendall(struct.pack("<Q", 2) + b"go")
    assert server.recv(64) == struct.pack("<Q", 2) + b"go"
    time.sleep(1.0)  # the simulation takes longer than the idle deadline
    server.sendall(b"done")
    client.settimeout(2)
    assert client.recv(64) == b"done"
    client.close()
    t.join(2.0)


def test_a_silent_connection_is_closed_after_the_handshake_timeout():
    from tvm_plugin.rpc.server import SimServer

    srv = SimServer(None, 1, "k", "127.0.0.1:1", handshake_timeout=0.4)
    a, b = socket.socketpair()
    srv.slots.acquire()  # what the accept loop holds for a connection
    t0 = time.monotonic()
    srv._handshake(a, "peer")
    assert time.monotonic() - t0 < 2.0
    assert _closed_after(b, 2.0) is not None and srv.stats["bad"] == 1


@pytest.mark.parametrize("key", ["a b", "", " ", "tab\there", "x" * 201, "new\nline", 5])
def test_server_keys_that_no_client_can_match_are_refused(key):
    from dcoc.errors import DcocError
    from tvm_plugin.rpc.protocol import check_key

    with pytest.raises(DcocError, match="--key"):
        check_key(key)


def test_cli_idle_default_matches_the_library():
    from dcoc.cli import cmd_rpc
    from tvm_plugin.rpc import protocol

    assert cmd_rpc.DEFAULT_IDLE_TIMEOUT == protocol.IDLE_TIMEOUT


@pytest.fixture(scope="module")
def cluster():
    c, key = Cluster(), f"idle{os.getpid()}"
    try:
        proc = c.sim_server(key, "--idle-timeout", str(IDLE))
        c.wait_free(key, 1, timeout=90, watch=[proc])
        yield c, key, proc
    finally:
        c.close()


def test_an_idle_matched_client_cannot_block_the_next(cluster):
    c, key, proc = cluster
    mk = _tracker_request(c.addr, key)  # the idle client: matched, handshake, then nothing
    s = socket.create_connection(("127.0.0.1", proc.port), timeout=10)
    try:
        s.sendall(_handshake(mk))
        assert struct.unpack("<i", s.recv(4))[0] == 0xFF271  # RPC_CODE_SUCCESS
        t0 = time.monotonic()
        out = _simulate(c.addr, key)  # a legitimate client, through the tracker
        waited = time.monotonic() - t0
        assert out["valid"], out
        assert waited < IDLE + 8, waited
        assert _closed_after(s, 1.0) is not None  # the idle session was closed
    finally:
        s.close()
    assert proc.poll() is None


def test_the_measurer_reconnects_after_its_idle_session_was_closed(cluster):
    from dcoc.targets.vta import Conv2DWorkload, HWConfig, default_knobs
    from dcoc.targets.vta.spaces import vta_task
    from tvm_plugin.rpc import RPCSimMeasurer

    c, key, proc = cluster
    c.wait_free(key, 1, timeout=30, watch=[proc])
    wl, hw = Conv2DWorkload(1, 14, 14, 32, 32, (3, 3), (1, 1), (1, 1)), HWConfig.preset("pynq")
    task, knobs = vta_task(wl, hw), default_knobs(wl, hw)
    m = RPCSimMeasurer(c.addr, key, timeout=30, connect_timeout=30)
    try:
        first = m.measure(task, [knobs])
        time.sleep(IDLE + 1.5)  # the server closes the quiet session meanwhile
        again = m.measure(task, [knobs, knobs])
    finally:
        m.close()
    assert first[0].error_no == again[0].error_no == 0, (first, again)
    assert again[0].cost == first[0].cost and again[1].error_no == 0
    assert not m.lost
