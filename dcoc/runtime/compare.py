"""``dcoc run``'s comparisons, on plain arrays: the float model under ONNX Runtime (the
accuracy reference), cosine similarity and top-1 agreement, and stacking the outputs of
several samples."""
from __future__ import annotations

import numpy as np

from dcoc.runtime.inputs import InputError

__all__ = ["float_outputs", "ort_source", "cosine", "top1", "float_agreement", "stack_samples"]


def float_outputs(model, samples: list[dict]) -> list[list] | None:
    """The float model's outputs of every sample under ONNX Runtime (CPU); None when
    onnxruntime is not installed."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    so = ort.SessionOptions()
    so.log_severity_level = 3
    src = ort_source(model)
    sess = ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
    return [[np.asarray(o) for o in sess.run(None, s)] for s in samples]


def ort_source(model):
    """The ONNX model for ONNX Runtime: the file itself, or (when ``input_shapes``
    changed a static input shape) a copy with those input dims and the inferred shapes
    cleared."""
    import onnx

    declared = {}
    for vi in model.onnx.graph.input:
        dims = vi.type.tensor_type.shape.dim
        declared[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else None for d in dims)
    if all(declared.get(n) == tuple(s) for n, s in model.input_shapes.items()):
        return model.path if model.path else model.onnx.SerializeToString()
    proto = onnx.load(model.path) if model.path else model.onnx
    m = onnx.ModelProto()
    m.CopyFrom(proto)
    for vi in m.graph.input:
        if vi.name in model.input_shapes:
            dims = vi.type.tensor_type.shape.dim
            for d, v in zip(dims, model.input_shapes[vi.name]):
                d.Clear()
                d.dim_value = int(v)
    del m.graph.value_info[:]
    for vo in m.graph.output:
        for d in vo.type.tensor_type.shape.dim:
            d.Clear()
            d.dim_param = "?"
    return m.SerializeToString()


def cosine(a, b) -> float:
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        return 1.0 if na == nb else 0.0
    return float(a @ b / (na * nb))


def top1(a, b) -> tuple[int, int]:
    a, b = np.asarray(a), np.asarray(b)
    while a.ndim > 1 and a.shape[-1] == 1:  # [N, C, 1, 1] class scores
        a, b = a[..., 0], b[..., 0]
    if a.ndim == 0 or a.shape[-1] < 2:
        return 0, 0
    x = a.reshape(-1, a.shape[-1]).argmax(-1)
    y = b.reshape(-1, b.shape[-1]).argmax(-1)
    return int((x == y).sum()), int(x.size)


def float_agreement(sim_out: list[list], flt: list[list]) -> tuple[float, float | None]:
    """``(cosine, top-1 agreement)`` of the simulator's outputs vs the float ones: the
    cosine of every sample's outputs concatenated (mean over the samples), and the top-1
    agreement of the first output (None when it has no class axis)."""
    cos = float(np.mean([cosine(np.concatenate([o.ravel() for o in so]),
                                np.concatenate([o.ravel() for o in fo]))
                         for so, fo in zip(sim_out, flt)]))
    agree = total = 0
    for so, fo in zip(sim_out, flt):
        a, t = top1(so[0], fo[0])
        agree, total = agree + a, total + t
    return cos, (agree / total if total else None)


def stack_samples(arrays: list, index: int) -> np.ndarray:
    """One output of several samples stacked on a new leading axis; a one-line
    InputError when its shape depends on the data (e.g. after NonZero)."""
    shapes = {tuple(np.shape(a)) for a in arrays}
    if len(shapes) > 1:
        shown = ", ".join("x".join(map(str, s)) or "scalar" for s in sorted(shapes)[:3])
        raise InputError(f"output {index} of the model has a size that depends on the input data "
                         f"(shapes {shown} across the samples), so the samples cannot be stacked: "
                         "run them one at a time (one sample per --inputs file)")
    return np.stack(arrays)
