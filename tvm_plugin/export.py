"""Export a tuned llvm/cuda model as one shared library that stock TVM loads.

The recipe is TVM's own: import the ONNX model with the Relax frontend, apply the run's
MetaSchedule database (``MetaScheduleApplyDatabase`` inside the ``compile_relax``
pipeline: :func:`tvm_plugin.metaschedule.build.compile_model`), ``tvm.compile`` and
``export_library``.  The library needs only TVM's runtime to run::

    lib = tvm.runtime.load_module("model.so")
    vm = relax.VirtualMachine(lib, tvm.cpu())
    out = vm["main"](tvm.runtime.tensor(x, tvm.cpu()))

It is compiled for the run's target, ``mcpu`` included (the host CPU by default): it runs
on CPUs with that instruction set only.
"""
from __future__ import annotations

import json
import os

import numpy as np

from dcoc.errors import ConfigError, DcocError, ModelError

__all__ = ["export_tvm", "compile_from_work_dir"]

LIB_NAME = "model.so"


def _paths(path: str) -> tuple[str, str, str]:
    """(library, metadata json, readme) for an export ``path``: ``X.so`` gives ``X.so``,
    ``X.json`` and ``X.md`` side by side; anything else is a directory holding
    ``model.so``, ``export.json`` and ``README.md``."""
    if path.endswith(".so"):
        d = os.path.dirname(os.path.abspath(path))
        stem = path[:-3]
        os.makedirs(d, exist_ok=True)
        return path, stem + ".json", stem + ".md"
    if os.path.exists(path) and not os.path.isdir(path):
        raise ConfigError(f"export path {path} exists and is not a directory (give a "
                          "directory, or a path ending in .so)")
    os.makedirs(path, exist_ok=True)
    return os.path.join(path, LIB_NAME), os.path.join(path, "export.json"), os.path.join(path, "README.md")


def _target(data: dict):
    import tvm

    text = data.get("target")
    try:
        spec = json.loads(text) if isinstance(text, str) and text.strip().startswith("{") else text
        return tvm.target.Target(spec)
    except Exception as exc:  # noqa: BLE001 - a one-line error
        raise ConfigError(f"the result's target {text!r} is not a TVM target: "
                          f"{' '.join(str(exc).split())[:160]}") from None


def _load_model(data: dict):
    from tvm_plugin.frontend import load

    src = data.get("model_path") or data.get("model")
    if not src:
        raise ConfigError("the result does not name its model")
    shapes = data.get("input_shapes") or None
    try:
        return load(src, shapes)
    except ModelError as exc:
        if not data.get("model_path"):
            raise ModelError(f"{exc} (the result does not record its model's file; rerun the "
                             "tuning command to record it)") from None
        raise


def compile_from_work_dir(data: dict, work_dir: str, model=None):
    """The tuned model of a finished run, compiled again from its work dir: the model
    re-imported, the best record of every task from the MetaSchedule database (minus the
    tasks the run kept untuned), ``compile_model``.  Returns ``(executable, target, model,
    report)``."""
    from tvm.s_tir import meta_schedule as ms

    from tvm_plugin.frontend import resolve_target
    from tvm_plugin.metaschedule.build import compile_model
    from tvm_plugin.metaschedule.database import copy_record

    if not work_dir or not os.path.isfile(os.path.join(work_dir, "database_tuning_record.json")):
        raise ConfigError(f"{work_dir} holds no MetaSchedule database "
                          "(database_tuning_record.json)")
    tgt = _target(data)
    m = model if model is not None else _load_model(data)
    kept = set((data.get("extra") or {}).get("kept_untuned") or [])
    db = ms.database.JSONDatabase(work_dir=work_dir)
    best = ms.database.MemoryDatabase()
    for t in m.tasks(resolve_target(tgt)):
        mod = t.ms_task.dispatched[0]
        if t.name in kept or not db.has_workload(mod):
            continue
        top = db.get_top_k(db.commit_workload(mod), 1)
        if len(top):
            copy_record(best, top[0], mod)
    ex, report = compile_model(best, m.mod, tgt)
    want = (data.get("extra") or {}).get("tuned_functions")
    if want is not None and len(report["tuned"]) < len(want):
        raise DcocError(f"only {len(report['tuned'])} of the {len(want)} functions the run tuned "
                        f"were found in {work_dir}'s database")
    return ex, tgt, m, report


def _ort_outputs(model, inputs: dict) -> list | None:
    try:
        import onnxruntime as ort
    except ImportError:  # pragma: no cover - a dependency
        return None
    sess = ort.InferenceSession(model.onnx.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, inputs)


def export_tvm(data: dict, work_dir: str | None, path: str, executable=None) -> dict:
    """Write the tuned model's shared library (and its README / export.json) to ``path``.

    ``executable``: the run's compiled model when in memory (``TuneResult.executable``);
    otherwise it is compiled again from ``work_dir`` (:func:`compile_from_work_dir`).  The
    written library is loaded back and run against ONNX Runtime on one random input; the
    largest absolute difference goes into ``export.json``.
    """
    from tvm_plugin.frontend.common import _quiet_native_stderr

    with _quiet_native_stderr():  # TVM's C++ warnings ("Scope Saving: ...")
        return _export_tvm(data, work_dir, path, executable)


