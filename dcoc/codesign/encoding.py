"""The joint (hardware, one layer's schedule) point of co-design.

A point is an int vector: the hardware knobs' choice positions, then the positions of one
layer's schedule knobs over the *union* of each knob's choices across the hardware space,
mapped onto the target's software *slots* (a value that is not a choice on the current
hardware is an invalid point).  The same layout serves every layer, so one search (or one
set of agents) covers the model.
"""
from __future__ import annotations

import math

import numpy as np

from dcoc.search.space import Knob, Space

#: the agents' context length (workload descriptor + kind + share + count, zero-padded)
CONTEXT_DIM = 18


class JointEncoding:
    """Encode and decode joint points of a session's layers on one board."""

    def __init__(self, session, board, hw_ranges=None):
        self.s = session
        self.target = session.target
        self.board = board
        self.hs = self.target.hw_space(board, hw_ranges)
        self.hw_knobs = tuple(k.name for k in self.hs.knobs)
        self.hw_choices = [np.array(k.choices) for k in self.hs.knobs]
        slots = self.target.slots
        self.union = [self.target.sw_union(layer, self.hs) for layer in session.layers]
        self.dims = np.array([[len(c) for c in self.hw_choices] + [len(c) for c in un] for un in self.union])
        # one joint space only to name the knobs for the agent split
        self.agent_space = Space([Knob(k.name, k.choices, "hw") for k in self.hs.knobs] +
                                 [Knob(n, (0,), "tile" if n.startswith("tile") else "thread") for n in slots])
        self._hw_cache: dict = {}
        self._space_cache: dict = {}
        self._fit_cache: dict = {}

    def shape(self, hw) -> tuple:
        """The compute-core shape of ``hw`` (e.g. VTA's BATCH x BLOCK_IN x BLOCK_OUT)."""
        return tuple(getattr(hw, k) for k in self.target.core_knobs)

    def hw_of(self, hpos: tuple):
        """The hardware config at hardware positions ``hpos`` (None if infeasible)."""
        if hpos not in self._hw_cache:
            vals = {k: int(self.hw_choices[i][p]) for i, (k, p) in enumerate(zip(self.hw_knobs, hpos))}
            reason = self.hs.check(vals)
            self._hw_cache[hpos] = None if reason else self.target.make_hw(vals, self.board)
        return self._hw_cache[hpos]

    def hw_pos(self, hw) -> tuple:
        return tuple(int(np.flatnonzero(self.hw_choices[i] == getattr(hw, k))[0])
                     for i, k in enumerate(self.hw_knobs))

    def space(self, li: int, hw) -> Space:
        """Layer ``li``'s schedule space on ``hw`` (cached)."""
        key = (li, hw.name)
        if key not in self._space_cache:
            self._space_cache[key] = self.target.sw_space(self.s.layers[li], hw)
        return self._space_cache[key]

    def fits(self, li: int, hw, knobs: dict) -> bool:
        """Whether ``knobs`` is a valid schedule of layer ``li`` on ``hw`` (static check, cached)."""
        key = (li, hw.name, Space.key(knobs))
        if key not in self._fit_cache:
            self._fit_cache[key] = self.space(li, hw).is_valid(knobs)
        return self._fit_cache[key]

    def knobs_of(self, li: int, hw, spos: tuple) -> dict | None:
        """Union positions -> knobs valid for ``hw`` (None if a value is not a choice or does not fit)."""
        layer = self.s.layers[li]
        knobs = {}
        for k in self.space(li, hw).knobs:
            sl = self.target.slot(layer, k.name)
            v = self.union[li][sl][spos[sl]]
            if v not in k.choices:
                return None
            knobs[k.name] = v
        return knobs if self.fits(li, hw, knobs) else None

    def sw_pos(self, li: int, knobs: dict) -> tuple:
        layer = self.s.layers[li]
        pos = [0] * len(self.target.slots)
        for name, v in knobs.items():
            sl = self.target.slot(layer, name)
            pos[sl] = self.union[li][sl].index(v)
        return tuple(pos)

    def decode(self, point, li: int):
        """(hw, knobs) of a joint point of layer ``li`` (hw None: infeasible; knobs None: invalid)."""
        nh = len(self.hw_knobs)
        hw = self.hw_of(tuple(int(x) for x in point[:nh]))
        if hw is None:
            return None, None
        return hw, self.knobs_of(li, hw, tuple(int(x) for x in point[nh:]))

    def context(self, li: int) -> np.ndarray:
        """Layer ``li``'s context for the agents: its descriptor, kind, share of the MACs, count."""
        layers = self.s.layers
        layer = layers[li]
        d = self.target.descriptor(layer)
        total = sum(l.count * l.workload.macs for l in layers)
        share = layer.count * layer.workload.macs / total
        c = [math.log2(max(v, 1)) / 10.0 for v in d] + [float(layer.kind == "dense"), share,
                                                         math.log2(layer.count + 1) / 4.0]
        return np.array(c + [0.0] * (CONTEXT_DIM - len(c)), dtype=np.float32)

    def valid_schedules(self, li: int, hw) -> list[dict]:
        """Every valid schedule of layer ``li`` on ``hw``."""
        return [k for k in self.space(li, hw) if self.fits(li, hw, k)]

    def features(self, li: int, hw, knob_list: list[dict]) -> np.ndarray:
        """The cost model's features of layer ``li``'s schedules on ``hw``."""
        sp = self.space(li, hw)
        pts = np.array([sp.point(k) for k in knob_list], dtype=np.int64).reshape(len(knob_list), -1)
        return sp.point_features(pts)
