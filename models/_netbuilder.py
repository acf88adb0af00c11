"""A small, deterministic ONNX graph builder used by the zoo.

:class:`NetBuilder` writes an ONNX graph with :mod:`onnx.helper` while tracking every
tensor's static shape, so that the parameter and MAC counts of a network are known
*without* generating its weights (``materialize=False``: a dry run that ``dcoc models``
uses, milliseconds even for VGG-16).  With ``materialize=True`` the weights are drawn
from one ``numpy.random.default_rng(seed)`` stream in graph order, so two builds give
bit-identical files.

Weights follow the usual initialisations: convolution and linear weights He-uniform
(``U(-b, b)``, ``b = sqrt(6 / fan_in)``), biases ``U(-0.1, 0.1)``, BatchNorm with
``gamma ~ U(0.5, 1.5)``, ``beta ~ U(-0.1, 0.1)``, running mean ``U(-0.1, 0.1)`` and
running variance ``U(0.5, 1.5)`` (so the folded affine transform is not the identity),
LayerNorm ``gamma = 1``, ``beta = 0``.  Uniform draws are used because they are 3x faster
than normal draws, which matters for VGG-16's 138 M parameters.

Large weight files can be written as ONNX *external data* (``external_data=<file>``):
each tensor is streamed to the ``.data`` file as soon as it is generated, so building
VGG-16 never holds more than one layer's weights in memory.
"""
from __future__ import annotations

import math
from typing import BinaryIO

import numpy as np
import onnx
from onnx import TensorProto, helper

_NP_TO_ONNX = {
    np.dtype("float32"): TensorProto.FLOAT,
    np.dtype("int64"): TensorProto.INT64,
}


