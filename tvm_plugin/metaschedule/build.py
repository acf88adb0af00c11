"""Builders, runners, compilation with a tuning database, and running compiled models.

* :func:`fast_build` / :class:`PersistentBuilder` / :func:`make_builder` -- MetaSchedule's
  default ``LocalBuilder`` costs ~15 s per batch (every batch starts a fresh process pool
  whose workers import ``tvm.s_tir.tensor_intrin``; notes section 5).  ``fast_build``
  skips that import (fine for fp32 schedules, which are never tensorized), and
  ``PersistentBuilder`` keeps one pool for the whole run (recycled every
  ``recycle_every`` batches against the pool workers' known memory leak, TVM #11096).
  A batch of 16 builds in ~2.5 s on 2 cores instead of ~17 s.
* :func:`evaluator_config` / :func:`make_runner` -- ``"local"`` (``LocalRunner``) or
  ``"rpc://HOST:PORT/KEY"`` (``RPCRunner`` through a tracker).  Default evaluator:
  ``number=3, repeat=1, min_repeat_ms=10`` (one warm-up + 3 timed runs, repeated until
  10 ms have passed): ~0.1 s per candidate instead of ~0.2 s with MetaSchedule's
  ``min_repeat_ms=100``; kernels under ~1 ms are averaged over at least 10 ms, so the
  ranking noise stays at a few percent (measured; see docs/metaschedule.md).
  ``flush_cache=True``: cold-cache timing -- ``number=1, repeat=10, min_repeat_ms=0`` with
  MetaSchedule's ``enable_cpu_cache_flush`` (every argument but the first flushed from the
  CPU caches before each repeat; AutoTVM's documented x86 setting).  The flush runs once
  per *repeat*, so with ``number > 1`` or ``min_repeat_ms > 0`` all runs after a repeat's
  first are warm and the flush changes nothing (measured): refused.
* :func:`compile_model` -- apply a database and compile the *unfused* module (the
  ``compile_relax`` pipeline, notes section 7), reporting how many fused PrimFuncs the
  database actually replaced (the fused-module pitfall makes this silently zero).
* :func:`measure_latency`, :func:`make_model_runner` -- time a compiled model
  (``time_evaluator``) and run it on numpy inputs; :func:`kernel_evaluator` times one
  kernel.
* threads: :func:`runtime_threads` (what the TVM runtime should run on),
  :func:`use_runtime_threads` (make it so), :func:`pool_threads` (what it runs on).
"""
from __future__ import annotations

import os
import shutil
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from dcoc.errors import DcocError, TargetError

#: default evaluator settings of a tuning measurement (see module docstring)
EVAL_NUMBER, EVAL_REPEAT, EVAL_MIN_REPEAT_MS = 3, 1, 10
#: cold-cache settings (``flush_cache=True``): one run per repeat, each after a flush
EVAL_COLD_NUMBER, EVAL_COLD_REPEAT, EVAL_COLD_MIN_REPEAT_MS = 1, 10, 0

#: MetaSchedule device-type names by target kind (``RunnerInput`` rejects "llvm")
_DEVICE_OF_KIND = {"llvm": "cpu", "c": "cpu", "cuda": "cuda", "rocm": "rocm",
                   "vulkan": "vulkan", "metal": "metal", "opencl": "opencl"}


def device_type(target) -> str:
    kind = target.kind.name if hasattr(target, "kind") else str(target)
    return _DEVICE_OF_KIND.get(kind, kind)


def device_of(target):
    import tvm

    return tvm.device(device_type(target), 0)


# ============================================================================ preload
_PRELOADED = False


