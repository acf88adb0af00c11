"""PyTorch models in: an ``nn.Module`` becomes an ONNX file, which every target loads.

``dcoc.tune(module, example_inputs=x, ...)`` exports the module with ``torch.onnx.export``
(TorchScript exporter, opset 17, static shapes from ``example_inputs``) into the work dir
and then tunes that file like any other ONNX model.  Going through ONNX rather than
``torch.export`` + TVM's ``from_exported_program`` keeps one model format for everything
downstream: the VTA task extraction and the quantized ``dcoc run`` pipeline, the ONNX
Runtime reference, the work dir's content-hash identity (resume), ``TuneResult.run`` and
``export``.  (torch's newer ``dynamo=True`` ONNX exporter needs ``onnxscript``, which is not
a dependency.)
"""
from __future__ import annotations

import hashlib
import inspect
import io
import os
import warnings

from dcoc.errors import DcocError, ModelError

__all__ = ["module_to_onnx"]

OPSET = 17


def _input_names(module, n: int) -> list[str]:
    """The names of ``forward``'s first ``n`` positional parameters (``input0``... when
    they cannot be read)."""
    try:
        params = [p.name for p in inspect.signature(module.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    if len(params) >= n:
        return params[:n]
    return ["input"] if n == 1 else [f"input{i}" for i in range(n)]


def module_to_onnx(module, example_inputs, path: str) -> str:
    """Export ``module`` (in eval mode) at the shapes of ``example_inputs`` to ``path``.

    An existing file at ``path`` with the same content is kept (a rerun resumes); one with
    other content (the module's weights or code changed) is refused, as the work dir
    belongs to the model it was tuned for."""
    import torch

    if example_inputs is None:
        raise DcocError("a PyTorch module needs example_inputs (a tensor or a tuple of tensors)")
    args = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    if not args or not all(isinstance(a, torch.Tensor) for a in args):
        raise DcocError("example_inputs must be a tensor or a tuple of tensors")
    names = _input_names(module, len(args))
    was_training = module.training
    module.eval()
    buf = io.BytesIO()
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(module, args, buf, dynamo=False, opset_version=OPSET,
                              input_names=names, do_constant_folding=True)
    except Exception as exc:  # noqa: BLE001 - torch's exporter errors become one line
        raise ModelError(f"torch.onnx.export failed for {type(module).__name__}: "
                         f"{' '.join(str(exc).split())[:200]}") from None
    finally:
        module.train(was_training)
    data = buf.getvalue()
    if os.path.isfile(path):
        with open(path, "rb") as f:
            old = f.read()
        if old == data:
            return path
        raise DcocError(f"{path} holds another version of {type(module).__name__} (its weights or "
                        "code changed since that run): choose a new work_dir")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.{hashlib.sha256(data).hexdigest()[:8]}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return path