class NetBuilder:
    """Build an ONNX ``ModelProto`` layer by layer with shape, parameter and MAC tracking.

    Parameters
    ----------
    name: graph name.
    seed: seed of the weight stream (``numpy.random.default_rng``).
    materialize: generate weights (True) or only count them (False, dry run).
    opset: ``ai.onnx`` opset of the produced model.
    external_data: an open binary file that float weights are streamed into (ONNX external
        data, ``location`` = ``external_location``); None keeps weights inside the model.
    external_location: the data file's name relative to the ``.onnx`` file.
    """

    def __init__(self, name: str, seed: int = 0, materialize: bool = True, opset: int = 17,
                 external_data: BinaryIO | None = None, external_location: str = ""):
        self.name = name
        self.opset = opset
        self.materialize = materialize
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.input_shapes: dict[str, tuple[int, ...]] = {}
        self.params = 0
        self.macs = 0
        self._ext = external_data
        self._ext_location = external_location
        self._counter: dict[str, int] = {}

    # ------------------------------------------------------------------ plumbing
    def _uid(self, prefix: str) -> str:
        n = self._counter.get(prefix, 0)
        self._counter[prefix] = n + 1
        return prefix if n == 0 else f"{prefix}_{n}"

    def _node(self, op: str, inputs: list[str], out_shape: tuple[int, ...], name: str,
              **attrs) -> str:
        name = self._uid(name)
        out = name + ".out" if not name.endswith(".out") else name
        self.nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        self.shapes[out] = tuple(int(d) for d in out_shape)
        return out

    def shape(self, x: str) -> tuple[int, ...]:
        return self.shapes[x]

    def const(self, name: str, array) -> str:
        """A small constant (shape vectors, axes, scalars): an initializer, not a parameter."""
        array = np.asarray(array)
        name = self._uid(name)
        self.initializers.append(onnx.numpy_helper.from_array(array, name))
        self.shapes[name] = tuple(array.shape)
        return name

    def weight(self, name: str, shape: tuple[int, ...], init: str, fan_in: int = 1,
               lo: float = 0.0, hi: float = 1.0) -> str:
        """A learned parameter: counted in :attr:`params`; generated only when materializing.

        ``init``: ``"he"`` (He-uniform with ``fan_in``), ``"uniform"`` (``U(lo, hi)``),
        ``"ones"``, ``"zeros"``.
        """
        name = self._uid(name)
        shape = tuple(int(d) for d in shape)
        size = math.prod(shape)
        self.params += size
        self.shapes[name] = shape
        if not self.materialize:
            return name
        if init == "he":
            bound = math.sqrt(6.0 / max(fan_in, 1))
            lo, hi = -bound, bound
        if init in ("he", "uniform"):
            arr = self.rng.random(size, dtype=np.float32)
            arr *= np.float32(hi - lo)
            arr += np.float32(lo)
        elif init == "ones":
            arr = np.ones(size, dtype=np.float32)
        elif init == "zeros":
            arr = np.zeros(size, dtype=np.float32)
        else:  # pragma: no cover - programming error
            raise ValueError(f"unknown init {init!r}")
        arr = arr.reshape(shape)
        if self._ext is not None:
            tensor = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=list(shape))
            offset = self._ext.tell()
            self._ext.write(arr.tobytes())
            tensor.data_location = TensorProto.EXTERNAL
            for k, v in (("location", self._ext_location), ("offset", str(offset)),
                         ("length", str(arr.nbytes))):
                entry = tensor.external_data.add()
                entry.key, entry.value = k, v
        else:
            tensor = onnx.numpy_helper.from_array(arr, name)
        self.initializers.append(tensor)
        return name

    def input(self, name: str, shape: tuple[int, ...], dtype=TensorProto.FLOAT) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, dtype, list(shape)))
        self.shapes[name] = tuple(shape)
        self.input_shapes[name] = tuple(shape)
        return name

    def output(self, x: str, name: str = "output", dtype=TensorProto.FLOAT) -> str:
        self.nodes.append(helper.make_node("Identity", [x], [name], name=self._uid("output")))
        self.shapes[name] = self.shapes[x]
        self.outputs.append(helper.make_tensor_value_info(name, dtype, list(self.shapes[x])))
        return name

    def model(self, doc: str = "") -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs,
                                  initializer=self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)],
                                  producer_name="dcoc_models", doc_string=doc)
        model.ir_version = 8
        return model

    # ------------------------------------------------------------------ CNN layers
    def conv(self, x: str, cout: int, k: int | tuple[int, int], stride: int = 1,
             pad: int | None = None, groups: int = 1, dilation: int = 1, bias: bool = False,
             name: str = "conv") -> str:
        n, cin, h, w = self.shapes[x]
        kh, kw = (k, k) if isinstance(k, int) else k
        if pad is None:
            pad = (kh - 1) * dilation // 2
        oh = (h + 2 * pad - dilation * (kh - 1) - 1) // stride + 1
        ow = (w + 2 * pad - dilation * (kw - 1) - 1) // stride + 1
        fan_in = cin // groups * kh * kw
        wname = self.weight(name + ".weight", (cout, cin // groups, kh, kw), "he", fan_in=fan_in)
        inputs = [x, wname]
        if bias:
            inputs.append(self.weight(name + ".bias", (cout,), "uniform", lo=-0.1, hi=0.1))
        self.macs += n * cout * oh * ow * fan_in
        return self._node("Conv", inputs, (n, cout, oh, ow), name, kernel_shape=[kh, kw],
                          strides=[stride, stride], pads=[pad, pad, pad, pad],
                          dilations=[dilation, dilation], group=groups)

    def bn(self, x: str, name: str = "bn") -> str:
        c = self.shapes[x][1]
        scale = self.weight(name + ".weight", (c,), "uniform", lo=0.5, hi=1.5)
        shift = self.weight(name + ".bias", (c,), "uniform", lo=-0.1, hi=0.1)
        mean = self.weight(name + ".running_mean", (c,), "uniform", lo=-0.1, hi=0.1)
        var = self.weight(name + ".running_var", (c,), "uniform", lo=0.5, hi=1.5)
        return self._node("BatchNormalization", [x, scale, shift, mean, var], self.shapes[x],
                          name, epsilon=1e-5, momentum=0.9)

    def relu(self, x: str, name: str = "relu") -> str:
        return self._node("Relu", [x], self.shapes[x], name)

    def relu6(self, x: str, name: str = "relu6") -> str:
        lo = self.const("clip_min", np.array(0.0, dtype=np.float32))
        hi = self.const("clip_max", np.array(6.0, dtype=np.float32))
        return self._node("Clip", [x, lo, hi], self.shapes[x], name)

    def add(self, a: str, b: str, name: str = "add") -> str:
        return self._node("Add", [a, b], np.broadcast_shapes(self.shapes[a], self.shapes[b]),
                          name)

    def maxpool(self, x: str, k: int, stride: int, pad: int = 0, name: str = "maxpool") -> str:
        n, c, h, w = self.shapes[x]
        oh = (h + 2 * pad - k) // stride + 1
        ow = (w + 2 * pad - k) // stride + 1
        return self._node("MaxPool", [x], (n, c, oh, ow), name, kernel_shape=[k, k],
                          strides=[stride, stride], pads=[pad, pad, pad, pad])

    def global_avgpool(self, x: str, name: str = "avgpool") -> str:
        n, c, _, _ = self.shapes[x]
        return self._node("GlobalAveragePool", [x], (n, c, 1, 1), name)

    def flatten(self, x: str, name: str = "flatten") -> str:
        s = self.shapes[x]
        return self._node("Flatten", [x], (s[0], math.prod(s[1:])), name, axis=1)

    def gemm(self, x: str, n_out: int, name: str = "fc") -> str:
        """PyTorch ``nn.Linear`` as ONNX ``Gemm(transB=1)`` with bias."""
        m, k = self.shapes[x]
        w = self.weight(name + ".weight", (n_out, k), "he", fan_in=k)
        b = self.weight(name + ".bias", (n_out,), "uniform", lo=-0.1, hi=0.1)
        self.macs += m * n_out * k
        return self._node("Gemm", [x, w, b], (m, n_out), name, transB=1)

    # ------------------------------------------------------------------ transformer layers
    def linear(self, x: str, n_out: int, name: str = "linear") -> str:
        """``x @ W + b`` on a (..., K) activation: ``MatMul`` with a (K, N) weight, then ``Add``."""
        *lead, k = self.shapes[x]
        w = self.weight(name + ".weight", (k, n_out), "he", fan_in=k)
        b = self.weight(name + ".bias", (n_out,), "uniform", lo=-0.1, hi=0.1)
        self.macs += math.prod(lead) * n_out * k
        y = self._node("MatMul", [x, w], (*lead, n_out), name + ".matmul")
        return self._node("Add", [y, b], (*lead, n_out), name + ".add")

    def matmul(self, a: str, b: str, name: str = "matmul") -> str:
        """Activation x activation matmul with numpy broadcasting of the batch dims."""
        sa, sb = self.shapes[a], self.shapes[b]
        batch = np.broadcast_shapes(sa[:-2], sb[:-2])
        self.macs += math.prod(batch) * sa[-2] * sb[-1] * sa[-1]
        return self._node("MatMul", [a, b], (*batch, sa[-2], sb[-1]), name)

    def layernorm(self, x: str, name: str = "ln") -> str:
        d = self.shapes[x][-1]
        g = self.weight(name + ".weight", (d,), "ones")
        b = self.weight(name + ".bias", (d,), "zeros")
        return self._node("LayerNormalization", [x, g, b], self.shapes[x], name, axis=-1,
                          epsilon=1e-5)

    def gelu(self, x: str, name: str = "gelu") -> str:
        """Exact GELU as PyTorch exports it at opset 17: ``0.5 * x * (1 + erf(x / sqrt 2))``."""
        s = self.shapes[x]
        c = self.const("sqrt2", np.array(math.sqrt(2.0), dtype=np.float32))
        one = self.const("one", np.array(1.0, dtype=np.float32))
        half = self.const("half", np.array(0.5, dtype=np.float32))
        t = self._node("Div", [x, c], s, name + ".div")
        t = self._node("Erf", [t], s, name + ".erf")
        t = self._node("Add", [t, one], s, name + ".add")
        t = self._node("Mul", [x, t], s, name + ".mul")
        return self._node("Mul", [t, half], s, name + ".mul_half")

    def softmax(self, x: str, name: str = "softmax") -> str:
        return self._node("Softmax", [x], self.shapes[x], name, axis=-1)

    def scale(self, x: str, factor: float, name: str = "scale") -> str:
        c = self.const("scale", np.array(factor, dtype=np.float32))
        return self._node("Mul", [x, c], self.shapes[x], name)

    def reshape(self, x: str, shape: tuple[int, ...], name: str = "reshape") -> str:
        s = self.const("shape", np.array(shape, dtype=np.int64))
        assert math.prod(shape) == math.prod(self.shapes[x]), (shape, self.shapes[x])
        return self._node("Reshape", [x, s], shape, name)

    def transpose(self, x: str, perm: tuple[int, ...], name: str = "transpose") -> str:
        s = self.shapes[x]
        return self._node("Transpose", [x], tuple(s[p] for p in perm), name, perm=list(perm))

    def gather(self, table: str, idx: str, name: str = "embedding") -> str:
        return self._node("Gather", [table, idx], (*self.shapes[idx], self.shapes[table][-1]),
                          name, axis=0)
