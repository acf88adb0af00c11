"""Does the data a kernel is timed on change which schedule wins?

MetaSchedule's runner fills every argument with ``tvm.contrib.random.random_fill_for_measure``
(floats uniform in [1, 10]); the model feeds the kernel its own activations.  For most
kernels the values do not matter, but a kernel with a data-dependent part (the transformer's
FFN matmul fused with GELU's ``erf``: 0.44 ms on [1, 10] data, 1.84 ms on N(0,1), 1.40-1.64
ms inside the model; session 34) is tuned on data the model never gives it.

For one task of a whole-model workload and the work dirs ``bench_metaschedule --work-dir``
kept, this takes the ``--top`` fastest distinct records of each dir (by the latency tuning
recorded), builds each exactly as the builder built it, and times every one by the tuning
evaluator (``number=3, repeat=1, min_repeat_ms=10``; ``--rounds`` interleaved rounds, the
fastest median kept) on three fills of its arguments:

* ``metaschedule``: what every strategy's tuning measured (``random_fill_for_measure``);
* ``normal``: N(0, 1) floats (what ``bench_metaschedule``'s kernel re-timing uses);
* ``model``: the arguments the compiled model passes the kernel (captured from one run of
  the first dir's compiled model with a Relax VM instrument, on the benchmark's inputs).

Printed: each record's times, and per dir and pooled: Spearman's rank correlation of each
fill with ``model``, and the *regret* of choosing by a fill -- the model-data time of the
record that fill ranks first over the fastest model-data time among the same records (1.0:
the fill picks the schedule the model's data would).  So one reads off whether a runner that
fills arguments like the model would tune differently, before building one::

    python -m scripts.ms_fill --workload transformer --task dense_m128_n1024_k256 \\
        D/transformer_1000_75_dcoc D/transformer_1000_75_evolutionary --out fill.json
    python -m scripts.ms_fill --read fill.json       # the summary again, no TVM
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

from dcoc.errors import DcocError

FILLS = ("metaschedule", "normal", "model")


def _task_function(work_dir: str, task: str) -> str:
    """The compiled function name (MetaSchedule task name) of dcoc task ``task``."""
    from scripts.ms_profile import layer_functions

    rows = layer_functions(work_dir)
    for row in rows:
        if row["task"] == task:
            return row["function"]
    raise DcocError(f"{work_dir}: no task {task!r}; tasks are "
                    f"{', '.join(sorted({row['task'] for row in rows}))}")


def _records(work_dir: str, task: str, top: int) -> list:
    """The ``top`` fastest records of ``task`` in ``work_dir``'s database (distinct traces)."""
    from tvm.s_tir import meta_schedule as ms

    from dcoc.search.msdb import FAILED_SECS, task_names

    names = task_names(work_dir)
    db = ms.database.JSONDatabase(work_dir=work_dir)
    for rec in db.get_all_tuning_records():
        if names.get(str(rec.workload.as_json()[0])) == task:
            out, seen = [], set()
            for r in db.get_top_k(rec.workload, 4 * top):
                secs = [float(x) for x in (r.run_secs or [])]
                if not secs or min(secs) >= FAILED_SECS:
                    continue
                key = str(r.trace.as_json(remove_postproc=True))
                if key not in seen:
                    seen.add(key)
                    out.append(r)
                if len(out) == top:
                    break
            return out
    raise DcocError(f"{work_dir}: no records of task {task!r}")


def model_arguments(ex, target, model, inputs: dict, function: str) -> list:
    """The numpy arguments the compiled model passes ``function`` at its first call."""
    from tvm import relax

    from tvm_plugin.build import _to_device, device_of

    dev = device_of(target)
    got: list = []

    def instrument(func, symbol, before, ret, *a):  # noqa: ARG001 - the VM's signature
        if before and symbol == function and not got:
            got.append([x.numpy().copy() for x in a])

    vm = relax.VirtualMachine(ex, dev)
    vm.set_instrument(instrument)
    vm["main"](*_to_device([inputs[n] for n in model.input_shapes], dev))
    if not got:
        raise DcocError(f"the compiled model never calls {function}")
    return got[0]


def _fills(args_info, captured: list, dev, seed: int = 0) -> dict:
    """{fill: [device tensors]} for a record's arguments."""
    import numpy as np
    import tvm

    shapes = [(tuple(int(s) for s in i.shape), str(i.dtype)) for i in args_info]
    got = [(tuple(a.shape), str(a.dtype)) for a in captured]
    if got != shapes:
        raise DcocError(f"the model passes {got}, the record expects {shapes}")
    ms_fill = tvm.get_global_func("tvm.contrib.random.random_fill_for_measure")
    rng = np.random.default_rng(seed)
    out = {"metaschedule": [], "normal": [], "model": []}
    for (shape, dt), cap in zip(shapes, captured):
        t = tvm.runtime.empty(shape, dt, dev)
        ms_fill(t)
        out["metaschedule"].append(t)
        out["normal"].append(tvm.runtime.tensor(
            rng.standard_normal(shape).astype(dt) if dt.startswith("float")
            else np.zeros(shape, dt), dev))
        out["model"].append(tvm.runtime.tensor(cap, dev))
    return out


