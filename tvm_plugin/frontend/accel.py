"""ONNX import, preflight and task extraction: the only place dcoc imports a model into TVM.

Pipeline (see ``docs/frontend.md``)::

    path / zoo name / ModelProto
      -> preflight      file, protobuf, ONNX checker, unsupported operators (all of them,
                        by name and count), dynamic input dims, --input-shape validation
      -> import         tvm.relax.frontend.onnx.from_onnx(keep_params_in_input=False)
                        -> DecomposeOpsForInference -> CanonicalizeBindings
                        -> fold constant weight arithmetic in numpy -> DeadCodeElimination
                        = Model.mod, the *unfused* module (give it to compile_relax)
      -> lower_for_tuning(mod, target)
                        library dispatch, LegalizeOps, AnnotateTIROpPattern, FoldConstant,
                        FuseOps, FuseTIR: the same sequence compile_relax runs, so the
                        MetaSchedule tasks and the database keys agree
      -> extract_tasks(mod, target) -> TaskList of dcoc.tasks.Task

Targets: ``vta`` (the conv2d/dense workloads VTA runs, found by walking the Relax graph,
plus the operators that stay on the CPU), ``llvm`` / ``cuda`` / a TVM target JSON dict /
a ``tvm.target.Target`` (the MetaSchedule tasks, classified by inspecting their PrimFuncs).

Every failure a user can cause raises :class:`dcoc.errors.ModelError` or
:class:`dcoc.errors.TargetError` with a single-line message; TVM is imported lazily, so
file-level errors are reported without paying for ``import tvm``.
"""
from __future__ import annotations

import collections
import contextlib
import gc
import io
import json
import math
import os
import re
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np

from dcoc.errors import ModelError, TargetError
from dcoc.tasks import Task, TaskList

if TYPE_CHECKING:  # pragma: no cover
    import onnx

__all__ = [
    "Model", "TargetSpec", "load", "load_model", "lower_for_tuning", "extract_tasks",
    "model_tasks", "resolve_target", "preflight", "unsupported_ops", "task_name",
]

#: ONNX domains whose operators the TVM frontend converts by op_type
_STANDARD_DOMAINS = ("", "ai.onnx")
#: contrib domain whose operators TVM also converts by op_type (Attention, SkipLayerNorm...)
_MS_DOMAIN = "com.microsoft"
#: ops the frontend handles outside its converter table
_DIRECT_OPS = {"If", "Constant"}

_CALL_OPS = {"relax.call_tir", "relax.call_tir_inplace", "relax.call_dps_packed",
             "relax.call_pure_packed", "relax.call_tir_with_grad"}


# ============================================================================ targets
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


# ============================================================================ output hygiene
_NATIVE_NOISE = re.compile(r"^\[\d\d:\d\d:\d\d\] \S+: Warning: ")


