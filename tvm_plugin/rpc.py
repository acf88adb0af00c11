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
:data:`DEFAULT_TIME_LIMIT`) before it is answered as invalid.  It listens on 127.0.0.1
unless ``--host`` says otherwise; binding it to another address lets every host that can
reach that address use this machine's CPU for simulations (and try to crash the
process), so do that only on a trusted network.  The tracker has no authentication
either.
"""
from __future__ import annotations

import collections
import dataclasses
import json
import logging
import math
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


def parse_addr(addr, default_port: int = 9190) -> tuple[str, int]:
    if isinstance(addr, (tuple, list)):
        return str(addr[0]), int(addr[1])
    host, _, port = str(addr).rpartition(":")
    if not host:
        return str(addr), default_port
    return host.strip("[]"), int(port)


def serve(tracker: str | tuple, key: str = DEFAULT_KEY, host: str = "127.0.0.1",
          port: int = 9090, port_end: int | None = None, custom_addr: str | None = None,
          silent: bool = True, time_limit: float = DEFAULT_TIME_LIMIT) -> None:
    """Run a simulator RPC server registered with ``tracker`` under ``key`` (blocks).

    The listening loop runs in this process (no extra pool process); TVM forks one child
    per client session, which inherits the registered simulator function and nothing
    else (see *Security* in the module docstring).  ``host``: the address to listen on
    (default loopback only).
    """
    import socket

    from tvm.rpc import server as rpc_server

    register(time_limit)
    rpc_server._serve_loop = _restricted_serve_loop  # noqa: SLF001 - sessions: simulator only
    if silent:
        logging.getLogger("RPCServer").setLevel(logging.ERROR)
    tracker_addr = parse_addr(tracker)
    port_end = max(int(port_end or 0), port + 100)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    bound = None
    for p in range(port, port_end):
        try:
            sock.bind((host, p))
            bound = p
            break
        except OSError:
            continue
    if bound is None:
        raise SystemExit(f"dcoc rpc: cannot bind to any port in [{port}, {port_end})")
    sock.listen(1)
    print(f"dcoc rpc: simulator server on {host}:{bound}, key '{key}', tracker "
          f"{tracker_addr[0]}:{tracker_addr[1]}", flush=True)
    rpc_server._listen_loop(sock, bound, key, tracker_addr, None, custom_addr)  # noqa: SLF001


# ============================================================================ client
def tracker_servers(tracker, key: str, timeout: float = 5.0) -> dict:
    """``{"free": n, "pending": n}`` for ``key`` on the tracker (zeros if unknown).

    A tracker that cannot be reached within ``timeout`` seconds is a one-line
    :class:`dcoc.errors.DcocError` (TVM's own client would retry for a minute)."""
    import socket

    from tvm import rpc

    from dcoc.errors import DcocError

    host, port = parse_addr(tracker)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise DcocError(f"RPC tracker {host}:{port} is not reachable: "
                        f"{exc.strerror or exc}") from None
    try:
        summary = rpc.connect_tracker(host, port).summary()
    except Exception as exc:  # noqa: BLE001 - not a tracker, or it went away
        raise DcocError(f"RPC tracker {host}:{port} did not answer: "
                        f"{' '.join(str(exc).split())[:200]}") from None
    info = summary.get("queue_info", {}).get(key, {})
    return {"free": int(info.get("free", 0)), "pending": int(info.get("pending", 0))}


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
        self.tracker = parse_addr(tracker)
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
def add_serve_arguments(s) -> None:
    """The ``dcoc rpc serve`` options (this module imports TVM only when serving)."""
    s.add_argument("--tracker", required=True, help="HOST:PORT of the RPC tracker")
    s.add_argument("--key", default=DEFAULT_KEY, help=f"server key (default {DEFAULT_KEY})")
    s.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only; another "
                        "address lets every host that reaches it run simulations here)")
    s.add_argument("--port", type=int, default=9090, help="first port to try")
    s.add_argument("--port-end", type=int, default=None, help="last port to try (default PORT+100)")
    s.add_argument("--custom-addr", default=None, help="address to report to the tracker")
    s.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT,
                   help=f"seconds one simulation may take (default {DEFAULT_TIME_LIMIT:g}); "
                        "longer ones are answered as invalid")


def check_tracker(addr: str, timeout: float = 5.0, wait: float = 0.0) -> tuple[str, int]:
    """(host, port) of ``HOST:PORT`` once a TCP connection to it succeeds within
    ``timeout`` seconds (retrying for ``wait`` seconds: a server may start before its
    tracker); a one-line DcocError otherwise (checked before TVM is imported)."""
    import socket
    import time

    from dcoc.errors import DcocError

    host, _, port = str(addr).rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit():
        raise DcocError(f"--tracker '{addr}': expected HOST:PORT, e.g. 127.0.0.1:9190")
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
