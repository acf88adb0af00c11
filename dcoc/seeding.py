"""One seed controls every random choice.

Child generators are derived deterministically from the run seed and a string path
(``child_rng(seed, "task3", "agent_hw")``), so adding a consumer never shifts another
consumer's stream.
"""
from __future__ import annotations

import hashlib

import numpy as np


def _key(parts) -> list[int]:
    out = []
    for p in parts:
        if isinstance(p, (int, np.integer)):
            out.append(int(p) & 0xFFFFFFFF)
        else:
            h = hashlib.sha256(str(p).encode()).digest()
            out.append(int.from_bytes(h[:4], "little"))
    return out


def child_seed(seed: int, *path) -> int:
    """A 32-bit seed derived from ``seed`` and a path of names/ints."""
    ss = np.random.SeedSequence([int(seed) & 0xFFFFFFFF, *_key(path)])
    return int(ss.generate_state(1, dtype=np.uint32)[0])


def child_rng(seed: int, *path) -> np.random.Generator:
    """A numpy Generator derived from ``seed`` and ``path``."""
    return np.random.default_rng(child_seed(seed, *path))
