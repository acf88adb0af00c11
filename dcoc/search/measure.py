"""Measurers: a batch of configs in, one result per config out.

Every measurement counts as one trial.  A measurer never raises for a bad config: an
invalid schedule, a crash of the worker or a timeout becomes an error result
(``error_no != 0``, ``cost == inf``) and tuning goes on.

* :class:`Measurer` -- the interface (``measure(task, configs) -> list[MeasureResult]``).
* :class:`FunctionMeasurer` -- measures with a plain Python function ``f(task, config) ->
  (cost_seconds, info)``; in-process (``n_workers=0``) or in a process pool.
* :class:`VTASimMeasurer` -- the VTA timing simulator in a pool of worker processes.
* :class:`ReplayMeasurer` -- wraps another measurer and answers configs already in a
  records database from the records (resume without re-measuring).

Process pools are `pebble <https://pebble.readthedocs.io>`_ pools: each measurement has
its own timeout, and a worker that crashes or hangs is replaced without ending the run.
"""
from __future__ import annotations

import enum
import math
import multiprocessing as mp
import os
import time
import traceback
from collections import namedtuple
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Callable, Sequence

from dcoc.search.tuning_task import TuningTask


class MeasureErrorNo(enum.IntEnum):
    """AutoTVM's error codes (``autotvm/measure/measure.py``)."""

    NO_ERROR = 0
    INSTANTIATION_ERROR = 1  # invalid config (the schedule cannot be built)
    COMPILE_HOST = 2
    COMPILE_DEVICE = 3
    RUNTIME_DEVICE = 4  # the measurement itself failed (worker crashed, RPC lost)
    WRONG_ANSWER = 5
    BUILD_TIMEOUT = 6
    RUN_TIMEOUT = 7
    UNKNOWN_ERROR = 8


MeasureInput = namedtuple("MeasureInput", ["target", "task", "config"])


class MeasureResult(
    namedtuple("MeasureResult", ["costs", "error_no", "all_cost", "timestamp", "error_msg", "info"])
):
    """Result of one measurement (AutoTVM's fields plus ``error_msg`` and ``info``).

    costs: tuple of measured seconds (empty when the measurement failed).
    error_no: a :class:`MeasureErrorNo`.
    all_cost: wall seconds the measurement took (building + running / simulating).
    timestamp: time.time() when it finished.
    error_msg: one line, or None.
    info: extra numbers (e.g. ``cycles``) as a dict.
    """

    __slots__ = ()

    def __new__(cls, costs, error_no=0, all_cost=0.0, timestamp=None, error_msg=None, info=None):
        return super().__new__(
            cls, tuple(costs), int(error_no), float(all_cost),
            time.time() if timestamp is None else timestamp, error_msg, info or {},
        )

    @property
    def valid(self) -> bool:
        return self.error_no == MeasureErrorNo.NO_ERROR and bool(self.costs)

    @property
    def cost(self) -> float:
        """Mean measured seconds; ``inf`` for failed measurements."""
        return sum(self.costs) / len(self.costs) if self.valid else math.inf

    @classmethod
    def error(cls, error_no, msg, all_cost=0.0, info=None) -> "MeasureResult":
        return cls((), error_no, all_cost, None, " ".join(str(msg).split())[:500], info)


