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
--target systolic: co-design a weight-stationary systolic array (PE rows x columns, shadow
  weight registers and three SRAM sizes; tile sizes, loop order and double buffering per
  layer) on its tile-stream simulator, within --board arty-a7 (default) or kv260.
--target llvm / cuda / JSON dict: tune the model's MetaSchedule tasks with the tuner as
  the search strategy, compile the tuned model and measure it against the untuned one and
  (llvm) against ONNX Runtime on the same threads.  Trials go to every task once (largest
  share of the model's time first), then where the model's time is (MetaSchedule's
  gradient rule); --time-budget stops starting new batches once its seconds are spent.

tuners (--tuner; every name runs the same algorithm on every target):
{tuners}
MetaSchedule's own searches, llvm/cuda only (same task scheduler and budget as the above):
  evolutionary  EvolutionarySearch at its defaults (population 512) + its XGBoost cost model
  replay-trace  ReplayTrace: random traces of the design space, no cost model

Records are appended to WORK_DIR/records.jsonl (vta) or a MetaSchedule database
(llvm/cuda) as they are measured; rerunning the same command resumes (nothing recorded is
measured again).  A work dir belongs to one model and target (WORK_DIR/dcoc_run.json):
another model or target is refused.  The result goes to WORK_DIR/result.json (and
--json PATH, or stdout with --json -), the tuning curve to WORK_DIR/curve.png (llvm/cuda:
the estimated model latency, drawn once every task has a measured schedule, i.e. when
--trials >= tasks).  llvm/cuda: TVM's own logs and native warnings go to WORK_DIR/logs/
(-v: to the console).

Several models (accelerator targets): ONE hardware config for all of them, schedules per
model; --trials is the budget of the whole mix and a layer several models share is measured
once.  The objective is the weighted sum of the models' accelerator latencies (--weights,
e.g. the inferences per second each must serve; default 1 each) or, with --objective max,
the largest weight x latency.  The table compares every model with the preset and with each
model's own single-model design (co-designed alone with trials/models, every other model's
schedules tuned on its hardware with as many; --no-singles skips them).  --export writes
the hardware once and one schedules file per model.

