"""Search spaces: discrete knobs with ordered choices, constraints, index mapping, features.

A :class:`Space` is a product of :class:`Knob` s.  A *config* is a plain
``dict[str, int]`` (knob name -> chosen value); a *point* is the tuple of choice
indices (one per knob, in knob order); an *index* is the mixed-radix integer of a point
(the first knob varies slowest).  All three map onto each other exactly.

Constraints are cheap predicates a tuner can query before spending a measurement
(``space.check(config) -> None | reason``).  They never replace the measurer's own
validity check: a config that passes here may still be invalid when measured (e.g. a
micro-op cache overflow only the compiler sees), and comes back as an error result.

Features for cost models (:meth:`Space.features`) are the knob values, log2-scaled,
followed by the space's constant descriptor (workload and hardware numbers, log-scaled),
so one model can learn across tasks and hardware configs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

from dcoc.errors import KnobError

Config = dict  # dict[str, int]
Constraint = Callable[[dict], "str | None"]


@dataclass(frozen=True)
class Knob:
    """One tunable parameter.

    ``group`` tags the knob's role ("hw", "tile", "thread", "order", ...): DCOC's default
    agent split is by group; other tuners ignore it.
    """

    name: str
    choices: tuple
    group: str = "sw"

    def __post_init__(self):
        if not self.choices:
            raise KnobError(f"knob '{self.name}' has no choices")
        object.__setattr__(self, "choices", tuple(self.choices))

    def __len__(self) -> int:
        return len(self.choices)

    @property
    def feature_table(self) -> np.ndarray:
        """Numeric features of each choice, shape (n_choices, width).

        int/float choices -> log2(value); tuple choices (e.g. MetaSchedule tile
        decisions) -> log2 of each element; anything else -> the choice index.
        """
        table = self.__dict__.get("_ftable")
        if table is None:
            rows = []
            for i, c in enumerate(self.choices):
                if isinstance(c, (tuple, list)):
                    rows.append([_log2(v) for v in c])
                elif isinstance(c, (int, float, np.integer, np.floating)) and not isinstance(c, bool):
                    rows.append([_log2(c)])
                else:
                    rows.append([float(i)])
            width = max(len(r) for r in rows)
            table = np.zeros((len(rows), width), dtype=np.float32)
            for i, r in enumerate(rows):
                table[i, : len(r)] = r
            object.__setattr__(self, "_ftable", table)
        return table

    def index(self, value) -> int:
        try:
            return self.choices.index(value)
        except ValueError:
            raise KnobError(
                f"invalid value {value!r} for knob '{self.name}'; choices are {list(self.choices)}"
            ) from None


def _log2(v) -> float:
    v = float(v)
    return math.log2(v) if v > 0 else (-math.log2(-v) if v < 0 else 0.0)


@dataclass
class Space:
    """A product of knobs with optional constraints.

    Parameters
    ----------
    knobs: the knobs, in order (the first varies slowest in the index).
    constraints: predicates ``config -> None | reason``; a config is valid iff all return None.
    descriptor: constant numbers describing the task/hardware (appended to features).
    name: free text for display.
    feature_fn: optional ``(space, points) -> array (n, f)`` of extra, domain-specific
        features (e.g. the VTA tile footprints), appended after the descriptor.
    """

    knobs: list
    constraints: list = field(default_factory=list)
    descriptor: dict = field(default_factory=dict)
    name: str = ""
    feature_fn: Callable | None = field(default=None, repr=False)

    def __post_init__(self):
        names = [k.name for k in self.knobs]
        if len(set(names)) != len(names):
            raise KnobError(f"duplicate knob names in space: {names}")
        self._by_name = {k.name: k for k in self.knobs}
        self._radix = [len(k) for k in self.knobs]
        # strides for the mixed-radix index (first knob slowest)
        strides, s = [], 1
        for r in reversed(self._radix):
            strides.append(s)
            s *= r
        self._strides = list(reversed(strides))
        self._size = s

    # ------------------------------------------------------------------ basics
    def __len__(self) -> int:
        return self._size

    @property
    def size(self) -> int:
        return self._size

    @property
    def names(self) -> list[str]:
        return [k.name for k in self.knobs]

    @property
    def dims(self) -> list[int]:
        """Number of choices per knob."""
        return list(self._radix)

    def knob(self, name: str) -> Knob:
        try:
            return self._by_name[name]
        except KeyError:
            raise KnobError(f"unknown knob '{name}'; knobs are {self.names}") from None

    def __contains__(self, config) -> bool:
        try:
            self.point(config)
        except KnobError:
            return False
        return True

    # ----------------------------------------------------------- conversions
    def point(self, config: dict) -> tuple:
        """Config -> tuple of choice indices.  Raises KnobError on unknown/missing/bad knobs."""
        extra = set(config) - set(self._by_name)
        if extra:
            raise KnobError(f"unknown knob(s) {sorted(extra)}; knobs are {self.names}")
        out = []
        for k in self.knobs:
            if k.name not in config:
                raise KnobError(f"missing knob '{k.name}'")
            out.append(k.index(config[k.name]))
        return tuple(out)

    def config(self, point: Sequence[int]) -> dict:
        """Tuple of choice indices -> config."""
        return {k.name: k.choices[int(i)] for k, i in zip(self.knobs, point)}

    def index(self, config: dict) -> int:
        return sum(i * s for i, s in zip(self.point(config), self._strides))

    def point_of_index(self, index: int) -> tuple:
        if not 0 <= index < self._size:
            raise KnobError(f"index {index} outside the space of size {self._size}")
        out = []
        for s, r in zip(self._strides, self._radix):
            out.append((index // s) % r)
        return tuple(out)

    def get(self, index: int) -> dict:
        """Index -> config (AutoTVM's ``config_space.get``)."""
        return self.config(self.point_of_index(int(index)))

    @staticmethod
    def key(config: dict) -> tuple:
        """A hashable identity of a config (sorted items)."""
        return tuple(sorted(config.items()))

    # ------------------------------------------------------------- validity
    def check(self, config: dict) -> str | None:
        """None if the config is in the space and satisfies every constraint, else the reason."""
        try:
            self.point(config)
        except KnobError as exc:
            return str(exc)
        for c in self.constraints:
            reason = c(config)
            if reason:
                return reason
        return None

    def is_valid(self, config: dict) -> bool:
        return self.check(config) is None

    # -------------------------------------------------------------- sampling
    def sample_point(self, rng: np.random.Generator) -> tuple:
        return tuple(int(rng.integers(r)) for r in self._radix)

    def sample(self, rng: np.random.Generator, valid: bool = True, max_tries: int = 1000) -> dict:
        """A uniformly random config (rejection-sampled to satisfy the constraints if ``valid``)."""
        for _ in range(max_tries):
            cfg = self.config(self.sample_point(rng))
            if not valid or self.is_valid(cfg):
                return cfg
        raise KnobError(f"could not sample a valid config from space '{self.name}' in {max_tries} tries")

    def neighbors(self, point: Sequence[int], step: int = 1) -> Iterator[tuple]:
        """Points differing in one knob by +-step choice positions."""
        for d, r in enumerate(self._radix):
            for delta in (-step, step):
                v = point[d] + delta
                if 0 <= v < r:
                    p = list(point)
                    p[d] = v
                    yield tuple(p)

    def __iter__(self) -> Iterator[dict]:
        for i in range(self._size):
            yield self.get(i)

    # -------------------------------------------------------------- features
    @property
    def feature_names(self) -> list[str]:
        names = []
        for k in self.knobs:
            w = k.feature_table.shape[1]
            names += [f"log2_{k.name}"] if w == 1 else [f"log2_{k.name}[{i}]" for i in range(w)]
        return names + [f"desc_{n}" for n in self.descriptor]

    def features(self, configs: Iterable[dict]) -> np.ndarray:
        """Feature matrix: log2 knob values (per element for tuple choices), then the
        constant log2 descriptor.  Extra features can be added by ``feature_fn``."""
        configs = list(configs)
        points = np.array([self.point(c) for c in configs], dtype=np.int64).reshape(len(configs), -1)
        return self.point_features(points)

    def point_features(self, points: np.ndarray) -> np.ndarray:
        """Vectorised :meth:`features` for an int array of points, shape (n, n_knobs)."""
        points = np.asarray(points, dtype=np.int64).reshape(-1, len(self.knobs))
        cols = [k.feature_table[points[:, d]] for d, k in enumerate(self.knobs)]
        if self.descriptor:
            desc = np.array([_log2(v) for v in self.descriptor.values()], dtype=np.float32)
            cols.append(np.broadcast_to(desc, (len(points), len(desc))))
        if self.feature_fn is not None:
            cols.append(np.asarray(self.feature_fn(self, points), dtype=np.float32))
        if not cols:
            return np.empty((len(points), 0), np.float32)
        return np.concatenate(cols, axis=1).astype(np.float32)

    def __repr__(self) -> str:
        dims = "x".join(str(r) for r in self._radix)
        return f"Space({self.name!r}, knobs={self.names}, dims={dims}, size={self._size})"


def product(*spaces: Space, name: str = "") -> Space:
    """The product of several spaces (knob names must be disjoint)."""
    knobs, cons, desc = [], [], {}
    for s in spaces:
        knobs += list(s.knobs)
        cons += list(s.constraints)
        desc.update(s.descriptor)
    return Space(knobs, cons, desc, name or " x ".join(s.name for s in spaces))


def hardware_space(ranges: dict, violations: Callable, board, name: str) -> Space:
    """The hardware knobs ``ranges`` (knob -> choices), constrained to the configs whose
    ``violations(config) -> [reasons]`` is empty; a :class:`~dcoc.errors.DcocError` raised
    while building a config counts as its reason.  Each distinct config is checked once.
    ``board`` (with ``bram36``, ``dsp``, ``lut``) becomes the descriptor."""
    from dcoc.errors import DcocError

    names = tuple(ranges)
    cache: dict = {}

    def fits(cfg):
        key = tuple(cfg[k] for k in names)
        if key not in cache:
            try:
                v = violations(cfg)
                cache[key] = "; ".join(v) if v else None
            except DcocError as exc:
                cache[key] = str(exc)
        return cache[key]

    return Space([Knob(k, tuple(ranges[k]), "hw") for k in names], [fits],
                 {"board_bram": board.bram36, "board_dsp": board.dsp, "board_lut": board.lut},
                 name=name)
