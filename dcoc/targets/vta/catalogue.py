"""Benchmark-only material: the ResNet-18 layer catalogue (C2..C11) and exhaustive tables.

Used by ``dcoc tune-task C2``, the ``scripts/`` benchmarks and tests -- never by the
tuners or drivers themselves.

* :func:`resnet18_layer` -- ResNet-18's conv layers (:data:`dcoc.targets.catalogue.RESNET18_CONV`)
  as VTA workloads;
* :func:`exhaustive` -- every schedule of a layer simulated once, cached on disk
  (keyed by :func:`timing_model_tag`, so a change of the timing model invalidates it);
  measure with :class:`dcoc.search.measure.TableMeasurer`.
"""
from __future__ import annotations

from dcoc.search.space import Space
from dcoc.targets.catalogue import RESNET18_CONV, resnet18_shape
from dcoc.targets.vta.layer import simulate
from dcoc.targets.vta.workloads import Conv2DWorkload


def _epilogue(epilogue):
    from dcoc.targets.vta.spaces import _epilogue as ep

    return ep(epilogue)


def sw_space(wl, hw, epilogue="default"):
    from dcoc.targets.vta.spaces import sw_space as sp

    return sp(wl, hw, epilogue)


def resnet18_layer(name: str):
    """The Conv2DWorkload of ResNet-18 layer ``C2`` .. ``C11``."""
    h, ci, co, k, s, _ = resnet18_shape(name)
    return Conv2DWorkload(batch=1, height=h, width=h, in_channels=ci, out_channels=co,
                          kernel=(k, k), stride=(s, s), padding=(k // 2, k // 2))


def cache_root(name: str) -> str:
    """``$DCOC_CACHE/name`` (else ``$XDG_CACHE_HOME/dcoc/name``, else ``~/.cache/dcoc/name``):
    caches of simulated times (:func:`dcoc.paths.cache_root`)."""
    from dcoc.paths import cache_root as _root

    return _root(name)


def timing_model_tag(epilogue="default") -> str:
    """A short hash of the timing constants, the simulator's source and ``epilogue``:
    caches of simulated times are keyed by it, so any change of the timing model
    invalidates them."""
    import hashlib
    import json
    import os
    from dataclasses import asdict

    from dcoc.targets.vta.simulator import DEFAULT_TIMING

    h = hashlib.sha256(json.dumps(asdict(DEFAULT_TIMING), sort_keys=True, default=str).encode())
    src = os.path.dirname(os.path.abspath(__file__))
    for fname in sorted(os.listdir(src)):  # the simulator's code is part of the key
        if fname.endswith(".py"):
            with open(os.path.join(src, fname), "rb") as f:
                h.update(f.read())
    h.update(repr(_epilogue(epilogue)).encode())
    return h.hexdigest()[:12]


def exhaustive(wl, hw, cache_dir: str | None = None, epilogue="default") -> dict:
    """Simulate every point of ``wl``'s schedule space on ``hw``: ``{config key: seconds | None}``.

    Cached as JSON under ``cache_dir`` (default ``$DCOC_CACHE/exhaustive`` or
    ``~/.cache/dcoc/exhaustive``), keyed by workload, hardware and
    :func:`timing_model_tag`.
    """
    import json
    import os

    root = cache_dir or cache_root("exhaustive")
    ep = _epilogue(epilogue)
    tag = timing_model_tag(epilogue)
    path = os.path.join(root, f"{wl.name}@{hw.name}@{tag}.json")
    if os.path.exists(path):
        with open(path) as f:
            rows = json.load(f)
        return {tuple((k, v) for k, v in r[0]): r[1] for r in rows}
    sp = sw_space(wl, hw)
    table = {}
    for cfg in sp:
        r = simulate(wl, hw, cfg, epilogue=ep)
        table[Space.key(cfg)] = float(r.seconds) if r.valid else None
    os.makedirs(root, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump([[list(map(list, k)), v] for k, v in table.items()], f)
    os.replace(tmp, path)
    return table


__all__ = ["RESNET18_CONV", "cache_root", "exhaustive", "resnet18_layer", "sw_space", "timing_model_tag"]
