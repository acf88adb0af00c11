"""Append-only JSON-lines tuning records.

One line per trial::

    {"task": "<workload key>", "task_name": "...", "target": "vta", "hw": "1x16x16_i8w8a32_15_15_18_17",
     "knobs": {...}, "cost": 0.0057 | null, "valid": true, "error_no": 0, "error": null,
     "info": {"cycles": 569900}, "tuner": "xgb", "seed": 0, "trial": 17, "wall": 0.004, "ts": 1764...}

Lines are appended and flushed (and fsync'ed) after every batch, so a killed run loses at
most the batch in flight.  A partially written last line (the process died mid-write) is
ignored on load and cut off before the next append; a complete last line that only lacks
its newline counts and gets the newline.

Every line is checked before it counts (:func:`record_problem`): a JSON object with the
record fields, a valid one with a finite cost > 0; for an accelerator target, a hardware
name this version parses, and (where the workload can be read back from the task key)
knobs of the task's schedule space and a cost not below the compute bound (one full
GEMM tile per cycle).
Lines that fail (foreign, forged, corrupt, nested too deeply) are skipped and reported
once per file (count and first problem) on stderr; they are never listed, chosen as
best, replayed or merged.  A file with no valid line is refused (:class:`RecordsError`);
:meth:`Records.load` (what reads a file to list, merge, plot or warm-start from) also
refuses one with no record at all.  The file is read by :mod:`dcoc.readfile` (a regular
file of at most 1 GiB).

Records for different hardware never mix: every query takes the hardware name, and
``hw`` is part of every key.
"""
from __future__ import annotations

import json
import math
import os
import sys
from typing import Iterable, Iterator

from dcoc.errors import RecordsError

_warned: set = set()


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
        #: lines of the file that were not counted: [(line number, why)]
        self.skipped: list[tuple[int, str]] = []
        if self.path and os.path.lexists(self.path):
            self.rows = list(_read(self.path, self.skipped))
            if self.skipped and (self.path, len(self.skipped)) not in _warned:
                _warned.add((self.path, len(self.skipped)))  # once per file and count
                n, why = self.skipped[0]
                print(f"dcoc: warning: {self.path}: {len(self.skipped)} line(s) skipped, not "
                      f"valid records (first: line {n}: {why})", file=sys.stderr)

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
        data = "".join(json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n"
                       for r in rows).encode("utf-8")
        try:
            _repair_tail(self.path)
            _append_whole(self.path, data)
        except OSError as exc:
            del self.rows[-len(rows):]
            raise RecordsError(f"cannot append to records file {self.path}: "
                               f"{exc.strerror or exc} (the records already written are "
                               "intact; free space and rerun the same command to resume)") from None

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
        """Read a records file that must hold at least one record (RecordsError: missing,
        not a regular file, or no record in it)."""
        if not os.path.lexists(path):
            raise RecordsError(f"records file not found: {path}")
        db = cls(path)
        if not db.rows:
            why = f" (line {db.skipped[0][0]}: {db.skipped[0][1]})" if db.skipped else ""
            raise RecordsError(f"records file {path} holds no tuning record{why}")
        return db

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


def _parse_line(raw: bytes) -> tuple[dict | None, str | None]:
    """(record, None) or (None, why it is not one)."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None, "not UTF-8 text"
    try:
        rec = json.loads(line)
    except json.JSONDecodeError:
        return None, "not a JSON record"
    except RecursionError:
        return None, "JSON nested too deeply"
    problem = record_problem(rec)
    if problem:
        return None, f"not a tuning record ({problem})"
    return rec, None


def _read(path: str, skipped: list | None = None) -> Iterator[dict]:
    from dcoc.readfile import read_bytes

    lines = read_bytes(path, "records file", "records", RecordsError).split(b"\n")
    last = len(lines)  # a file ending in "\n" has an empty last piece
    checks: dict = {}
    bad: list = [] if skipped is None else skipped
    good = 0
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        rec, why = _parse_line(raw)
        if rec is not None:
            why = _impossible(rec, checks)
        if why is None:
            good += 1
            yield rec
        elif n == last and rec is None:
            return  # cut by a crash mid-write: the batch in flight is lost
        else:
            bad.append((n, why))
    if bad and not good:
        n, why = bad[0]
        raise RecordsError(f"{path}:{n}: {why}")


def record_problem(rec) -> str | None:
    """Why ``rec`` is not a tuning record (None when it is one): a JSON object with a
    string ``task``, an ``hw`` (string, or null for tasks without hardware), a ``knobs``
    object, and a finite number ``cost`` > 0 when ``valid`` is true."""
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
    if "target" in rec and rec["target"] is not None and not isinstance(rec["target"], str):
        return "a 'target' that is not a string"
    if rec.get("valid"):
        c = rec.get("cost")
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not math.isfinite(c) or c <= 0:
            return "a valid record without a finite cost > 0"
    return None


def _impossible(rec: dict, checks: dict) -> str | None:
    """Why a well-formed record cannot be true (None: plausible, or nothing to check): for
    an accelerator target, a hardware name this version cannot parse, knobs outside the
    task's schedule space, a cost below the compute bound (a forged record)."""
    target, hw = rec.get("target"), rec.get("hw")
    if not target or not hw:
        return None
    key = (target, rec["task"], hw)
    if key not in checks:
        checks[key] = _checker(target, rec, hw)
    check = checks[key]
    return check(rec) if callable(check) else check


#: what checks the records of one (target, task, hardware) (``"module:function"``, loaded
#: lazily: the targets sit above dcoc.search and are never imported here)
RECORD_CHECK = "dcoc.targets.hooks:record_checker"


def _checker(target: str, rec: dict, hw: str):
    """:data:`RECORD_CHECK`'s verdict for ``rec``'s key: None, a problem, or a function."""
    try:
        from dcoc.registry import load

        make = load(RECORD_CHECK)
    except Exception:  # noqa: BLE001 - no target registry: nothing to check
        return None
    return make(target, rec, hw)


def _append_whole(path: str, data: bytes) -> None:
    """Append ``data`` and fsync; if any of it cannot be written (disk full, file-size
    limit), cut the file back to where it was: no partial batch is left behind."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        start = os.lseek(fd, 0, os.SEEK_END)
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        except OSError:
            try:
                os.ftruncate(fd, start)
            except OSError:
                pass
            raise
    finally:
        os.close(fd)


def _repair_tail(path: str) -> None:
    """Before appending: a last line without its newline is completed when it is a record
    (it was counted on load), else cut (left by a crash mid-write)."""
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return
    with open(path, "rb+") as f:
        f.seek(-1, os.SEEK_END)
        if f.read(1) == b"\n":
            return
        size = f.seek(0, os.SEEK_END)
        back = min(size, 1 << 20)
        f.seek(size - back)
        tail = f.read()
        nl = tail.rfind(b"\n")
        if nl < 0 and back < size:  # a last line over 1 MiB: not a record
            f.seek(0)
            data = f.read()
            nl = data.rfind(b"\n")
            cut = nl + 1
            f.truncate(cut)
            return
        piece = tail[nl + 1:]
        rec, _ = _parse_line(piece)
        if rec is not None:
            f.seek(0, os.SEEK_END)
            f.write(b"\n")
        else:
            f.truncate(size - len(piece))
