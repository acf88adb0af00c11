"""Where a compiled model spends its time, kernel by kernel, and how each kernel times alone.

Each work directory that ``python -m scripts.bench_metaschedule ... --work-dir D`` keeps is
compiled again as ``tune_model`` compiled it (as :mod:`scripts.ms_retime` does), then:

* **in model**: the model is run ``--runs`` times with a Relax VM instrument that times
  every call (wall clock around it); per call site the median, per function the median of
  its call sites -- what each tuned kernel costs where the model calls it, its weights
  usually not in cache (the instrument adds ~2 us per call, visible on the VM builtins);
* **alone, warm**: each fused PrimFunc of the executable timed by itself with random
  arguments of the shapes the model passes it, by the tuning evaluator
  (``number=3, repeat=1, min_repeat_ms=10``: what every strategy's tuning measured);
* **alone, cold**: the same with ``number=1, repeat=10, min_repeat_ms=0`` and MetaSchedule's
  CPU cache flush before each run (what ``bench_metaschedule --flush-cache`` measures
  since session 34);
* **tuned**: the latency the tuning recorded for the function's task (``result.json``).

Printed per dir: a row per function (calls, ms per call in each column), the weighted sums
(calls x ms) and the compiled model's own latency (``time_evaluator``, median of 5 timings of
>= 100 ms, best of 3), so one reads off whether the model is the sum of its kernels and which
timing of a kernel predicts its cost inside the model::

    python -m scripts.ms_profile --workload resnet18 D/resnet18_1000_80_dcoc \
        D/resnet18_1000_80_evolutionary --out prof.json
    python -m scripts.ms_profile --read prof.json        # the table again, no TVM

Session 34 found with it why ResNet-18's compiled model was 1.2-1.7x its summed tuned
kernels: inside the model a kernel meets its weights cold, and the warm timing of tuning
(with or without the old ``--flush-cache``) cannot see it (docs/RESULTS.md).
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import os
import statistics
import sys
import time

from dcoc.errors import DcocError

_BUILTIN = "vm.builtin."


def instrumented_calls(vm, args, runs: int = 30, warmup: int = 5):
    """({(call index, symbol): [seconds per run]}, [(symbol, [(shape, dtype) or None])]) of
    ``vm["main"](*args)`` run ``warmup + runs`` times under a timing instrument."""
    calls: list = []
    t0 = [0.0]

    def instrument(func, symbol, before, ret, *a):  # noqa: ARG001 - the VM's signature
        if before:
            calls.append([symbol, [(tuple(int(d) for d in x.shape), str(x.dtype))
                                   if hasattr(x, "shape") and hasattr(x, "dtype") else None
                                   for x in a], 0.0])
            t0[0] = time.perf_counter()
        else:
            calls[-1][2] = time.perf_counter() - t0[0]
        return 0

    vm.set_instrument(instrument)
    per: dict = collections.defaultdict(list)
    try:
        for r in range(warmup + runs):
            calls.clear()
            vm["main"](*args)
            if r >= warmup:
                for i, (sym, _, sec) in enumerate(calls):
                    per[(i, sym)].append(sec)
    finally:
        vm.set_instrument(lambda *a: 0)
    return dict(per), [(sym, shapes) for sym, shapes, _ in calls]


def profile_executable(ex, target, model, inputs: dict, runs: int = 30, seed: int = 0,
                       recorded: dict | None = None) -> dict:
    """The profile of one compiled model (module docstring): ``{"model_ms", "builtin_ms",
    "functions": {name: {"calls", "in_model", "warm", "cold", "tuned"}}}`` (ms per call;
    ``tuned`` from ``recorded`` = {function name: ms}, None when absent)."""
    import numpy as np
    import tvm
    from tvm import relax

    from tvm_plugin.build import _to_device, device_of, evaluator_config

    dev = device_of(target)
    args = _to_device([inputs[n] for n in model.input_shapes], dev)
    vm = relax.VirtualMachine(ex, dev)
    per, seq = instrumented_calls(vm, args, runs=runs)
    model_ms = min(float(np.median(relax.VirtualMachine(ex, dev).time_evaluator(
        "main", dev, number=1, repeat=5, min_repeat_ms=100)(*args).results))
                   for _ in range(3)) * 1e3
    lib = ex.mod.imports[0]
    rng = np.random.default_rng(seed)
    funcs: dict = {}
    builtin = 0.0
    for (i, sym), secs in sorted(per.items()):
        med = statistics.median(secs) * 1e3
        if sym.startswith(_BUILTIN) or not lib.implements_function(sym):
            builtin += med
            continue
        funcs.setdefault(sym, {"sites": [], "shapes": seq[i][1]})["sites"].append(med)
    out = {}
    for sym, f in funcs.items():
        if any(s is None for s in f["shapes"]):
            raise DcocError(f"{sym}: a non-tensor argument; cannot time it alone")
        arrs = [tvm.runtime.tensor(rng.standard_normal(shape).astype(dtype)
                                   if dtype.startswith("float") else np.zeros(shape, dtype), dev)
                for shape, dtype in f["shapes"]]
        alone = {}
        for kind, flush in (("warm", False), ("cold", True)):
            ev = evaluator_config(flush_cache=flush)
            timer = lib.time_evaluator(sym, dev, number=ev.number, repeat=ev.repeat,
                                       min_repeat_ms=ev.min_repeat_ms,
                                       f_preproc="cache_flush_cpu_non_first_arg" if flush else "")
            alone[kind] = min(float(np.median(timer(*arrs).results)) for _ in range(3)) * 1e3
        out[sym] = {"calls": len(f["sites"]), "in_model": statistics.median(f["sites"]),
                    **alone, "tuned": (recorded or {}).get(sym)}
    return {"model_ms": model_ms, "builtin_ms": builtin, "functions": out}


def layer_functions(work_dir: str) -> list[dict]:
    """Each layer of a work dir's result.json as ``{"task", "function", "latency_ms"}``:
    its dcoc task, the compiled function (MetaSchedule task name) it runs as, and the
    tuning's recorded ms (None where it has none)."""
    with open(os.path.join(work_dir, "result.json"), encoding="utf-8") as f:
        res = json.load(f)
    scheds = res.get("schedules", {})
    return [{"task": layer["task"],
             "function": (scheds.get(layer["layer"]) or {}).get("ms_task", layer["task"]),
             "latency_ms": layer.get("latency_ms")} for layer in res.get("layers", [])]


