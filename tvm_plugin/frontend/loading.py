"""ONNX import: preflight, TVM's Relax ONNX importer, the import pipeline
(DecomposeOpsForInference, CanonicalizeBindings, numpy constant folding, DCE) and
:class:`Model`."""
from __future__ import annotations

import contextlib
import gc
import io
import math
import os
import re
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from dcoc.errors import ModelError
from dcoc.tasks import TaskList
from tvm_plugin.frontend.common import _first_line, _quiet_native_stderr
from tvm_plugin.frontend.folding import _fold_constants_numpy
from tvm_plugin.frontend.lowering import lower_for_tuning
from tvm_plugin.frontend.preflight import _STANDARD_DOMAINS, preflight
from tvm_plugin.frontend.targets import resolve_target

if TYPE_CHECKING:  # pragma: no cover
    import onnx


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
        from tvm_plugin.frontend.extract import extract_tasks

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
