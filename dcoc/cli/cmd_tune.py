"""``dcoc tune``: tune a whole model (VTA co-design, or MetaSchedule for llvm/cuda)."""
from __future__ import annotations

import json
import sys

from dcoc.cli.options import (
    Output,
    add_model_arguments,
    add_output_arguments,
    add_target_argument,
    parse_input_shapes,
    render_table,
)

NAME = "tune"
HELP = "tune a model: accelerator + schedules (vta) or schedules (llvm/cuda)"
DESCRIPTION = """\
Tune MODEL end to end and print a per-layer table and a summary.

--target vta (default): co-design a VTA-style accelerator and the schedules of every layer
  VTA runs, on the bundled cycle-level simulator, within the FPGA budget of --board: the
  GEMM core (BATCH x BLOCK_IN x BLOCK_OUT), the four buffer sizes, and tiling and virtual
  threads per layer.  One simulation = one trial.  With --hardware, only the schedules are
  tuned on that fixed accelerator.
--target systolic: co-design a weight-stationary systolic array (PE rows x columns and
  three SRAM sizes; tile sizes, loop order and double buffering per layer) on its analytic
  timing model, within --board arty-a7 (default) or kv260.
--target llvm / cuda / JSON dict: tune the model's MetaSchedule tasks with the tuner as
  the search strategy, compile the tuned model and measure it against the untuned one.

tuners (--tuner; every name runs the same algorithm on every target):
{tuners}

Records are appended to WORK_DIR/records.jsonl (vta) or a MetaSchedule database
(llvm/cuda) as they are measured; rerunning the same command resumes (nothing recorded is
measured again).  A work dir belongs to one model and target (WORK_DIR/dcoc_run.json):
another model or target is refused.  The result goes to WORK_DIR/result.json (and
--json PATH, or stdout with --json -), the tuning curve to WORK_DIR/curve.png.  llvm/cuda:
TVM's own logs and native warnings go to WORK_DIR/logs/ (-v: to the console).

examples:
  dcoc tune resnet18 --target vta --board pynq --trials 300
  dcoc tune mobilenetv2 --board ultra96 --trials 2000 --tuner dcoc     # the paper's agents
  dcoc tune resnet18 --hardware pynq --tuner xgb --trials 500       # software only
  dcoc tune resnet18 --target systolic --board kv260 --trials 500
  dcoc tune resnet18 --board pynq --trials 300 --pareto
  dcoc tune light_squeezenet --target llvm --trials 64 --json out.json
  dcoc tune resnet18 --trials 300 -q --json - | jq .latency_ms"""


def add_arguments(parser) -> None:
    add_model_arguments(parser)
    add_target_argument(parser)
    from dcoc.cli.options import add_tuner_argument
    from dcoc.targets import available, get

    boards = list(dict.fromkeys(b for t in available() for b in get(t).boards))
    parser.add_argument("--board", default=None, choices=boards,
                        help="accelerator targets: FPGA resource budget and clock/bus (default: the "
                             "target's first board: " + ", ".join(f"{t} {get(t).default_board}"
                                                                  for t in available()) + ")")
    parser.add_argument("--trials", type=int, default=2000,
                        help="measurement budget: simulations (vta) or builds+runs (default: 2000)")
    add_tuner_argument(parser)
    parser.add_argument("--seed", type=int, default=0, help="the one seed of every random choice (default: 0)")
    parser.add_argument("--work-dir", default=None,
                        help="records/results directory (default: dcoc_runs/<model>_<target>_..._s<seed>)")
    parser.add_argument("--hardware", default=None, metavar="HW",
                        help="vta: tune software only on this accelerator: a preset (pynq, pynq_4x8, "
                             "ultra96, zcu104) or a name like 1x16x16_i8w8a32_15_15_18_17")
    parser.add_argument("--no-resume", action="store_true",
                        help="ignore records already in the work dir (they are kept; new ones are appended)")
    parser.add_argument("--workers", type=int, default=None,
                        help="vta: simulator worker processes (default: CPU cores; 0 = in-process)")
    parser.add_argument("--runner", default="local",
                        help="llvm/cuda: 'local' or 'rpc://HOST:PORT/KEY' (TVM RPC tracker)")
    parser.add_argument("--flush-cache", action="store_true",
                        help="llvm: time every candidate cold (CPU caches flushed of its "
                             "arguments before each run; number=1, repeat=10), as a kernel meets "
                             "its weights inside a model whose weights do not fit in cache -- "
                             "then the tuned kernels add up to the compiled model (ResNet-18: "
                             "1.14-1.59x the warm-timed kernels, 0.94-1.02x the cold); a cold run "
                             "needs its own --work-dir")
    parser.add_argument("--warm-start", nargs="+", default=None, metavar="RUN_DIR_OR_RECORDS",
                        help="accelerator co-design with a DCOC-family tuner: start from earlier runs of OTHER models "
                             "(their run directories or records.jsonl; same board): pre-fits the cost "
                             "model on their measurements and scores their best hardware first")
    parser.add_argument("--pareto", action="store_true",
                        help="accelerator co-design: also report the throughput/area Pareto front (BRAM36, DSP, LUT) "
                             "over every hardware config the search completed (result.json 'pareto')")
    add_output_arguments(parser, "the result (what WORK_DIR/result.json holds)")


