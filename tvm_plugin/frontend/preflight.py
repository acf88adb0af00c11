"""ONNX preflight: read the file, run the ONNX checker, list every unsupported operator and
resolve the static input shapes, all before TVM imports anything (one-line ModelError)."""
from __future__ import annotations

import collections
import os
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

import numpy as np

from dcoc.errors import ModelError
from tvm_plugin.frontend.common import _first_line

if TYPE_CHECKING:  # pragma: no cover
    import onnx

#: ONNX domains whose operators the TVM frontend converts by op_type
_STANDARD_DOMAINS = ("", "ai.onnx")
#: contrib domain whose operators TVM also converts by op_type (Attention, SkipLayerNorm...)
_MS_DOMAIN = "com.microsoft"
#: ops the frontend handles outside its converter table
_DIRECT_OPS = {"If", "Constant"}


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
    if not os.path.lexists(path):
        raise ModelError(f"model file '{path}' does not exist")
    if os.path.isdir(path):
        raise ModelError(f"'{path}' is a directory, not an ONNX file")
    from dcoc.readfile import check_regular

    check_regular(path, "model file", "model", ModelError)
    if os.path.getsize(path) == 0:
        raise ModelError(f"'{label}' is an empty file, not an ONNX model")
    try:
        model = onnx.load_model(path, load_external_data=False)
    except OSError as exc:
        raise ModelError(f"cannot read '{path}': {exc.strerror or exc}") from None
    except (DecodeError, RuntimeError, ValueError, TypeError, UnicodeDecodeError) as exc:
        raise ModelError(f"'{label}' is not an ONNX model (protobuf parse failed: "
                         f"{_first_line(exc)})") from None
    except Exception as exc:  # noqa: BLE001 - onnx's text/JSON parsers (by file suffix)
        raise ModelError(f"'{label}' is not an ONNX model ({_first_line(exc)})") from None
    if not model.HasField("graph") or model.ir_version <= 0 or not model.opset_import:
        raise ModelError(f"'{label}' is not an ONNX model (no graph, IR version or opset in the "
                         "protobuf)")
    if not model.graph.node:
        raise ModelError(f"'{label}' has a graph without nodes (no operator to tune or run)")
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