examples:
  dcoc tune resnet18 --target vta --board pynq --trials 300
  dcoc tune resnet18 mobilenetv2 --board pynq --trials 600 --weights 2 1  # one design for both
  dcoc tune mobilenetv2 --board ultra96 --trials 2000 --tuner dcoc     # the paper's agents
  dcoc tune resnet18 --hardware pynq --tuner xgb --trials 500       # software only
  dcoc tune resnet18 --target systolic --board kv260 --trials 500
  dcoc tune resnet18 --board pynq --trials 300 --pareto
  dcoc tune light_squeezenet --target llvm --trials 64 --json out.json
  dcoc tune resnet18 --target llvm --trials 5000 --time-budget 600 --tuner evolutionary
  dcoc tune resnet18 --trials 300 -q --json - | jq .latency_ms"""


def add_arguments(parser) -> None:
    add_model_arguments(parser, "several: one accelerator for all of them (a model mix)")
    add_target_argument(parser)
    from dcoc.cli.options import MAX_TRIALS, add_board_argument, add_tuner_argument, int_at_least, worker_count

    add_board_argument(parser, "accelerator targets: FPGA resource budget and clock/bus")
    parser.add_argument("--trials", type=int_at_least(1, MAX_TRIALS), default=None,
                        help="measurement budget: simulations (vta) or builds+runs (default: "
                             "2000; llvm/cuda with --time-budget: no limit, the clock ends the run)")
    parser.add_argument("--time-budget", type=float, default=None, metavar="SECONDS",
                        help="llvm/cuda: wall-clock seconds for the search; no new batch starts "
                             "once they are spent (what was measured is kept; the summary says "
                             "it stopped on time)")
    add_tuner_argument(parser)
    parser.add_argument("--seed", type=int, default=0, help="the one seed of every random choice (default: 0)")
    parser.add_argument("--work-dir", default=None,
                        help="records/results directory (default: dcoc_runs/<model>_<target>_..._s<seed>)")
    parser.add_argument("--hardware", default=None, metavar="HW",
                        help="vta: tune software only on this accelerator: a preset (pynq, pynq_4x8, "
                             "ultra96, zcu104) or a name like 1x16x16_i8w8a32_15_15_18_17")
    parser.add_argument("--no-resume", action="store_true",
                        help="ignore records already in the work dir (they are kept; new ones are appended)")
    parser.add_argument("--workers", type=worker_count, default=None,
                        help="vta: simulator worker processes (default: CPU cores; 0 = in-process; "
                             "at most 4 x the CPU cores)")
    parser.add_argument("--wait", action="store_true",
                        help="another dcoc process is tuning in the work dir: wait for it "
                             "(default: a one-line error naming its PID)")
    parser.add_argument("--runner", default="local",
                        help="llvm/cuda: 'local' or 'rpc://HOST:PORT/KEY' (TVM RPC tracker)")
    parser.add_argument("--no-prior", action="store_true",
                        help="llvm/cuda: start each task with random schedules instead of the "
                             "ones the pre-trained cost model shipped with dcoc ranks best")
    parser.add_argument("--prior", default=None, metavar="FILE",
                        help="llvm/cuda: another pre-trained cost model (python -m "
                             "scripts.train_cpu_prior makes one)")
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
                             "over every hardware config that fits the board: the configs the search measured, "
                             "the others timed with schedules transferred from its designs (or default ones) and "
                             "marked estimated (result.json 'pareto', WORK_DIR/pareto.png)")
    parser.add_argument("--extended-cores", action="store_true",
                        help="vta: also search GEMM cores stock tvm-vta cannot build (non-square "
                             "BLOCK_IN != BLOCK_OUT, relaxed instruction layout); such designs are "
                             "marked in the summary, the Pareto front and the export, which states "
                             "the pkg_config.py change tvm-vta needs (default: buildable cores only)")
    parser.add_argument("--export", default=None, metavar="PATH",
                        help="after tuning, export the result (`dcoc export`): llvm/cuda a TVM library "
                             "(PATH.so or PATH/model.so), vta/systolic a directory with the hardware "
                             "config (vta_config.json), resource report, schedules")
    parser.add_argument("--weights", nargs="+", type=float, default=None, metavar="W",
                        help="several models: one positive weight per model (default: 1 each), "
                             "e.g. the inferences per second each must serve")
    parser.add_argument("--objective", choices=("weighted", "max"), default="weighted",
                        help="several models: minimize the weighted sum of their latencies "
                             "(default) or the largest weight x latency")
    parser.add_argument("--no-singles", action="store_true",
                        help="several models: skip the single-model designs the table compares with")
    add_output_arguments(parser, "the result (what WORK_DIR/result.json holds)")


def run(args) -> int:
    import dcoc
    from dcoc.api.checks import check_cpu_settings, check_time_budget
    from dcoc.errors import DcocError
    from dcoc.targets import is_accelerator
    from dcoc.tuners import check

    out = Output(args)  # checks a --json PATH before the run
    accel = is_accelerator(args.target.strip())
    check(args.tuner, accel)  # an unknown tuner or setting: one line, before any work
    budget = check_time_budget(getattr(args, "time_budget", None), cli=True)
    shapes = parse_input_shapes(args.input_shape)
    if getattr(args, "export", None):
        from dcoc.results.export import check_export_path

        check_export_path(args.export)  # before any work
    flush = bool(getattr(args, "flush_cache", False))
    check_cpu_settings(accel, time_budget=budget, flush_cache=flush, cli=True)
    kw = {"wait": True} if getattr(args, "wait", False) else {}
    if getattr(args, "extended_cores", False):
        kw["extended_cores"] = True
    if not accel:
        kw["runner"] = args.runner
        kw["verbose"] = out.verbose
        if flush:
            kw["flush_cache"] = True
        if budget is not None:
            kw["time_budget"] = budget
        if args.no_prior and args.prior:
            raise DcocError("--no-prior and --prior exclude each other")
        if args.no_prior or args.prior:
            kw["prior"] = False if args.no_prior else args.prior
    elif args.no_prior or args.prior:
        raise DcocError("--no-prior / --prior are for llvm/cuda targets")
    models = args.model if isinstance(args.model, list) else [args.model]
    if len(models) > 1:
        kw.update(weights=args.weights, objective=args.objective, singles=not args.no_singles)
    elif args.weights is not None or args.objective != "weighted":
        raise DcocError("--weights and --objective are for several models")
    res = dcoc.tune(models if len(models) > 1 else models[0], target=_target_arg(args.target),
                    board=args.board, trials=args.trials,
                    tuner=args.tuner, seed=args.seed, work_dir=args.work_dir,
                    resume=not args.no_resume, hardware=args.hardware, input_shapes=shapes,
                    n_workers=args.workers, progress=out.progress,
                    pareto=bool(getattr(args, "pareto", False)),
                    warm_start=getattr(args, "warm_start", None) or None, **kw)
    if len(models) > 1:
        return _report_mix(res, args, out)
    text = summary(res)
    if getattr(res, "pareto", None) is not None:
        text += "\n" + pareto_summary(res.pareto, res.board, (res.extra or {}).get("pareto"))
    out.print(text)
    try:
        from dcoc.results.plots import plot_run_dir

        plot_run_dir(res.work_dir)
    except Exception as exc:  # noqa: BLE001 - a plot must never lose a result
        print(f"dcoc: plot skipped: {' '.join(str(exc).split())}", file=sys.stderr)
    return _export_and_json(res, args, out)


def _export_and_json(res, args, out) -> int:
    """``--export`` and ``--json`` of a finished result (one model or a mix)."""
    if getattr(args, "export", None):
        meta = res.export(args.export)
        out.print(f"exported   {meta['path']} ({', '.join(meta['files'])})")
    if out.json_path is not None:
        from dcoc.results.result import _json_default

        out.emit_json(res.to_json(), default=_json_default)
        if not out.json_to_stdout:
            out.print(f"result written to {out.json_path}")
    return 0


def _report_mix(res, args, out) -> int:
    """Print a model mix's table (and Pareto front), export, write --json."""
    text = res.summary()
    if res.pareto is not None:
        text += "\n" + pareto_summary(res.pareto, res.board, (res.extra or {}).get("pareto"))
        text += "\n  (ms: the weighted sum of the models' accelerator latencies)"
    out.print(text)
    return _export_and_json(res, args, out)


