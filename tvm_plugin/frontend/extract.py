"""The entry point :func:`extract_tasks`: a module or a loaded Model -> TaskList for a target
(:func:`tvm_plugin.frontend.loading.model_tasks` resolves, loads and extracts in one call)."""
from __future__ import annotations

from dcoc.errors import ModelError
from dcoc.tasks import TaskList
from tvm_plugin.frontend.accel import _vta_tasks
from tvm_plugin.frontend.lowering import _is_lowered, lower_for_tuning
from tvm_plugin.frontend.metaschedule import _ms_tasks
from tvm_plugin.frontend.targets import resolve_target


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

      - conv2d with dilation 1, any groups (grouped and depthwise convs run as VTA's
        grouped conv2d) -> ``device="vta"``, except the network's first conv (conv layer
        0, the one consuming the model input: VTA's quantizer skips it and it runs in
        fp32 on the CPU, e.g. ResNet-18's 7x7 stem) -> ``device="cpu"``;
      - dilated conv2d -> ``device="cpu"``;
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
    if hasattr(mod, "fused") and hasattr(mod, "tasks"):  # a loaded Model
        return mod.tasks(spec)
    if spec.is_vta:
        if _is_lowered(mod):
            raise ModelError("VTA task extraction needs the unfused module from load_model(), "
                             "not a legalized/fused one")
        return _vta_tasks(mod)
    if not _is_lowered(mod):
        mod = lower_for_tuning(mod, spec)
    return _ms_tasks(mod, spec)
