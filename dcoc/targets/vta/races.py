"""SRAM race check of a simulated VTA instruction stream (``run_program(check_races=True)``):
two modules touching overlapping SRAM ranges of one buffer at overlapping times, at least
one writing, means a dependency token is missing."""
from __future__ import annotations

from dcoc.errors import SimulationError

__all__ = ["check_races"]


def check_races(log, insns, module_names) -> None:
    """SimulationError when two modules touch overlapping SRAM ranges of the same buffer
    at overlapping times with at least one write (a missing dependency token).
    ``log``: the engine's access log; ``module_names``: the names of the module ids."""
    by_buf: dict = {}
    for rec in log:
        by_buf.setdefault(rec[0], []).append(rec)
    for buf, recs in by_buf.items():
        writers = [r for r in recs if r[6]]
        if not writers:
            continue
        recs.sort(key=lambda r: r[2])
        active: list = []
        for r in recs:
            active = [a for a in active if a[3] > r[2]]
            for a in active:
                if a[1] == r[1] or not (a[6] or r[6]):
                    continue
                if a[4] < r[5] and r[4] < a[5]:
                    w, o = (a, r) if a[6] else (r, a)
                    raise SimulationError(
                        f"SRAM race on {buf}[{max(a[4], r[4])}..{min(a[5], r[5])}): "
                        f"{module_names[w[1]]} writes ({insns[w[7]]}) while "
                        f"{module_names[o[1]]} {'writes' if o[6] else 'reads'} ({insns[o[7]]}) "
                        f"in cycles {max(a[2], r[2])}..{min(a[3], r[3])} (missing dependency token?)")
            active.append(r)
