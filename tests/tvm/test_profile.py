"""scripts.ms_profile on a compiled model: every kernel call is timed in the model and the
kernel again alone, warm and cold (the tool session 34 found ResNet-18's gap with)."""
from __future__ import annotations


def test_profile_times_every_kernel_call_in_the_model_and_alone(conv_model, llvm):
    from scripts.ms_profile import profile_executable, table
    from tvm_plugin.build import compile_model, random_inputs

    ex, _ = compile_model(None, conv_model.mod, llvm.tvm)
    inputs = random_inputs(conv_model.input_shapes, conv_model.input_dtypes, seed=0)
    lib = ex.mod.imports[0]
    prof = profile_executable(ex, llvm.tvm, conv_model, inputs, runs=2,
                              recorded={"no_such_function": 1.0})
    fns = prof["functions"]
    assert fns and all(lib.implements_function(name) for name in fns)
    for f in fns.values():
        assert f["calls"] >= 1 and f["tuned"] is None
        assert f["in_model"] > 0 and f["warm"] > 0 and f["cold"] > 0
    assert prof["model_ms"] > 0 and prof["builtin_ms"] > 0  # allocations are VM builtins
    in_model = sum(f["calls"] * f["in_model"] for f in fns.values()) + prof["builtin_ms"]
    assert 0.1 < prof["model_ms"] / in_model < 10  # one unit (ms) everywhere
    text = table("conv16", prof)
    assert "compiled model" in text and all(name[:58] in text for name in fns)


def test_fill_captures_the_arguments_the_model_passes_a_kernel(conv_model, llvm):
    import numpy as np

    from scripts.ms_fill import model_arguments
    from scripts.ms_profile import _BUILTIN, instrumented_calls
    from tvm_plugin.build import _to_device, compile_model, device_of, random_inputs
    from tvm import relax

    ex, _ = compile_model(None, conv_model.mod, llvm.tvm)
    inputs = random_inputs(conv_model.input_shapes, conv_model.input_dtypes, seed=0)
    vm = relax.VirtualMachine(ex, device_of(llvm.tvm))
    _, seq = instrumented_calls(vm, _to_device([inputs[n] for n in conv_model.input_shapes],
                                              device_of(llvm.tvm)), runs=1, warmup=0)
    first, shapes = next((s, sh) for s, sh in seq if not s.startswith(_BUILTIN))
    got = model_arguments(ex, llvm.tvm, conv_model, inputs, first)
    assert [(a.shape, str(a.dtype)) for a in got] == shapes
    (x,) = inputs.values()  # the model's first kernel reads the model's input itself
    assert any(a.shape == x.shape and np.array_equal(a, x) for a in got)
