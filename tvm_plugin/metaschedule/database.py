"""What ``tune_model`` reads from and writes to a MetaSchedule database: recorded bests and
history (resume), task names for TVM-free readers, and the applied database with the tasks
whose untuned code is faster dropped."""
from __future__ import annotations

import math
import os


def recorded_bests(db, ctxs) -> dict:
    """``{task index: (records, best valid cost s)}`` of the tasks the database holds."""
    from tvm_plugin.metaschedule.strategy import record_result

    out = {}
    try:
        recs = list(db.get_all_tuning_records())
    except Exception:  # noqa: BLE001
        return out
    if not recs:
        return out
    import tvm_ffi

    by_hash: dict = {}
    for rec in recs:
        h = tvm_ffi.structural_hash(rec.workload.mod)
        n, b = by_hash.get(h, (0, math.inf))
        r = record_result(rec)
        by_hash[h] = (n + 1, min(b, r.cost) if r.valid else b)
    for i, ctx in enumerate(ctxs):
        h = tvm_ffi.structural_hash(ctx.mod)
        if h in by_hash:
            out[i] = by_hash[h]
    return out


def previous_history(work_dir: str) -> list:
    """The tuning curve of the work dir's last result (a resumed run continues it)."""
    from dcoc.errors import DcocError
    from dcoc.readfile import read_json

    try:
        hist = read_json(os.path.join(work_dir, "result.json"), "result file").get("history") or []
        return [[int(t), float(v)] for t, v in hist]
    except (DcocError, ValueError, TypeError, AttributeError):
        return []


def write_task_names(db, ctxs, task_info, work_dir: str) -> None:
    """``work_dir/ms_tasks.json``: {workload structural hash: task name} for the database
    readers that run without TVM (:mod:`dcoc.search.msdb`)."""
    import json

    names = {}
    for ctx, info in zip(ctxs, task_info):
        try:
            if db.has_workload(ctx.mod):
                names[str(db.commit_workload(ctx.mod).as_json()[0])] = info["name"]
        except Exception:  # noqa: BLE001 - names are a convenience
            continue
    from dcoc.paths import write_text_atomic
    from dcoc.search.msdb import TASK_NAMES_FILE

    write_text_atomic(os.path.join(work_dir, TASK_NAMES_FILE),
                      json.dumps(names, indent=2, sort_keys=True) + "\n")


def _time_kernels(kernels: dict, rounds: int = 2) -> dict:
    import numpy as np

    best = {k: math.inf for k in kernels}
    for _ in range(rounds):
        for k, (f, args) in kernels.items():
            best[k] = min(best[k], float(np.median([float(x) for x in f(*args).results])))
    return best


def drop_slower_than_untuned(db, ctxs, task_info, target, margin: float = 0.05):
    """A MemoryDatabase with each task's best record, except the tasks whose untuned
    PrimFunc is faster than that record by more than ``margin``; and those task names."""
    import numpy as np
    import tvm
    from tvm.s_tir import Schedule
    from tvm.s_tir import meta_schedule as ms

    from tvm_plugin.metaschedule.build import device_of, kernel_evaluator

    out = ms.database.MemoryDatabase()
    kept = []
    dev = device_of(target)
    for ctx, info in zip(ctxs, task_info):
        if not db.has_workload(ctx.mod):
            continue
        top = db.get_top_k(db.commit_workload(ctx.mod), 1)
        if not len(top):
            continue
        rec = top[0]
        faster_untuned = False
        try:
            sch = Schedule(ctx.mod)
            rec.trace.apply_to_schedule(sch, remove_postproc=False)
            rng = np.random.default_rng(0)
            args = []
            for a in rec.args_info:
                shape, dt = [int(x) for x in a.shape], str(a.dtype)
                arr = rng.standard_normal(shape).astype(dt) if "float" in dt else np.zeros(shape, dt)
                args.append(tvm.runtime.tensor(arr, dev))
            kern = {}
            for key, mod in (("tuned", sch.mod), ("untuned", ctx.mod)):
                kern[key] = (kernel_evaluator(mod, target, dev, min_repeat_ms=20), args)
            t = _time_kernels(kern)
            faster_untuned = t["untuned"] < t["tuned"] * (1 - margin)
        except Exception:  # noqa: BLE001 - keep the tuned schedule if the check fails
            faster_untuned = False
        if faster_untuned:
            kept.append(info["name"])
            continue
        copy_record(out, rec, ctx.mod)
    return out, kept


def copy_record(db, rec, mod=None) -> None:
    """Commit a copy of the tuning record ``rec`` (of ``mod``, by default its own
    workload's module) into the database ``db``."""
    from tvm.s_tir import meta_schedule as ms

    wl = db.commit_workload(rec.workload.mod if mod is None else mod)
    db.commit_tuning_record(ms.database.TuningRecord(rec.trace, wl, rec.run_secs,
                                                     rec.target, rec.args_info))
