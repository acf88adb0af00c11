"""The client side: :class:`RPCSimMeasurer` fans measurements out over a tracker's
simulator servers; tracker queries."""
from __future__ import annotations

import collections
import json
import math
import threading
import time
from typing import Sequence

from dcoc.search.measure import MeasureErrorNo, Measurer, MeasureResult
from dcoc.search.tuning_task import TuningTask
from tvm_plugin.rpc.protocol import (
    _TRACKER_SUCCESS,
    _TRACKER_SUMMARY,
    DEFAULT_KEY,
    SIM_FUNC,
    ProtocolError,
    TrackerConnection,
    encode_request,
    logger,
    parse_addr,
)


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
    __slots__ = ("sess", "func", "name", "alive", "busy_since", "item", "thread", "fresh")

    def __init__(self, sess, func, name):
        self.sess, self.func, self.name = sess, func, name
        self.alive = True
        self.fresh = True  # no call of the current batch answered yet
        self.busy_since = None
        self.item = None
        self.thread = None


class RPCSimMeasurer(Measurer):
    """The VTA timing simulator on the RPC servers of a tracker.

    Parameters
    ----------
    tracker: ``"HOST:PORT"`` or ``(host, port)`` of the RPC tracker.
    key: the servers' key (``dcoc rpc serve --key KEY``).
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
        from dcoc.targets.vta.spaces import make_hw

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
        for attempt in range(2):
            if not queue:
                break
            self._top_up()
            # a session the server closed while idle (``dcoc rpc serve --idle-timeout``)
            # fails on its first call of a batch: its item goes back to the queue and the
            # batch runs once more on fresh sessions
            if not self._run_queue(queue, results, retry=attempt == 0):
                break
        for i, _ in queue:
            results[i] = MeasureResult.error(MeasureErrorNo.RUNTIME_DEVICE,
                                             f"no live RPC server for key '{self.key}'")
        return results

    def _run_queue(self, queue, results, retry: bool) -> int:
        """Measure ``queue``'s items on the live sessions (one thread each) into
        ``results``; returns how many items went back to ``queue`` because their session
        was closed before its first answer of this batch (``retry``), else 0."""
        cond = threading.Condition()
        expired = [0]

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
                    if err is not None and retry and s.fresh:  # closed while idle
                        s.alive = False
                        queue.appendleft((i, text))
                        expired[0] += 1
                        cond.notify_all()
                        return
                    if err is not None:
                        s.alive = False
                        self.lost.append(s.name)
                        results[i] = MeasureResult.error(
                            MeasureErrorNo.RUNTIME_DEVICE,
                            f"RPC server {s.name} failed during the measurement: {err}", wall,
                            {"server": s.name})
                        cond.notify_all()
                        return
                    s.fresh = False
                    results[i] = _result_of(out, wall, s.name)
                    cond.notify_all()

        live = [s for s in self.sessions if s.alive]
        for s in live:
            s.fresh = True
            s.thread = threading.Thread(target=worker, args=(s,), daemon=True)
            s.thread.start()
        with cond:
            while True:
                busy = [s for s in self.sessions if s.alive and s.item is not None]
                if not queue and not busy:
                    break
                if not any(s.alive for s in self.sessions):
                    break
                # a worker leaves when it finds the queue empty; an item put back after
                # that (its session closed while idle) has no worker left to take it: the
                # caller's next attempt measures it on fresh sessions
                if not busy and not any(s.alive and s.thread is not None and s.thread.is_alive()
                                        for s in self.sessions):
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
        for s in self.sessions:  # finished workers only; hung ones stay abandoned
            if s.thread is not None and s.alive:
                s.thread.join(1.0)
        self.sessions = [s for s in self.sessions if s.alive]
        self.n_parallel = max(1, len(self.sessions))
        return expired[0]

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
