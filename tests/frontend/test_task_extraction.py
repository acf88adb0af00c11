"""Real ONNX files in, real task lists out (vta and llvm targets)."""
from __future__ import annotations

import collections

import pytest

import dcoc_models
from dcoc.tasks import KINDS, TaskList

CONV_KEYS = {"batch", "in_channels", "out_channels", "height", "width", "kernel_h", "kernel_w",
             "stride_h", "stride_w", "pad_top", "pad_left", "pad_bottom", "pad_right",
             "dilation_h", "dilation_w", "groups", "out_height", "out_width"}
MM_KEYS = {"batch", "m", "n", "k"}


def _sig(t):
    w = t.workload
    return (w["height"], w["in_channels"], w["out_channels"], w["kernel_h"], w["stride_h"],
            w["out_height"])


def _check_contract(tl: TaskList):
    assert isinstance(tl, TaskList) and isinstance(tl.cpu_ops, list)
    names = [t.name for t in tl]
    assert len(set(names)) == len(names), "task names must be unique"
    for t in tl:
        assert t.kind in KINDS and t.weight >= 1
        if "conv2d" in t.kind:
            assert set(t.workload) == CONV_KEYS
            w = t.workload
            assert t.macs == (w["batch"] * w["out_channels"] * w["out_height"] * w["out_width"]
                              * w["in_channels"] // w["groups"] * w["kernel_h"] * w["kernel_w"])
            # output size follows from the rest of the workload
            assert w["out_height"] == (w["height"] + w["pad_top"] + w["pad_bottom"]
                                       - w["dilation_h"] * (w["kernel_h"] - 1) - 1) \
                // w["stride_h"] + 1
        elif t.kind in ("dense", "batch_matmul"):
            assert set(t.workload) == MM_KEYS
            assert t.macs == t.workload["batch"] * t.workload["m"] * t.workload["n"] * \
                t.workload["k"]


# --------------------------------------------------------------------------- VTA target
def test_resnet18_vta_reference_workloads(tasks_of):
    """The 10 distinct VTA conv workloads of ResNet-18 (vta-reference 4.2) with their
    multiplicities; the 7x7 stem stays on the CPU; fc is a VTA dense."""
    tl = tasks_of("resnet18", "vta")
    _check_contract(tl)
    vta_convs = {_sig(t): t.weight for t in tl if t.kind == "conv2d" and t.device == "vta"}
    assert vta_convs == {
        (56, 64, 64, 3, 1, 56): 4,     # C2
        (56, 64, 128, 3, 2, 28): 1,    # C3
        (56, 64, 128, 1, 2, 28): 1,    # C4 (1x1 shortcut)
        (28, 128, 128, 3, 1, 28): 3,   # C5
        (28, 128, 256, 3, 2, 14): 1,   # C6
        (28, 128, 256, 1, 2, 14): 1,   # C7
        (14, 256, 256, 3, 1, 14): 3,   # C8
        (14, 256, 512, 3, 2, 7): 1,    # C9
        (14, 256, 512, 1, 2, 7): 1,    # C10
        (7, 512, 512, 3, 1, 7): 3,     # C11
    }
    assert sum(vta_convs.values()) == 19  # 16 3x3 + 3 1x1
    c2 = tl.by_name("conv2d_56x56_64x64_k3s1")
    assert c2.workload == dict(batch=1, in_channels=64, out_channels=64, height=56, width=56,
                               kernel_h=3, kernel_w=3, stride_h=1, stride_w=1, pad_top=1,
                               pad_left=1, pad_bottom=1, pad_right=1, dilation_h=1,
                               dilation_w=1, groups=1, out_height=56, out_width=56)
    assert c2.macs == 115_605_504 and c2.device == "vta"
    # each occurrence's fused epilogue: every block's conv1 has the folded-BN bias, conv2 the
    # bias and the residual add; the 1x1 shortcut convs a bias only
    ep = {(e["bias"], e["residual"]): e["count"] for e in c2.epilogues}
    assert ep == {(True, False): 2, (True, True): 2}
    assert tl.by_name("conv2d_56x56_64x128_k1s2").epilogues == \
        [{"bias": True, "residual": False, "count": 1}]
    for t in tl:
        if t.device == "vta":
            assert sum(e["count"] for e in t.epilogues) == t.weight, t.name
    stem = [t for t in tl if t.device == "cpu"]
    assert [(t.name, t.weight) for t in stem] == [("conv2d_224x224_3x64_k7s2", 1)]
    assert stem[0].workload["pad_top"] == 3 and stem[0].workload["out_height"] == 112
    fc = tl.by_name("dense_m1_n1000_k512")
    assert (fc.kind, fc.device, fc.weight, fc.workload) == \
        ("dense", "vta", 1, dict(batch=1, m=1, n=1000, k=512))
    # BN, ReLU and residual adds are fused into the conv tasks; what stays on the CPU:
    assert {t.name: t.weight for t in tl.cpu_ops} == {"max_pool2d": 1, "mean": 1, "reshape": 1}
    assert all(t.kind == "other" and t.device == "cpu" for t in tl.cpu_ops)
    assert tl.cpu_ops[0].workload == {"elements": 64 * 56 * 56}
    assert tl.total_macs == dcoc_models.info("resnet18").macs


def test_light_resnet50_vta(tasks_of):
    tl = tasks_of("light_resnet50", "vta")
    _check_contract(tl)
    convs = [t for t in tl if t.kind == "conv2d"]
    assert len(convs) == 23  # distinct conv workloads
    assert sum(t.weight for t in convs) == 53
    assert [t.name for t in convs if t.device == "cpu"] == ["conv2d_224x224_3x64_k7s2"]
    assert tl.by_name("conv2d_14x14_256x256_k3s1").weight == 5  # 6 blocks, 1st strided
    assert tl.by_name("conv2d_56x56_64x256_k1s1").weight == 4  # 3 blocks + the projection
    assert tl.by_name("dense_m1_n1000_k2048").device == "vta"
    ops = {t.name: t.weight for t in tl.cpu_ops}
    assert ops["max_pool2d"] == 1 and ops["avg_pool2d"] == 1 and ops["softmax"] == 1
    assert tl.total_macs == dcoc_models.info("light_resnet50").macs


def test_mobilenetv2_vta_depthwise_on_vta(tasks_of):
    tl = tasks_of("mobilenetv2", "vta")
    _check_contract(tl)
    dw = [t for t in tl if t.kind == "depthwise_conv2d"]
    assert len(dw) == 10 and sum(t.weight for t in dw) == 17
    assert all(t.device == "vta" and t.workload["groups"] == t.workload["in_channels"]
               for t in dw)
    assert sum(t.weight for t in tl if t.kind == "conv2d" and t.device == "vta") == 34
    assert tl[0].name == "conv2d_224x224_3x32_k3s2" and tl[0].device == "cpu"
    # BN + ReLU6 (Clip -> maximum/minimum) are fused; only GAP and flatten remain
    assert {t.name: t.weight for t in tl.cpu_ops} == {"mean": 1, "reshape": 1}
    assert tl.total_macs == dcoc_models.info("mobilenetv2").macs


def test_transformer_vta_dense_and_attention(tasks_of):
    tl = tasks_of("transformer", "vta")
    _check_contract(tl)
    got = {(t.kind, t.workload["batch"], t.workload["m"], t.workload["n"], t.workload["k"]):
           t.weight for t in tl}
    assert got == {
        ("dense", 1, 128, 256, 256): 16,         # Q, K, V, output projection x 4 layers
        ("batch_matmul", 4, 128, 128, 64): 4,    # Q @ K^T per head
        ("batch_matmul", 4, 128, 64, 128): 4,    # P @ V per head
        ("dense", 1, 128, 1024, 256): 4,         # FFN up
        ("dense", 1, 128, 256, 1024): 4,         # FFN down
    }
    assert all(t.device == "vta" for t in tl)
    ops = {t.name: t.weight for t in tl.cpu_ops}
    assert ops["layer_norm"] == 9 and ops["softmax"] == 4 and ops["erf"] == 4
    assert ops["permute_dims"] == 16 and "matmul" not in ops
    assert tl.total_macs == dcoc_models.info("transformer").macs


def test_shape_only_import_gives_identical_tasks():
    from tvm_plugin.frontend import load

    full, light = load("resnet18", weights=True), load("resnet18", weights=False)
    assert not light.weights and full.weights
    a, b = full.tasks("vta"), light.tasks("vta")
    assert [(t.name, t.workload, t.weight, t.device) for t in a] == \
        [(t.name, t.workload, t.weight, t.device) for t in b]


@pytest.mark.parametrize("name", dcoc_models.light_names())
def test_every_light_model_vta(tasks_of, name):
    tl = tasks_of(name, "vta")
    _check_contract(tl)
    assert len(tl) > 0 and tl.cpu_ops
    assert tl.total_macs == dcoc_models.info(name).macs  # every MAC is in some task


# --------------------------------------------------------------------------- TVM targets
def test_resnet18_llvm_metaschedule_tasks(tasks_of):
    tl = tasks_of("resnet18", "llvm")
    _check_contract(tl)
    assert all(t.ms_task is not None and t.device == "llvm" for t in tl)
    assert all(t.weight == t.ms_task.weight for t in tl)
    assert '"num-cores"' in tl.target
    vta = tasks_of("resnet18", "vta")
    # the same 11 conv workloads + fc, recovered from the fused PrimFuncs
    assert {tuple(sorted(t.workload.items())) for t in tl if t.kind != "other"} == \
        {tuple(sorted(t.workload.items())) for t in vta}
    per_wl = collections.Counter()
    for t in tl:
        if t.kind == "conv2d":
            per_wl[_sig(t)] += t.weight
    assert per_wl[(56, 64, 64, 3, 1, 56)] == 4  # split over two fused epilogues
    assert sum(per_wl.values()) == 20
    assert {t.name for t in tl if t.kind == "other"} == {"max_pool2d", "mean", "reshape"}
    assert tl.total_macs == dcoc_models.info("resnet18").macs
    # the MetaSchedule task really is the conv it claims to be
    from tvm.s_tir.analysis import estimate_tir_flops

    c = tl.by_name("conv2d_56x56_64x128_k3s2")
    assert estimate_tir_flops(c.ms_task.dispatched[0]) >= 2 * c.macs


def test_light_resnet50_llvm(tasks_of):
    tl = tasks_of("light_resnet50", "llvm")
    _check_contract(tl)
    convs = {tuple(sorted(t.workload.items())) for t in tl if t.kind == "conv2d"}
    assert len(convs) == 23
    assert sum(t.weight for t in tl if t.kind == "conv2d") == 53
    assert [t.kind for t in tl].count("dense") == 1


def test_transformer_llvm(tasks_of):
    tl = tasks_of("transformer", "llvm")
    _check_contract(tl)
    mm = collections.Counter()
    for t in tl:
        if t.kind in ("dense", "batch_matmul"):
            mm[(t.kind, t.workload["batch"], t.workload["m"], t.workload["n"],
                t.workload["k"])] += t.weight
    assert mm == {("dense", 1, 128, 256, 256): 16, ("batch_matmul", 4, 128, 128, 64): 4,
                  ("batch_matmul", 4, 128, 64, 128): 4, ("dense", 1, 128, 1024, 256): 4,
                  ("dense", 1, 128, 256, 1024): 4}


def test_cuda_target_extracts_without_gpu():
    from tvm_plugin.frontend import model_tasks

    tl = model_tasks("light_squeezenet", "cuda")
    assert tl and all(t.device == "cuda" and t.ms_task is not None for t in tl)
    assert sum(t.weight for t in tl if t.kind == "conv2d") == 26


def test_load_model_api_and_lowering():
    import tvm

    from tvm_plugin.frontend import extract_tasks, load, load_model, lower_for_tuning, resolve_target

    mod = load_model(dcoc_models.get("transformer"))
    assert isinstance(mod, tvm.IRModule)
    fused = lower_for_tuning(mod, "llvm")
    a = extract_tasks(fused, "llvm")      # already fused
    b = extract_tasks(mod, "llvm")        # lowered on the fly
    assert [t.name for t in a] == [t.name for t in b]
    assert [t.name for t in extract_tasks(mod, "vta")] == \
        [t.name for t in load("transformer").tasks("vta")]
    m = load("transformer")
    assert m.fused("llvm") is m.fused(resolve_target("llvm"))  # cached per target
    assert m.input_shapes == {"input_ids": (1, 128)} and m.input_dtypes == {"input_ids": "int64"}


def test_resolve_target_forms():
    import tvm

    from tvm_plugin.frontend import resolve_target

    assert resolve_target("vta").is_vta and resolve_target("VTA").tvm is None
    t = resolve_target("llvm")
    assert t.kind == "llvm" and int(t.tvm.attrs["num-cores"]) >= 1
    t = resolve_target({"kind": "llvm", "mcpu": "skylake"})
    assert t.tvm.attrs["mcpu"] == "skylake" and "num-cores" in t.tvm.attrs
    t = resolve_target('{"kind": "llvm", "num-cores": 3}')
    assert int(t.tvm.attrs["num-cores"]) == 3
    t = resolve_target(tvm.target.Target({"kind": "llvm"}))
    assert "num-cores" in t.tvm.attrs
    assert resolve_target({"kind": "vta"}).is_vta


@pytest.mark.parametrize("which", ["transformer", "conv_bn"])
def test_tasks_match_compile_relax_pipeline(monkeypatch, which):
    """compile_relax(db, rewrite_for_tvm(model.mod), ...) re-fuses the unfused module
    itself; the module it hands to MetaScheduleApplyDatabase must yield exactly our
    MetaSchedule tasks, or every database lookup would miss (TVM notes section 7)."""
    import tvm
    import tvm_ffi
    from tvm import relax
    from tvm.s_tir import meta_schedule as ms

    from tests.tvm.conftest import conv_onnx
    from tvm_plugin.frontend import load, lowering, resolve_target
    from tvm_plugin.frontend.rewrites import rewrite_for_tvm

    # compile_relax knows nothing of weight prepacking (compile_model applies it)
    monkeypatch.setattr(lowering, "PREPACK_WEIGHTS", False)
    model = load("transformer") if which == "transformer" else \
        load(conv_onnx(c=8, oc=8, h=8, w=8, bn=True), name="conv_bn")
    spec = resolve_target({"kind": "llvm", "num-cores": 2})
    ours = model.tasks(spec)
    captured = {}
    real = relax.transform.MetaScheduleApplyDatabase

    def capture(enable_warning=False):
        @tvm.transform.module_pass(opt_level=0, name="CaptureThenApplyDatabase")
        def _pass(mod, _ctx):
            captured["mod"] = mod
            return real(enable_warning=enable_warning)(mod)
        return _pass

    monkeypatch.setattr(relax.transform, "MetaScheduleApplyDatabase", capture)
    ms.relax_integration.compile_relax(ms.database.MemoryDatabase(),
                                       rewrite_for_tvm(model.mod), spec.tvm, params={})
    theirs = ms.relax_integration.extract_tasks(captured["mod"], spec.tvm)
    assert {t.task_name: (int(t.weight), tvm_ffi.structural_hash(t.dispatched[0]))
            for t in theirs} == \
        {t.ms_task.task_name: (t.weight, tvm_ffi.structural_hash(t.ms_task.dispatched[0]))
         for t in ours}