def preload_tensor_intrin() -> None:
    """Import ``tvm.s_tir.tensor_intrin`` (every ``TuneContext`` does) in ~3 s instead of 15-35 s.

    The import parses 248 TVMScript PrimFuncs; each parse calls ``inspect.stack()``, whose
    ``getmodule`` scans all of ``sys.modules`` for every frame -- slow once torch/xgboost
    are loaded.  During this one import ``inspect.stack`` is replaced by an equivalent
    that reads only what TVMScript's parser uses (frames, file names, line numbers, the
    current source line).  The 124 registered tensor intrinsics are structurally
    identical to the ones of a plain import (checked).  Idempotent; falls back to the
    plain import if anything goes wrong.
    """
    global _PRELOADED
    import sys

    if _PRELOADED or "tvm.s_tir.tensor_intrin" in sys.modules:
        _PRELOADED = True
        return
    import inspect
    import linecache

    def fast_stack(context: int = 1):
        frame = sys._getframe(1)
        out = []
        while frame is not None:
            fn, ln = frame.f_code.co_filename, frame.f_lineno
            out.append(inspect.FrameInfo(frame, fn, ln, frame.f_code.co_name,
                                         [linecache.getline(fn, ln)] if context else None, 0))
            frame = frame.f_back
        return out

    orig = inspect.stack
    inspect.stack = fast_stack
    try:
        import tvm.s_tir.tensor_intrin  # noqa: F401
    except Exception:  # noqa: BLE001 - retry the ordinary way
        inspect.stack = orig
        for name in [m for m in sys.modules if m.startswith("tvm.s_tir.tensor_intrin")]:
            del sys.modules[name]
        import tvm.s_tir.tensor_intrin  # noqa: F401
    finally:
        inspect.stack = orig
    _PRELOADED = True


# ============================================================================ builder
def fast_build(mod, target, _params):
    """MetaSchedule build function without the ``tensor_intrin`` import (notes 5.1)."""
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    return tvm_build(RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod), target=target)


def _make_persistent_builder():
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.builder import BuilderResult, PyBuilder
    from tvm.s_tir.meta_schedule.builder.local_builder import _serialize_params, _worker_func
    from tvm.support.popen_pool import PopenPoolExecutor, StatusKind

    @derived_object
    class PersistentBuilder(PyBuilder):
        """A MetaSchedule builder with one worker pool for the whole run.

        ``max_workers`` (default: physical cores), ``timeout_sec`` per build, ``f_build``
        (default :func:`fast_build`), ``recycle_every`` batches before the pool is
        restarted.  Call :meth:`close` (or let it be collected) to end the workers.
        """

        def __init__(self, max_workers: int | None = None, timeout_sec: float = 60.0,
                     f_build: Callable | str | None = fast_build, f_export=None,
                     recycle_every: int = 50):
            self.max_workers = int(max_workers or _physical_cores())
            self.timeout_sec = float(timeout_sec)
            self.f_build, self.f_export = f_build, f_export
            self.recycle_every = int(recycle_every)
            self._pool = None
            self._batches = 0

        def _get_pool(self):
            if self._pool is not None and self._batches >= self.recycle_every:
                self.close()
            if self._pool is None:
                self._pool = PopenPoolExecutor(max_workers=self.max_workers,
                                               timeout=self.timeout_sec)
                self._batches = 0
            return self._pool

        def build(self, build_inputs):
            pool = self._get_pool()
            self._batches += 1
            args = [(self.f_build, self.f_export, b.mod, b.target, _serialize_params(b.params))
                    for b in build_inputs]
            results = []
            for r in pool.map_with_error_catching(lambda a: _worker_func(*a), args):
                if r.status == StatusKind.COMPLETE:
                    results.append(BuilderResult(r.value, None))
                elif r.status == StatusKind.TIMEOUT:
                    results.append(BuilderResult(
                        None, f"PersistentBuilder: Timeout, killed after {self.timeout_sec:g} s"))
                else:
                    results.append(BuilderResult(
                        None, f"PersistentBuilder: An exception occurred\n{r.value}"))
            return results

        def close(self):
            if self._pool is not None:
                try:
                    self._pool.shutdown()
                except Exception:  # noqa: BLE001 - best effort
                    pass
                self._pool = None

        def __del__(self):  # pragma: no cover - best effort
            try:
                self.close()
            except Exception:  # noqa: BLE001
                pass

    return PersistentBuilder


_PB = None