def pareto_summary(front, board, stats: dict | None = None, rows: int = 12) -> str:
    """The Pareto front as a table: the designs spanning its resource range (all of them
    when there are at most ``rows``), measured (searched) or estimated."""
    from dcoc.results.pareto import MEASURED, RESOURCE_KEYS, spanning

    stats = stats or {}
    shown = spanning(front, rows)
    n_meas = sum(p.get("source", MEASURED) == MEASURED for p in front)
    marks = any("buildable" in p or "latency_basis" in p for p in front)
    table = [[p["hardware"]["name"], p.get("source", MEASURED), f"{p['latency_ms']:.3f}",
              f"{p['throughput']:.1f}", p["resources"]["bram36"], p["resources"]["dsp"],
              p["resources"]["lut"]]
             + ([("stock" if p.get("buildable", True) else "PATCH"), p.get("latency_basis", "")]
                if marks else []) for p in shown]
    over = (f"of the {stats['configs']} hardware configs that fit it" if stats.get("configs")
            else "of the hardware configs the search completed")
    span = ", ".join(f"{'BRAM36' if k == 'bram36' else k.upper()} {min(p['resources'][k] for p in front)}"
                     f"-{max(p['resources'][k] for p in front)}" for k in RESOURCE_KEYS) if front else ""
    head = (f"\nPareto front on {board}: {len(front)} non-dominated designs {over}\n"
            f"  {n_meas} measured, {len(front) - n_meas} estimated; {span}"
            + (f"\n  showing {len(shown)} that span it; all of them, with their schedules, are in result.json"
               if len(shown) < len(front) else "; schedules in result.json"))
    if stats.get("estimated"):
        head += ("\n  measured: the search tuned every layer on it (or on a buffer-size variant); estimated:"
                 " not searched,\n  layers timed with schedules transferred from the searched designs or"
                 " default ones (tuning\n  can only lower them); every latency is the simulation of the"
                 " design's schedules")
    if marks:
        head += ("\n  build: stock = tvm-vta's config flow builds it, PATCH = needs the pkg_config.py change"
                 " the export states;\n  latencies: calibrated on measured rows of that bitstream, or estimated")
    return head + "\n" + render_table(["hardware", "source", "ms", "inf/s", "BRAM36", "DSP", "LUT"]
                                      + (["build", "latencies"] if marks else []), table,
                                      right={2, 3, 4, 5, 6})


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
        from dcoc.targets.vta.report import layer_table  # the table dcoc simulate / dcoc run print

        out.append(layer_table([{**r, "kind": r.get("kind", ""),
                                 "total_ms": r.get("total_ms", r["ms"] * r["count"]),
                                 "roofline": r.get("roofline", r.get("utilization", 0.0)),
                                 "epilogue": r.get("epilogue", "")} for r in res.layers]))
        if res.cpu_layers:
            out.append("")
            out.append("on the CPU (their host-timed total is the 'cpu layers' line):")
            out.append(render_table(["layer", "kind", "count", "why"],
                                    [[c["layer"], c.get("kind", ""), c["count"], c.get("reason", "")]
                                     for c in res.cpu_layers], right={2}))
        out.append("")
        out.append(f"hardware    {get(res.target).describe_hw(res.hardware, res.board)}")
        notes = (res.extra or {}).get("hw_notes") or {}
        if notes.get("build"):
            out.append(f"build       {notes['build']}")
        if notes.get("basis"):
            out.append(f"latencies   {notes['basis']}")
    else:
        rows = [[r.get("task", r.get("layer")), r.get("weight", r.get("count", "")),
                 f"{r.get('ms', float('nan')):.4f}", r.get("trials", "")] for r in res.layers]
        if rows:
            out.append(render_table(["task", "weight", "best ms", "trials"], rows, right={1, 2, 3}))
            out.append("")
    w = 11 if is_accelerator(res.target) else 10  # label width
    if is_accelerator(res.target):
        out += _accelerator_lines(res)
    else:
        out.append(f"latency    {res.latency_ms:.3f} ms  ({res.throughput:.1f} inferences/s)")
        out += _llvm_lines(res)
    out.append(f"{'trials':<{w}} {res.trials}  tuner {res.tuner}" + (f" ({res.method})" if res.method else "")
               + f"  seed {res.seed}  wall {res.wall_seconds:.0f} s")
    if is_accelerator(res.target) and (res.extra or {}).get("search"):
        out.append(f"{'search':<{w}} {res.extra['search']}")
    out.append(f"{'work dir':<{w}} {res.work_dir}")
    return "\n".join(out)


