"""Append-only JSON-lines tuning records.

One line per trial::

    {"task": "<workload key>", "task_name": "...", "target": "vta", "hw": "1x16x16_i8w8a32_15_15_18_17",
     "knobs": {...}, "cost": 0.0057 | null, "valid": true, "error_no": 0, "error": null,
     "info": {"cycles": 569900}, "tuner": "xgb", "seed": 0, "trial": 17, "wall": 0.004, "ts": 1764...}

Lines are appended and flushed (and fsync'ed) after every batch, so a killed run loses at
most the batch in flight.  A partially written last line (the process died mid-write) is
ignored on load and cut off before the next append.

Records for different hardware never mix: every query takes the hardware name, and
``hw`` is part of every key.
"""
from __future__ import annotations

import json
import math
import os
from typing import Iterable, Iterator

from dcoc.errors import RecordsError


def _match(rec: dict, **filters) -> bool:
    for k, v in filters.items():
        if v is not None and rec.get(k) != v:
            return False
    return True


class Records:
    """A records database backed by a JSONL file (or memory only when ``path`` is None)."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = os.fspath(path) if path is not None else None
        self.rows: list[dict] = []
        if self.path and os.path.exists(self.path):
            self.rows = list(_read(self.path))

    # ------------------------------------------------------------------ write
    def append(self, rows: Iterable[dict]) -> None:
        """Append rows and flush them to disk (fsync) before returning."""
        rows = list(rows)
        if not rows:
            return
        self.rows.extend(rows)
        if not self.path:
            return
        d = os.path.dirname(self.path)
        if d:
            os.makedirs(d, exist_ok=True)
        _repair_tail(self.path)
        with open(self.path, "a", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def log(self, task, inputs, results, tuner: str = "", seed=None, first_trial: int = 0) -> list[dict]:
        """Turn measured (MeasureInput, MeasureResult) pairs into rows and append them."""
        rows = []
        for i, (inp, res) in enumerate(zip(inputs, results)):
            hw, knobs = task.split(inp.config)
            cost = res.cost
            rows.append({
                "task": task.workload_key,
                "task_name": task.name,
                "target": task.target,
                "hw": hw,
                "knobs": knobs,
                "cost": cost if math.isfinite(cost) else None,
                "valid": bool(res.valid),
                "error_no": int(res.error_no),
                "error": res.error_msg,
                "info": _jsonable(res.info),
                "tuner": tuner,
                "seed": seed,
                "trial": first_trial + i,
                "wall": round(float(res.all_cost), 6),
                "ts": round(float(res.timestamp), 3),
            })
        self.append(rows)
        return rows

    # ------------------------------------------------------------------ read
    def __iter__(self) -> Iterator[dict]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    @classmethod
    def load(cls, path) -> "Records":
        if not os.path.exists(path):
            raise RecordsError(f"records file not found: {path}")
        return cls(path)

    def filter(self, task=None, target=None, hw=None, tuner=None, seed=None, valid=None) -> list[dict]:
        return [r for r in self.rows
                if _match(r, task=task, target=target, hw=hw, tuner=tuner, seed=seed, valid=valid)]

    def best(self, task: str, target: str | None = None, hw: str | None = None) -> dict | None:
        """The fastest valid record of a task on one hardware config."""
        rows = self.topk(task, target, hw, 1)
        return rows[0] if rows else None

    def topk(self, task: str, target: str | None = None, hw: str | None = None, k: int = 10) -> list[dict]:
        rows = [r for r in self.filter(task=task, target=target, hw=hw) if r.get("valid")]
        rows.sort(key=lambda r: r["cost"])
        return rows[:k]

    def best_per_task(self, target: str | None = None, hw: str | None = None) -> dict:
        """{(task key, hw name): best record} over all valid records."""
        best: dict = {}
        for r in self.rows:
            if not r.get("valid") or not _match(r, target=target, hw=hw):
                continue
            key = (r["task"], r["hw"])
            if key not in best or r["cost"] < best[key]["cost"]:
                best[key] = r
        return best

    def hardware(self) -> list[str]:
        """Hardware names present, in first-seen order."""
        return list(dict.fromkeys(r["hw"] for r in self.rows))

    @classmethod
    def merge(cls, paths: Iterable, out=None) -> "Records":
        """Concatenate several files (dropping exact duplicate trials) into one database."""
        return cls.merge_rows((cls.load(p).rows for p in paths), out)

    @classmethod
    def merge_rows(cls, row_lists: Iterable, out=None) -> "Records":
        """Concatenate several lists of rows (dropping exact duplicates); written to ``out``
        (which must not exist) when given."""
        merged = cls(out) if out is not None and not os.path.exists(out) else cls(None)
        seen = set()
        rows = []
        for rs in row_lists:
            for r in rs:
                key = json.dumps(r, sort_keys=True)
                if key not in seen:
                    seen.add(key)
                    rows.append(r)
        if out is not None and os.path.exists(out):
            raise RecordsError(f"merge output already exists: {out}")
        merged.append(rows)
        return merged


def _jsonable(info: dict) -> dict:
    out = {}
    for k, v in (info or {}).items():
        if isinstance(v, (bool, int, float, str)) or v is None:
            out[k] = v
        elif hasattr(v, "item"):
            out[k] = v.item()
    return out


def _read(path: str) -> Iterator[dict]:
    try:
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")
    except IsADirectoryError:
        raise RecordsError(f"{path} is a directory, not a records file") from None
    except OSError as exc:
        raise RecordsError(f"cannot read records file {path}: {exc.strerror or exc}") from None
    last = len(lines)  # a file ending in "\n" has an empty last piece
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        truncated = n == last  # no newline after it: possibly cut by a crash mid-write
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            if truncated:
                return
            raise RecordsError(f"{path}:{n}: not UTF-8 text (not a records file?)") from None
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            if truncated:
                return  # truncated by a crash mid-write: the batch in flight is lost
            raise RecordsError(f"{path}:{n}: not a JSON record") from None
        problem = record_problem(rec)
        if problem:
            raise RecordsError(f"{path}:{n}: not a tuning record ({problem})")
        yield rec


def record_problem(rec) -> str | None:
    """Why ``rec`` is not a tuning record (None when it is one): a JSON object with a
    string ``task``, an ``hw`` (string, or null for tasks without hardware), a ``knobs``
    object, and a finite number ``cost`` when ``valid`` is true."""
    if not isinstance(rec, dict):
        what = "null" if rec is None else type(rec).__name__
        if isinstance(rec, list) and len(rec) == 2 and isinstance(rec[0], int):
            return ("a list, as in a MetaSchedule database: run `dcoc records` on the work "
                    "dir or its database_tuning_record.json")
        return f"a JSON {what}, expected an object"
    if not isinstance(rec.get("task"), str):
        return "no 'task' string"
    if "hw" not in rec or not (rec["hw"] is None or isinstance(rec["hw"], str)):
        return "no 'hw' (a hardware name, or null for tasks without one)"
    if not isinstance(rec.get("knobs"), dict):
        return "no 'knobs' object"
    if rec.get("valid"):
        c = rec.get("cost")
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not math.isfinite(c) or c < 0:
            return "a valid record without a finite 'cost'"
    return None


def _repair_tail(path: str) -> None:
    """Cut a partial last line (left by a crash mid-write) before appending."""
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return
    with open(path, "rb+") as f:
        f.seek(-1, os.SEEK_END)
        if f.read(1) == b"\n":
            return
        f.seek(0)
        data = f.read()
        cut = data.rfind(b"\n") + 1
        f.truncate(cut)
