"""Distributed measurement over a TVM RPC tracker.

Two ways to scale measurement out, both through the standard TVM tracker
(``python -m tvm.exec.rpc_tracker --host 127.0.0.1 --port 9190``; use a non-loopback
address only on a network you trust, see *Security* below):

1. **Real hardware (llvm/cuda)**: MetaSchedule's ``RPCRunner``.  Start TVM's own servers
   on the measuring machines (``python -m tvm.exec.rpc_server --tracker HOST:9190 --key
   KEY``) and pass ``runner="rpc://HOST:9190/KEY"`` to :func:`tvm_plugin.metaschedule.tuning.tune_model`
   (or ``dcoc tune ... --runner rpc://HOST:9190/KEY``); see :func:`tvm_plugin.metaschedule.build.make_runner`.
2. **The VTA simulator**: ``python -m tvm_plugin.rpc serve --tracker HOST:9190 --key
   vta-sim`` starts an RPC server that registers the simulator as the remote function
   :data:`SIM_FUNC` (JSON in: workload, hardware, knobs; JSON out: valid, reason, cycles,
   seconds).  :class:`RPCSimMeasurer` fans a batch of configs out over every server the
   tracker has for the key -- one session per server, one thread per session, a
   per-measurement timeout -- so simulation spreads over many machines.  A server that
   dies (or times out) turns its in-flight measurement into an error result and leaves
   the pool; the batch continues on the others, and servers that (re)join the tracker
   are picked up at the next batch.

Wire format (JSON text, both ways)::

    request  {"workload": {"kind": "conv2d", "batch": 1, "height": 56, ..., "kernel": [3, 3],
                           ...} | {"kind": "dense", "batch": .., "in_features": .., "out_features": ..},
              "hw": {HWConfig constructor fields},
              "knobs": {knob: int},
              "epilogue": absent (VTA's default requantization) | null (none) | {Epilogue fields}}
    response {"valid": true, "reason": null, "cycles": 569900, "seconds": 0.0057,
              "gops": 12.3, "utilization": 0.41}
             {"valid": false, "reason": "..."}   (invalid knobs/config; never an RPC error)

Security.  TVM's own RPC server (``python -m tvm.exec.rpc_server``, case 1) runs whatever
a client sends it -- upload a shared library, load it, call it -- so anyone who can reach
its port (or the tracker's) can run code as the server's user: expose it only on a
network where you trust every host.  The simulator server here (case 2) is restricted:
in each session process every TVM global function except :data:`SIM_FUNC` is removed
before the session starts (no upload, download, load_module, module loading or any other
TVM function can be called), a request larger than :data:`MAX_REQUEST_BYTES` is refused,
and one simulation may take at most ``--time-limit`` seconds (default
:data:`DEFAULT_TIME_LIMIT`) before it is answered as invalid.  Its accept loop
(:class:`SimServer`, not TVM's) gives each connection :data:`HANDSHAKE_TIMEOUT` seconds
to hand-shake, handles at most :data:`MAX_CONNECTIONS` at once, checks every declared
length (key, packet) before reading what follows (a packet above
:data:`MAX_PACKET_BYTES` closes its session unread), and closes only the connection that
sent malformed bytes; the tracker registration is renewed only when the tracker
connection fails.  It listens on 127.0.0.1
unless ``--host`` says otherwise; binding it to another address lets every host that can
reach that address use this machine's CPU for simulations (and try to crash the
process), so do that only on a trusted network.  The tracker has no authentication
either.
"""
from __future__ import annotations

import collections
import dataclasses
import errno
import json
import logging
import math
import struct
import threading
import time
from typing import Any, Sequence

from dcoc.search.measure import MeasureErrorNo, Measurer, MeasureResult
from dcoc.search.tuning_task import TuningTask

#: the remote function the simulator servers register
SIM_FUNC = "dcoc.vta.simulate_json"
DEFAULT_KEY = "vta-sim"
#: a request longer than this (characters) is answered as invalid, unread
MAX_REQUEST_BYTES = 64 * 1024
#: seconds one simulation may take on a server before it is answered as invalid
DEFAULT_TIME_LIMIT = 20.0

logger = logging.getLogger("dcoc.rpc")


# ============================================================================ codec
def _fields(obj) -> dict:
    out = {}
    for f in dataclasses.fields(obj):
        if not f.init:
            continue
        v = getattr(obj, f.name)
        out[f.name] = list(v) if isinstance(v, tuple) else v
    return out


