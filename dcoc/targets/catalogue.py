"""Target-neutral benchmark layers: ResNet-18's conv shapes as plain data.

Every target builds its own workload from a shape (VTA:
:func:`dcoc.targets.vta.catalogue.resnet18_layer`; systolic: ``parse_workload("C2")``);
``dcoc tune-task C2`` and the benchmarks name layers by these keys.
"""
from __future__ import annotations

from dcoc.errors import DcocError

#: ResNet-18's conv layers C2..C11 (vta-reference §4.2): (H=W, CI, CO, K, S, count)
RESNET18_CONV = {
    "C2": (56, 64, 64, 3, 1, 4), "C3": (56, 64, 128, 3, 2, 1), "C4": (56, 64, 128, 1, 2, 1),
    "C5": (28, 128, 128, 3, 1, 3), "C6": (28, 128, 256, 3, 2, 1), "C7": (28, 128, 256, 1, 2, 1),
    "C8": (14, 256, 256, 3, 1, 3), "C9": (14, 256, 512, 3, 2, 1), "C10": (14, 256, 512, 1, 2, 1),
    "C11": (7, 512, 512, 3, 1, 3),
}


def resnet18_shape(name) -> tuple:
    """``(H=W, CI, CO, K, S, count)`` of ResNet-18 layer ``C2`` .. ``C11`` (any case)."""
    key = name.upper() if isinstance(name, str) else None
    if key not in RESNET18_CONV:
        raise DcocError(f"unknown ResNet-18 layer '{name}'; choose from {', '.join(RESNET18_CONV)}")
    return RESNET18_CONV[key]


def resnet18_spec(name: str) -> str:
    """The layer as a ``conv:H,W,CI,CO,K,S,P`` spec (padding K // 2)."""
    h, ci, co, k, s, _ = resnet18_shape(name)
    return f"conv:{h},{h},{ci},{co},{k},{s},{k // 2}"


__all__ = ["RESNET18_CONV", "resnet18_shape", "resnet18_spec"]