def _llvm_lines(res) -> list:
    """llvm/cuda: the speed-up line against untuned TVM and ONNX Runtime, the tasks left
    with TVM's default code, and how the budget ended."""
    import math

    ex = res.extra or {}
    out = []
    ort = getattr(res, "onnxruntime_ms", None)
    if math.isfinite(res.latency_ms):
        from dcoc.reference import speed_line

        out.append("speed-up   " + speed_line(res.latency_ms, res.baseline_latency_ms,
                                              ort if ort is not None else math.nan,
                                              ex.get("runtime_threads")))
    untuned, n = ex.get("untuned_tasks") or [], ex.get("n_tasks")
    if untuned and n:
        from dcoc.reference import untuned_phrase

        out.append("untuned    " + untuned_phrase(len(untuned), n, len(ex.get("unmeasured_tasks") or [])))
    if ex.get("stopped_on_time"):
        out.append(f"budget     stopped on time: {ex.get('time_budget_s'):g} s spent after "
                   f"{ex.get('new_trials')} new trials")
    return out


def _accelerator_lines(res) -> list[str]:
    """Accelerator, baseline, CPU-layer and whole-model lines of an accelerator result."""
    from dcoc.targets import get

    tg = get(res.target)
    n_acc, n_cpu = sum(int(r["count"]) for r in res.layers), sum(int(c["count"]) for c in res.cpu_layers)
    lines = [f"accelerator {res.latency_ms:.3f} ms  ({res.throughput:.1f} inferences/s; the {n_acc} layers "
             f"{tg.label} runs, simulated)",
             f"baseline    {res.baseline_latency_ms:.3f} ms  ({tg.baseline_label(res.board)}); "
             f"speedup {res.speedup:.2f}x"]
    model = res.model_latency_ms
    if not res.cpu_layers:
        lines.append(f"latency     {res.latency_ms:.3f} ms  ({res.throughput:.1f} inferences/s; "
                     "no layer is left on the CPU)")
    elif model is None:
        lines.append(f"cpu layers  {n_cpu} layers, {res.cpu_method or 'not timed'}")
        lines.append(f"latency     accelerator only: {res.latency_ms:.3f} ms without the {n_cpu} CPU layers "
                     "(not timed)")
    else:
        lines.append(f"cpu layers  {res.cpu_latency_ms:.3f} ms  ({n_cpu} layers left on the CPU; "
                     f"{_short_method(res.cpu_method)})")
        lines.append(f"latency     {model:.3f} ms  ({1000.0 / model:.1f} inferences/s: accelerator + CPU layers); "
                     f"baseline {res.baseline_model_latency_ms:.3f} ms, speedup "
                     f"{res.baseline_model_latency_ms / model:.2f}x")
    return lines


def _short_method(method: str | None) -> str:
    """The CPU timing method in a few words (the full text is result.json's cpu_method)."""
    m = method or "not timed"
    return m.split(", fastest of")[0] + ("; not the board's CPU" if "not the board's CPU" in m else "")