class Measurer:
    """Interface: measure a batch of configs of one task.

    Subclasses implement :meth:`measure`; ``n_parallel`` tells tuners how many configs a
    batch should hold to keep the measurer busy (AutoTVM's ``measure_batch.n_parallel``).
    """

    n_parallel: int = 1

    def measure(self, task: TuningTask, configs: Sequence[dict]) -> list[MeasureResult]:
        raise NotImplementedError

    def measure_jobs(self, jobs: Sequence[tuple]) -> list[MeasureResult]:
        """Measure ``[(task, config), ...]`` spanning several tasks (results in order)."""
        out: list = [None] * len(jobs)
        groups: dict = {}
        for i, (task, cfg) in enumerate(jobs):
            groups.setdefault(id(task), (task, []))[1].append(i)
        for task, idx in groups.values():
            for i, r in zip(idx, self.measure(task, [jobs[i][1] for i in idx])):
                out[i] = r
        return out

    def close(self) -> None:
        """Release workers (pools, RPC sessions)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_BLOB_CACHE: dict = {}


def _call_blob(blob: bytes, config):
    """Worker side of a pool measurement: unpickle (fn, task) once per batch, then measure."""
    import cloudpickle

    key = hash(blob)
    if key not in _BLOB_CACHE:
        if len(_BLOB_CACHE) > 8:
            _BLOB_CACHE.clear()
        _BLOB_CACHE[key] = cloudpickle.loads(blob)
    fn, task = _BLOB_CACHE[key]
    return _call_measure(fn, task, config)


def _call_measure(fn, task, config):
    """Worker-side wrapper: run ``fn`` and convert exceptions to an error result."""
    t0 = time.perf_counter()
    try:
        out = fn(task, config)
    except Exception as exc:  # noqa: BLE001 - a bad config must not end the run
        tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return MeasureResult.error(MeasureErrorNo.RUNTIME_DEVICE, tb, time.perf_counter() - t0)
    if isinstance(out, MeasureResult):
        return out
    cost, info = out if isinstance(out, tuple) else (out, {})
    wall = time.perf_counter() - t0
    if cost is None or not math.isfinite(cost):
        reason = (info or {}).get("reason", "invalid config")
        return MeasureResult.error(MeasureErrorNo.INSTANTIATION_ERROR, reason, wall, info)
    return MeasureResult((float(cost),), MeasureErrorNo.NO_ERROR, wall, None, None, info)


class FunctionMeasurer(Measurer):
    """Measure with ``fn(task, config) -> cost_seconds | (cost_seconds, info) | MeasureResult``.

    ``cost`` of None/inf means the config is invalid (``info["reason"]`` says why).

    Parameters
    ----------
    fn: the measuring function (shipped to workers with cloudpickle for ``n_workers > 0``).
    n_workers: worker processes; 0 measures in this process (no timeout enforcement);
        None means one per CPU core.
    timeout: seconds allowed per measurement (pool mode); a timeout is an error result.
    """

    def __init__(self, fn: Callable, n_workers: int | None = 0, timeout: float = 60.0):
        self.fn = fn
        cap = 4 * (os.cpu_count() or 1)
        if n_workers is not None and (isinstance(n_workers, bool) or not isinstance(n_workers, int)
                                      or not 0 <= n_workers <= cap):
            from dcoc.errors import DcocError

            raise DcocError(f"n_workers must be an integer in 0..{cap} (0 = in-process, at most "
                            f"4 x the CPU cores), got {n_workers!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) \
                or not math.isfinite(timeout) or timeout <= 0:
            from dcoc.errors import DcocError

            raise DcocError(f"timeout must be a finite number of seconds > 0, got {timeout!r}")
        self.n_workers = (os.cpu_count() or 1) if n_workers is None else int(n_workers)
        self.timeout = float(timeout)
        self.n_parallel = max(1, self.n_workers)
        self._pool = None

    def _get_pool(self):
        if self._pool is None:
            from pebble import ProcessPool

            self._pool = ProcessPool(
                max_workers=self.n_workers, context=mp.get_context("fork")
            )
        return self._pool

    def measure(self, task, configs):
        return self.measure_jobs([(task, c) for c in configs])

    def measure_jobs(self, jobs):
        jobs = list(jobs)
        if self.n_workers == 0:
            return [_call_measure(self.fn, task, c) for task, c in jobs]
        import cloudpickle

        pool = self._get_pool()
        # tasks may hold closures (constraints): ship (fn, task) with cloudpickle, once per task
        blobs: dict = {}
        futures = []
        for task, c in jobs:
            if id(task) not in blobs:
                blobs[id(task)] = cloudpickle.dumps((self.fn, task))
            futures.append(pool.schedule(_call_blob, args=(blobs[id(task)], c), timeout=self.timeout))
        results = []
        for fut in futures:
            try:
                results.append(fut.result())
            except FutureTimeout:
                results.append(MeasureResult.error(
                    MeasureErrorNo.RUN_TIMEOUT, f"measurement timed out after {self.timeout:g} s",
                    self.timeout))
            except Exception as exc:  # noqa: BLE001 - worker died (ProcessExpired) etc.
                results.append(MeasureResult.error(
                    MeasureErrorNo.RUNTIME_DEVICE, f"measurement worker failed: {exc}"))
        return results

    def close(self):
        if self._pool is not None:
            self._pool.stop()
            self._pool.join()
            self._pool = None

    def __del__(self):  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass


class ReplayMeasurer(Measurer):
    """Answer from records where possible, measure the rest with ``inner``: THE resume
    mechanism (used by :meth:`dcoc.tuners.Tuner.tune` and :class:`dcoc.codesign.Session`).

    A tuner or driver re-run with the same seed proposes the same configs, and those
    already recorded (same task, target, hardware, tuner and seed; see
    :func:`recorded_results`) are answered from the file instead of being measured
    again.  ``replayed`` counts them.
    """

    def __init__(self, inner: Measurer, known: dict):
        self.inner = inner
        self.known = known  # (workload key, hw_name, config key) -> MeasureResult
        self.n_parallel = inner.n_parallel
        self.replayed = 0

    def _hit(self, task, config):
        from dcoc.search.space import Space

        if not self.known:
            return None
        hw, sw = task.split(config)
        return self.known.get((task.workload_key, hw, Space.key(sw)))

    def measure_flagged(self, jobs) -> tuple[list[MeasureResult], list[bool]]:
        """Measure ``[(task, config)]``: (results, whether each was replayed from the records)."""
        jobs = list(jobs)
        out: list = [None] * len(jobs)
        flags = [False] * len(jobs)
        todo = []
        for i, (task, c) in enumerate(jobs):
            hit = self._hit(task, c)
            if hit is not None:
                out[i], flags[i] = hit, True
                self.replayed += 1
            else:
                todo.append(i)
        if todo:
            for i, r in zip(todo, self.inner.measure_jobs([jobs[i] for i in todo])):
                out[i] = r
        return out, flags

    def measure_jobs(self, jobs):
        return self.measure_flagged(jobs)[0]

    def measure(self, task, configs):
        return self.measure_jobs([(task, c) for c in configs])

    def close(self):
        self.inner.close()


def recorded_results(records, target: str, tuner: str, seed, tasks=None, hw=None) -> dict:
    """``{(workload key, hw name, config key): MeasureResult}`` of the recorded trials of one
    (target, tuner, seed), for :class:`ReplayMeasurer`; ``tasks``/``hw`` narrow it down."""
    from dcoc.search.space import Space

    known = {}
    for r in records.filter(target=target, tuner=tuner, seed=seed):
        if tasks is not None and r["task"] not in tasks:
            continue
        if hw is not None and r["hw"] != hw:
            continue
        res = (MeasureResult((r["cost"],), 0, r.get("wall", 0.0), r.get("ts"), None, r.get("info"))
               if r.get("valid") else
               MeasureResult((), r.get("error_no", 8) or 8, r.get("wall", 0.0), r.get("ts"),
                             r.get("error"), r.get("info")))
        known[(r["task"], r["hw"], Space.key(r["knobs"]))] = res
    return known


class TableMeasurer(Measurer):
    """Answer from a precomputed table ``{config key: seconds or None}``.

    For benchmarking tuners on a deterministic measurer (the VTA simulator): simulate a
    layer's whole space once (e.g. :func:`dcoc.targets.vta.catalogue.exhaustive`), then every tuner and
    seed looks results up instead of re-simulating -- the same numbers, measured once.
    ``wall`` of each result is the time the original measurement took (``0`` if unknown).
    """

    def __init__(self, table: dict, n_parallel: int = 1):
        self.table = table
        self.n_parallel = n_parallel
        self.calls = 0

    def measure(self, task, configs):
        from dcoc.search.space import Space

        out = []
        for c in configs:
            self.calls += 1
            v = self.table.get(Space.key(task.split(c)[1]))
            if v is None:
                out.append(MeasureResult.error(MeasureErrorNo.INSTANTIATION_ERROR, "invalid config"))
            else:
                out.append(MeasureResult((v,), MeasureErrorNo.NO_ERROR, 0.0))
        return out


class MemoMeasurer(Measurer):
    """Memoize a deterministic measurer (the simulator) by (workload, hardware, knobs).

    For benchmarks that run many tuners and seeds over the same spaces in one process:
    a repeated config costs a lookup instead of a simulation, and still counts as a
    trial of whoever asked.  Not for real hardware (its timings vary).
    """

    def __init__(self, inner: Measurer):
        self.inner = inner
        self.n_parallel = inner.n_parallel
        self.memo: dict = {}
        self.hits = 0

    def measure_jobs(self, jobs):
        from dcoc.search.space import Space

        jobs = list(jobs)
        keys = []
        for task, c in jobs:
            hw, sw = task.split(c)
            keys.append((task.workload_key, hw, Space.key(sw)))
        todo = [i for i, k in enumerate(keys) if k not in self.memo]
        self.hits += len(jobs) - len(todo)
        if todo:
            for i, r in zip(todo, self.inner.measure_jobs([jobs[i] for i in todo])):
                self.memo[keys[i]] = r
        return [self.memo[k] for k in keys]

    def measure(self, task, configs):
        return self.measure_jobs([(task, c) for c in configs])

    def close(self):
        self.inner.close()


def measure_option(measurer: Measurer | None = None, **kwargs) -> dict:
    """AutoTVM-style measure option: ``{"measurer": measurer}`` (default: the default
    target's own measurer, built with ``kwargs``)."""
    return {"measurer": measurer if measurer is not None else create_measurer("simulator", **kwargs)}


# ------------------------------------------------------------------------ registry
#: measurer name -> "module:factory" (imported lazily; tvm loads only for "rpc")
REGISTRY = {
    "simulator": "dcoc.targets.hooks:target_measurer",   # the target's own measurer
    "table": "dcoc.search.measure:TableMeasurer",
    "function": "dcoc.search.measure:FunctionMeasurer",
    "memo": "dcoc.search.measure:MemoMeasurer",
    "rpc": "tvm_plugin.rpc:RPCSimMeasurer",
}


def measurer_names() -> list[str]:
    return list(REGISTRY)


def create_measurer(name: str, **kwargs) -> Measurer:
    """A measurer by registry name, e.g. ``create_measurer("simulator", target="vta", n_workers=2)``,
    ``create_measurer("rpc", tracker="127.0.0.1:9190")``, ``create_measurer("table", table=...)``."""
    from dcoc.registry import load, lookup

    return load(lookup(REGISTRY, name, "measurer"))(**kwargs)