def recorded_latency(work_dir: str) -> dict:
    """{compiled function name: the tuning's recorded ms} from a work dir's result.json."""
    return {row["function"]: float(row["latency_ms"]) for row in layer_functions(work_dir)
            if row["latency_ms"] is not None}


def table(name: str, prof: dict) -> str:
    """One dir's profile as text: a row per function, weighted sums, the model."""
    cols = ("in_model", "tuned", "warm", "cold")
    lines = [f"== {name}: compiled model {prof['model_ms']:.4f} ms",
             f"  {'function':58s} {'calls':>5s} " + " ".join(f"{c:>9s}" for c in cols)
             + "   (ms per call)"]
    fns = prof["functions"]
    sums = dict.fromkeys(cols, 0.0)
    rec = [0, 0.0]  # functions with a tuning record, their in-model sum
    for sym, f in sorted(fns.items(), key=lambda kv: -kv[1]["calls"] * kv[1]["in_model"]):
        cells = []
        for c in cols:
            v = f.get(c)
            cells.append(f"{v:9.4f}" if v is not None else f"{'-':>9s}")
            sums[c] += f["calls"] * (v or 0.0)
        if f.get("tuned") is not None:
            rec[0] += 1
            rec[1] += f["calls"] * f["in_model"]
        lines.append(f"  {sym[:58]:58s} {f['calls']:5d} " + " ".join(cells))
    lines.append(f"  {'weighted sum (calls x ms)':58s} {'':5s} "
                 + " ".join(f"{sums[c]:9.4f}" for c in cols))
    ratio = lambda a, b: a / b if b > 0 else math.nan  # noqa: E731
    lines.append(f"  VM builtins in model {prof['builtin_ms']:.4f} ms; model / sum in model "
                 f"{ratio(prof['model_ms'], sums['in_model']):.3f}; sum alone warm / in model "
                 f"{ratio(sums['warm'], sums['in_model']):.3f}; cold / in model "
                 f"{ratio(sums['cold'], sums['in_model']):.3f}; tuned / in model "
                 f"{ratio(sums['tuned'], rec[1]):.3f} (the {rec[0]} of {len(fns)} functions "
                 "with a tuning record)")
    return "\n".join(lines)


def profile_dirs(workload: str, dirs, runs: int = 30, log=print) -> dict:
    """{dir: profile} of kept work dirs of a benchmark whole-model workload."""
    from scripts.ms_retime import compile_dir, load_workload

    target, model, _, inputs = load_workload(workload)
    out = {}
    for d in dirs:
        ex, _, _ = compile_dir(d, model, target)
        out[d] = profile_executable(ex, target.tvm, model, inputs, runs=runs,
                                    recorded=recorded_latency(d))
        log(table(os.path.basename(os.path.normpath(d)), out[d]))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m scripts.ms_profile", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dirs", nargs="*", help="work dirs kept by bench_metaschedule --work-dir")
    p.add_argument("--workload", help="the whole-model workload the dirs tuned (small_cnn, "
                   "transformer, mobilenetv2, resnet18)")
    p.add_argument("--runs", type=int, default=30, help="instrumented model runs (after 5 "
                   "warm-up runs)")
    p.add_argument("--out", help="write the profiles (JSON) here")
    p.add_argument("--read", nargs="+", help="print the tables of earlier --out files (no TVM)")
    a = p.parse_args(argv)
    try:
        if a.read:
            for path in a.read:
                try:
                    with open(path, encoding="utf-8") as f:
                        profs = json.load(f)
                except (OSError, ValueError) as e:
                    raise DcocError(f"cannot read profiles {path}: {e}") from None
                for d, prof in profs.items():
                    print(table(os.path.basename(os.path.normpath(d)), prof))
            return 0
        if not a.dirs or not a.workload:
            raise DcocError("give the work dirs and --workload (or --read earlier profiles)")
        from scripts.ms_retime import check_kept_dirs

        check_kept_dirs(a.workload, a.dirs)
        profs = profile_dirs(a.workload, a.dirs, runs=a.runs)
    except DcocError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump(profs, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