def _export_tvm(data, work_dir, path, executable):
    import tvm
    from tvm import relax

    from tvm_plugin.metaschedule.build import _flatten, device_of, random_inputs

    m = None
    if executable is None:
        try:
            executable, tgt, m, _ = compile_from_work_dir(data, work_dir)
        except DcocError:
            raise
        except Exception as exc:  # noqa: BLE001 - TVM build errors become one line
            raise DcocError(f"compiling the tuned model for {data.get('target')} failed: "
                            f"{' '.join(str(exc).split())[:200]}") from None
    else:
        tgt = _target(data)
    if m is None:
        m = _load_model(data)
    lib_path, meta_path, readme_path = _paths(path)
    try:
        executable.export_library(lib_path)
    except Exception as exc:  # noqa: BLE001 - compiler/linker failures become one line
        raise DcocError(f"export_library failed: {' '.join(str(exc).split())[:200]}") from None

    # load what was written and compare with ONNX Runtime
    names = list(m.input_shapes)
    x = random_inputs(m.input_shapes, m.input_dtypes, seed=0)
    try:
        dev = device_of(tgt)
        vm = relax.VirtualMachine(tvm.runtime.load_module(lib_path), dev)
        outs = _flatten(vm["main"](*[tvm.runtime.tensor(np.ascontiguousarray(x[n]), dev) for n in names]))
    except Exception as exc:  # noqa: BLE001 - e.g. a cuda library on a machine without a GPU
        raise DcocError(f"the library was written to {lib_path}, but loading it back to check it "
                        f"failed: {' '.join(str(exc).split())[:200]}") from None
    ref = _ort_outputs(m, x)
    err = None
    if ref is not None and len(ref) == len(outs):
        err = max(float(np.max(np.abs(np.asarray(r, np.float64) - np.asarray(o, np.float64))))
                  if np.asarray(r).size else 0.0 for r, o in zip(ref, outs))

    tj = json.loads(str(tgt)) if str(tgt).startswith("{") else {"kind": tgt.kind.name}
    meta = {"target": tj, "kind": tgt.kind.name, "mcpu": tj.get("mcpu"),
            "device": "cuda" if tgt.kind.name == "cuda" else "cpu",
            "tvm_version": tvm.__version__, "model": data.get("model"),
            "model_path": data.get("model_path"),
            "inputs": [{"name": n, "shape": [int(d) for d in m.input_shapes[n]],
                        "dtype": m.input_dtypes[n]} for n in names],
            "outputs": [{"shape": list(o.shape), "dtype": str(o.dtype)} for o in outs],
            "latency_ms": data.get("latency_ms"), "untuned_latency_ms": data.get("baseline_latency_ms"),
            "trials": data.get("trials"), "tuner": data.get("tuner"), "seed": data.get("seed"),
            "work_dir": work_dir, "library": os.path.basename(lib_path),
            "check": {"max_abs_error_vs_onnxruntime": err,
                      "inputs": "one random input (normal, seed 0)"}}
    with open(meta_path, "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    with open(readme_path, "w", encoding="utf-8") as f:
        f.write(_readme(meta, os.path.basename(lib_path)))
    return {**meta, "path": lib_path,
            "files": [os.path.basename(p) for p in (lib_path, meta_path, readme_path)]}


def _readme(meta: dict, lib: str) -> str:
    dev = "tvm.cuda()" if meta["kind"] == "cuda" else "tvm.cpu()"
    args = ", ".join(f"tvm.runtime.tensor({n['name'].replace('/', '_').replace('.', '_')}, dev)"
                     for n in meta["inputs"])
    inputs = "\n".join(f"| `{n['name']}` | {'x'.join(map(str, n['shape']))} | {n['dtype']} |"
                       for n in meta["inputs"])
    lat = meta.get("latency_ms")
    tuned = f"; {lat:.3f} ms per inference when tuned" if lat else ""
    err = meta["check"]["max_abs_error_vs_onnxruntime"]
    return f"""# {meta['model']}: tuned TVM module

`{lib}` is the model compiled by TVM {meta['tvm_version']} with the schedules dcoc tuned
({meta['trials']} trials, tuner {meta['tuner']}, seed {meta['seed']}){tuned}.
It needs TVM's runtime (`pip install apache-tvm=={meta['tvm_version']}`), not dcoc.

| input | shape | dtype |
|---|---|---|
{inputs}

```python
import numpy as np
import tvm
from tvm import relax

dev = {dev}
vm = relax.VirtualMachine(tvm.runtime.load_module("{lib}"), dev)
# one numpy array per input above, e.g. np.zeros(shape, dtype)
out = vm["main"]({args})
```

`out` is a `tvm.runtime.Tensor` (`.numpy()`), or a tuple of them for several outputs.
Checked at export: max |difference| to ONNX Runtime on one random input
{'n/a' if err is None else f'{err:.3g}'}.

**Target.** `{json.dumps(meta['target'])}`.  The code is compiled for this `mcpu`
({meta.get('mcpu') or 'generic'}): LLVM uses that CPU's instruction set (e.g. AVX-512), so
the library can crash with an illegal instruction on an older CPU.  To deploy elsewhere,
tune with that CPU's target, e.g. `--target '{{"kind": "llvm", "mcpu": "x86-64-v3",
"num-cores": 4}}'` (the schedules are also tuned for this machine's core count and caches).
"""
