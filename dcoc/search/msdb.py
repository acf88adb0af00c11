"""Read a MetaSchedule JSON database (what ``dcoc tune --target llvm/cuda`` leaves in its
work dir) without TVM, as rows shaped like dcoc's tuning records.

A work dir holds ``database_workload.json`` (one ``[structural hash, module]`` line per
tuned workload) and ``database_tuning_record.json`` (one ``[workload index, [trace,
run_secs, target, args_info]]`` line per measured candidate, in measurement order).
``ms_tasks.json``, written by :func:`tvm_plugin.metaschedule.tuning.tune_model`, names each workload
(``{structural hash: task name}``); without it a workload is named ``workload<i>``.

:func:`ms_database_dir` finds the database from a work dir or either file;
:func:`load_ms_rows` returns one row per measured candidate::

    {"task": "ms:<name>", "task_name": name, "target": "llvm", "hw": <target kind or mcpu>,
     "knobs": {}, "cost": mean seconds | None, "valid": bool, "tuner": "metaschedule",
     "seed": None, "trial": i}
"""
from __future__ import annotations

import json
import math
import os

from dcoc.errors import RecordsError

RECORDS_FILE = "database_tuning_record.json"
WORKLOADS_FILE = "database_workload.json"
TASK_NAMES_FILE = "ms_tasks.json"
#: run seconds at or above this are MetaSchedule's failure marker (it stores 1e10 for a
#: candidate that failed to build or run)
FAILED_SECS = 1e9


def ms_database_dir(path: str) -> str | None:
    """The directory of the MetaSchedule database at ``path`` (a work dir, or one of the two
    database files), or None when ``path`` is not one."""
    if os.path.isdir(path):
        return path if os.path.isfile(os.path.join(path, RECORDS_FILE)) else None
    if os.path.basename(path) in (RECORDS_FILE, WORKLOADS_FILE):
        return os.path.dirname(path) or "."
    return None


def _lines(path: str):
    from dcoc.readfile import read_bytes

    raw = read_bytes(path, "MetaSchedule database file", "records", RecordsError).split(b"\n")
    for n, b in enumerate(raw, 1):
        if not b.strip():
            continue
        try:
            yield n, json.loads(b.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            if n == len(raw):  # cut off mid-write
                return
            raise RecordsError(f"{path}:{n}: not a MetaSchedule database line") from None


def task_names(directory: str) -> dict:
    """{workload structural hash: task name} from ``directory``'s ``ms_tasks.json`` (written
    by ``tune_model``); {} when it is missing or unreadable (names are a convenience)."""
    p = os.path.join(directory, TASK_NAMES_FILE)
    if os.path.isfile(p):
        from dcoc.errors import DcocError
        from dcoc.readfile import read_json

        try:
            return read_json(p, "MetaSchedule task names file")
        except DcocError:
            pass
    return {}


def load_ms_rows(directory: str, with_trace: bool = False) -> list[dict]:
    """One records-style row per measured candidate of the database in ``directory``
    (``with_trace``: each row also holds the record's trace JSON as ``"trace"``)."""
    names = task_names(directory)
    hashes = []
    wp = os.path.join(directory, WORKLOADS_FILE)
    if os.path.isfile(wp):
        for n, line in _lines(wp):
            if not isinstance(line, list) or not line:
                raise RecordsError(f"{wp}:{n}: not a MetaSchedule workload line")
            hashes.append(str(line[0]))
    rows = []
    rp = os.path.join(directory, RECORDS_FILE)
    for n, line in _lines(rp):
        try:
            idx, body = int(line[0]), line[1]
            run_secs = [float(x) for x in body[1]] if body[1] is not None else []
            target = body[2] if len(body) > 2 else None
        except (TypeError, ValueError, IndexError, KeyError):
            raise RecordsError(f"{rp}:{n}: not a MetaSchedule tuning record") from None
        shash = hashes[idx] if 0 <= idx < len(hashes) else None
        name = names.get(shash) or f"workload{idx}"
        ok = bool(run_secs) and all(math.isfinite(x) and x < FAILED_SECS for x in run_secs)
        hw = "?"
        if isinstance(target, dict):
            hw = str(target.get("mcpu") or target.get("arch") or target.get("kind") or "?")
        rows.append({"task": f"ms:{name}", "task_name": name,
                     "target": target.get("kind") if isinstance(target, dict) else None,
                     "hw": hw, "knobs": {}, "cost": sum(run_secs) / len(run_secs) if ok else None,
                     "valid": ok, "tuner": "metaschedule", "seed": None, "trial": len(rows)})
        if with_trace:
            rows[-1]["trace"] = body[0]
    return rows
