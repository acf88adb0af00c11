"""`dcoc rpc serve`: the restricted simulator server (:class:`SimServer`) registered with a
TVM RPC tracker (see *Security* in the package docstring)."""
from __future__ import annotations

import collections
import errno
import json
import logging
import math
import struct
import threading
import time

from tvm_plugin.rpc.protocol import (
    _TRACKER_GET_PENDING,
    _TRACKER_PUT,
    _TRACKER_UPDATE_INFO,
    DEFAULT_KEY,
    DEFAULT_TIME_LIMIT,
    HANDSHAKE_TIMEOUT,
    IDLE_TIMEOUT,
    MAX_CONNECTIONS,
    MAX_KEY_BYTES,
    MAX_PACKET_BYTES,
    MAX_REQUEST_BYTES,
    PACKET_TIMEOUT,
    RPC_CODE_MISMATCH,
    RPC_CODE_SUCCESS,
    RPC_MAGIC,
    SIM_FUNC,
    ProtocolError,
    TrackerConnection,
    _recv_exact,
    check_key,
    logger,
    parse_addr,
    simulate_json,
)


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
                   packet_timeout: float = PACKET_TIMEOUT,
                   idle_timeout: float = IDLE_TIMEOUT) -> None:
    """Copy one session's bytes between the client (``conn``) and TVM's server loop
    (``inner``, one end of a socket pair).  Client packets (``uint64 length`` + body) are
    checked *before* their body is read: a length above ``packet_limit`` (or a body that
    does not arrive within ``packet_timeout`` seconds) closes the session.  A client that
    sends nothing for ``idle_timeout`` seconds while no request of it is being served
    (after the handshake, or between requests) is closed too: it cannot hold the server."""
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
        serving, last = False, time.monotonic()  # serving: a request is with the server
        while True:
            wait = None if serving or not idle_timeout else \
                max(0.0, last + idle_timeout - time.monotonic())
            ready, _, _ = select.select([conn, inner], [], [], wait)
            if not ready:
                logger.warning("session closed: the client sent nothing for %g s", idle_timeout)
                break
            if inner in ready:  # the server's answers: copied as they are
                data = inner.recv(1 << 16)
                if not data:
                    break
                conn.sendall(data)
                serving, last = False, time.monotonic()
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
                serving, last = True, time.monotonic()
    except (OSError, struct.error) as exc:
        logger.info("session closed: %s", exc)
    finally:
        shut()


def _session_main(conn, close_fds, time_limit: float, idle_timeout: float = IDLE_TIMEOUT) -> None:
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
    t = threading.Thread(target=_relay_session, daemon=True,
                         args=(conn, outer, MAX_PACKET_BYTES, PACKET_TIMEOUT, idle_timeout))
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
                 tracker_timeout: float = 10.0, idle_timeout: float = IDLE_TIMEOUT):
        import queue

        self.sock, self.port, self.key = sock, int(port), key
        self.tracker_addr = parse_addr(tracker_addr)
        self.custom_addr = custom_addr
        self.time_limit = time_limit
        self.idle_timeout = float(idle_timeout)
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
            target=_session_main, args=(conn, close, self.time_limit, self.idle_timeout),
            daemon=True)
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


def serve(tracker: str | tuple, key: str = DEFAULT_KEY, host: str = "127.0.0.1",
          port: int = 9090, port_end: int | None = None, custom_addr: str | None = None,
          silent: bool = True, time_limit: float = DEFAULT_TIME_LIMIT,
          ready=None, idle_timeout: float = IDLE_TIMEOUT) -> None:
    """Run a simulator RPC server registered with ``tracker`` under ``key`` (blocks).

    :class:`SimServer` accepts connections in this process and forks one child per
    client session, which inherits the registered simulator function and nothing else
    (see *Security* in the module docstring).  ``host``: the address to listen on
    (default loopback only).  ``ready``: called with the :class:`SimServer` once it
    listens (tests use it to stop the server).
    """
    import socket

    from dcoc.errors import DcocError

    key = check_key(key)
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
    server = SimServer(sock, bound, key, tracker_addr, custom_addr, time_limit=time_limit,
                       idle_timeout=idle_timeout)
    if ready is not None:
        ready(server)
    try:
        server.serve_forever()
    finally:
        sock.close()


def run_serve(args) -> int:
    """``dcoc rpc serve``: serve until interrupted."""
    try:
        serve(args.tracker, args.key, args.host, args.port, args.port_end, args.custom_addr,
              silent=not getattr(args, "verbose", False), time_limit=args.time_limit,
              idle_timeout=getattr(args, "idle_timeout", IDLE_TIMEOUT))
    except KeyboardInterrupt:
        return 0
    return 0
