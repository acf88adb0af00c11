"""Legalize and fuse an unfused Relax module for MetaSchedule (the sequence
``compile_relax`` runs)."""
from __future__ import annotations

from dcoc.errors import ModelError, TargetError
from tvm_plugin.frontend.common import _CALL_OPS, _first_line, _quiet_native_stderr
from tvm_plugin.frontend.rewrites import rewrite_for_tvm
from tvm_plugin.frontend.targets import resolve_target

#: CPU weight prepacking (TVM's ``static_shape_tuning_pipeline(cpu_weight_prepack=True)``):
#: the fused PrimFuncs' constant weights are marked layout-free, so MetaSchedule's
#: ``RewriteLayout`` postprocessor packs them in the layout the schedule reads, and
#: :func:`tvm_plugin.metaschedule.build.compile_model` folds that packing into the constants.
PREPACK_WEIGHTS = True


def prepack_weights(target, prepack: bool | None = None) -> bool:
    """Whether weights are prepacked for ``target``: ``prepack`` if given, else
    :data:`PREPACK_WEIGHTS` on llvm (CPU) targets; never on other targets."""
    spec = resolve_target(target)
    if spec.kind != "llvm":
        return False
    return PREPACK_WEIGHTS if prepack is None else bool(prepack)


def lower_for_tuning(mod, target="llvm", label: str = "model", prepack: bool | None = None):
    """Legalize and fuse an unfused Relax module for MetaSchedule.

    Runs ``library_dispatch_passes(target)``, ``LegalizeOps``, ``AnnotateTIROpPattern``,
    ``FoldConstant``, ``FuseOps``, ``FuseTIR`` under ``with target, PassContext(opt_level=3)``
    after :func:`~tvm_plugin.frontend.rewrites.rewrite_for_tvm` (batch norm and bias folded
    into the conv weights, fast ``erf``) -- exactly the preparation
    ``ms.relax_integration.compile_relax`` applies, so tasks extracted from the result match
    the database keys compile_relax looks up.  Compile with
    the *unfused* module (``Model.mod``), never with this one (TVM notes section 7).
    On llvm targets :func:`prepack_weights` adds ``AttachAttrLayoutFreeBuffers`` (the
    tasks then see their weights as layout-free; ``compile_model`` does the same).
    """
    import tvm
    from tvm import relax

    spec = resolve_target(target)
    if spec.is_vta:
        raise TargetError("lower_for_tuning needs a TVM target (llvm, cuda or a JSON dict), "
                          "not vta")
    t = spec.tvm
    mod = rewrite_for_tvm(mod)
    try:
        from tvm.relax import pipeline as rp

        dispatch = list(rp.library_dispatch_passes(t))
    except Exception:  # noqa: BLE001 - targets without a registered pipeline
        dispatch = []
    seq = tvm.transform.Sequential([
        *dispatch,
        relax.transform.LegalizeOps(),
        relax.transform.AnnotateTIROpPattern(),
        relax.transform.FoldConstant(),
        relax.transform.FuseOps(),
        relax.transform.FuseTIR(),
    ])
    try:
        with _quiet_native_stderr(), t, tvm.transform.PassContext(opt_level=3):
            fused = seq(mod)
            return attach_layout_free(fused) if prepack_weights(spec, prepack) else fused
    except Exception as exc:  # noqa: BLE001
        raise ModelError(f"TVM failed to legalize/fuse '{label}' for {spec.kind}: "
                         f"{_first_line(exc)}") from None


def attach_layout_free(fused):
    """``AttachAttrLayoutFreeBuffers`` on a fused module, keeping the functions' names (the
    pass re-adds every PrimFunc, which renames ``mean`` to ``mean1``)."""
    from tvm import relax
    from tvm.relax.expr_functor import PyExprMutator, mutator

    after = relax.transform.AttachAttrLayoutFreeBuffers()(fused)
    old = {gv.name_hint for gv in fused.get_global_vars()}
    now = {gv.name_hint for gv in after.get_global_vars()}
    rename = {n: n[:-1] for n in now if n not in old and n[:-1] in old and n[:-1] not in now}
    if not rename:
        return after
    bb = relax.BlockBuilder()
    new_gv = {gv: bb.add_func(f, rename.get(gv.name_hint, gv.name_hint))
              for gv, f in after.functions.items() if not isinstance(f, relax.Function)}

    @mutator
    class _Rename(PyExprMutator):
        def visit_global_var_(self, op):
            return new_gv.get(op, op)

    for gv, f in after.functions.items():
        if isinstance(f, relax.Function):
            bb.add_func(_Rename().visit_expr(f), gv.name_hint)
    out = bb.get()
    return out.with_attrs(after.attrs) if after.attrs else out


def _is_lowered(mod) -> bool:
    """True when ``main`` only calls PrimFuncs/packed functions (legalized already)."""
    import tvm
    from tvm import relax

    func = mod["main"]
    for block in func.body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op) and \
                    v.op.name not in _CALL_OPS:
                return False
    return True
