"""ONNX import, preflight and task extraction: the only place dcoc imports a model into TVM.

Pipeline (see ``docs/frontend.md``)::

    path / zoo name / ModelProto
      -> preflight      file, protobuf, ONNX checker, unsupported operators (all of them,
                        by name and count), dynamic input dims, --input-shape validation
      -> import         tvm.relax.frontend.onnx.from_onnx(keep_params_in_input=False)
                        -> DecomposeOpsForInference -> CanonicalizeBindings
                        -> fold constant weight arithmetic in numpy -> DeadCodeElimination
                        = Model.mod, the *unfused* module (give it to compile_relax)
      -> lower_for_tuning(mod, target)
                        library dispatch, LegalizeOps, AnnotateTIROpPattern, FoldConstant,
                        FuseOps, FuseTIR: the same sequence compile_relax runs, so the
                        MetaSchedule tasks and the database keys agree
      -> extract_tasks(mod, target) -> TaskList of dcoc.tasks.Task

Targets: ``vta`` (the conv2d/dense workloads VTA runs, found by walking the Relax graph,
plus the operators that stay on the CPU), ``llvm`` / ``cuda`` / a TVM target JSON dict /
a ``tvm.target.Target`` (the MetaSchedule tasks, classified by inspecting their PrimFuncs).

Every failure a user can cause raises :class:`dcoc.errors.ModelError` or
:class:`dcoc.errors.TargetError` with a single-line message; TVM is imported lazily, so
file-level errors are reported without paying for ``import tvm``.

Modules (one concern each; this package re-exports the public names, so import from
``tvm_plugin.frontend``)::

    targets       resolve_target, TargetSpec
    preflight     preflight, unsupported_ops (file, checker, operators, input shapes)
    loading       load, load_model, model_tasks, Model (TVM's ONNX importer + import pipeline)
    folding       numpy constant folding of weight arithmetic
    lowering      lower_for_tuning (legalize + fuse)
    accel         VTA extraction: the Relax graph walk and offload policy
    classify      classify_primfunc: TIR anchor block -> (kind, workload, macs)
    metaschedule  MetaSchedule task extraction
    naming        task_name and the workload dicts both extractions build
    extract       extract_tasks (the entry point)
    common        TVM output hygiene (_quiet_native_stderr, _first_line), Relax helpers
"""
from tvm_plugin.frontend.classify import classify_primfunc  # noqa: F401
from tvm_plugin.frontend.extract import extract_tasks
from tvm_plugin.frontend.loading import Model, load, load_model, model_tasks
from tvm_plugin.frontend.lowering import _is_lowered, lower_for_tuning  # noqa: F401
from tvm_plugin.frontend.naming import task_name
from tvm_plugin.frontend.preflight import preflight, unsupported_ops
from tvm_plugin.frontend.targets import TargetSpec, resolve_target

__all__ = [
    "Model", "TargetSpec", "load", "load_model", "lower_for_tuning", "extract_tasks",
    "model_tasks", "resolve_target", "preflight", "unsupported_ops", "task_name",
]