def PersistentBuilder(*args, **kwargs):  # noqa: N802 - a class factory (tvm imported lazily)
    """See ``_make_persistent_builder``: a persistent-pool MetaSchedule builder."""
    global _PB
    if _PB is None:
        _PB = _make_persistent_builder()
    return _PB(*args, **kwargs)


def make_builder(kind: str = "persistent", max_workers: int | None = None,
                 timeout_sec: float = 60.0):
    """``"persistent"`` (default) or ``"local"`` (MetaSchedule's LocalBuilder, but with
    :func:`fast_build`), or an existing Builder (returned as is)."""
    if not isinstance(kind, str):
        return kind
    if kind == "persistent":
        return PersistentBuilder(max_workers=max_workers, timeout_sec=timeout_sec)
    if kind == "local":
        from tvm.s_tir import meta_schedule as ms

        return ms.builder.LocalBuilder(max_workers=max_workers or _physical_cores(),
                                       timeout_sec=timeout_sec, f_build=fast_build)
    raise DcocError(f"unknown builder '{kind}'; choose persistent or local")


def close_builder(builder) -> None:
    close = getattr(builder, "close", None)
    if callable(close):
        close()


# ============================================================================ threads
def runtime_threads(target=None) -> int:
    """The TVM runtime's thread count for ``target``: ``TVM_NUM_THREADS`` when set, else the
    target's ``num-cores`` (physical cores for ``"llvm"``)."""
    env = os.environ.get("TVM_NUM_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    if target is not None:
        attrs = getattr(target, "attrs", None)
        n = attrs.get("num-cores") if attrs is not None else None
        if n:
            return int(n)
    return _physical_cores()


def pool_threads() -> int:
    """The number of threads TVM's CPU thread pool runs a model on (``runtime.NumThreads``:
    ``TVM_NUM_THREADS``, else TVM's own default -- on x86, half the logical CPUs)."""
    import tvm

    try:
        return int(tvm.get_global_func("runtime.NumThreads")())
    except Exception:  # noqa: BLE001
        return 1


def use_runtime_threads(target=None) -> int:
    """Make the TVM runtime run on :func:`runtime_threads` threads, and return that number.

    TVM's CPU thread pool sizes itself on first use from ``TVM_NUM_THREADS``, else from
    half of ``std::thread::hardware_concurrency()`` on x86 (it assumes two hyper-threads
    per core): on a 2-core machine without SMT a compiled model ran on ONE thread while
    ONNX Runtime ran on two.  This sets ``TVM_NUM_THREADS`` (unless the user did) before
    the pool exists, in this process and in the measurement workers it starts later.
    Called by :func:`make_runner`, :func:`measure_latency` and :func:`make_model_runner`.
    """
    n = runtime_threads(target)
    os.environ.setdefault("TVM_NUM_THREADS", str(n))
    return int(os.environ["TVM_NUM_THREADS"])


# ============================================================================ runner
def evaluator_config(number: int | None = None, repeat: int | None = None,
                     min_repeat_ms: int | None = None, flush_cache: bool = False):
    """MetaSchedule's EvaluatorConfig; unset fields take the default settings, or the
    cold-cache ones with ``flush_cache`` (module docstring).  A flush with ``number != 1``
    or ``min_repeat_ms != 0`` is refused: the flush precedes only a repeat's first run."""
    from tvm.s_tir import meta_schedule as ms

    defaults = ((EVAL_COLD_NUMBER, EVAL_COLD_REPEAT, EVAL_COLD_MIN_REPEAT_MS) if flush_cache
                else (EVAL_NUMBER, EVAL_REPEAT, EVAL_MIN_REPEAT_MS))
    number, repeat, min_repeat_ms = (d if v is None else v for v, d in
                                     zip((number, repeat, min_repeat_ms), defaults))
    if flush_cache and (number != 1 or min_repeat_ms != 0):
        raise DcocError(f"a cache flush precedes only the first of a repeat's runs; with "
                        f"number={number}, min_repeat_ms={min_repeat_ms} the other runs "
                        "are warm -- use number=1, min_repeat_ms=0")
    return ms.runner.EvaluatorConfig(number=number, repeat=repeat, min_repeat_ms=min_repeat_ms,
                                     enable_cpu_cache_flush=flush_cache)


def parse_rpc(spec: str) -> tuple[str, int, str]:
    """``rpc://HOST:PORT/KEY`` -> (host, port, key)."""
    import re

    m = re.fullmatch(r"rpc://\[?([^\]/]+?)\]?:(\d+)/([^/\s]+)", spec.strip())
    if not m:
        raise DcocError(f"bad runner '{spec}'; expected local or rpc://HOST:PORT/KEY")
    return m.group(1), int(m.group(2)), m.group(3)


def make_runner(spec: Any = "local", timeout_sec: float = 30.0, evaluator=None,
                max_workers: int | None = None, session_timeout_sec: float | None = None):
    """A MetaSchedule runner: ``"local"``, ``"rpc://HOST:PORT/KEY"``, or a Runner object.

    RPC: one session per candidate (MetaSchedule's RPCRunner), ``max_workers`` parallel
    sessions (default 1: measuring concurrently on one device skews timings),
    ``session_timeout_sec`` (default ``timeout_sec``) bounds a whole session (upload +
    run), so a hung or killed server becomes an error result.
    """
    from tvm.s_tir import meta_schedule as ms

    if not isinstance(spec, str):
        return spec
    if spec == "local":
        use_runtime_threads()
    ev = evaluator if evaluator is not None else evaluator_config()
    if spec == "local":
        return ms.runner.LocalRunner(timeout_sec=timeout_sec, evaluator_config=ev)
    if spec.startswith("rpc://"):
        host, port, key = parse_rpc(spec)
        cfg = ms.runner.RPCConfig(tracker_host=host, tracker_port=port, tracker_key=key,
                                  session_priority=1,
                                  session_timeout_sec=int(session_timeout_sec or timeout_sec))
        return ms.runner.RPCRunner(rpc_config=cfg, evaluator_config=ev,
                                   max_workers=max_workers or 1)
    raise DcocError(f"bad runner '{spec}'; expected local or rpc://HOST:PORT/KEY")


# ============================================================================ compile


def _scheduled_funcs(mod) -> tuple[list[str], list[str]]:
    """(tuned, untuned) names of the PrimFuncs of a fused module after ApplyDatabase."""
    from tvm import tirx

    tuned, untuned = [], []
    for gv, f in mod.functions.items():
        if isinstance(f, tirx.PrimFunc):
            attrs = f.attrs or {}
            (tuned if attrs.get("tirx.is_scheduled", False) else untuned).append(gv.name_hint)
    return sorted(tuned), sorted(untuned)


def compile_model(database, mod, target, params: Mapping | None = None,
                  min_tuned: int = 0, prepack: bool | None = None):
    """Compile the *unfused* Relax module ``mod`` with the schedules in ``database``.

    Applies ``rewrite_for_tvm`` (batch norm and bias folded into the conv weights, fast
    ``erf``), as ``lower_for_tuning`` does before task extraction, then runs the pipeline of
    ``ms.relax_integration.compile_relax`` (library dispatch, LegalizeOps,
    AnnotateTIROpPattern, FoldConstant, FuseOps, FuseTIR, then MetaScheduleApplyDatabase,
    DLight fallback on GPUs, lowering), and counts the fused PrimFuncs the database
    replaced.  ``database=None`` compiles untuned (the same
    pipeline with an empty database: the baseline).

    CPU (llvm) targets, unless ``prepack=False`` or
    ``tvm_plugin.frontend.lowering.PREPACK_WEIGHTS`` is off: TVM's weight prepacking
    (``static_shape_tuning_pipeline(cpu_weight_prepack=True)``) -- the fused functions'
    constant weights are marked layout-free (``AttachAttrLayoutFreeBuffers``, as at task
    extraction, so the database keys match), each tuned schedule's weight layout rewrite is
    split out of the kernel (``SplitLayoutRewritePreproc``) and folded into the constants at
    compile time (``FoldConstant``): the kernels read weights packed in their tile order and
    nothing repacks them at run time.

    Returns ``(executable, report)``; report = ``{"tuned": [names], "untuned": [names],
    "functions": {name: PrimFunc}}`` (the compiled model's fused PrimFuncs, after the
    schedules were applied).
    Raises DcocError if fewer than ``min_tuned`` functions were replaced (e.g. a fused
    module was passed: compile_relax fuses again and every lookup misses).
    """
    import tvm
    from tvm import relax
    from tvm.relax import pipeline as rp
    from tvm.relax.transform import BindParams, MetaScheduleApplyDatabase
    from tvm.s_tir import dlight as dl
    from tvm.s_tir import meta_schedule as ms

    from tvm_plugin.frontend import _is_lowered
    from tvm_plugin.frontend.lowering import attach_layout_free, prepack_weights
    from tvm_plugin.frontend.rewrites import rewrite_for_tvm

    if _is_lowered(mod):
        raise DcocError("compile_model needs the unfused module (Model.mod / load_model()), "
                        "not a legalized or fused one: fusing twice drops every tuned schedule")
    if database is None:
        database = ms.database.MemoryDatabase()
    if params:
        mod = BindParams("main", dict(params))(mod)
    mod = rewrite_for_tvm(mod)
    try:
        dispatch = list(rp.library_dispatch_passes(target))
    except (ValueError, AttributeError):
        dispatch = []
    try:
        lower = list(rp.dataflow_lower_passes(target))
        finalize = list(rp.finalize_passes(target))
    except (ValueError, AttributeError):  # what compile_relax falls back to (llvm in 0.27)
        lower = [relax.transform.RewriteDataflowReshape(), relax.transform.ToNonDataflow(),
                 relax.transform.RemovePurityChecking(), relax.transform.CallTIRRewrite()]
        finalize = [relax.transform.StaticPlanBlockMemory(), relax.transform.LowerAllocTensor(),
                    relax.transform.KillAfterLastUse(), relax.transform.LowerRuntimeBuiltin(),
                    relax.transform.ComputePrimValue(), relax.transform.VMShapeLower(),
                    relax.transform.AttachGlobalSymbol()]
    is_gpu = rp.BackendDispatcher.is_gpu_target(target)
    pack = prepack_weights(target, prepack)
    report: dict = {}

    @tvm.transform.module_pass(opt_level=3)
    def _pipeline(m, _ctx):
        m = tvm.transform.Sequential([
            *dispatch, relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern(),
            relax.transform.FoldConstant(), relax.transform.FuseOps(), relax.transform.FuseTIR(),
        ])(m)
        if pack:
            m = attach_layout_free(m)
        m = MetaScheduleApplyDatabase(enable_warning=False)(m)
        report["tuned"], report["untuned"] = _scheduled_funcs(m)
        if pack:
            m = tvm.transform.Sequential([relax.transform.SplitLayoutRewritePreproc(),
                                          relax.transform.FoldConstant(),
                                          relax.transform.DeadCodeElimination()])(m)
        report["functions"] = {gv.name_hint: f for gv, f in m.functions.items()
                               if isinstance(f, tvm.tirx.PrimFunc)}
        if is_gpu:
            m = dl.ApplyDefaultSchedule(dl.gpu.Matmul(), dl.gpu.GEMV(), dl.gpu.Reduction(),
                                        dl.gpu.GeneralReduction(), dl.gpu.Fallback())(m)
        return tvm.transform.Sequential(lower + finalize)(m)

    with target, database, tvm.transform.PassContext(opt_level=3):
        ex = relax.build(mod, target=target, relax_pipeline=_pipeline)
    if len(report.get("tuned", [])) < min_tuned:
        raise DcocError(f"only {len(report.get('tuned', []))} of the model's functions were "
                        f"found in the tuning database (expected >= {min_tuned})")
    return ex, report


# ============================================================================ running
def _to_device(arrays: Sequence[np.ndarray], dev):
    import tvm

    return [tvm.runtime.tensor(np.ascontiguousarray(a), dev) for a in arrays]


def _flatten(out) -> list:
    import tvm

    if isinstance(out, tvm.runtime.Tensor):
        return [out.numpy()]
    if isinstance(out, (list, tuple)) or type(out).__name__ in ("Array", "ADT", "Tuple"):
        res = []
        for o in out:
            res += _flatten(o)
        return res
    if hasattr(out, "numpy"):
        return [out.numpy()]
    return [np.asarray(out)]


def make_model_runner(executable, target, input_names: Sequence[str],
                      input_dtypes: Mapping[str, str] | None = None) -> Callable:
    """``run({input name: ndarray}) -> [numpy outputs]`` for a compiled Relax executable."""
    from tvm import relax

    use_runtime_threads(target)
    dev = device_of(target)
    vm = relax.VirtualMachine(executable, dev)
    names = list(input_names)
    dtypes = dict(input_dtypes or {})

    def run(inputs: Mapping[str, np.ndarray]) -> list:
        missing = [n for n in names if n not in inputs]
        if missing:
            raise DcocError(f"missing model input(s) {missing}; inputs are {names}")
        extra = sorted(set(inputs) - set(names))
        if extra:
            raise DcocError(f"unknown model input(s) {extra}; inputs are {names}")
        arrays = [np.asarray(inputs[n], dtype=dtypes.get(n) or None) for n in names]
        return _flatten(vm["main"](*_to_device(arrays, dev)))

    run.vm = vm
    return run


def kernel_evaluator(mod, target, dev, min_repeat_ms: int, repeat: int = 3):
    """``time_evaluator`` of a kernel's ``main`` (``number=1``), built exactly as the
    builder builds a candidate (:func:`fast_build`)."""
    lib = fast_build(mod, target, None)
    rt = lib.jit() if hasattr(lib, "jit") else lib
    return rt.time_evaluator("main", dev, number=1, repeat=repeat, min_repeat_ms=min_repeat_ms)


def measure_latency(executable, target, inputs: Sequence[np.ndarray], number: int = 1,
                    repeat: int = 5, min_repeat_ms: int = 100) -> dict:
    """Time ``main`` with ``time_evaluator``: ``{"median_ms", "mean_ms", "std_ms", "results_ms"}``.

    Each of the ``repeat`` timings averages ``number`` runs, raised by TVM until one
    timing lasts at least ``min_repeat_ms`` (so a 1 ms model is averaged over ~100 runs
    and a slow untuned model is run once per timing)."""
    from tvm import relax

    use_runtime_threads(target)
    dev = device_of(target)
    vm = relax.VirtualMachine(executable, dev)
    args = _to_device(inputs, dev)
    r = vm.time_evaluator("main", dev, number=number, repeat=repeat,
                          min_repeat_ms=min_repeat_ms)(*args)
    res = [float(x) * 1e3 for x in r.results]
    return {"median_ms": float(np.median(res)), "mean_ms": float(np.mean(res)),
            "std_ms": float(np.std(res)), "results_ms": res}


def random_inputs(shapes: Mapping[str, Sequence[int]], dtypes: Mapping[str, str] | None = None,
                  seed: int = 0) -> dict:
    """Deterministic inputs: floats ~ N(0, 1), ints in [0, 10)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in shapes.items():
        dt = np.dtype((dtypes or {}).get(name, "float32"))
        if dt.kind == "f":
            out[name] = rng.standard_normal(tuple(shape)).astype(dt)
        elif dt.kind == "b":
            out[name] = rng.integers(0, 2, tuple(shape)).astype(dt)
        else:
            out[name] = rng.integers(0, 10, tuple(shape)).astype(dt)
    return out


def remove_artifact(path: str | None) -> None:
    if path:
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)


def _physical_cores() -> int:
    try:
        import psutil

        n = psutil.cpu_count(logical=False)
    except Exception:  # noqa: BLE001
        n = None
    return int(n or os.cpu_count() or 1)


def resolve_tvm_target(target):
    """``"llvm"`` / ``"cuda"`` / JSON dict / Target -> tvm Target with ``num-cores``."""
    from tvm_plugin.frontend import resolve_target

    spec = resolve_target(target)
    if spec.is_vta:
        raise TargetError("this function needs a TVM target (llvm, cuda or a JSON dict), not vta")
    return spec.tvm