def time_records(workload: str, task: str, dirs, top: int = 16, rounds: int = 3,
                 log=print) -> dict:
    """{"task", "function", "records": [{"dir", "rank", "recorded_ms", fill: ms ...}]}."""
    import numpy as np
    from tvm.s_tir import Schedule

    from scripts.ms_retime import compile_dir, load_workload
    from tvm_plugin.build import device_of, evaluator_config, fast_build

    function = _task_function(dirs[0], task)
    for d in dirs[1:]:  # before minutes of compiling
        if _task_function(d, task) != function:
            raise DcocError(f"{d}: task {task!r} compiles to another function")
    target, model, _, inputs = load_workload(workload)
    ex, _, _ = compile_dir(dirs[0], model, target)
    captured = model_arguments(ex, target.tvm, model, inputs, function)
    dev = device_of(target.tvm)
    ev = evaluator_config()
    kernels = []
    for d in dirs:
        for rank, rec in enumerate(_records(d, task, top)):
            sch = Schedule(rec.workload.mod)
            rec.trace.apply_to_schedule(sch, remove_postproc=False)
            lib = fast_build(sch.mod, target.tvm, None)
            rt = lib.jit() if hasattr(lib, "jit") else lib
            timer = rt.time_evaluator("main", dev, number=ev.number, repeat=ev.repeat,
                                      min_repeat_ms=ev.min_repeat_ms)
            secs = [float(x) for x in rec.run_secs]
            kernels.append(({"dir": d, "rank": rank,
                             "recorded_ms": 1e3 * sum(secs) / len(secs) if secs else None},
                            timer, _fills(rec.args_info, captured, dev)))
        log(f"{os.path.basename(os.path.normpath(d))}: {top} records built")
    best = [{f: math.inf for f in FILLS} for _ in kernels]
    for _ in range(rounds):  # interleaved: machine load hits every record and fill alike
        for b, (_, timer, fills) in zip(best, kernels):
            for f in FILLS:
                b[f] = min(b[f], float(np.median(timer(*fills[f]).results)) * 1e3)
    return {"workload": workload, "task": task, "function": function,
            "records": [{**info, **b} for (info, _, _), b in zip(kernels, best)]}


def _regret(recs: list, fill: str) -> float:
    """Model-data time of the record ``fill`` ranks first over the fastest model-data time."""
    pick = min(recs, key=lambda r: r[fill])
    return pick["model"] / min(r["model"] for r in recs)


def summary(result: dict) -> str:
    """The read-out of :func:`time_records` (no TVM)."""
    from scipy.stats import spearmanr

    recs = result["records"]
    lines = [f"task {result['task']} ({result['function']}) of {result['workload']}: "
             f"{len(recs)} records; ms on each fill (tuning evaluator, fastest of the rounds)",
             "", "| dir | rank | recorded | " + " | ".join(FILLS) + " |",
             "|---|---|---|" + "---|" * len(FILLS)]
    for r in recs:
        rec = "-" if r["recorded_ms"] is None else f"{r['recorded_ms']:.4f}"
        lines.append(f"| {os.path.basename(os.path.normpath(r['dir']))} | {r['rank']} | {rec} | "
                     + " | ".join(f"{r[f]:.4f}" for f in FILLS) + " |")
    lines += ["", "| records | n | fastest on model data (ms) | "
              + " | ".join(f"rho({f}, model) | regret({f})" for f in FILLS[:2]) + " |",
              "|---|---|---|" + "---|---|" * 2]
    groups = {}
    for r in recs:
        groups.setdefault(os.path.basename(os.path.normpath(r["dir"])), []).append(r)
    groups["pooled"] = recs
    for name, g in groups.items():
        cells = []
        for f in FILLS[:2]:
            rho = spearmanr([r[f] for r in g], [r["model"] for r in g])[0] if len(g) > 2 \
                else math.nan
            cells.append(f"{rho:.3f} | {_regret(g, f):.3f}")
        lines.append(f"| {name} | {len(g)} | {min(r['model'] for r in g):.4f} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m scripts.ms_fill", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dirs", nargs="*", help="work dirs kept by bench_metaschedule --work-dir")
    p.add_argument("--workload", help="the whole-model workload the dirs tuned")
    p.add_argument("--task", help="the task (dcoc name, as result.json lists it)")
    p.add_argument("--top", type=int, default=16, help="fastest distinct records per dir")
    p.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds")
    p.add_argument("--out", help="write the timings (JSON) here")
    p.add_argument("--read", help="print the summary of an earlier --out file (no TVM)")
    a = p.parse_args(argv)
    try:
        if a.read:
            try:
                with open(a.read, encoding="utf-8") as f:
                    res = json.load(f)
            except (OSError, ValueError) as e:
                raise DcocError(f"cannot read {a.read}: {e}") from None
            print(summary(res))
            return 0
        if not a.dirs or not a.workload or not a.task:
            raise DcocError("give the work dirs, --workload and --task (or --read a file)")
        if a.top < 1 or a.rounds < 1:
            raise DcocError("--top and --rounds must be >= 1")
        from scripts.ms_retime import check_kept_dirs

        check_kept_dirs(a.workload, a.dirs)
        res = time_records(a.workload, a.task, a.dirs, top=a.top, rounds=a.rounds)
    except DcocError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(summary(res))
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
