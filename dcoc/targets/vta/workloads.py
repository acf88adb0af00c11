"""Workloads VTA can run (conv2d, dense), the fused ALU epilogue, and the knob spaces.

Knob meaning (the TOPI-VTA templates ``conv2d_packed.vta`` / ``dense_packed.vta``; each
split knob is the *inner* factor of AutoTVM's 2-way ``factors`` split, vta-reference §4):

* conv2d: ``tile_h`` / ``tile_w`` output rows / columns per tile (divide OH / OW),
  ``tile_ci`` input-channel blocks per load (divides ceil(CI / BLOCK_IN); grouped: the
  input blocks of one packed group, :mod:`dcoc.targets.vta.grouped`), ``tile_co``
  output-channel blocks per tile (divides ceil(CO / BLOCK_OUT); grouped: a tile lies in
  one packed group or covers whole ones), ``oc_nthread`` and
  ``h_nthread`` in {1, 2} (virtual threads; on-chip buffers are replicated per thread).
  ``tile_b`` is defined by the template but never applied; it is not part of the space
  (a ``tile_b`` knob equal to a divisor of the batch blocks is accepted and ignored).
* dense: ``tile_b`` (divides ceil(N / BATCH)), ``tile_ci``, ``tile_co``, ``oc_nthread``.

Channels that are not a multiple of the block are zero-padded up to it; a batch that is
not a multiple of the config's BATCH is zero-padded up to it (so a batch-1 workload on a
BATCH=4 config computes 4 rows, three of them padding -- VTA has no partial batch).

This module never imports tvm.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from dcoc.errors import WorkloadError
from dcoc.targets.vta.grouped import conv_groups

__all__ = ["CONV_KINDS", "Conv2DWorkload", "DenseWorkload", "Epilogue", "DEFAULT_EPILOGUE", "conv2d_space",
           "dense_space", "space_for", "space_size", "divisors", "CONV_KNOBS", "DENSE_KNOBS",
           "workload_from_task", "check_knobs"]

#: the task kinds VTA runs as a (grouped) conv2d
CONV_KINDS = ("conv2d", "depthwise_conv2d", "grouped_conv2d")
CONV_KNOBS = ("tile_h", "tile_w", "tile_ci", "tile_co", "oc_nthread", "h_nthread")
DENSE_KNOBS = ("tile_b", "tile_ci", "tile_co", "oc_nthread")


def divisors(n: int) -> list[int]:
    """All positive divisors of ``n`` in increasing order (AutoTVM's ``factors`` policy)."""
    n = int(n)
    small, large = [], []
    i = 1
    while i * i <= n:
        if n % i == 0:
            small.append(i)
            if i * i != n:
                large.append(n // i)
        i += 1
    return small + large[::-1]


def _pair(v, name: str) -> tuple[int, int]:
    if isinstance(v, bool):
        raise WorkloadError(f"{name} must be an int or a pair of ints, got {v!r}")
    if isinstance(v, int):
        return (v, v)
    try:
        t = tuple(int(x) for x in v)
    except (TypeError, ValueError):
        raise WorkloadError(f"{name} must be an int or a pair of ints, got {v!r}") from None
    if len(t) != 2:
        raise WorkloadError(f"{name} must have 2 entries, got {v!r}")
    return t


def _posint(v, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        try:
            if not isinstance(v, bool) and int(v) == v and int(v) >= 1:
                return int(v)
        except (TypeError, ValueError):
            pass
        raise WorkloadError(f"{name} must be a positive integer, got {v!r}")
    return v


# ----------------------------------------------------------------------------- epilogue
@dataclass(frozen=True)
class Epilogue:
    """The elementwise ops fused after the GEMM and executed on the VTA ALU (all timed).

    In order: ``bias`` (ADD of a per-output-channel int32 vector DMA'd into ACC),
    ``residual`` (ADD of an int32 tensor of the output's shape DMA'd into ACC),
    ``round`` (ADD imm 2**(shift-1)), ``shift`` (SHR imm; ``None`` skips), ``clip``
    (``(lo, hi)``: MIN imm hi, then MAX imm lo; ``None`` skips).  The result is stored as
    int8 (the low 8 bits -- VTA truncates, so clip first).  The default is VTA's
    requantization: shift 8, clip [0, 127].
    """

    bias: bool = False
    residual: bool = False
    round: bool = False
    shift: int | None = 8
    clip: tuple[int, int] | None = (0, 127)

    def __post_init__(self):
        if self.shift is not None:
            if isinstance(self.shift, bool) or not isinstance(self.shift, int) or \
                    not -16 <= self.shift <= 15:
                raise WorkloadError(f"epilogue shift must be an int in [-16, 15] (5-bit signed "
                                    f"ALU shift argument), got {self.shift!r}")
        if self.clip is not None:
            try:
                lo, hi = (int(x) for x in self.clip)
            except (TypeError, ValueError):
                raise WorkloadError(f"epilogue clip must be (lo, hi), got {self.clip!r}") from None
            if not (-32768 <= lo <= hi <= 32767):
                raise WorkloadError(f"epilogue clip bounds must satisfy -32768 <= lo <= hi <= "
                                    f"32767 (16-bit ALU immediate), got {self.clip!r}")
            object.__setattr__(self, "clip", (lo, hi))
        if self.round and not self.shift:
            raise WorkloadError("epilogue round=True needs a positive shift")
        if self.round and self.shift is not None and self.shift > 15:
            raise WorkloadError("epilogue rounding constant does not fit the ALU immediate")

    def alu_ops(self) -> list[tuple[str, int | None]]:
        """The ALU op sequence: ("bias"|"residual", None) tensor ADDs and (opname, imm) ops."""
        ops: list[tuple[str, int | None]] = []
        if self.bias:
            ops.append(("bias", None))
        if self.residual:
            ops.append(("residual", None))
        if self.round and self.shift and self.shift > 0:
            ops.append(("add", 1 << (self.shift - 1)))
        if self.shift is not None:
            ops.append(("shr", self.shift))
        if self.clip is not None:
            ops.append(("min", self.clip[1]))
            ops.append(("max", self.clip[0]))
        return ops


DEFAULT_EPILOGUE = Epilogue()


# ----------------------------------------------------------------------------- conv2d
@dataclass(frozen=True)
class Conv2DWorkload:
    """A 2-D convolution, NCHW data and OIHW weights (O = out channels, I = in channels
    per group).

    ``kernel``, ``stride``, ``dilation``: int or (h, w).  ``padding``: int, (ph, pw)
    (symmetric) or (top, left, bottom, right); always stored as the 4-tuple.  ``groups``
    divides both channel counts (``groups == in_channels``: depthwise); VTA runs it as
    :mod:`dcoc.targets.vta.grouped` describes.
    """

    batch: int
    height: int
    width: int
    in_channels: int
    out_channels: int
    kernel: Any = (3, 3)
    stride: Any = (1, 1)
    padding: Any = (0, 0)
    dilation: Any = (1, 1)
    groups: int = 1

    def __post_init__(self):
        for n in ("batch", "height", "width", "in_channels", "out_channels", "groups"):
            object.__setattr__(self, n, _posint(getattr(self, n), n))
        if self.in_channels % self.groups or self.out_channels % self.groups:
            raise WorkloadError(f"groups={self.groups} must divide in_channels="
                                f"{self.in_channels} and out_channels={self.out_channels}")
        k = _pair(self.kernel, "kernel")
        s = _pair(self.stride, "stride")
        d = _pair(self.dilation, "dilation")
        for n, v in (("kernel", k), ("stride", s), ("dilation", d)):
            if min(v) < 1:
                raise WorkloadError(f"{n} entries must be >= 1, got {v}")
        p = self.padding
        if isinstance(p, int) and not isinstance(p, bool):
            p = (p, p, p, p)
        else:
            try:
                p = tuple(int(x) for x in p)
            except (TypeError, ValueError):
                raise WorkloadError(f"padding must be an int, (ph, pw) or (top, left, bottom, "
                                    f"right), got {self.padding!r}") from None
            if len(p) == 2:
                p = (p[0], p[1], p[0], p[1])
            elif len(p) != 4:
                raise WorkloadError(f"padding must have 2 or 4 entries, got {self.padding!r}")
        if min(p) < 0:
            raise WorkloadError(f"padding must be >= 0, got {p}")
        object.__setattr__(self, "kernel", k)
        object.__setattr__(self, "stride", s)
        object.__setattr__(self, "dilation", d)
        object.__setattr__(self, "padding", p)
        if self.out_height < 1 or self.out_width < 1:
            raise WorkloadError(f"conv2d output would be empty ({self.out_height}x{self.out_width})")

    kind = "conv2d"

    @property
    def pad_top(self) -> int:
        return self.padding[0]

    @property
    def pad_left(self) -> int:
        return self.padding[1]

    @property
    def pad_bottom(self) -> int:
        return self.padding[2]

    @property
    def pad_right(self) -> int:
        return self.padding[3]

    @property
    def out_height(self) -> int:
        kh = self.dilation[0] * (self.kernel[0] - 1) + 1
        return (self.height + self.padding[0] + self.padding[2] - kh) // self.stride[0] + 1

    @property
    def out_width(self) -> int:
        kw = self.dilation[1] * (self.kernel[1] - 1) + 1
        return (self.width + self.padding[1] + self.padding[3] - kw) // self.stride[1] + 1

    @property
    def macs(self) -> int:
        return (self.batch * self.out_channels * self.out_height * self.out_width
                * (self.in_channels // self.groups) * self.kernel[0] * self.kernel[1])

    @property
    def flops(self) -> int:
        return 2 * self.macs

    @property
    def data_shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.in_channels, self.height, self.width)

    @property
    def weight_shape(self) -> tuple[int, int, int, int]:
        return (self.out_channels, self.in_channels // self.groups, self.kernel[0], self.kernel[1])

    @property
    def output_shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.out_channels, self.out_height, self.out_width)

    @property
    def name(self) -> str:
        k = self.kernel[0] if self.kernel[0] == self.kernel[1] else f"{self.kernel[0]}x{self.kernel[1]}"
        s = self.stride[0] if self.stride[0] == self.stride[1] else f"{self.stride[0]}x{self.stride[1]}"
        return (f"conv2d_{self.height}x{self.width}_{self.in_channels}x{self.out_channels}"
                f"_k{k}s{s}" + (f"_g{self.groups}" if self.groups != 1 else "")
                + (f"_b{self.batch}" if self.batch != 1 else ""))

    @classmethod
    def from_task(cls, task) -> "Conv2DWorkload":
        """Build from a :class:`dcoc.tasks.Task` of a conv kind (conv2d, depthwise_conv2d,
        grouped_conv2d)."""
        wl = getattr(task, "workload", task)
        kind = getattr(task, "kind", "conv2d")
        if kind not in CONV_KINDS:
            raise WorkloadError(f"task {getattr(task, 'name', '?')!r} is {kind}, not conv2d")
        try:
            return cls(batch=int(wl["batch"]), height=int(wl["height"]), width=int(wl["width"]),
                       in_channels=int(wl["in_channels"]), out_channels=int(wl["out_channels"]),
                       kernel=(int(wl["kernel_h"]), int(wl["kernel_w"])),
                       stride=(int(wl["stride_h"]), int(wl["stride_w"])),
                       padding=(int(wl.get("pad_top", 0)), int(wl.get("pad_left", 0)),
                                int(wl.get("pad_bottom", 0)), int(wl.get("pad_right", 0))),
                       dilation=(int(wl.get("dilation_h", 1)), int(wl.get("dilation_w", 1))),
                       groups=int(wl.get("groups", 1)))
        except KeyError as exc:
            raise WorkloadError(f"conv2d task workload lacks {exc.args[0]!r}") from None


# ----------------------------------------------------------------------------- dense
@dataclass(frozen=True)
class DenseWorkload:
    """``out[N, M] = data[N, K] · weight[M, K]ᵀ`` (int8 x int8 -> int32, then the epilogue).

    ``batch`` = N (rows), ``in_features`` = K, ``out_features`` = M.
    """

    batch: int
    in_features: int
    out_features: int

    def __post_init__(self):
        for n in ("batch", "in_features", "out_features"):
            object.__setattr__(self, n, _posint(getattr(self, n), n))

    kind = "dense"

    @property
    def macs(self) -> int:
        return self.batch * self.in_features * self.out_features

    @property
    def flops(self) -> int:
        return 2 * self.macs

    @property
    def data_shape(self) -> tuple[int, int]:
        return (self.batch, self.in_features)

    @property
    def weight_shape(self) -> tuple[int, int]:
        return (self.out_features, self.in_features)

    @property
    def output_shape(self) -> tuple[int, int]:
        return (self.batch, self.out_features)

    @property
    def name(self) -> str:
        return f"dense_m{self.batch}_n{self.out_features}_k{self.in_features}"

    @classmethod
    def from_task(cls, task) -> "DenseWorkload":
        """Build from a ``dense`` :class:`dcoc.tasks.Task` (workload ``batch=1, m, n, k``:
        data m x k, weight n x k).  A ``batch_matmul`` task maps to one of its ``batch``
        matmuls (see :func:`workload_from_task`)."""
        wl = getattr(task, "workload", task)
        kind = getattr(task, "kind", "dense")
        if kind not in ("dense", "batch_matmul"):
            raise WorkloadError(f"task {getattr(task, 'name', '?')!r} is {kind}, not dense")
        try:
            if kind == "dense" and int(wl.get("batch", 1)) != 1:
                raise WorkloadError("a dense task must have batch=1 (use batch_matmul)")
            return cls(batch=int(wl["m"]), in_features=int(wl["k"]), out_features=int(wl["n"]))
        except KeyError as exc:
            raise WorkloadError(f"dense task workload lacks {exc.args[0]!r}") from None


def workload_from_task(task) -> tuple["Conv2DWorkload | DenseWorkload", int]:
    """``(workload, repeats)`` for a VTA-runnable task: conv2d, depthwise_conv2d and
    grouped_conv2d -> (Conv2DWorkload, 1);
    dense -> (DenseWorkload, 1); batch_matmul -> (DenseWorkload of one matmul, batch).
    Other kinds raise :class:`WorkloadError`."""
    kind = getattr(task, "kind", None)
    if kind in CONV_KINDS:
        return Conv2DWorkload.from_task(task), 1
    if kind == "dense":
        return DenseWorkload.from_task(task), 1
    if kind == "batch_matmul":
        return DenseWorkload.from_task(task), int(task.workload.get("batch", 1))
    raise WorkloadError(f"task {getattr(task, 'name', '?')!r} of kind {kind!r} cannot run on VTA")


# ----------------------------------------------------------------------------- spaces
def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _check_space_args(wl, hw, kind) -> None:
    from dcoc.errors import ConfigError

    if not isinstance(wl, kind):
        raise WorkloadError(f"expected a {kind.__name__}, got {type(wl).__name__}")
    if not all(hasattr(hw, a) for a in ("batch", "block_in", "block_out")):
        raise ConfigError(f"expected a hardware config (an HWConfig), got {type(hw).__name__}")


def conv2d_space(wl: Conv2DWorkload, hw) -> dict[str, list[int]]:
    """Every conv2d knob's ordered choices: ``tile_h``, ``tile_w``, ``tile_ci``, ``tile_co``,
    ``oc_nthread``, ``h_nthread`` (ResNet-18 C2 on 1x16x16: 8*8*3*3*2*2 = 2304 points).
    Grouped: ``tile_ci`` divides a packed group's input blocks, ``tile_co`` divides the
    output blocks and divides or is a multiple of a packed group's output blocks."""
    _check_space_args(wl, hw, Conv2DWorkload)
    gb = conv_groups(wl, hw.block_in, hw.block_out)
    cpg = gb.co_blocks
    return {
        "tile_h": divisors(wl.out_height),
        "tile_w": divisors(wl.out_width),
        "tile_ci": divisors(gb.ci_blocks),
        "tile_co": [t for t in divisors(gb.out_blocks) if cpg % t == 0 or t % cpg == 0],
        "oc_nthread": [1, 2],
        "h_nthread": [1, 2],
    }


def dense_space(wl: DenseWorkload, hw) -> dict[str, list[int]]:
    """Every dense knob's ordered choices: ``tile_b``, ``tile_ci``, ``tile_co``, ``oc_nthread``."""
    _check_space_args(wl, hw, DenseWorkload)
    return {
        "tile_b": divisors(_ceil(wl.batch, hw.batch)),
        "tile_ci": divisors(_ceil(wl.in_features, hw.block_in)),
        "tile_co": divisors(_ceil(wl.out_features, hw.block_out)),
        "oc_nthread": [1, 2],
    }


def space_for(wl, hw) -> dict[str, list[int]]:
    """``conv2d_space`` or ``dense_space`` depending on the workload type."""
    if isinstance(wl, Conv2DWorkload):
        return conv2d_space(wl, hw)
    if isinstance(wl, DenseWorkload):
        return dense_space(wl, hw)
    raise WorkloadError(f"unsupported workload {wl!r}")


def space_size(space: Mapping[str, list]) -> int:
    n = 1
    for v in space.values():
        n *= len(v)
    return n


def check_knobs(wl, hw, knobs) -> str | None:
    """None when ``knobs`` is a complete, in-space setting; otherwise the reason (one line)."""
    if not isinstance(knobs, Mapping):
        return f"knobs must be a dict of knob name -> int, got {type(knobs).__name__}"
    space = space_for(wl, hw)
    extra_ok = {}
    if isinstance(wl, Conv2DWorkload):
        extra_ok["tile_b"] = divisors(_ceil(wl.batch, hw.batch))
    for k, v in knobs.items():
        choices = space.get(k, extra_ok.get(k))
        if choices is None:
            return f"unknown knob {k!r} (valid: {', '.join(space)})"
        if isinstance(v, bool) or not isinstance(v, (int,)) and not (
                hasattr(v, "__index__") and not isinstance(v, float)):
            return f"knob {k}={v!r} is not an integer"
        if int(v) not in choices:
            return f"knob {k}={v} is not in the space {choices}"
    missing = [k for k in space if k not in knobs]
    if missing:
        return f"missing knob(s) {', '.join(missing)}"
    return None
