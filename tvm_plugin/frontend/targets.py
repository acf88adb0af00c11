"""Target resolution: ``"vta"``, ``"llvm"``, ``"cuda"``, a TVM target JSON dict (or its
text) or a ``tvm.target.Target`` -> :class:`TargetSpec`."""
from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import dataclass
from typing import Any

from dcoc.errors import TargetError
from tvm_plugin.frontend.common import _first_line, _quiet_native_stderr


@dataclass(frozen=True)
class TargetSpec:
    """A resolved target.

    kind: ``"vta"`` or the TVM target kind (``"llvm"``, ``"cuda"``, ...).
    tvm: the ``tvm.target.Target`` (None for vta).  For llvm it always carries
        ``num-cores`` (MetaSchedule needs it).
    """

    kind: str
    tvm: Any = None

    @property
    def is_vta(self) -> bool:
        return self.kind == "vta"

    @property
    def device(self) -> str:
        """The ``Task.device`` of tasks extracted for this target (vta: per task)."""
        return self.kind

    def __str__(self) -> str:
        return "vta" if self.tvm is None else str(self.tvm)


def _physical_cores() -> int:
    try:
        import psutil

        n = psutil.cpu_count(logical=False)
    except Exception:  # noqa: BLE001 - psutil missing or unsupported platform
        n = None
    return int(n or os.cpu_count() or 1)


def _bad_target(spec) -> TargetError:
    shown = spec if isinstance(spec, str) else json.dumps(spec) if isinstance(spec, dict) \
        else str(spec)
    return TargetError(f"unknown target '{shown}'; expected vta, llvm, cuda or a TVM target "
                       "JSON dict")


def resolve_target(target) -> TargetSpec:
    """Normalize a target given as ``"vta"``, ``"llvm"``, ``"cuda"``, a TVM target JSON dict
    (or its JSON text), or a ``tvm.target.Target``.

    * ``"llvm"`` means this machine: ``{"kind": "llvm", "mcpu": <host cpu>, "num-cores":
      <physical cores>}``.  A dict or Target without ``num-cores`` gets it filled in.
    * ``"cuda"`` uses the first GPU's architecture when a GPU is present.
    * Anything else raises :class:`TargetError` (one line).
    """
    if isinstance(target, TargetSpec):
        return target
    if isinstance(target, str):
        text = target.strip()
        if text.lower() == "vta":
            return TargetSpec("vta")
        if text.startswith("{"):
            try:
                target = json.loads(text)
            except json.JSONDecodeError as exc:
                raise TargetError(f"target '{text}' is not valid JSON: {exc.msg} at column "
                                  f"{exc.colno}") from None
        elif re.match(r"^[A-Za-z]\w*\s+-", text):
            kind = text.split()[0]
            raise TargetError(f"TVM 0.27 no longer accepts target strings like '{text}'; use a "
                              f"JSON dict, e.g. '{{\"kind\": \"{kind}\", \"mcpu\": ...}}'")
        elif not re.fullmatch(r"[A-Za-z0-9_./-]+", text):
            raise _bad_target(text)
    import tvm

    with _quiet_native_stderr():
        if isinstance(target, str):
            kind = target.strip()
            if kind == "llvm":
                cfg = {"kind": "llvm", "num-cores": _physical_cores()}
                with contextlib.suppress(Exception):
                    cpu = tvm.target.codegen.llvm_get_system_cpu()
                    if cpu and cpu != "generic":
                        cfg["mcpu"] = cpu
                return TargetSpec("llvm", tvm.target.Target(cfg))
            if kind == "cuda":
                with contextlib.suppress(Exception):
                    dev = tvm.cuda(0)
                    if dev.exist:
                        return TargetSpec("cuda", tvm.target.Target.from_device(dev))
                return TargetSpec("cuda", tvm.target.Target({"kind": "cuda", "arch": "sm_50"}))
            try:
                t = tvm.target.Target(kind)
            except Exception:  # noqa: BLE001 - TVM raises ValueError/TVMError
                raise _bad_target(kind) from None
        elif isinstance(target, dict):
            if "kind" not in target:
                raise TargetError(f"target {json.dumps(target)} has no \"kind\"; expected vta, "
                                  "llvm, cuda or a TVM target JSON dict")
            if str(target["kind"]).lower() == "vta":
                return TargetSpec("vta")
            try:
                t = tvm.target.Target(dict(target))
            except Exception as exc:  # noqa: BLE001
                raise TargetError(f"invalid TVM target {json.dumps(target)}: "
                                  f"{_first_line(exc)}") from None
        elif isinstance(target, tvm.target.Target):
            t = target
        else:
            raise _bad_target(target)
        if t.kind.name == "llvm" and "num-cores" not in t.attrs:
            cfg = _target_config(t)
            cfg["num-cores"] = _physical_cores()
            t = tvm.target.Target(cfg)
    return TargetSpec(t.kind.name, t)


def _target_config(t) -> dict:
    cfg = {}
    for k, v in t.export().items():
        if k in ("tag", "keys") and not v:
            continue
        if k == "host":
            continue
        cfg[k] = list(v) if isinstance(v, (tuple, list)) or type(v).__name__ == "Array" else v
    return cfg


#: TVM target kinds that need a device on this machine to tune (measure) on, and TVM's
#: device constructor for each
_DEVICE_KINDS = {"cuda": "cuda", "rocm": "rocm", "vulkan": "vulkan", "metal": "metal", "opencl": "opencl"}


def require_device(target) -> None:
    """TargetError (one line) when ``target`` (a name, a JSON dict or its text, or a
    ``tvm.target.Target``) needs a GPU this machine does not have -- checked before any work,
    so that ``--target cuda`` without a GPU is one line, not a traceback after tuning began."""
    kind = None
    if isinstance(target, str):
        text = target.strip()
        if text.startswith("{"):
            with contextlib.suppress(json.JSONDecodeError, AttributeError):
                kind = json.loads(text).get("kind")
        else:
            kind = text.split()[0] if text else None
    elif isinstance(target, dict):
        kind = target.get("kind")
    else:
        kind = getattr(getattr(target, "kind", None), "name", None)
    kind = str(kind or "").lower()
    if kind not in _DEVICE_KINDS:
        return
    import tvm

    ok = False
    with _quiet_native_stderr(), contextlib.suppress(Exception):
        ok = bool(getattr(tvm, _DEVICE_KINDS[kind])(0).exist)
    if not ok:
        raise TargetError(f"target {kind}: this machine has no {kind} device (TVM finds no {kind}(0)); "
                          "tune on a machine with one, or use --target llvm")