def encode_request(wl, hw, knobs: dict, epilogue: Any = "default") -> str:
    """JSON request text for one simulation."""
    from dcoc.vta import Conv2DWorkload

    kind = "conv2d" if isinstance(wl, Conv2DWorkload) else "dense"
    req = {"workload": {"kind": kind, **_fields(wl)}, "hw": _fields(hw),
           "knobs": {k: int(v) for k, v in knobs.items()}}
    if epilogue is None:
        req["epilogue"] = None
    elif epilogue != "default":
        req["epilogue"] = _fields(epilogue)
    return json.dumps(req, sort_keys=True)


def _tuples(d: dict) -> dict:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}


def decode_request(text: str):
    """(workload, hw, knobs, epilogue kwargs) from request text."""
    from dcoc.vta import Conv2DWorkload, DenseWorkload, Epilogue, HWConfig

    req = json.loads(text)
    w = dict(req["workload"])
    kind = w.pop("kind")
    wl = Conv2DWorkload(**_tuples(w)) if kind == "conv2d" else DenseWorkload(**w)
    hw = HWConfig(**req["hw"])
    kw = {}
    if "epilogue" in req:
        kw["epilogue"] = None if req["epilogue"] is None else Epilogue(**_tuples(req["epilogue"]))
    return wl, hw, dict(req["knobs"]), kw


def simulate_json(text: str) -> str:
    """The server side: simulate one request; invalid input is a result, never an error."""
    try:
        from dcoc.vta import simulate

        wl, hw, knobs, kw = decode_request(str(text))
        r = simulate(wl, hw, knobs, **kw)
        if not r.valid:
            return json.dumps({"valid": False, "reason": str(r.reason)})
        return json.dumps({"valid": True, "reason": None, "cycles": int(r.cycles),
                           "seconds": float(r.seconds), "gops": float(r.gops),
                           "utilization": float(r.utilization)})
    except Exception as exc:  # noqa: BLE001 - report, do not kill the session
        return json.dumps({"valid": False, "reason": f"{type(exc).__name__}: {exc}"[:500]})


# ============================================================================ wire helpers
#: TVM's RPC handshake constants (tvm.rpc.base; repeated so the client side needs no TVM)
RPC_MAGIC = 0xFF271
RPC_TRACKER_MAGIC = 0x2F271
RPC_CODE_SUCCESS = RPC_MAGIC + 0
RPC_CODE_MISMATCH = RPC_MAGIC + 2
_TRACKER_SUCCESS, _TRACKER_PUT, _TRACKER_UPDATE_INFO = 0, 3, 5
_TRACKER_SUMMARY, _TRACKER_GET_PENDING = 6, 7

#: seconds a new connection may take to finish the handshake (magic, key length, key)
HANDSHAKE_TIMEOUT = 5.0
#: connections handled at once (handshakes in progress); more wait in the listen queue
MAX_CONNECTIONS = 16
#: the longest handshake key accepted ("client:KEY:RANDOM -timeout=N")
MAX_KEY_BYTES = 1024
#: the largest RPC packet a session reads: a request at the cap plus the packet framing;
#: a longer declared length closes the session before any of its body is read
MAX_PACKET_BYTES = MAX_REQUEST_BYTES + 4096
#: seconds the body of one packet may take to arrive once its length was read
PACKET_TIMEOUT = 30.0
#: the largest tracker reply read (JSON)
_MAX_TRACKER_REPLY = 1 << 24


class ProtocolError(OSError):
    """A peer that broke the wire protocol (bad magic, bad length, not UTF-8 ...)."""


def _recv_exact(sock, n: int, deadline: float | None = None) -> bytes:
    """Exactly ``n`` bytes; ``deadline`` (time.monotonic()) bounds the whole read."""
    import socket

    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("deadline passed")
            sock.settimeout(left)
        chunk = sock.recv(min(n - len(buf), 1 << 16))
        if not chunk:
            raise ConnectionError("connection closed by the peer")
        buf += chunk
    return bytes(buf)


def _send_json(sock, obj) -> None:
    data = json.dumps(obj).encode("utf-8")
    sock.sendall(struct.pack("<i", len(data)) + data)


def _recv_json(sock, deadline: float | None = None):
    size = struct.unpack("<i", _recv_exact(sock, 4, deadline))[0]
    if not 0 <= size <= _MAX_TRACKER_REPLY:
        raise ProtocolError(f"reply length {size} out of range")
    try:
        return json.loads(_recv_exact(sock, size, deadline).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"reply is not JSON: {exc}") from None


