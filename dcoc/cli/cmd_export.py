"""``dcoc export``: what a finished run produced, in a form that lives without dcoc."""
from __future__ import annotations

from dcoc.cli.options import Output, add_output_arguments

NAME = "export"
HELP = "export a finished run: a TVM library (llvm/cuda) or a hardware config + schedules (vta)"
DESCRIPTION = """\
Export the result of a finished `dcoc tune` run (its WORK_DIR) to PATH; `dcoc tune
--export PATH` does the same at the end of a run.

llvm / cuda: the model compiled with the run's MetaSchedule database (TVM's recipe: Relax
  import of the ONNX model, MetaScheduleApplyDatabase, tvm.compile, export_library) into
  one shared library that stock TVM runs with tvm.runtime.load_module +
  relax.VirtualMachine, no dcoc needed.  PATH ending in .so: the library there, with
  X.json / X.md beside it; otherwise a directory with model.so, export.json, README.md.
  The library is compiled for the run's target and its mcpu (the host CPU unless the
  --target JSON named another): it runs on CPUs with that instruction set only.
vta / systolic: a directory with the hardware config in the target's own format
  (vta_config.json, the keys of VTA's config/vta_config.json; systolic_config.json), a
  resource/clock report, the per-layer schedules and the commands that reproduce the
  latency.  `dcoc run`'s executable is not exported: its accelerator layers are packed
  functions registered in the dcoc process (the simulator).

--check PATH re-simulates an exported accelerator directory from its files alone and
compares with the latency it records (exit 1 when they differ).

examples:
  dcoc tune resnet18 --board pynq --trials 300 --work-dir wd --export pynq_design
  dcoc export wd pynq_design
  dcoc export --check pynq_design
  dcoc export dcoc_runs/light_squeezenet_llvm_surrogate_s0 squeezenet.so"""


def add_arguments(parser) -> None:
    parser.add_argument("work_dir", metavar="WORK_DIR", nargs="?", default=None,
                        help="work dir of a finished `dcoc tune` run (holds result.json)")
    parser.add_argument("path", metavar="PATH", nargs="?", default=None,
                        help="where to export: a directory, or a .so file (llvm/cuda)")
    parser.add_argument("--check", metavar="EXPORT_DIR", default=None,
                        help="re-simulate an exported accelerator directory instead")
    parser.add_argument("--wait", action="store_true",
                        help="a run is still writing WORK_DIR: wait for it to finish (default: a "
                             "one-line error naming its PID)")
    add_output_arguments(parser, "the export's metadata")


def run(args) -> int:
    from dcoc.errors import DcocError

    out = Output(args)
    if args.check is not None:
        if args.work_dir is not None:
            raise DcocError("--check takes the export directory alone (no WORK_DIR/PATH)")
        from dcoc.api.export import check

        r = check(args.check)
        exp = r["exported_latency_ms"]
        same = exp is not None and abs(r["latency_ms"] - exp) <= 1e-9 * max(1.0, abs(exp))
        r["reproduced"] = same
        out.emit_json(r)
        out.print(f"latency {r['latency_ms']:.6f} ms on {r['hardware']} "
                  f"({len(r['layers'])} layers re-simulated); exported {exp if exp is None else f'{exp:.6f}'} ms: "
                  + ("reproduced" if same else "DIFFERENT"))
        return 0 if same else 1
    if args.work_dir is None or args.path is None:
        raise DcocError("give WORK_DIR and PATH (or --check EXPORT_DIR)")
    from dcoc.api.export import check_export_path, export

    check_export_path(args.path)
    meta = export(args.work_dir, args.path, wait=args.wait)
    out.emit_json(meta)
    tgt = meta.get("target") if isinstance(meta.get("target"), str) else meta.get("kind")
    out.print(f"exported {meta.get('model')} ({tgt}) to {meta['path']}: {', '.join(meta['files'])}")
    err = (meta.get("check") or {}).get("max_abs_error_vs_onnxruntime")
    if err is not None:
        out.print(f"checked: the library loaded back matches ONNX Runtime to {err:.3g} (max abs difference)")
    return 0