@contextlib.contextmanager
def _quiet_native_stderr():
    """Capture what TVM's C++ side writes to fd 2; drop its warnings, forward the rest."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real fd 2 (embedded interpreters)
        yield
        return
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode("utf-8", "replace")
            rest = [ln for ln in text.splitlines() if ln.strip() and not _NATIVE_NOISE.match(ln)]
            if rest:
                print("\n".join(rest), file=sys.stderr)


def _first_line(exc: BaseException) -> str:
    """A one-line summary of an exception: ``Type: message`` with newlines folded.

    TVM errors carry a C++/Python traceback before the message; only the message is kept.
    """
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if any(ln.startswith("Traceback") for ln in lines):
        frames = [i for i, ln in enumerate(lines)
                  if ln.startswith(("File ", "Traceback")) or re.match(r"^\d+: ", ln)]
        lines = lines[frames[-1] + 1:] if frames else lines
        lines = [ln for ln in lines if not ln.startswith("^")]
    msg = " ".join(lines) or type(exc).__name__
    if len(msg) > 400:
        msg = msg[:397] + "..."
    name = type(exc).__name__
    return msg if msg.startswith(name) else f"{name}: {msg}"


# ============================================================================ preflight
def _model_label(source, proto=None) -> str:
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    if proto is not None and proto.graph.name:
        return proto.graph.name
    return "<ModelProto>"


def _read_onnx(path: str, label: str | None = None) -> "onnx.ModelProto":
    """Parse an ONNX file (external data not loaded, but checked to exist) or raise
    ModelError."""
    import onnx
    from google.protobuf.message import DecodeError

    label = label or path
    if not os.path.exists(path):
        raise ModelError(f"model file '{path}' does not exist")
    if os.path.isdir(path):
        raise ModelError(f"'{path}' is a directory, not an ONNX file")
    if os.path.getsize(path) == 0:
        raise ModelError(f"'{label}' is an empty file, not an ONNX model")
    try:
        model = onnx.load_model(path, load_external_data=False)
    except (DecodeError, RuntimeError, ValueError, TypeError, UnicodeDecodeError) as exc:
        raise ModelError(f"'{label}' is not an ONNX model (protobuf parse failed: "
                         f"{_first_line(exc)})") from None
    except OSError as exc:
        raise ModelError(f"cannot read '{path}': {exc.strerror or exc}") from None
    if not model.HasField("graph") or model.ir_version <= 0 or not model.opset_import:
        raise ModelError(f"'{label}' is not an ONNX model (no graph, IR version or opset in the "
                         "protobuf)")
    base = os.path.dirname(os.path.abspath(path))
    missing = sorted({e.value for t in _all_initializers(model.graph)
                      if t.data_location == onnx.TensorProto.EXTERNAL
                      for e in t.external_data if e.key == "location"
                      and not os.path.exists(os.path.join(base, e.value))})
    if missing:
        raise ModelError(f"'{label}' references missing external data file(s): "
                         f"{', '.join(missing)} (expected next to the .onnx file)")
    return model


def _all_initializers(graph) -> Iterable:
    yield from graph.initializer
    for g in _subgraphs(graph):
        yield from g.initializer


def _subgraphs(graph) -> Iterable:
    """All graphs nested in node attributes (If/Loop/Scan bodies), recursively."""
    import onnx

    for node in graph.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield a.g
                yield from _subgraphs(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    yield g
                    yield from _subgraphs(g)


def _all_nodes(graph) -> Iterable:
    yield from graph.node
    for g in _subgraphs(graph):
        yield from g.node


def unsupported_ops(model: "onnx.ModelProto") -> collections.Counter:
    """``Counter`` of the operators in ``model`` (subgraphs included) that the TVM Relax ONNX
    frontend cannot convert.

    Keys are op types; operators from a non-standard domain are shown as ``domain::Op``
    (TVM converts by op type only, so a custom-domain op is never really supported, except
    the ``com.microsoft`` contrib ops that TVM implements).  Model-local functions must be
    inlined first (:func:`preflight` does).
    """
    from tvm.relax.frontend.onnx.onnx_frontend import _get_convert_map

    table = _get_convert_map()
    bad: collections.Counter = collections.Counter()
    for node in _all_nodes(model.graph):
        op, dom = node.op_type, node.domain
        if dom in _STANDARD_DOMAINS or dom == _MS_DOMAIN:
            if op not in table and op not in _DIRECT_OPS:
                bad[op if dom in _STANDARD_DOMAINS else f"{dom}::{op}"] += 1
        else:
            bad[f"{dom}::{op}"] += 1
    return bad


def _input_infos(model) -> list:
    inits = {t.name for t in model.graph.initializer}
    return [vi for vi in model.graph.input if vi.name not in inits]


def _dtype_name(elem_type: int) -> str:
    import onnx

    try:
        return str(np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type)))
    except Exception:  # noqa: BLE001
        return "float32"


def _resolve_input_shapes(model, input_shapes: Mapping[str, Sequence[int]] | None,
                          label: str) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
    """Static shape of every model input, from the model or ``input_shapes``; else ModelError."""
    infos = _input_infos(model)
    names = [vi.name for vi in infos]
    given = {}
    for name, shape in (input_shapes or {}).items():
        if name not in names:
            raise ModelError(f"--input-shape names '{name}', but the inputs of '{label}' are: "
                             f"{', '.join(names) or '(none)'}")
        try:
            dims = tuple(int(d) for d in shape)
        except (TypeError, ValueError):
            raise ModelError(f"--input-shape {name}: {shape!r} is not a list of integers") \
                from None
        if not dims or any(d <= 0 for d in dims):
            raise ModelError(f"--input-shape {name}: every dimension must be a positive "
                             f"integer, got {','.join(map(str, dims)) or '(empty)'}")
        given[name] = dims
    shapes, dtypes, problems = {}, {}, []
    for vi in infos:
        tt = vi.type.tensor_type
        dtypes[vi.name] = _dtype_name(tt.elem_type)
        if not vi.type.HasField("tensor_type"):
            raise ModelError(f"input '{vi.name}' of '{label}' is not a tensor (sequence/map "
                             "inputs are not supported)")
        if vi.name in given:
            if tt.HasField("shape") and len(tt.shape.dim) != len(given[vi.name]):
                raise ModelError(f"input '{vi.name}' of '{label}' has rank {len(tt.shape.dim)}, "
                                 f"but --input-shape gives {len(given[vi.name])} dims "
                                 f"({','.join(map(str, given[vi.name]))})")
            shapes[vi.name] = given[vi.name]
            continue
        if not tt.HasField("shape"):
            raise ModelError(f"input '{vi.name}' of '{label}' has an unknown rank; pass "
                             f"--input-shape {vi.name}:D0,D1,...")
        dims, dynamic, example = [], [], []
        for i, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value") and d.dim_value > 0:
                dims.append(int(d.dim_value))
                example.append(str(d.dim_value))
            else:
                sym = d.dim_param or "?"
                dynamic.append(f"'{sym}' (dim {i})")
                example.append(f"<{d.dim_param or f'dim{i}'}>")
        if dynamic:
            problems.append(f"input '{vi.name}' of '{label}' has dynamic dimension"
                            f"{'s' if len(dynamic) > 1 else ''} {', '.join(dynamic)}; pass "
                            f"--input-shape {vi.name}:{','.join(example)}")
            continue
        shapes[vi.name] = tuple(dims)
    if problems:
        raise ModelError("; ".join(problems) + " (library: input_shapes={name: shape})")
    return shapes, dtypes


def preflight(source, input_shapes: Mapping[str, Sequence[int]] | None = None,
              check: bool = True, label: str | None = None
              ) -> tuple["onnx.ModelProto", dict, dict, str]:
    """Validate a model before any lowering.

    Returns ``(model, input_shapes, input_dtypes, label)`` with external data *not* loaded.
    Raises :class:`ModelError` (one line) for: a missing file, a file that is not an ONNX
    protobuf, an ONNX checker failure, operators the TVM frontend does not support (all of
    them, by name and count), dynamic input dimensions without ``input_shapes``, and bad
    ``input_shapes``.
    """
    import onnx

    if isinstance(source, onnx.ModelProto):
        model, path = source, None
    elif isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        model = _read_onnx(path, label)
    else:
        raise ModelError(f"expected an ONNX file path or onnx.ModelProto, got "
                         f"{type(source).__name__}")
    label = label or _model_label(source, model)
    if check:
        try:
            if path is not None:
                onnx.checker.check_model(path)
            else:
                onnx.checker.check_model(model)
        except (onnx.checker.ValidationError, ValueError) as exc:
            raise ModelError(f"'{label}' fails the ONNX checker: {_first_line(exc)}") from None
    if model.functions:
        try:
            from onnx import inliner

            model = inliner.inline_local_functions(model)
        except Exception as exc:  # noqa: BLE001
            raise ModelError(f"'{label}': cannot inline its local functions: "
                             f"{_first_line(exc)}") from None
    bad = unsupported_ops(model)
    if bad:
        listing = ", ".join(f"{op} x{n}" for op, n in sorted(bad.items()))
        total = sum(bad.values())
        raise ModelError(f"'{label}' uses {len(bad)} operator type(s) ({total} node(s)) the TVM "
                         f"Relax ONNX frontend does not support: {listing}")
    shapes, dtypes = _resolve_input_shapes(model, input_shapes, label)
    return model, shapes, dtypes, label


# ============================================================================ import
def _strip_weights(model: "onnx.ModelProto") -> "onnx.ModelProto":
    """A copy whose float weights are ``ConstantOfShape`` nodes (zero values).

    Shapes, and hence every workload, are unchanged; the numbers are not.  Integer
    initializers (shape vectors, axes) and small float ones are kept, as the importer may
    need their values.
    """
    import onnx
    from onnx import helper

    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    keep, nodes = [], []
    floats = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE,
              onnx.TensorProto.BFLOAT16)
    stripped = set()
    for t in g.initializer:
        if t.data_type in floats and math.prod(t.dims) >= 64:
            shape = helper.make_tensor(t.name + "__shape", onnx.TensorProto.INT64,
                                       [len(t.dims)], list(t.dims))
            value = helper.make_tensor("value", t.data_type, [1], [0])
            nodes.append(helper.make_node("Constant", [], [t.name + "__shape"], value=shape))
            nodes.append(helper.make_node("ConstantOfShape", [t.name + "__shape"], [t.name],
                                          value=value))
            stripped.add(t.name)
        else:
            keep.append(t)
    del g.initializer[:]
    g.initializer.extend(keep)
    inputs = [vi for vi in g.input if vi.name not in stripped]
    del g.input[:]
    g.input.extend(inputs)
    body = list(g.node)
    del g.node[:]
    g.node.extend(nodes + body)
    return out


def _has_external(model) -> bool:
    import onnx

    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer)


def _run_from_onnx(model, shapes: dict, label: str):
    """Import with TVM's Relax ONNX frontend; its prints/warnings are captured and any
    failure becomes a one-line ModelError naming the failing node and operator.

    This is ``tvm.relax.frontend.onnx.from_onnx(model, shape_dict, keep_params_in_input=
    False)`` minus its internal ``onnx.checker`` call (preflight already ran the checker;
    on VGG-16 the second check costs 3.6 s of re-serialization).  If TVM's importer class
    changes, the public ``from_onnx`` is used instead.
    """
    from tvm.relax.frontend.onnx import onnx_frontend as fe

    out = io.StringIO()
    importer = None
    error = None
    with _quiet_native_stderr():
        try:
            with contextlib.redirect_stdout(out), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cls = getattr(fe, "ONNXGraphImporter", None)
                if cls is None:
                    return fe.from_onnx(model, shape_dict=dict(shapes),
                                        keep_params_in_input=False)
                importer = cls(dict(shapes), "float32", keep_params_in_input=False,
                               sanitize=True)
                opset = next((o.version for o in model.opset_import
                              if o.domain in _STANDARD_DOMAINS), 1)
                return importer.from_onnx(model.graph, opset)
        except Exception as exc:  # noqa: BLE001 - anything from TVM becomes one line
            where = ""
            done = getattr(importer, "_nodes", None)
            if isinstance(done, dict):
                node = next((n for n in model.graph.node
                             if any(o and o not in done for o in n.output)), None)
                if node is not None:
                    where = f" on operator '{node.op_type}'" + (
                        f" (node '{node.name}')" if node.name else "")
            if not where:
                m = re.search(r"Error converting operator (\w+)", out.getvalue())
                where = f" on operator '{m.group(1)}'" if m else ""
            error = f"TVM's ONNX importer failed{where} in '{label}': {_first_line(exc)}"
        # free the half-built BlockBuilder now, while TVM's C++ warnings are still captured
        importer = None
        gc.collect()
    raise ModelError(error)


def _import_pipeline(mod, fold: bool = True):
    """DecomposeOpsForInference -> CanonicalizeBindings (-> numpy constant folding -> DCE)."""
    from tvm import relax

    mod = relax.transform.DecomposeOpsForInference()(mod)
    mod = relax.transform.CanonicalizeBindings()(mod)
    if fold:
        mod = _fold_constants_numpy(mod)
        mod = relax.transform.CanonicalizeBindings()(mod)
        mod = relax.transform.DeadCodeElimination()(mod)
    return mod


@dataclass
class Model:
    """An imported model.

    onnx: the (preflighted) ONNX graph; external data is not loaded into it.
    mod: the unfused Relax module (after DecomposeOpsForInference, CanonicalizeBindings and
        constant-weight folding): what ``compile_relax`` wants, and what the VTA
        extraction walks.
    input_shapes / input_dtypes: every model input's static shape and dtype.
    weights: False when imported shape-only (weights replaced by zeros, see
        :func:`load`): the workloads are exact, the numbers are not.
    """

    name: str
    onnx: Any
    mod: Any
    input_shapes: dict[str, tuple[int, ...]]
    input_dtypes: dict[str, str]
    path: str | None = None
    weights: bool = True
    folded: bool = True
    _fused: dict = field(default_factory=dict, repr=False)

    def fused(self, target="llvm"):
        """The legalized and fused module for ``target`` (cached): :func:`lower_for_tuning`.

        A shape-only import folds its constant weights first (in numpy) and keeps the
        folded module as :attr:`mod`, so ``compile_relax(db, model.mod, ...)`` still
        sees exactly the module the tasks came from.
        """
        spec = resolve_target(target)
        key = str(spec)
        if key not in self._fused:
            if not self.folded:
                from tvm import relax

                with _quiet_native_stderr():
                    self.mod = relax.transform.DeadCodeElimination()(
                        relax.transform.CanonicalizeBindings()(_fold_constants_numpy(self.mod)))
                self.folded = True
            self._fused[key] = lower_for_tuning(self.mod, spec, label=self.name)
        return self._fused[key]

    def tasks(self, target="vta") -> TaskList:
        """:func:`extract_tasks` for this model."""
        spec = resolve_target(target)
        mod = self.mod if spec.is_vta else self.fused(spec)
        tl = extract_tasks(mod, spec)
        tl.model = self.name
        return tl


def load(source, input_shapes: Mapping[str, Sequence[int]] | None = None, *,
         weights: bool = True, name: str | None = None) -> Model:
    """Preflight and import an ONNX model (path, zoo/light name, or ``onnx.ModelProto``).

    ``weights=False`` imports shape-only: float initializers become ``ConstantOfShape``
    zeros, so nothing large is read or copied (VGG-16: 0.2 s instead of ~4 s and
    ~1.1 GB).  Every workload is identical; use it when only the tasks are needed.
    """

    path = None
    if isinstance(source, (str, os.PathLike)):
        import dcoc_models

        text = os.fspath(source)
        path = dcoc_models.resolve(text)
        label = text  # what the user typed: a zoo name or the path as given
        display = name or (os.path.splitext(os.path.basename(text))[0] if os.path.exists(text)
                           else text)
        src = path
    else:
        src, label, display = source, name, name
    model, shapes, dtypes, label = preflight(src, input_shapes, label=label)
    display = display or label
    if weights:
        imported = model
        if path is not None and _has_external(model):
            try:
                imported = _with_external_data(model, path)
            except OSError as exc:
                raise ModelError(f"cannot read the external data of '{label}': {exc}") from None
    else:
        imported = _strip_weights(model)
    mod = _run_from_onnx(imported, shapes, label)
    del imported
    try:
        with _quiet_native_stderr():
            mod = _import_pipeline(mod, fold=weights)
    except Exception as exc:  # noqa: BLE001
        raise ModelError(f"TVM failed to prepare '{label}' for inference: "
                         f"{_first_line(exc)}") from None
    return Model(name=display, onnx=model, mod=mod, input_shapes=shapes, input_dtypes=dtypes,
                 path=path, weights=weights, folded=weights)


def _with_external_data(model, path: str):
    """A copy of ``model`` with its external data read in (the original stays light)."""
    import onnx

    full = onnx.ModelProto()
    full.CopyFrom(model)
    onnx.external_data_helper.load_external_data_for_model(
        full, os.path.dirname(os.path.abspath(path)))
    return full


def load_model(path_or_model, input_shapes: Mapping[str, Sequence[int]] | None = None):
    """Preflight and import an ONNX model; return the unfused Relax ``tvm.IRModule``.

    ``path_or_model``: an ``.onnx`` path, a zoo or ``light_*`` name, or an
    ``onnx.ModelProto``.  ``input_shapes``: ``{input name: shape}`` for dynamic inputs.
    The module is the one to give ``compile_relax``; :func:`lower_for_tuning` gives the
    fused module MetaSchedule extracts tasks from.  See :func:`load` for the full
    :class:`Model`.
    """
    return load(path_or_model, input_shapes).mod


# ---------------------------------------------------------------------------- numpy folding
def _np_binary(fn):
    return lambda call, xs: fn(xs[0], xs[1])


def _np_expand_dims(call, xs):
    x = xs[0]
    ndim = x.ndim + len(call.attrs.axis)
    axes = sorted(int(a) % ndim for a in call.attrs.axis)
    for a in axes:
        x = np.expand_dims(x, a)
    return x


def _np_permute(call, xs):
    axes = call.attrs.axes
    return np.transpose(xs[0], None if axes is None else [int(a) for a in axes])


def _is_tensor(e) -> bool:
    """True for tensor-typed Relax expressions (not shapes, strings, functions)."""
    from tvm import relax

    return isinstance(getattr(e, "ty", None), relax.TensorType)


def _static_shape(ty) -> tuple[int, ...] | None:
    shape = getattr(ty, "shape", None)
    if shape is None:
        return None
    try:
        return tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        return None


_FOLDERS = {
    "relax.add": _np_binary(np.add),
    "relax.subtract": _np_binary(np.subtract),
    "relax.multiply": _np_binary(np.multiply),
    "relax.divide": _np_binary(np.divide),
    "relax.power": _np_binary(np.power),
    "relax.maximum": _np_binary(np.maximum),
    "relax.minimum": _np_binary(np.minimum),
    "relax.sqrt": lambda call, xs: np.sqrt(xs[0]),
    "relax.rsqrt": lambda call, xs: 1 / np.sqrt(xs[0]),
    "relax.negative": lambda call, xs: -xs[0],
    "relax.exp": lambda call, xs: np.exp(xs[0]),
    "relax.expand_dims": _np_expand_dims,
    "relax.permute_dims": _np_permute,
    "relax.reshape": lambda call, xs: xs[0],  # reshaped to the output shape below
    "relax.broadcast_to": lambda call, xs: xs[0],  # broadcast to the output shape below
    "relax.squeeze": lambda call, xs: xs[0],
    "relax.flatten": lambda call, xs: xs[0],
    "relax.astype": lambda call, xs: xs[0],
    "relax.isnan": lambda call, xs: np.isnan(xs[0]),
    "relax.isinf": lambda call, xs: np.isinf(xs[0]),
    "relax.where": lambda call, xs: np.where(xs[0], xs[1], xs[2]),
    "relax.equal": _np_binary(np.equal),
    "relax.not_equal": _np_binary(np.not_equal),
    "relax.less": _np_binary(np.less),
    "relax.less_equal": _np_binary(np.less_equal),
    "relax.greater": _np_binary(np.greater),
    "relax.greater_equal": _np_binary(np.greater_equal),
    "relax.logical_not": lambda call, xs: np.logical_not(xs[0]),
}
_FLOAT_ONLY = {"relax.divide", "relax.power", "relax.sqrt", "relax.rsqrt", "relax.exp"}
#: folds that produce more than this many elements are left to TVM's FoldConstant
_FOLD_LIMIT = 1 << 28


def _fold_constants_numpy(mod):
    """Fold constant weight arithmetic (BatchNorm statistics, transposed Gemm weights,
    ``ConstantOfShape`` weights ...) in numpy.

    TVM's FoldConstant compiles every distinct constant expression with LLVM first, which
    took 4 s on ResNet-18 and 12 s on light_resnet50; numpy gives the same IEEE results
    in milliseconds, leaving FoldConstant (still run by the tuning pipeline) almost nothing.
    """
    import tvm
    from tvm import relax
    from tvm.ir.expr import Constant

    @relax.expr_functor.mutator
    class _Fold(relax.PyExprMutator):
        def _const_of(self, arg):
            if isinstance(arg, Constant):
                return arg
            if isinstance(arg, relax.Var):
                b = self.lookup_binding(arg)
                if isinstance(b, Constant):
                    return b
            return None

        def visit_call_(self, call):  # noqa: N802 - TVM visitor name
            call = super().visit_call_(call)
            if not isinstance(call.op, tvm.ir.Op):
                return call
            name = call.op.name
            fn = _FOLDERS.get(name)
            if fn is None or not call.args:
                return call
            tensors = [a for a in call.args if _is_tensor(a)]
            consts = [self._const_of(a) for a in tensors]
            if not tensors or any(c is None for c in consts):
                return call
            ty = self.builder_.normalize(call).ty
            shape = _static_shape(ty)
            dtype = getattr(ty, "dtype", None)
            if shape is None or dtype is None or math.prod(shape) > _FOLD_LIMIT:
                return call
            arrays = [c.value.numpy() for c in consts]
            if name in _FLOAT_ONLY and not all(np.issubdtype(a.dtype, np.floating)
                                               for a in arrays):
                return call
            try:
                with np.errstate(all="ignore"):
                    res = np.asarray(fn(call, arrays))
                    if name in ("relax.reshape", "relax.squeeze", "relax.flatten"):
                        res = res.reshape(shape)
                    elif name == "relax.broadcast_to":
                        res = np.broadcast_to(res, shape)
                    res = res.astype(str(dtype), copy=False)
                    if not res.flags.c_contiguous:  # (ascontiguousarray makes 0-d 1-d)
                        res = res.copy(order="C")
            except Exception:  # noqa: BLE001 - leave anything unusual to TVM
                return call
            if res.shape != shape:
                return call
            return relax.const(res, str(dtype))

    folder = _Fold(mod)
    for gv, func in list(mod.functions.items()):
        if isinstance(func, relax.Function):
            folder.builder_.update_func(gv, folder.visit_expr(func))
    return folder.builder_.get()


# ============================================================================ lowering
def lower_for_tuning(mod, target="llvm", label: str = "model"):
    """Legalize and fuse an unfused Relax module for MetaSchedule.

    Runs ``library_dispatch_passes(target)``, ``LegalizeOps``, ``AnnotateTIROpPattern``,
    ``FoldConstant``, ``FuseOps``, ``FuseTIR`` under ``with target, PassContext(opt_level=3)``
    -- exactly the preparation ``ms.relax_integration.compile_relax`` applies, so tasks
    extracted from the result match the database keys compile_relax looks up.  Compile with
    the *unfused* module (``Model.mod``), never with this one (TVM notes section 7).
    """
    import tvm
    from tvm import relax

    spec = resolve_target(target)
    if spec.is_vta:
        raise TargetError("lower_for_tuning needs a TVM target (llvm, cuda or a JSON dict), "
                          "not vta")
    t = spec.tvm
    try:
        from tvm.relax import pipeline as rp

        dispatch = list(rp.library_dispatch_passes(t))
    except Exception:  # noqa: BLE001 - targets without a registered pipeline
        dispatch = []
    seq = tvm.transform.Sequential([
        *dispatch,
        relax.transform.LegalizeOps(),
        relax.transform.AnnotateTIROpPattern(),
        relax.transform.FoldConstant(),
        relax.transform.FuseOps(),
        relax.transform.FuseTIR(),
    ])
    try:
        with _quiet_native_stderr(), t, tvm.transform.PassContext(opt_level=3):
            return seq(mod)
    except Exception as exc:  # noqa: BLE001
        raise ModelError(f"TVM failed to legalize/fuse '{label}' for {spec.kind}: "
                         f"{_first_line(exc)}") from None


def _is_lowered(mod) -> bool:
    """True when ``main`` only calls PrimFuncs/packed functions (legalized already)."""
    import tvm
    from tvm import relax

    func = mod["main"]
    for block in func.body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op) and \
                    v.op.name not in _CALL_OPS:
                return False
    return True


# ============================================================================ naming
def _kxs(a: int, b: int) -> str:
    return str(a) if a == b else f"{a}x{b}"


def task_name(kind: str, wl: Mapping[str, int]) -> str:
    """A stable, readable name for a workload, e.g. ``conv2d_56x56_64x64_k3s1``.

    conv kinds: ``<kind>_<H>x<W>_<Cin>x<Cout>_k<K>s<S>`` plus ``d<D>`` (dilation > 1),
    ``g<G>`` (grouped), ``b<N>`` (batch > 1); dense: ``dense_m<M>_n<N>_k<K>``;
    batch_matmul: ``batch_matmul_b<B>_m<M>_n<N>_k<K>``.
    """
    if kind in ("conv2d", "depthwise_conv2d", "grouped_conv2d") and wl:
        s = (f"{kind}_{wl['height']}x{wl['width']}_{wl['in_channels']}x{wl['out_channels']}"
             f"_k{_kxs(wl['kernel_h'], wl['kernel_w'])}s{_kxs(wl['stride_h'], wl['stride_w'])}")
        if wl["dilation_h"] != 1 or wl["dilation_w"] != 1:
            s += f"d{_kxs(wl['dilation_h'], wl['dilation_w'])}"
        if kind == "grouped_conv2d":
            s += f"_g{wl['groups']}"
        if wl["batch"] != 1:
            s += f"_b{wl['batch']}"
        return s
    if kind == "dense" and wl:
        return f"dense_m{wl['m']}_n{wl['n']}_k{wl['k']}" + \
            (f"_b{wl['batch']}" if wl.get("batch", 1) != 1 else "")
    if kind == "batch_matmul" and wl:
        return f"batch_matmul_b{wl['batch']}_m{wl['m']}_n{wl['n']}_k{wl['k']}"
    return kind


def _uniquify(tasks: list[Task]) -> None:
    seen: dict[str, int] = {}
    for t in tasks:
        if t.name in seen:
            seen[t.name] += 1
            n = seen[t.name]
            while f"{t.name}_{n}" in seen:
                n += 1
            t.name = f"{t.name}_{n}"
            seen[t.name] = 1
        else:
            seen[t.name] = 1


def _conv_kind(groups: int, in_channels: int) -> str:
    if groups == 1:
        return "conv2d"
    if groups == in_channels:
        return "depthwise_conv2d"
    return "grouped_conv2d"


def _conv_workload(n, c, h, w, o, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw, g, oh, ow) -> dict:
    return dict(batch=n, in_channels=c, out_channels=o, height=h, width=w, kernel_h=kh,
                kernel_w=kw, stride_h=sh, stride_w=sw, pad_top=pt, pad_left=pl,
                pad_bottom=pb, pad_right=pr, dilation_h=dh, dilation_w=dw, groups=g,
                out_height=oh, out_width=ow)


def _conv_macs(wl) -> int:
    return (wl["batch"] * wl["out_channels"] * wl["out_height"] * wl["out_width"]
            * (wl["in_channels"] // wl["groups"]) * wl["kernel_h"] * wl["kernel_w"])


def _mm_macs(wl) -> int:
    return wl["batch"] * wl["m"] * wl["n"] * wl["k"]


# ============================================================================ VTA extraction
@dataclass
class _Node:
    var: Any
    op: str                       # display name, e.g. "conv2d", "max_pool2d", "add"
    relax_op: str                 # e.g. "relax.nn.conv2d"
    args: list                    # canonical tensor argument vars/consts
    call: Any
    shape: tuple | None
    const: bool
    index: int


#: elementwise ops VTA's ALU applies in a conv/dense epilogue (with a constant operand, or
#: a same-shape activation for add: the residual, DMA'd into the accumulator)
_EPILOGUE_OPS = {"relax.add", "relax.subtract", "relax.multiply", "relax.divide",
                 "relax.nn.relu", "relax.clip", "relax.maximum", "relax.minimum",
                 "relax.right_shift", "relax.left_shift", "tir:maximum", "tir:minimum",
                 "tir:clip"}


def _display_op(name: str) -> str:
    for p in ("relax.nn.", "relax.image.", "relax."):
        if name.startswith(p):
            return name[len(p):]
    return name


def _walk_graph(mod) -> tuple[list[_Node], set, list]:
    """Flatten ``main`` into op nodes in dataflow order, resolving aliases and tuples."""
    import tvm
    from tvm import relax
    from tvm.ir.expr import Constant

    func = mod["main"]
    alias: dict = {}
    tuples: dict = {}
    const_vars: set = set()
    nodes: list[_Node] = []

    def canon(e):
        while isinstance(e, relax.Var) and e in alias:
            e = alias[e]
        return e

    def is_const(e) -> bool:
        e = canon(e)
        if isinstance(e, Constant):
            return True
        if isinstance(e, relax.Var):
            return e in const_vars
        if isinstance(e, relax.Tuple):
            return all(is_const(f) for f in e.fields)
        return not _is_tensor(e)

    def tensor_args(args) -> list:
        out = []
        for a in args:
            a = canon(a)
            if isinstance(a, relax.Var) and a in tuples:
                a = tuples[a]
            if isinstance(a, relax.Tuple):
                out.extend(tensor_args(a.fields))
            elif _is_tensor(a):
                out.append(a)
        return out

    def visit_seq(seq):
        for block in seq.blocks:
            for b in block.bindings:
                visit_binding(b)
        return seq.body

    def visit_binding(b):
        var, v = b.var, b.value
        if isinstance(b, relax.MatchCast) or isinstance(v, relax.Var):
            alias[var] = v
            return
        if isinstance(v, Constant):
            const_vars.add(var)
            return
        if isinstance(v, relax.Tuple):
            tuples[var] = relax.Tuple([canon(f) for f in v.fields])
            if is_const(v):
                const_vars.add(var)
            return
        if isinstance(v, relax.TupleGetItem):
            tv = canon(v.tuple_value)
            src = tuples.get(tv) if isinstance(tv, relax.Var) else tv
            if isinstance(src, relax.Tuple):
                alias[var] = src.fields[v.index]
            elif is_const(tv):
                const_vars.add(var)
            # else: an output of a multi-output op (e.g. dropout): a plain activation
            return
        if isinstance(v, relax.If):
            visit_seq(v.true_branch) if isinstance(v.true_branch, relax.SeqExpr) else None
            visit_seq(v.false_branch) if isinstance(v.false_branch, relax.SeqExpr) else None
            nodes.append(_Node(var, "if", "relax.If", [canon(v.cond)], v, None, False,
                               len(nodes)))
            return
        if isinstance(v, relax.Call):
            if isinstance(v.op, tvm.ir.Op):
                rname = v.op.name
                if rname in _CALL_OPS and v.args and isinstance(v.args[0], relax.GlobalVar):
                    # a PrimFunc the importer emitted directly (e.g. Clip -> maximum1)
                    disp = re.sub(r"\d+$", "", v.args[0].name_hint) or v.args[0].name_hint
                    rname = "tir:" + disp
                    args = tensor_args(v.args[1:])
                else:
                    disp = _display_op(rname)
                    args = tensor_args(v.args)
            else:
                rname = disp = getattr(v.op, "name_hint", None) or "call"
                args = tensor_args(v.args)
            const = all(is_const(a) for a in args) and rname not in (
                "relax.call_pure_packed", "relax.call_dps_packed")
            if const:
                const_vars.add(var)
                return
            nodes.append(_Node(var, disp, rname, args, v, _static_shape(var.ty), False,
                               len(nodes)))
            return
        alias[var] = v  # anything else: transparent

    body = visit_seq(func.body) if isinstance(func.body, relax.SeqExpr) else func.body
    outputs = tensor_args([body]) if body is not None else []
    return nodes, const_vars, [canon(o) for o in outputs]


def _shape_of(e) -> tuple | None:
    return _static_shape(getattr(e, "ty", None))


def _vta_tasks(mod, name: str = "") -> TaskList:
    """conv2d/dense/batch_matmul workloads for VTA (and the CPU), plus the CPU-only ops."""
    from tvm import relax
    from tvm.ir.expr import Constant

    nodes, const_vars, outputs = _walk_graph(mod)

    def is_const(a) -> bool:
        return isinstance(a, Constant) or (isinstance(a, relax.Var) and a in const_vars)

    users: dict = collections.defaultdict(list)
    for n in nodes:
        for a in n.args:
            if isinstance(a, relax.Var):
                users[a].append(n)
    for o in outputs:
        if isinstance(o, relax.Var):
            users[o].append(None)  # the function output is a use

    anchors: dict[int, tuple[str, dict, str]] = {}  # node index -> (kind, workload, device)
    first_conv_seen = False
    for n in nodes:
        if n.relax_op == "relax.nn.conv2d":
            a = n.call.attrs
            ds, ws, os_ = _shape_of(n.args[0]), _shape_of(n.args[1]), n.shape
            if str(a.data_layout) != "NCHW" or str(a.kernel_layout) != "OIHW" or \
                    None in (ds, ws, os_):
                continue
            pad = [int(p) for p in a.padding]
            pad = pad * 2 if len(pad) == 2 else pad
            g = int(a.groups)
            wl = _conv_workload(ds[0], ds[1], ds[2], ds[3], ws[0], ws[2], ws[3],
                                int(a.strides[0]), int(a.strides[1]), pad[0], pad[1], pad[2],
                                pad[3], int(a.dilation[0]), int(a.dilation[1]), g, os_[2], os_[3])
            kind = _conv_kind(g, ds[1])
            on_vta = kind == "conv2d" and wl["dilation_h"] == 1 and wl["dilation_w"] == 1
            if not first_conv_seen:
                first_conv_seen = True
                on_vta = False  # VTA's quantizer skips conv layer 0: it runs in fp32 on the CPU
            anchors[n.index] = (kind, wl, "vta" if on_vta else "cpu")
        elif n.relax_op == "relax.matmul" and len(n.args) == 2:
            sa, sb = _shape_of(n.args[0]), _shape_of(n.args[1])
            if sa is None or sb is None or n.shape is None:
                continue
            ca, cb = is_const(n.args[0]), is_const(n.args[1])
            sa2 = (1,) + sa if len(sa) == 1 else sa
            sb2 = sb + (1,) if len(sb) == 1 else sb
            if cb and len(sb) <= 2:  # activation x 2-D weight: dense, rows = all leading dims
                wl = dict(batch=1, m=math.prod(sa2[:-1]), n=sb2[-1], k=sa2[-1])
                anchors[n.index] = ("dense", wl, "vta")
            elif ca and len(sa) <= 2:  # 2-D weight x activation: dense on the transpose
                wl = dict(batch=1, m=math.prod(sb2[:-2]) * sb2[-1], n=sa2[-2], k=sa2[-1])
                anchors[n.index] = ("dense", wl, "vta")
            else:  # activation x activation (attention) or batched weights
                batch = math.prod(np.broadcast_shapes(sa2[:-2], sb2[:-2])) if \
                    (len(sa2) > 2 or len(sb2) > 2) else 1
                wl = dict(batch=int(batch), m=sa2[-2], n=sb2[-1], k=sa2[-1])
                anchors[n.index] = ("batch_matmul", wl, "vta")

    # absorb each anchor's elementwise epilogue (bias, folded BN, ReLU/clip, residual add)
    absorbed: set[int] = set()
    for idx in sorted(anchors):
        cur = nodes[idx]
        while True:
            us = users.get(cur.var, [])
            if len(us) != 1 or us[0] is None:
                break
            u = us[0]
            if u.relax_op not in _EPILOGUE_OPS or u.index in anchors or u.index in absorbed:
                break
            if u.shape != cur.shape:
                break
            others = [a for a in u.args if not a.same_as(cur.var)]
            if u.relax_op in ("relax.add",):
                ok = all(is_const(a) or _shape_of(a) == cur.shape for a in others)
            else:
                ok = all(is_const(a) for a in others)
            if not ok:
                break
            absorbed.add(u.index)
            cur = u

    agg: dict[tuple, Task] = {}
    for idx in sorted(anchors):
        kind, wl, device = anchors[idx]
        key = (kind, device, tuple(sorted(wl.items())))
        if key in agg:
            agg[key].weight += 1
            continue
        macs = _conv_macs(wl) if "conv" in kind else _mm_macs(wl)
        agg[key] = Task(name=task_name(kind, wl), kind=kind, workload=dict(wl), weight=1,
                        macs=int(macs), device=device)
    tasks = list(agg.values())
    _uniquify(tasks)

    counts: dict[str, list[int]] = {}
    for n in nodes:
        if n.index in anchors or n.index in absorbed:
            continue
        elems = math.prod(n.shape) if n.shape else 0
        c = counts.setdefault(n.op, [0, 0])
        c[0] += 1
        c[1] += elems
    cpu_ops = [Task(name=op, kind="other", workload={"elements": tot // cnt}, weight=cnt,
                    macs=0, device="cpu") for op, (cnt, tot) in counts.items()]
    return TaskList(tasks, cpu_ops, model=name, target="vta")


# ============================================================================ MetaSchedule
def _stmt_children(s) -> list:
    out = []
    for attr in ("block", "body", "init", "then_case", "else_case"):
        c = getattr(s, attr, None)
        if c is not None and not isinstance(c, (int, float, str)):
            out.append(c)
    seq = getattr(s, "seq", None)
    if seq is not None:
        out.extend(seq)
    return out


def _blocks(func) -> list:
    """All SBlocks of a PrimFunc, in program order."""
    from tvm.s_tir.stmt import SBlock

    found, stack = [], [func.body]
    while stack:
        s = stack.pop()
        if isinstance(s, SBlock):
            found.append(s)
        stack.extend(reversed(_stmt_children(s)))
    return found


def _expr_nodes(e, cls) -> list:
    """Sub-expressions of ``e`` that are instances of ``cls`` (pre-order)."""
    from tvm.ir.expr import Expr

    out, stack = [], [e]
    while stack:
        x = stack.pop()
        if isinstance(x, cls):
            out.append(x)
        kids = []
        for attr in ("a", "b", "value", "condition", "true_value", "false_value"):
            c = getattr(x, attr, None)
            if isinstance(c, Expr):
                kids.append(c)
        for attr in ("args", "indices"):
            seq = getattr(x, attr, None)
            if seq is not None and not isinstance(seq, (str, bytes)):
                with contextlib.suppress(TypeError):
                    kids.extend(c for c in seq if isinstance(c, Expr))
        stack.extend(reversed(kids))
    return out


def _buf(load):
    """The buffer a TIR load reads (``BufferLoad.buffer`` / 0.27's ``TensorLoad.source``)."""
    b = getattr(load, "buffer", None)
    return b if b is not None else load.source


def _ints(shape) -> tuple[int, ...]:
    return tuple(int(d) for d in shape)


def _analyze_conv_block(blocks, conv) -> tuple[str, dict]:
    """Recover the conv2d workload from TOPI's ``conv2d_nchw``/``group_conv2d_nchw`` block."""
    from tvm import sym, tirx
    from tvm.ir.expr import TensorLoad

    store = conv.body
    out_shape = _ints(store.buffer.shape)
    mul = _expr_nodes(store.value, tirx.Mul)[0]
    data_load = _expr_nodes(mul.a, TensorLoad)[0]
    kern_load = _expr_nodes(mul.b, TensorLoad)[0]
    kshape = _ints(_buf(kern_load).shape)
    ry, rx = kern_load.indices[2], kern_load.indices[3]
    yy, xx = store.indices[2], store.indices[3]

    def lin(expr, v_out, v_red):
        c = sym.detect_linear_equation(expr, [v_out, v_red])
        return int(c[0]), int(c[1])

    sh, dh = lin(data_load.indices[2], yy, ry)
    sw, dw = lin(data_load.indices[3], xx, rx)
    padded = _ints(_buf(data_load).shape)
    src_shape, pt, pl = padded, 0, 0
    producer = next((b for b in blocks if b.body is not None and
                     isinstance(b.body, tirx.BufferStore) and
                     b.body.buffer.same_as(_buf(data_load))), None)
    if producer is not None:
        loads = _expr_nodes(producer.body.value, TensorLoad)
        if loads:
            src = loads[0]
            src_shape = _ints(_buf(src).shape)
            i2, i3 = producer.body.indices[2], producer.body.indices[3]
            c2 = sym.detect_linear_equation(src.indices[2], [i2])
            c3 = sym.detect_linear_equation(src.indices[3], [i3])
            pt, pl = -int(c2[1]), -int(c3[1])
    n, c, h, w = src_shape
    pb, pr = padded[2] - h - pt, padded[3] - w - pl
    g = max(1, c // kshape[1])
    wl = _conv_workload(n, c, h, w, kshape[0], kshape[2], kshape[3], sh, sw, pt, pl, pb, pr,
                        dh, dw, g, out_shape[2], out_shape[3])
    return _conv_kind(g, c), wl


def _analyze_matmul_block(mm) -> tuple[str, dict]:
    from tvm import tirx
    from tvm.ir.expr import TensorLoad

    store = mm.body
    out = _ints(store.buffer.shape)
    mul = _expr_nodes(store.value, tirx.Mul)[0]
    b_load = _expr_nodes(mul.b, TensorLoad)[0]
    k = math.prod(int(iv.dom.extent) for iv in mm.iter_vars if int(iv.iter_type) == 2)
    if len(_buf(b_load).shape) <= 2 or len(out) < 3:
        return "dense", dict(batch=1, m=math.prod(out[:-1]), n=out[-1], k=k)
    return "batch_matmul", dict(batch=math.prod(out[:-2]), m=out[-2], n=out[-1], k=k)


_CONV_BLOCK = re.compile(r"^(group_)?conv2d_nchw")
_MM_BLOCK = re.compile(r"^(matmul|T_matmul|T_batch_matmul|T_dense|dense|batch_matmul)")


def classify_primfunc(func) -> tuple[str, dict, int]:
    """``(kind, workload, macs)`` of a (fused) PrimFunc from its anchor block."""
    blocks = _blocks(func)
    for b in blocks:
        if _CONV_BLOCK.match(b.name_hint) and len(b.body.buffer.shape) == 4:
            try:
                kind, wl = _analyze_conv_block(blocks, b)
                return kind, wl, _conv_macs(wl)
            except Exception:  # noqa: BLE001 - unexpected TIR shape: keep the kind only
                return ("grouped_conv2d" if b.name_hint.startswith("group") else "conv2d"), \
                    {}, 0
    for b in blocks:
        if _MM_BLOCK.match(b.name_hint) and any(int(iv.iter_type) == 2 for iv in b.iter_vars):
            try:
                kind, wl = _analyze_matmul_block(b)
                return kind, wl, _mm_macs(wl)
            except Exception:  # noqa: BLE001
                return "dense", {}, 0
    return "other", {}, 0


def _ms_tasks(fused, spec: TargetSpec, name: str = "") -> TaskList:
    from tvm import relax, tirx
    from tvm.s_tir import meta_schedule as ms

    try:
        with _quiet_native_stderr():
            extracted = ms.relax_integration.extract_tasks(fused, spec.tvm)
    except Exception as exc:  # noqa: BLE001
        raise ModelError(f"MetaSchedule task extraction failed for '{name or 'model'}': "
                         f"{_first_line(exc)}") from None
    order: dict[str, int] = {}
    for block in fused["main"].body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.Call) and v.args and isinstance(v.args[0], relax.GlobalVar):
                order.setdefault(v.args[0].name_hint, len(order))
    tasks = []
    for et in extracted:
        func = next((f for f in et.dispatched[0].functions.values()
                     if isinstance(f, tirx.PrimFunc)), None) if et.dispatched else None
        kind, wl, macs = classify_primfunc(func) if func is not None else ("other", {}, 0)
        tname = task_name(kind, wl) if kind != "other" and wl else et.task_name
        tasks.append(Task(name=tname, kind=kind, workload=wl, weight=int(et.weight),
                          macs=int(macs), device=spec.kind, ms_task=et))
    tasks.sort(key=lambda t: (order.get(t.ms_task.task_name, len(order)), t.ms_task.task_name))
    _uniquify(tasks)
    return TaskList(tasks, [], model=name, target=str(spec))


# ============================================================================ entry points
def extract_tasks(mod, target) -> TaskList:
    """Tasks of a model for a target.

    ``mod``: a :class:`Model`, the unfused module from :func:`load_model`, or (TVM targets)
    an already fused module from :func:`lower_for_tuning`.

    * TVM targets (``llvm``, ``cuda``, a JSON dict, a ``tvm.target.Target``): the
      MetaSchedule tasks of ``ms.relax_integration.extract_tasks`` on the fused module, in
      first-call order; ``ms_task`` is the ``ExtractedTask`` and ``weight`` its call count.
      Each is classified from its PrimFunc's anchor block (``conv2d_nchw`` /
      ``group_conv2d_nchw`` -> conv kinds with the full workload recovered from buffer
      shapes and index expressions; ``matmul`` -> ``dense`` (2-D weight) or
      ``batch_matmul``; anything else -> ``other``, named by its MetaSchedule task name).
      ``cpu_ops`` is empty.
    * ``vta``: walks the Relax graph (exact attributes, no lowering) with this policy:

      - conv2d with groups == 1 and dilation 1 -> ``device="vta"``, except the network's
        first conv (conv layer 0, the one consuming the model input: VTA's quantizer skips
        it and it runs in fp32 on the CPU, e.g. ResNet-18's 7x7 stem) -> ``device="cpu"``;
      - depthwise, grouped or dilated conv2d -> ``device="cpu"``;
      - MatMul/Gemm with a constant 2-D weight -> ``dense`` on VTA, M = all rows of the
        activation (batch x sequence), N = output features, K = input features;
      - activation x activation MatMul (attention) -> ``batch_matmul`` on VTA, batch =
        number of independent matmuls (batch x heads);
      - elementwise ops VTA's ALU fuses after a conv/dense (bias add, folded BatchNorm
        affine, ReLU/clip, residual add) are absorbed into that task;
      - every other op (pooling, softmax, layer_norm, GELU's erf, transposes, unfused
        elementwise, ...) is listed in ``cpu_ops`` by op name with its count.

      Identical workloads on the same device are merged, ``weight`` = occurrences.
    """
    spec = resolve_target(target)
    if isinstance(mod, Model):
        return mod.tasks(spec)
    if spec.is_vta:
        if _is_lowered(mod):
            raise ModelError("VTA task extraction needs the unfused module from load_model(), "
                             "not a legalized/fused one")
        return _vta_tasks(mod)
    if not _is_lowered(mod):
        mod = lower_for_tuning(mod, spec)
    return _ms_tasks(mod, spec)


def model_tasks(model, target="vta", input_shapes: Mapping[str, Sequence[int]] | None = None,
                *, weights: bool | None = None) -> TaskList:
    """Resolve ``model`` (zoo name, ``light_*`` name, ONNX path or ModelProto), load it and
    extract its tasks for ``target`` (default ``vta``).

    ``weights``: load the real weights (default: only for TVM targets; the VTA extraction
    walks shapes and imports shape-only, see :func:`load`).
    """
    spec = resolve_target(target)
    m = load(model, input_shapes, weights=(not spec.is_vta) if weights is None else weights)
    tl = m.tasks(spec)
    tl.model = m.name
    return tl