class TrackerConnection:
    """A connection to a TVM RPC tracker where every call has a deadline of ``timeout``
    seconds (TVM's own client waits forever on a peer that accepts and never answers)."""

    def __init__(self, addr, timeout: float = 5.0):
        import socket

        self.addr = parse_addr(addr)
        self.timeout = float(timeout)
        self.sock = socket.create_connection(self.addr, timeout=self.timeout)
        try:
            deadline = time.monotonic() + self.timeout
            self.sock.sendall(struct.pack("<i", RPC_TRACKER_MAGIC))
            magic = struct.unpack("<i", _recv_exact(self.sock, 4, deadline))[0]
            if magic != RPC_TRACKER_MAGIC:
                raise ProtocolError("not an RPC tracker (wrong magic number)")
        except TimeoutError:
            self.close()
            raise ProtocolError(f"no answer within {self.timeout:g} s") from None
        except BaseException:
            self.close()
            raise

    def call(self, msg):
        self.sock.settimeout(self.timeout)
        _send_json(self.sock, msg)
        return _recv_json(self.sock, time.monotonic() + self.timeout)

    def call_ok(self, msg) -> None:
        reply = self.call(msg)
        if reply != _TRACKER_SUCCESS:
            raise ProtocolError(f"tracker refused {msg[0]}: {str(reply)[:100]}")

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


# ============================================================================ server
class _TimeLimit(BaseException):  # not caught by simulate_json's "except Exception"
    pass


def limited_simulate_json(text, time_limit: float = DEFAULT_TIME_LIMIT) -> str:
    """:func:`simulate_json` with the server's limits: a size cap on the request and a
    wall-clock limit per simulation (SIGALRM; the simulator is Python, so it is
    interrupted between bytecodes).  Both answer ``{"valid": false, "reason": ...}``."""
    import signal

    text = str(text)
    if len(text) > MAX_REQUEST_BYTES:
        return json.dumps({"valid": False, "reason": f"request of {len(text)} bytes exceeds the "
                                                     f"server's limit of {MAX_REQUEST_BYTES}"})
    if not time_limit or time_limit <= 0 or threading.current_thread() is not threading.main_thread():
        return simulate_json(text)

    def on_alarm(signum, frame):
        raise _TimeLimit()

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, float(time_limit))
    try:
        return simulate_json(text)
    except _TimeLimit:
        return json.dumps({"valid": False, "reason": f"simulation exceeded the server's time "
                                                     f"limit of {time_limit:g} s"})
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def register(time_limit: float = DEFAULT_TIME_LIMIT) -> None:
    """Register :data:`SIM_FUNC` in this process (sessions forked later inherit it)."""
    import tvm

    tvm.register_global_func(SIM_FUNC, lambda text: limited_simulate_json(text, time_limit),
                             override=True)


def restrict_globals(keep=(SIM_FUNC,)) -> int:
    """Remove every TVM global function except ``keep`` from this process (a session
    process of the simulator server: the RPC client can then call nothing else).
    Returns how many were removed; RuntimeError if any other function is left."""
    import tvm_ffi

    reg = tvm_ffi.registry
    remove = reg.get_global_func("ffi.FunctionRemoveGlobal")
    helpers = ("ffi.FunctionListGlobalNamesFunctor", "ffi.FunctionRemoveGlobal")
    names = list(reg.list_global_func_names())
    for name in names:
        if name not in keep and name not in helpers:
            remove(name)
    left = set(reg.list_global_func_names()) - set(keep) - set(helpers)
    if left:
        raise RuntimeError(f"could not remove TVM global functions: {sorted(left)[:5]}")
    for name in helpers:  # the registry tools last (``remove`` is held as an object)
        remove(name)
    return len(names) - len(keep)


def _restricted_serve_loop(sock, load_library, work_path):
    """Replacement for ``tvm.rpc.server._serve_loop`` (run in the forked session process):
    no upload/load_module environment, and only :data:`SIM_FUNC` left callable."""
    from tvm.rpc import _ffi_api

    server_loop = _ffi_api.ServerLoop  # looked up before the registry is emptied
    # rpc.LocalSession: the session the handshake constructs (it serves the registry,
    # which then holds only the simulator)
    restrict_globals(keep=(SIM_FUNC, "rpc.LocalSession"))
    server_loop(sock.fileno())


def _relay_session(conn, inner, packet_limit: int = MAX_PACKET_BYTES,
                   packet_timeout: float = PACKET_TIMEOUT) -> None:
    """Copy one session's bytes between the client (``conn``) and TVM's server loop
    (``inner``, one end of a socket pair).  Client packets (``uint64 length`` + body) are
    checked *before* their body is read: a length above ``packet_limit`` (or a body that
    does not arrive within ``packet_timeout`` seconds) closes the session."""
    import select
    import socket

    def shut():
        for s in (conn, inner):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass

    try:
        conn.settimeout(None)
        inner.settimeout(None)
        while True:
            ready, _, _ = select.select([conn, inner], [], [])
            if inner in ready:  # the server's answers: copied as they are
                data = inner.recv(1 << 16)
                if not data:
                    break
                conn.sendall(data)
            if conn in ready:
                head = conn.recv(8, socket.MSG_PEEK)
                if not head:
                    break
                deadline = time.monotonic() + packet_timeout
                head = _recv_exact(conn, 8, deadline)
                size = struct.unpack("<Q", head)[0]
                if size > packet_limit:
                    logger.warning("session closed: a packet of %d bytes exceeds the limit of %d",
                                   size, packet_limit)
                    break
                body = _recv_exact(conn, size, deadline)
                conn.settimeout(None)
                inner.sendall(head + body)
    except (OSError, struct.error) as exc:
        logger.info("session closed: %s", exc)
    finally:
        shut()


