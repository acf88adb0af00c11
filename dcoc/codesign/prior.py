"""Warm-start of DCOC's co-design from the measurements of *other* models (transfer).

A :class:`Prior` holds measurements ``(layer, hardware, schedule, seconds)`` of other
models on the same target and the hardware configs their runs found best.
:class:`dcoc.codesign.DCOCCoDesign` (``prior=``) uses it

* to pre-fit the per-kind cost models (the features -- workload descriptor, hardware,
  schedule -> efficiency = ideal / measured seconds -- are model-independent) before the
  target model's first measurement;
* to put the source runs' best hardware configs on the shortlist of configs to open.

Prior measurements are never counted as trials, never measured again and never written
to the target run's records (they live in the driver's cost-model data only).

Sources: in-memory :class:`~dcoc.codesign.Session` s (:meth:`Prior.from_sessions`), or
run directories / ``records.jsonl`` files of earlier co-design runs (:meth:`Prior.load`;
``dcoc tune --warm-start``).  A records file names a workload by its key, which does not
say everything about the workload (padding, dilation); the layers of a run are therefore
written next to its records (``layers.json``, :func:`write_layers`) and read back from
there.  Without that file a conv2d's padding is inferred from the recorded throughput
(``info.gops``) and a row that cannot be resolved is skipped.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os

from dcoc.errors import DcocError
from dcoc.targets.registry import DEFAULT_TARGET

LAYERS_FILE = "layers.json"


@dataclasses.dataclass
class Prior:
    """Measurements and best hardware of other models' co-design runs (see the module doc).

    ``rows``: ``[(Layer, hw, knobs, seconds | inf)]``; ``best_hw``: hardware configs, best
    first (each source's ranking interleaved); ``sources``: labels, for messages.
    """

    rows: list = dataclasses.field(default_factory=list)
    best_hw: list = dataclasses.field(default_factory=list)
    sources: list = dataclasses.field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rows)

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_sessions(cls, sessions) -> "Prior":
        """From finished :class:`~dcoc.codesign.Session` s (other models, same target/board)."""
        p = cls()
        rankings = []
        for s in sessions:
            for (hname, li, key), cost in s.measured.items():
                p.rows.append((s.layers[li], s.hw[hname], dict(key), cost))
            lat = {h: s.latency(h) for h in s.complete_hws()}
            rankings.append([s.hw[h] for h in sorted(lat, key=lat.get)])
            p.sources.append(f"session {s.tuner}/{s.seed} ({len(s.layers)} layers)")
        p.best_hw = _interleave(rankings)
        return p

    @classmethod
    def load(cls, paths, target=DEFAULT_TARGET, board=None) -> "Prior":
        """From run directories (``records.jsonl`` [+ ``layers.json``]) or
        records files; DcocError (one line) for a missing or corrupt source."""
        from dcoc.search.records import Records
        from dcoc.targets import get as get_target

        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        paths = list(paths or [])
        if not paths:
            raise DcocError("warm start: no source given (a run directory or records.jsonl)")
        tg = get_target(target)
        bd = tg.board(board) if board is not None else tg.board(tg.default_board)
        p = cls()
        rankings = []
        for src in paths:
            src = os.fspath(src)
            if os.path.isdir(src):
                rec_path = os.path.join(src, "records.jsonl")
                if not os.path.isfile(rec_path):
                    raise DcocError(f"warm start: {src} holds no records.jsonl (not a dcoc run directory)")
            elif os.path.isfile(src):
                rec_path = src
            else:
                raise DcocError(f"warm start: {src} does not exist (give a run directory or records.jsonl)")
            try:
                rows = Records.load(rec_path).rows
            except DcocError as exc:  # RecordsError: a corrupt file
                raise DcocError(f"warm start: {exc}") from None
            layers = read_layers(os.path.join(os.path.dirname(rec_path), LAYERS_FILE), tg)
            n0 = len(p.rows)
            best: dict = {}        # (hw name, task key) -> best seconds
            hws: dict = {}
            for r in rows:
                if r.get("target") not in (None, tg.name):
                    continue
                layer = layers.get(r["task"]) or tg.layer_from_record(r)
                hw = hws.get(r["hw"]) if r["hw"] in hws else _hw_from_name(r["hw"], tg, bd)
                hws[r["hw"]] = hw
                if layer is None or hw is None:
                    continue
                cost = float(r["cost"]) if r.get("valid") and r.get("cost") is not None else math.inf
                p.rows.append((layer, hw, dict(r["knobs"]), cost))
                if math.isfinite(cost):
                    k = (r["hw"], r["task"])
                    best[k] = min(best.get(k, math.inf), cost)
            if len(p.rows) == n0:
                raise DcocError(f"warm start: {rec_path} has no {tg.name} measurement on board {bd.name} "
                                "that can be used")
            tasks = {t for _, t in best}
            counts = {k: l.count for k, l in layers.items()}
            lat = {}
            for h in {h for h, _ in best}:
                if all((h, t) in best for t in tasks):
                    lat[h] = sum(counts.get(t, 1) * best[(h, t)] for t in tasks)
            rankings.append([hws[h] for h in sorted(lat, key=lat.get)])
            p.sources.append(rec_path)
        p.best_hw = _interleave(rankings)
        return p


def _interleave(rankings: list) -> list:
    out, seen = [], set()
    for i in range(max((len(r) for r in rankings), default=0)):
        for r in rankings:
            if i < len(r) and r[i].name not in seen:
                seen.add(r[i].name)
                out.append(r[i])
    return out


# ---------------------------------------------------------------------- layers.json
def _obj(o):
    """A dataclass instance as ``{"class": module.qualname, "fields": {...}}`` (else as is)."""
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        return {"class": f"{type(o).__module__}.{type(o).__qualname__}",
                "fields": {f.name: getattr(o, f.name) for f in dataclasses.fields(o)}}
    return o


def _unobj(d):
    if isinstance(d, dict) and "class" in d and "fields" in d:
        mod, _, name = d["class"].rpartition(".")
        if not mod.startswith("dcoc."):
            raise ValueError(f"class {d['class']} is not a dcoc class")
        from dcoc.registry import load

        cls = load(f"{mod}:{name}")
        f = {k: tuple(v) if isinstance(v, list) else v for k, v in d["fields"].items()}
        return cls(**f)
    return d


def write_layers(path: str, layers) -> None:
    """Write a run's layers (workload, epilogue, count, kind) next to its records."""
    rows = [{"key": l.key, "name": l.name, "count": int(l.count), "kind": l.kind, "target": l.target,
             "workload": _obj(l.workload), "epilogue": _obj(l.epilogue)} for l in layers]
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(rows, f)
    os.replace(tmp, path)


def read_layers(path: str, tg, what: str = "warm start") -> dict:
    """``{records key: Layer}`` from a ``layers.json`` ({} if there is none)."""
    from dcoc.readfile import read_json
    from dcoc.targets.base import Layer

    if not os.path.lexists(path):
        return {}
    rows = read_json(path, f"{what}: layers file", expect=list)
    try:
        out = {}
        for r in rows:
            layer = Layer(r["name"], _unobj(r["workload"]), int(r["count"]), r["kind"],
                          epilogue=_unobj(r["epilogue"]), target=r.get("target", tg.name))
            out[r["key"]] = layer
        return out
    except (OSError, ValueError, KeyError, TypeError, AttributeError, ImportError, DcocError) as exc:
        raise DcocError(f"{what}: {path} is not a layers file ({type(exc).__name__}: {exc})") from None


def _hw_from_name(name: str, tg, bd):
    for spec in (name, name + "_100MHz_bus8"):
        try:
            hw = tg.parse_hw(spec, bd.name)
        except DcocError:
            continue
        if hw is not None and hw.name == name:
            return hw if not tg.violations(hw, bd) else None
    return None


def as_prior(warm_start, target=DEFAULT_TARGET, board=None) -> Prior | None:
    """A :class:`Prior` from what users pass: None, a Prior, Sessions, or paths."""
    if warm_start is None or isinstance(warm_start, Prior):
        return warm_start
    items = [warm_start] if isinstance(warm_start, (str, os.PathLike)) else list(warm_start)
    if items and all(hasattr(x, "measured") and hasattr(x, "layers") for x in items):
        return Prior.from_sessions(items)
    if not all(isinstance(x, (str, os.PathLike)) for x in items):
        raise DcocError("warm_start must be run directories / records.jsonl paths, Sessions or a Prior")
    return Prior.load(items, target, board)


__all__ = ["LAYERS_FILE", "Prior", "as_prior", "read_layers", "write_layers"]
