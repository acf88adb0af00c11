"""What :mod:`dcoc.search` reaches by name through its registries (never by import:
the targets sit above the search layer).

* :func:`target_measurer` -- the ``"simulator"`` entry of
  :data:`dcoc.search.measure.REGISTRY`: a target's own measurer;
* :func:`cost_floor` -- :data:`dcoc.search.records.COST_FLOOR`: the compute bound a
  record's cost cannot beat (forged records are skipped on load).
"""
from __future__ import annotations

import math

from dcoc.targets.registry import available, get


def target_measurer(target: str | None = None, n_workers: int | None = None, **kw):
    """The target's own measurer (default: the default target's; VTA: the simulator process
    pool; systolic: its tile-stream simulator)."""
    return get(target).measurer(n_workers=n_workers, **kw)


def cost_floor(target: str, rec: dict, hw: str):
    """The compute bound (s) of ``rec``'s workload on ``hw``; None when it cannot be told
    (an unknown target, a hardware name or workload this version cannot read)."""
    try:
        if target not in available():
            return None
        tg = get(target)
    except Exception:  # noqa: BLE001 - no target registry: nothing to check
        return None
    try:
        h = tg.parse_hw(hw)
    except Exception:  # noqa: BLE001 - a name this version cannot read: nothing to check
        return None
    try:
        layer = tg.layer_from_record({k: v for k, v in rec.items() if k != "info"})
        if layer is None:
            return None
        floor = float(tg.ideal_seconds(layer, h))
        return floor if math.isfinite(floor) and floor > 0 else None
    except Exception:  # noqa: BLE001 - best effort
        return None