def _session_main(conn, close_fds, time_limit: float) -> None:
    """One client session, in a forked process: TVM's server loop restricted to the
    simulator, behind :func:`_relay_session`'s packet-size check."""
    import os
    import signal
    import socket

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    for s in close_fds:  # the listening socket and the tracker connection stay the parent's
        try:
            s.close()
        except OSError:
            pass
    inner, outer = socket.socketpair()
    t = threading.Thread(target=_relay_session, args=(conn, outer), daemon=True)
    t.start()
    try:
        _restricted_serve_loop(inner, None, None)
    except Exception as exc:  # noqa: BLE001 - a broken session ends this process only
        logger.info("session ended: %s", " ".join(str(exc).split())[:200])
    finally:
        try:
            inner.close()
        except OSError:
            pass
        t.join(2.0)
    os._exit(0)


class SimServer:
    """The simulator server's accept loop (replaces TVM's ``_listen_loop``).

    * every connection gets its own thread and at most ``handshake_timeout`` seconds to
      send a well-formed handshake (magic, a key length in 1..:data:`MAX_KEY_BYTES`, a
      UTF-8 key); anything else closes that connection only;
    * at most ``max_connections`` handshakes at once (more wait in the kernel's queue);
    * the client the tracker matched gets one session, served in a forked process (see
      :func:`_session_main`); other connections are answered "mismatch";
    * the tracker registration is kept across bad connections and renewed only when the
      tracker connection itself fails (or a matched client never came).
    """

    def __init__(self, sock, port: int, key: str, tracker_addr, custom_addr=None,
                 time_limit: float = DEFAULT_TIME_LIMIT,
                 handshake_timeout: float = HANDSHAKE_TIMEOUT,
                 max_connections: int = MAX_CONNECTIONS, ping_period: float = 2.0,
                 tracker_timeout: float = 10.0):
        import queue

        self.sock, self.port, self.key = sock, int(port), key
        self.tracker_addr = parse_addr(tracker_addr)
        self.custom_addr = custom_addr
        self.time_limit = time_limit
        self.handshake_timeout = float(handshake_timeout)
        self.slots = threading.BoundedSemaphore(int(max_connections))
        self.ping_period = float(ping_period)
        self.tracker_timeout = float(tracker_timeout)
        self.lock = threading.Lock()
        self.matched: queue.Queue = queue.Queue()
        self.matchkey = self._new_key()
        self.claimed = False
        self.session = None  # (process, deadline or None)
        self.stats = collections.Counter()
        self._stop = threading.Event()

    def _new_key(self, old: str | None = None) -> str:
        import random

        rng = random.SystemRandom()
        while True:
            k = f"{self.key}:{rng.random()}"
            if k != old:
                return k

    # ------------------------------------------------------------ one connection
    def _handshake(self, conn, addr) -> None:
        try:
            deadline = time.monotonic() + self.handshake_timeout
            magic = struct.unpack("<i", _recv_exact(conn, 4, deadline))[0]
            if magic != RPC_MAGIC:
                raise ProtocolError(f"bad magic {magic:#x}")
            keylen = struct.unpack("<i", _recv_exact(conn, 4, deadline))[0]
            if not 0 < keylen <= MAX_KEY_BYTES:
                raise ProtocolError(f"key length {keylen} out of range")
            try:
                words = _recv_exact(conn, keylen, deadline).decode("utf-8").split()
            except UnicodeDecodeError:
                raise ProtocolError("key is not UTF-8") from None
            if not words:
                raise ProtocolError("empty key")
            opts = {}
            for w in words[1:]:
                if w.startswith("-timeout="):
                    t = float(w[len("-timeout="):])
                    if math.isfinite(t) and t > 0:
                        opts["timeout"] = t
            with self.lock:
                ok = (words[0] == "client:" + self.matchkey and not self.claimed
                      and self.session is None)
                if ok:
                    self.claimed = True
            if not ok:
                conn.sendall(struct.pack("<i", RPC_CODE_MISMATCH))
                self.stats["mismatch"] += 1
                logger.info("mismatched key from %s", addr)
                conn.close()
                return
            server_key = ("server:" + self.key).encode("utf-8")
            conn.sendall(struct.pack("<ii", RPC_CODE_SUCCESS, len(server_key)) + server_key)
            self.matched.put((conn, addr, opts))
        except Exception as exc:  # noqa: BLE001 - any bad byte stream closes this connection only
            self.stats["bad"] += 1
            logger.info("connection from %s closed: %s", addr,
                        " ".join(f"{type(exc).__name__}: {exc}".split())[:200])
            try:
                conn.close()
            except OSError:
                pass
        finally:
            self.slots.release()

    def _accept(self) -> None:
        """Accept one connection into a free slot (the caller holds the slot)."""
        try:
            conn, addr = self.sock.accept()
        except OSError:
            self.slots.release()
            return
        try:
            threading.Thread(target=self._handshake, args=(conn, addr), daemon=True).start()
        except RuntimeError:  # cannot start a thread: drop the connection, keep serving
            self.slots.release()
            conn.close()

    # ------------------------------------------------------------ sessions
    def _start_session(self, conn, addr, opts, tracker) -> None:
        import multiprocessing

        close = [self.sock] + ([tracker.sock] if tracker is not None else [])
        proc = multiprocessing.get_context("fork").Process(
            target=_session_main, args=(conn, close, self.time_limit), daemon=True)
        proc.start()
        conn.close()  # the session process has its own copy
        deadline = time.monotonic() + opts["timeout"] if "timeout" in opts else None
        with self.lock:
            self.session = (proc, deadline)
        self.stats["sessions"] += 1
        logger.info("session for %s started (pid %d)", addr, proc.pid)

    def _check_session(self) -> bool:
        """True when a session just ended (a new match key is then needed)."""
        with self.lock:
            cur = self.session
        if cur is None:
            return False
        proc, deadline = cur
        if proc.is_alive() and (deadline is None or time.monotonic() < deadline):
            return False
        if proc.is_alive():
            logger.info("session timeout: ending pid %d", proc.pid)
            proc.kill()
        proc.join(5.0)
        with self.lock:
            self.session = None
            self.claimed = False
            self.matchkey = self._new_key(self.matchkey)
        return True

    # ------------------------------------------------------------ main loop
    def _connect_tracker(self):
        tracker = TrackerConnection(self.tracker_addr, self.tracker_timeout)
        try:
            tracker.call_ok([_TRACKER_UPDATE_INFO, {"key": "server:" + self.key,
                                                    "addr": [self.custom_addr, self.port]}])
        except BaseException:
            tracker.close()
            raise
        return tracker

    def stop(self) -> None:
        self._stop.set()

    def serve_forever(self) -> None:
        import select

        tracker = None
        registered = False
        next_ping = 0.0
        unmatched = 0
        retry_at = 0.0
        warned = False
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                if tracker is None and now >= retry_at:
                    try:
                        tracker = self._connect_tracker()
                        registered = False
                        if warned:
                            logger.warning("RPC tracker %s:%d reachable again", *self.tracker_addr)
                        warned = False
                    except OSError as exc:
                        if not warned:
                            logger.warning("RPC tracker %s:%d lost (%s); retrying",
                                           *self.tracker_addr, exc)
                        warned = True
                        retry_at = now + 2.0
                # a new connection only into a free slot: while every slot is busy with a
                # handshake (at most handshake_timeout seconds each), the kernel queues it
                if self.slots.acquire(blocking=False):
                    try:
                        ready, _, _ = select.select([self.sock], [], [], 0.2)
                    except (OSError, ValueError):
                        self.slots.release()
                        return  # the listening socket was closed: stop serving
                    if ready:
                        self._accept()
                    else:
                        self.slots.release()
                else:
                    self.stats["full"] += 1
                    time.sleep(0.05)
                while True:  # a matched client: serve it
                    try:
                        conn, addr, opts = self.matched.get_nowait()
                    except Exception:  # noqa: BLE001 - queue.Empty
                        break
                    registered = False  # its key is used up
                    try:
                        self._start_session(conn, addr, opts, tracker)
                    except Exception as exc:  # noqa: BLE001
                        logger.warning("cannot start a session: %s", exc)
                        conn.close()
                        with self.lock:
                            self.claimed = False
                            self.matchkey = self._new_key(self.matchkey)
                if self._check_session():
                    registered = False
                if tracker is None:
                    continue
                try:
                    with self.lock:
                        idle = self.session is None and not self.claimed
                        key = self.matchkey
                    if idle and not registered:
                        tracker.call_ok([_TRACKER_PUT, self.key, [self.port, key], self.custom_addr])
                        registered, unmatched = True, 0
                        next_ping = time.monotonic() + self.ping_period
                        self.stats["registrations"] += 1
                    elif idle and time.monotonic() >= next_ping:
                        next_ping = time.monotonic() + self.ping_period
                        pending = tracker.call([_TRACKER_GET_PENDING])
                        if not isinstance(pending, list):
                            raise ProtocolError("bad pending-keys reply")
                        unmatched = 0 if key in pending else unmatched + 1
                        # the tracker gave our key to a client that never came: a new key
                        if unmatched * self.ping_period > 4 + self.ping_period:
                            with self.lock:
                                if self.claimed or self.session is not None:
                                    continue
                                self.matchkey = self._new_key(self.matchkey)
                            registered = False
                except OSError as exc:  # the tracker went away: reconnect, register again
                    logger.warning("RPC tracker %s:%d lost (%s); reconnecting",
                                   *self.tracker_addr, exc)
                    tracker.close()
                    tracker, registered, retry_at = None, False, time.monotonic() + 0.5
        finally:
            if tracker is not None:
                tracker.close()
            with self.lock:
                cur = self.session
            if cur is not None and cur[0].is_alive():
                cur[0].kill()


