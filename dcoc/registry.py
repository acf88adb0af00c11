"""The one loader behind every registry of plug-ins (targets, tuners, measurers).

A registry maps a user-facing name to a ``"module:attribute"`` string; the module is
imported only when the name is used, so listing names (``--help``) stays cheap.
"""
from __future__ import annotations

import importlib

from dcoc.errors import DcocError


def load(spec: str):
    """The object a ``"module:attribute"`` spec names (``attribute`` may be dotted)."""
    mod, sep, attr = str(spec).partition(":")
    if not sep or not mod or not attr:
        raise DcocError(f"registry entry {spec!r} is not of the form 'module:attribute'")
    obj = importlib.import_module(mod)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def lookup(registry: dict, name, what: str) -> str:
    """``registry[name]`` (names compared stripped and lower-case); a one-line error naming
    the choices for an unknown ``name``."""
    key = str(name).strip().lower()
    if key not in registry:
        raise DcocError(f"unknown {what} '{name}'; choose one of {', '.join(registry)}")
    return registry[key]
