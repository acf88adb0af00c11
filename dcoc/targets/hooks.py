"""What :mod:`dcoc.search` reaches by name through its registries (never by import:
the targets sit above the search layer).

* :func:`target_measurer` -- the ``"simulator"`` entry of
  :data:`dcoc.search.measure.REGISTRY`: a target's own measurer;
* :func:`record_checker` -- :data:`dcoc.search.records.RECORD_CHECK`: what a record of a
  (target, task, hardware) must satisfy: a hardware name this version parses, knobs of
  the task's schedule space, a cost not below the compute bound (forged records are
  skipped on load).
"""
from __future__ import annotations

import math

from dcoc.targets.registry import available, get


def target_measurer(target: str | None = None, n_workers: int | None = None, **kw):
    """The target's own measurer (default: the default target's; VTA: the simulator process
    pool; systolic: its tile-stream simulator)."""
    return get(target).measurer(n_workers=n_workers, **kw)


def record_checker(target: str, rec: dict, hw: str):
    """What every record of ``rec``'s (target, task, ``hw``) must satisfy: None (nothing to
    check: a target this version does not know), a string (why no record of them can be
    true: a hardware name this version cannot parse), or a function ``row -> problem or
    None`` (knobs of the task's schedule space; a cost not below the compute bound)."""
    try:
        if target not in available():
            return None
        tg = get(target)
    except Exception:  # noqa: BLE001 - no target registry: nothing to check
        return None
    try:
        h = tg.parse_hw(hw)
    except Exception as exc:  # noqa: BLE001 - a name this version cannot read
        return f"hardware '{hw[:80]}' is not a {target} config this version can read ({exc})"
    if h is None:
        return f"hardware '{hw[:80]}' is not a {target} config"
    try:
        layer = tg.layer_from_record({k: v for k, v in rec.items() if k != "info"})
    except Exception:  # noqa: BLE001 - a workload this version cannot read: nothing to check
        layer = None
    if layer is None:
        return None
    space = floor = None
    try:
        space = tg.sw_space(layer, h)
        floor = float(tg.ideal_seconds(layer, h))
    except Exception:  # noqa: BLE001 - best effort: check what could be built
        pass
    if floor is not None and not (math.isfinite(floor) and floor > 0):
        floor = None
    where = f"{rec.get('task_name') or rec['task']} on {hw}"

    def check(row: dict) -> str | None:
        if space is not None:
            why = knobs_problem(space, row["knobs"], bool(row.get("valid")))
            if why:
                return f"{why} the schedule space of {where}"
        if floor is not None and row.get("valid") and row["cost"] < floor * (1 - 1e-6):
            return f"cost {row['cost']:.3g} s is below the compute bound {floor:.3g} s of {where}"
        return None

    return check


def knobs_problem(space, knobs: dict, valid: bool) -> str | None:
    """Why ``knobs`` is not a point of ``space`` (its names; values of the knob's type;
    for a valid record, values among the knob's choices), e.g. "knob 'bogus' is not in"."""
    names = [k.name for k in space.knobs]
    extra = [str(n)[:40] for n in knobs if n not in names]
    if extra:
        return f"knob '{extra[0]}' is not in"
    missing = [n for n in names if n not in knobs]
    if missing:
        return f"knob {missing[0]} is missing from"
    for k in space.knobs:
        v = knobs[k.name]
        if isinstance(v, bool) or not isinstance(v, type(k.choices[0])):
            kind = "an integer" if isinstance(k.choices[0], int) else f"a {type(k.choices[0]).__name__}"
            return f"knob {k.name} = {str(v)[:40]!r} is not {kind} in"
        if valid and v not in k.choices:
            return f"knob {k.name} = {v} is not a choice of"
    return None