def parse_addr(addr, default_port: int = 9190) -> tuple[str, int]:
    if isinstance(addr, (tuple, list)):
        return str(addr[0]), int(addr[1])
    host, _, port = str(addr).rpartition(":")
    if not host:
        return str(addr), default_port
    return host.strip("[]"), int(port)


def serve(tracker: str | tuple, key: str = DEFAULT_KEY, host: str = "127.0.0.1",
          port: int = 9090, port_end: int | None = None, custom_addr: str | None = None,
          silent: bool = True, time_limit: float = DEFAULT_TIME_LIMIT,
          ready=None) -> None:
    """Run a simulator RPC server registered with ``tracker`` under ``key`` (blocks).

    :class:`SimServer` accepts connections in this process and forks one child per
    client session, which inherits the registered simulator function and nothing else
    (see *Security* in the module docstring).  ``host``: the address to listen on
    (default loopback only).  ``ready``: called with the :class:`SimServer` once it
    listens (tests use it to stop the server).
    """
    import socket

    from dcoc.errors import DcocError

    register(time_limit)
    if silent:
        logger.setLevel(logging.ERROR)
    tracker_addr = parse_addr(tracker)
    port_end = min(max(int(port_end or 0), port + 100), 65536)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    bound = None
    for p in range(port, port_end):
        try:
            sock.bind((host, p))
            bound = p
            break
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                continue
            sock.close()
            raise DcocError(f"--host {host}: cannot listen there ({exc.strerror or exc})") from None
    if bound is None:
        sock.close()
        raise DcocError(f"cannot bind to any port in [{port}, {port_end}): all in use")
    sock.listen(64)
    print(f"dcoc rpc: simulator server on {host}:{bound}, key '{key}', tracker "
          f"{tracker_addr[0]}:{tracker_addr[1]}", flush=True)
    server = SimServer(sock, bound, key, tracker_addr, custom_addr, time_limit=time_limit)
    if ready is not None:
        ready(server)
    try:
        server.serve_forever()
    finally:
        sock.close()


