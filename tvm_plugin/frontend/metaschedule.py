"""MetaSchedule task extraction: ``ms.relax_integration.extract_tasks`` on the fused module,
classified and named, in first-call order."""
from __future__ import annotations

from dcoc.errors import ModelError
from dcoc.tasks import Task, TaskList
from tvm_plugin.frontend.classify import classify_primfunc
from tvm_plugin.frontend.common import _first_line, _quiet_native_stderr
from tvm_plugin.frontend.naming import _uniquify, task_name
from tvm_plugin.frontend.targets import TargetSpec


def _ms_tasks(fused, spec: TargetSpec, name: str = "") -> TaskList:
    from tvm import relax, tirx
    from tvm.s_tir import meta_schedule as ms

    try:
        with _quiet_native_stderr():
            extracted = ms.relax_integration.extract_tasks(fused, spec.tvm)
    except Exception as exc:  # noqa: BLE001
        raise ModelError(f"MetaSchedule task extraction failed for '{name or 'model'}': "
                         f"{_first_line(exc)}") from None
    order: dict[str, int] = {}
    for block in fused["main"].body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.Call) and v.args and isinstance(v.args[0], relax.GlobalVar):
                order.setdefault(v.args[0].name_hint, len(order))
    tasks = []
    for et in extracted:
        func = next((f for f in et.dispatched[0].functions.values()
                     if isinstance(f, tirx.PrimFunc)), None) if et.dispatched else None
        kind, wl, macs = classify_primfunc(func) if func is not None else ("other", {}, 0)
        tname = task_name(kind, wl) if kind != "other" and wl else et.task_name
        tasks.append(Task(name=tname, kind=kind, workload=wl, weight=int(et.weight),
                          macs=int(macs), device=spec.kind, ms_task=et))
    tasks.sort(key=lambda t: (order.get(t.ms_task.task_name, len(order)), t.ms_task.task_name))
    _uniquify(tasks)
    return TaskList(tasks, [], model=name, target=str(spec))