def run(args) -> int:
    import dcoc
    from dcoc.errors import DcocError
    from dcoc.tuners import tuner_kwargs

    out = Output(args)  # checks a --json PATH before the run
    tuner_kwargs(args.tuner)  # an unknown tuner or setting: one line, before any work
    if args.workers is not None and args.workers < 0:
        raise DcocError(f"--workers must be >= 0 (0 = in-process), got {args.workers}")
    shapes = parse_input_shapes(args.input_shape)
    kw = {}
    from dcoc.targets import is_accelerator

    if not is_accelerator(args.target.strip()):
        kw["runner"] = args.runner
        kw["verbose"] = out.verbose
        if getattr(args, "flush_cache", False):
            kw["flush_cache"] = True
    elif getattr(args, "flush_cache", False):
        raise DcocError("--flush-cache times CPU kernels (target llvm); the VTA simulator "
                        "has no cache to flush")
    res = dcoc.tune(args.model, target=_target_arg(args.target), board=args.board, trials=args.trials,
                    tuner=args.tuner, seed=args.seed, work_dir=args.work_dir,
                    resume=not args.no_resume, hardware=args.hardware, input_shapes=shapes,
                    n_workers=args.workers, progress=out.progress,
                    **({"pareto": True} if getattr(args, "pareto", False) else {}),
                    **({"warm_start": args.warm_start} if getattr(args, "warm_start", None) else {}), **kw)
    text = summary(res)
    if getattr(res, "pareto", None) is not None:
        text += "\n" + pareto_summary(res.pareto, res.board)
    out.print(text)
    try:
        from dcoc.results.plots import plot_run_dir

        plot_run_dir(res.work_dir)
    except Exception as exc:  # noqa: BLE001 - a plot must never lose a result
        print(f"dcoc: plot skipped: {' '.join(str(exc).split())}", file=sys.stderr)
    if out.json_path is not None:
        from dcoc.results.result import _json_default

        out.emit_json(res.to_json(), default=_json_default)
        if not out.json_to_stdout:
            out.print(f"result written to {out.json_path}")
    return 0


def pareto_summary(front, board) -> str:
    """The Pareto front as a table (one row per non-dominated hardware config)."""
    rows = [[p["hardware"]["name"], f"{p['latency_ms']:.3f}", f"{p['throughput']:.1f}",
             p["resources"]["bram36"], p["resources"]["dsp"], p["resources"]["lut"]] for p in front]
    return (f"\nPareto front on {board} ({len(front)} non-dominated configs; schedules in result.json)\n"
            + render_table(["hardware", "ms", "inf/s", "BRAM36", "DSP", "LUT"], rows,
                           right={1, 2, 3, 4, 5}))


def _target_arg(text: str):
    t = text.strip()
    if t.startswith("{"):
        try:
            return json.loads(t)
        except json.JSONDecodeError as exc:
            from dcoc.errors import TargetError

            raise TargetError(f"--target is not valid JSON: {exc.msg}") from None
    return t


def summary(res) -> str:
    """The per-layer table and the summary lines of a TuneResult."""
    from dcoc.targets import get, is_accelerator

    out = []
    if is_accelerator(res.target):
        from dcoc.vta.report import layer_table  # the table dcoc simulate / dcoc run print

        out.append(layer_table([{**r, "kind": r.get("kind", ""),
                                 "total_ms": r.get("total_ms", r["ms"] * r["count"]),
                                 "roofline": r.get("roofline", r.get("utilization", 0.0)),
                                 "epilogue": r.get("epilogue", "")} for r in res.layers]))
        if res.cpu_layers:
            out.append("")
            out.append("on the CPU (time not modelled):")
            out.append(render_table(["layer", "kind", "count"],
                                    [[c["layer"], c.get("kind", ""), c["count"]]
                                     for c in res.cpu_layers], right={2}))
        out.append("")
        out.append(f"hardware   {get(res.target).describe_hw(res.hardware, res.board)}")
    else:
        rows = [[r.get("task", r.get("layer")), r.get("weight", r.get("count", "")),
                 f"{r.get('ms', float('nan')):.4f}", r.get("trials", "")] for r in res.layers]
        if rows:
            out.append(render_table(["task", "weight", "best ms", "trials"], rows, right={1, 2, 3}))
            out.append("")
    out.append(f"latency    {res.latency_ms:.3f} ms  ({res.throughput:.1f} inferences/s)")
    if is_accelerator(res.target):
        base = get(res.target).baseline_label(res.board)
    else:
        base = "untuned"
    out.append(f"baseline   {res.baseline_latency_ms:.3f} ms  ({base}); speedup {res.speedup:.2f}x")
    out.append(f"trials     {res.trials}  tuner {res.tuner}" + (f" ({res.method})" if res.method else "")
               + f"  seed {res.seed}  wall {res.wall_seconds:.0f} s")
    out.append(f"work dir   {res.work_dir}")
    return "\n".join(out)