# ============================================================================ client
def tracker_servers(tracker, key: str, timeout: float = 5.0) -> dict:
    """``{"free": n, "pending": n}`` for ``key`` on the tracker (zeros if unknown).

    A tracker that cannot be reached, or does not answer, within ``timeout`` seconds is a
    one-line :class:`dcoc.errors.DcocError` (TVM's own client would retry for a minute,
    then wait for the answer forever)."""
    from dcoc.errors import DcocError

    host, port = parse_addr(tracker)
    try:
        conn = TrackerConnection((host, port), timeout)
    except ProtocolError as exc:
        raise DcocError(f"RPC tracker {host}:{port} did not answer: {exc}") from None
    except OSError as exc:
        why = "no answer within the timeout" if isinstance(exc, TimeoutError) else (exc.strerror or exc)
        raise DcocError(f"RPC tracker {host}:{port} is not reachable: {why}") from None
    try:
        reply = conn.call([_TRACKER_SUMMARY])
        if not (isinstance(reply, list) and len(reply) == 2 and reply[0] == _TRACKER_SUCCESS
                and isinstance(reply[1], dict)):
            raise ProtocolError(f"unexpected reply {str(reply)[:100]}")
        summary = reply[1]
    except OSError as exc:
        why = (f"no answer within {timeout:g} s" if isinstance(exc, TimeoutError)
               else " ".join(str(exc).split())[:200])
        raise DcocError(f"RPC tracker {host}:{port} did not answer: {why}") from None
    finally:
        conn.close()
    info = (summary.get("queue_info") or {}).get(key) or {}
    try:
        return {"free": int(info.get("free", 0)), "pending": int(info.get("pending", 0))}
    except (TypeError, ValueError, AttributeError):
        raise DcocError(f"RPC tracker {host}:{port} sent a malformed summary") from None


