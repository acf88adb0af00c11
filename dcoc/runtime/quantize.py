"""Post-training int8 quantization with power-of-two scales (numpy only, no TVM).

Every tensor that enters or leaves a layer VTA runs gets one scale ``2**-e`` (``e`` an
integer), chosen from calibration: ``e = floor(log2(127 / max|x|))`` -- the largest scale
at which the calibrated range still fits int8.  With power-of-two scales the whole
requantization of a layer is VTA's ALU epilogue:

    acc  = conv2d/dense(q_x, q_w)                      int32, scale 2**-(e_x + e_w)
    acc += q_bias                                      int32 (folded bias / BatchNorm)
    acc += q_residual << (e_x + e_w - e_r)             int32 (residual add, if absorbed)
    q_y  = clip((acc + 2**(s-1)) >> s, lo, hi)         s = e_x + e_w - e_y; int8

Per-layer choices (see docs/run.md):

* weights: per-output-channel affine ops after the layer (BatchNorm's scale, a constant
  multiply/divide) are folded into the weights, then quantized per tensor (VTA's shift is
  one immediate per layer, so per-channel scales cannot be requantized on the ALU);
  symmetric, [-127, 127];
* bias: everything additive per channel (bias, BatchNorm's shift) at the accumulator's
  scale, int32;
* activations: symmetric int8 per tensor;  ReLU / ReLU6 / Clip become the epilogue's
  clip bounds (``round(bound * 2**e_y)``);
* the shift must be in [0, 15] (5-bit ALU immediate, no left shift needed): when the
  weights are so small that ``s`` > 15 their exponent is lowered (coarser weights); when
  ``s`` < 0 the output exponent is lowered (coarser output);
* activation x activation matmuls (attention) quantize both operands per tensor and
  have no bias.

:class:`LayerSpec` (the float layer found by the frontend side) and :class:`QLayer` (its
integer parameters) are plain data; :func:`quantize_layers` turns one into the other.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

__all__ = ["LayerSpec", "QLayer", "exponent", "quantize_layers", "calibration_inputs",
           "CalibrationWarning", "MAX_SHIFT"]

#: largest right shift of the epilogue (the ALU immediate is 5-bit signed: [-16, 15])
MAX_SHIFT = 15
#: exponents are kept within this range (a tensor that is all zero gets 0)
_E_MIN, _E_MAX = -24, 24


class CalibrationWarning(UserWarning):
    """No calibration inputs were given: random ones were generated."""


@dataclass
class LayerSpec:
    """A float layer VTA can run, with the elementwise ops absorbed into it.

    kind: ``conv2d``, ``dense`` (activation x constant [K, N]) or ``batch_matmul``
        (activation x activation).
    name: the VTA task name (key of the tuned schedules).
    workload: the task workload dict (as ``dcoc tasks`` shows it).
    weight: float weights with the per-channel scale folded in later (conv: OIHW, dense:
        [K, N]); None for batch_matmul.
    scale, shift: per-output-channel affine ``y = scale * acc + shift`` absorbed after
        the layer (BatchNorm, bias, constant multiply/divide).
    clip: float bounds absorbed after the residual (ReLU: (0, inf), ReLU6: (0, 6)).
    data / other / residual / output: tensor ids (keys of the calibration ranges).
    attrs: conv strides / padding / dilation.
    """

    index: int
    name: str
    kind: str
    workload: dict
    weight: np.ndarray | None
    scale: np.ndarray
    shift: np.ndarray
    data: str
    output: str
    other: str | None = None
    residual: str | None = None
    clip: tuple[float, float] | None = None
    attrs: dict = field(default_factory=dict)
    absorbed: list = field(default_factory=list)


@dataclass
class QLayer:
    """The integer parameters of one layer (see the module docstring)."""

    spec: LayerSpec
    e_x: int
    e_w: int
    e_y: int
    qweight: np.ndarray | None
    qbias: np.ndarray | None
    shift: int
    clip_lo: int
    clip_hi: int
    e_r: int | None = None
    res_shift: int = 0
    notes: list = field(default_factory=list)

    @property
    def round(self) -> bool:
        return self.shift > 0


def exponent(max_abs: float) -> int:
    """The power-of-two exponent ``e`` (scale ``2**-e``) for a calibrated range."""
    m = float(max_abs)
    if not math.isfinite(m) or m <= 0:
        return 0
    return int(min(_E_MAX, max(_E_MIN, math.floor(math.log2(127.0 / m)))))


def _q(x: np.ndarray, e: int, lo: int, hi: int, dtype) -> np.ndarray:
    return np.clip(np.round(np.asarray(x, np.float64) * 2.0 ** e), lo, hi).astype(dtype)


def _qbound(v: float, e: int, default: int) -> int:
    if v is None or not math.isfinite(v):
        return default
    return int(min(127, max(-128, round(v * 2.0 ** e))))


def quantize_layers(layers: list[LayerSpec], ranges: dict[str, float]) -> tuple[list[QLayer], dict]:
    """Integer parameters of every layer; ``ranges``: tensor id -> calibrated max |x|.

    Returns ``(qlayers, exponents)`` where ``exponents`` maps each tensor id to its final
    exponent (a layer may lower its output's exponent, see the module docstring).
    Layers must come in dataflow order (producers first).
    """
    exps = {t: exponent(m) for t, m in ranges.items()}
    out = []
    for sp in layers:
        notes = []
        e_x = exps[sp.data]
        e_y = exps[sp.output]
        lo, hi = sp.clip if sp.clip is not None else (-math.inf, math.inf)
        if sp.kind == "batch_matmul":
            w = None
            e_w = exps[sp.other]
            qw = None
        else:
            ch = -1 if sp.kind == "dense" else 0
            shape = [1] * sp.weight.ndim
            shape[ch] = -1
            w = np.asarray(sp.weight, np.float64) * np.asarray(sp.scale, np.float64).reshape(shape)
            e_w = exponent(float(np.max(np.abs(w))) if w.size else 0.0)
        e_r = exps[sp.residual] if sp.residual is not None else None
        # keep the shift in [0, MAX_SHIFT] and the residual's left shift within int32
        while True:
            s = e_x + e_w - e_y
            rs = (e_x + e_w - e_r) if e_r is not None else 0
            if (s > MAX_SHIFT or rs > 20) and sp.kind != "batch_matmul":
                e_w -= 1
                notes.append("weights coarsened to keep the shift <= 15")
                continue
            if s > MAX_SHIFT:  # batch_matmul: both operands are activations
                e_y += s - MAX_SHIFT
                notes.append("output scale refined to keep the shift <= 15")
                continue
            if s < 0:
                e_y += s
                notes.append("output scale coarsened to keep the shift >= 0")
                continue
            break
        exps[sp.output] = e_y
        if w is not None:
            qw = _q(w, e_w, -127, 127, np.int8)
        e_acc = e_x + e_w
        qb = None
        if sp.kind != "batch_matmul" and np.any(np.asarray(sp.shift) != 0):
            qb = _q(sp.shift, e_acc, -(2 ** 31), 2 ** 31 - 1, np.int64).astype(np.int32)
        out.append(QLayer(spec=sp, e_x=e_x, e_w=e_w, e_y=e_y, qweight=qw, qbias=qb,
                          shift=e_acc - e_y, clip_lo=_qbound(lo, e_y, -128),
                          clip_hi=_qbound(hi, e_y, 127), e_r=e_r,
                          res_shift=(e_acc - e_r) if e_r is not None else 0,
                          notes=sorted(set(notes))))
    return out, exps


#: the largest magnitude accepted in a float input or calibration sample: larger values
#: overflow float32 inside a model (3e38 is float32's limit) and make every comparison moot
MAX_ABS_INPUT = 1e15


def check_values(samples: list[dict], what: str = "--inputs", calibration: bool = False) -> None:
    """Refuse float data no int8 run can be checked on: NaN/Inf, magnitudes above
    :data:`MAX_ABS_INPUT`, and (``calibration``) an input that is zero in every sample
    (its quantization scale would be undefined).  One-line
    :class:`dcoc.errors.WorkloadError` naming the input."""
    from dcoc.errors import WorkloadError

    if not samples:
        raise WorkloadError(f"{what}: no samples (an empty list or an empty leading axis)")
    for name in samples[0]:
        arrs = [np.asarray(smp[name]) for smp in samples]
        if arrs[0].dtype.kind not in "fc":
            continue
        bad = sum(int(np.count_nonzero(~np.isfinite(a))) for a in arrs)
        if bad:
            total = sum(a.size for a in arrs)
            raise WorkloadError(f"{what}: input '{name}' holds {bad} NaN/Inf value(s) of {total}; "
                                "the int8 run and its checks need finite numbers")
        peak = max((float(np.max(np.abs(a))) if a.size else 0.0) for a in arrs)
        if peak > MAX_ABS_INPUT:
            raise WorkloadError(f"{what}: input '{name}' holds a value of magnitude {peak:.3g} "
                                f"(> {MAX_ABS_INPUT:.0e}), which overflows float32 inside the model")
        if calibration and peak == 0.0:
            raise WorkloadError(f"{what}: input '{name}' is zero in every calibration sample; "
                                "its int8 scale cannot be calibrated: give real data")


def calibration_inputs(shapes: dict, dtypes: dict, n: int, seed: int, int_high: dict | None = None,
                       warn: bool = True) -> list[dict]:
    """``n`` random input dicts: float inputs ~ N(0, 1) (the zoo models take normalized
    images), integer inputs uniform in ``[0, int_high[name])`` (token ids: the embedding
    size).  Warns with :class:`CalibrationWarning` -- random data calibrates the ranges of
    random data, not of the data the model will see."""
    from dcoc.errors import WorkloadError

    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise WorkloadError(f"calibration_samples (--calibration-samples) must be an integer "
                            f">= 1, got {n!r}")
    if warn:
        warnings.warn("no calibration inputs given (--calibration): calibrating on "
                      f"{n} random input(s); scales fit random data, not real data",
                      CalibrationWarning, stacklevel=2)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        d = {}
        for name, shape in shapes.items():
            dt = np.dtype(dtypes.get(name, "float32"))
            if dt.kind == "f":
                d[name] = rng.standard_normal(shape).astype(dt)
            elif dt.kind == "b":
                d[name] = rng.integers(0, 2, shape).astype(dt)
            else:
                high = int((int_high or {}).get(name, 2))
                d[name] = rng.integers(0, max(1, high), shape).astype(dt)
        out.append(d)
    return out