class _Session:
    __slots__ = ("sess", "func", "name", "alive", "busy_since", "item", "thread")

    def __init__(self, sess, func, name):
        self.sess, self.func, self.name = sess, func, name
        self.alive = True
        self.busy_since = None
        self.item = None
        self.thread = None


class RPCSimMeasurer(Measurer):
    """The VTA timing simulator on the RPC servers of a tracker.

    Parameters
    ----------
    tracker: ``"HOST:PORT"`` or ``(host, port)`` of the RPC tracker.
    key: the servers' key (``python -m tvm_plugin.rpc serve --key KEY``).
    timeout: seconds allowed per measurement; a timed-out measurement is a
        ``RUN_TIMEOUT`` error and its server leaves the pool.
    max_sessions: sessions to hold at most (default: every free server).
    connect_timeout: seconds to wait for at least one server.
    """

    def __init__(self, tracker, key: str = DEFAULT_KEY, timeout: float = 60.0,
                 max_sessions: int | None = None, connect_timeout: float = 30.0):
        from dcoc.errors import DcocError

        try:
            self.tracker = parse_addr(tracker)
        except (ValueError, TypeError, IndexError):
            raise DcocError(f"tracker {tracker!r}: expected 'HOST:PORT' or (host, port)") from None
        if not 1 <= self.tracker[1] <= 65535:
            raise DcocError(f"tracker port {self.tracker[1]} is out of range (1-65535)")
        for name, v in (("timeout", timeout), ("connect_timeout", connect_timeout)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                    or v <= 0:
                raise DcocError(f"RPCSimMeasurer {name} must be a finite number of seconds > 0, "
                                f"got {v!r}")
        if max_sessions is not None and (isinstance(max_sessions, bool)
                                         or not isinstance(max_sessions, int) or max_sessions < 1):
            raise DcocError(f"RPCSimMeasurer max_sessions must be None or an integer >= 1, got "
                            f"{max_sessions!r}")
        self.key = key
        self.timeout = float(timeout)
        self.max_sessions = max_sessions
        self.connect_timeout = float(connect_timeout)
        self.sessions: list[_Session] = []
        self.lost: list[str] = []  # names of servers that failed
        self._lock = threading.Lock()
        self._counter = 0
        self.n_parallel = 1

    # ----------------------------------------------------------- sessions
    def _request_one(self) -> _Session | None:
        """One session from the tracker, or None if none came within a few seconds."""
        from tvm import rpc

        box: dict = {}
        done = threading.Event()

        def req():
            try:
                tr = rpc.connect_tracker(*self.tracker)
                s = tr.request(self.key, priority=1, session_timeout=0, max_retry=1)
                f = s.get_function(SIM_FUNC)
                with self._lock:
                    if box.get("abandoned"):
                        del s  # arrived too late: release the server again
                        return
                    box["s"] = (s, f)
            except Exception as exc:  # noqa: BLE001
                box["err"] = exc
            finally:
                done.set()

        threading.Thread(target=req, daemon=True).start()
        done.wait(10.0)
        with self._lock:
            if "s" not in box:
                box["abandoned"] = True
                return None
        self._counter += 1
        s, f = box["s"]
        return _Session(s, f, f"{self.key}#{self._counter}")

    def _top_up(self) -> None:
        self.sessions = [s for s in self.sessions if s.alive]
        want = self.max_sessions if self.max_sessions else 1 << 30
        deadline = time.monotonic() + (self.connect_timeout if not self.sessions else 0.0)
        while True:
            try:
                free = tracker_servers(self.tracker, self.key)["free"]
            except Exception as exc:  # noqa: BLE001 - tracker unreachable
                logger.warning("RPC tracker %s:%d unreachable: %s", *self.tracker, exc)
                free = 0
            while free > 0 and len(self.sessions) < want:
                s = self._request_one()
                if s is None:
                    break
                self.sessions.append(s)
                free -= 1
            if self.sessions or time.monotonic() >= deadline:
                break
            time.sleep(0.5)
        self.n_parallel = max(1, len(self.sessions))

    # ----------------------------------------------------------- measuring
    def _request_text(self, task: TuningTask, config: dict):
        from dcoc.vta.spaces import make_hw

        p = task.payload
        if task.hw_knobs:
            hw = make_hw(config, p["board"])
            knobs = {k: v for k, v in config.items() if k not in task.hw_knobs}
        else:
            hw, knobs = p["hw"], config
        return encode_request(p["workload"], hw, knobs, p.get("epilogue", "default"))

    def measure(self, task: TuningTask, configs: Sequence[dict]) -> list[MeasureResult]:
        configs = list(configs)
        results: list = [None] * len(configs)
        queue = collections.deque()
        for i, cfg in enumerate(configs):
            try:
                queue.append((i, self._request_text(task, cfg)))
            except Exception as exc:  # noqa: BLE001 - e.g. an invalid hardware config
                results[i] = MeasureResult.error(MeasureErrorNo.INSTANTIATION_ERROR,
                                                 f"{type(exc).__name__}: {exc}")
        if not queue:
            return results
        self._top_up()
        cond = threading.Condition()

        def worker(s: _Session):
            while True:
                with cond:
                    if not s.alive or not queue:
                        cond.notify_all()
                        return
                    i, text = queue.popleft()
                    s.item, s.busy_since = i, time.monotonic()
                t0 = time.perf_counter()
                try:
                    out = json.loads(str(s.func(text)))
                    err = None
                except Exception as exc:  # noqa: BLE001 - server died / connection lost
                    out, err = None, f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
                wall = time.perf_counter() - t0
                with cond:
                    if s.item != i:  # timed out meanwhile: the result was already given
                        return
                    s.item, s.busy_since = None, None
                    if err is not None:
                        s.alive = False
                        self.lost.append(s.name)
                        results[i] = MeasureResult.error(
                            MeasureErrorNo.RUNTIME_DEVICE,
                            f"RPC server {s.name} failed during the measurement: {err}", wall,
                            {"server": s.name})
                        cond.notify_all()
                        return
                    results[i] = _result_of(out, wall, s.name)
                    cond.notify_all()

        live = [s for s in self.sessions if s.alive]
        for s in live:
            s.thread = threading.Thread(target=worker, args=(s,), daemon=True)
            s.thread.start()
        with cond:
            while True:
                busy = [s for s in self.sessions if s.alive and s.item is not None]
                if not queue and not busy:
                    break
                if not any(s.alive for s in self.sessions):
                    break
                now = time.monotonic()
                for s in busy:
                    if now - s.busy_since > self.timeout:
                        i = s.item
                        s.item, s.alive = None, False
                        self.lost.append(s.name)
                        results[i] = MeasureResult.error(
                            MeasureErrorNo.RUN_TIMEOUT,
                            f"measurement timed out after {self.timeout:g} s on {s.name}",
                            self.timeout, {"server": s.name})
                cond.wait(0.2)
            left = list(queue)
            queue.clear()
        for i, _ in left:
            results[i] = MeasureResult.error(MeasureErrorNo.RUNTIME_DEVICE,
                                             f"no live RPC server for key '{self.key}'")
        for s in self.sessions:  # finished workers only; hung ones stay abandoned
            if s.thread is not None and s.alive:
                s.thread.join(1.0)
        self.sessions = [s for s in self.sessions if s.alive]
        self.n_parallel = max(1, len(self.sessions))
        return results

    def close(self) -> None:
        """Release every session (the servers return to the tracker's pool)."""
        self.sessions = []


def _result_of(out: dict, wall: float, server: str) -> MeasureResult:
    if out.get("valid"):
        secs = float(out["seconds"])
        if math.isfinite(secs):
            info = {k: out[k] for k in ("cycles", "gops", "utilization") if k in out}
            info["server"] = server
            return MeasureResult((secs,), MeasureErrorNo.NO_ERROR, wall, None, None, info)
    return MeasureResult.error(MeasureErrorNo.INSTANTIATION_ERROR,
                               out.get("reason") or "invalid config", wall, {"server": server})


# ============================================================================ CLI
def check_tracker(addr: str, timeout: float = 5.0, wait: float = 0.0) -> tuple[str, int]:
    """(host, port) of ``HOST:PORT`` once a TCP connection to it succeeds within
    ``timeout`` seconds (retrying for ``wait`` seconds: a server may start before its
    tracker); a one-line DcocError otherwise (checked before TVM is imported)."""
    import socket
    import time

    from dcoc.errors import DcocError

    host, _, port = str(addr).rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise DcocError(f"--tracker '{addr}': expected HOST:PORT with a port in 1-65535, "
                        "e.g. 127.0.0.1:9190")
    deadline = time.monotonic() + wait
    while True:
        try:
            socket.create_connection((host, int(port)), timeout=timeout).close()
            return host, int(port)
        except OSError as exc:
            if time.monotonic() >= deadline:
                raise DcocError(f"RPC tracker {host}:{port} is not reachable: "
                                f"{exc.strerror or exc}") from None
            time.sleep(0.5)


def run_serve(args) -> int:
    """``dcoc rpc serve``: serve until interrupted."""
    try:
        serve(args.tracker, args.key, args.host, args.port, args.port_end, args.custom_addr,
              silent=not getattr(args, "verbose", False), time_limit=args.time_limit)
    except KeyboardInterrupt:
        return 0
    return 0
