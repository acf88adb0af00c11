"""``dcoc tune-task``: tune one VTA workload's schedule with one tuner."""
from __future__ import annotations

from dcoc.cli.options import Output, add_hardware_argument, add_output_arguments

NAME = "tune-task"
HELP = "tune one accelerator layer's schedule (e.g. ResNet-18's C2 on VTA) with one tuner"
DESCRIPTION = """\
Tune the schedule of one workload on a fixed VTA configuration and print a best-so-far
curve and the best knobs.  WORKLOAD is a ResNet-18 layer (C2 .. C11), conv:H,W,CI,CO,K,S,P
or dense:N,K,M (--target systolic also takes gemm:M,K,N).  Every trial is one simulation;
records go to --records (JSONL; rerun to resume).

tuners (--tuner):
{tuners}

examples:
  dcoc tune-task C2 --tuner dcoc --trials 100          # the paper's agents
  dcoc tune-task conv:28,28,128,128,3,1,1 --hardware pynq_4x8 --tuner xgb --trials 300 --records c5.jsonl
  dcoc tune-task C5 --target systolic --hardware ws32x16_i16w15o15 --tuner dcoc --trials 100
  dcoc tune-task C2 --trials 50 --json -      # the result as JSON on stdout"""


def add_arguments(parser) -> None:
    parser.add_argument("workload", metavar="WORKLOAD", help="C2..C11, conv:H,W,CI,CO,K,S,P or dense:N,K,M")
    from dcoc.cli.options import MAX_TRIALS, add_tuner_argument, int_at_least, worker_count
    from dcoc.targets import DEFAULT_TARGET, available

    parser.add_argument("--target", default=DEFAULT_TARGET, choices=available(),
                        help=f"accelerator target (default: {DEFAULT_TARGET})")
    parser.add_argument("--board", default=None,
                        help="the board whose clock/bus a hardware name takes (default: the target's first)")
    add_hardware_argument(parser,
                          "accelerator: vta preset (pynq, pynq_4x8, ultra96, zcu104) or config name "
                          "(default: pynq); systolic: a name like ws16x16_i15w15o15 (default: the "
                          "board's 16x16 default)")
    add_tuner_argument(parser)
    parser.add_argument("--trials", type=int_at_least(1, MAX_TRIALS), default=200,
                        help="simulation budget (default: 200)")
    parser.add_argument("--seed", type=int, default=0, help="the one seed (default: 0)")
    parser.add_argument("--records", default=None, help="append records to this JSONL file (resumes)")
    parser.add_argument("--workers", type=worker_count, default=0,
                        help="simulator worker processes (default: 0 = in-process; at most 4 x "
                             "the CPU cores)")
    parser.add_argument("--early-stopping", type=int_at_least(1), default=None, metavar="N",
                        help="stop after N >= 1 trials without improvement")
    parser.add_argument("--wait", action="store_true",
                        help="another dcoc process is appending to --records: wait for it "
                             "(default: a one-line error naming its PID)")
    add_output_arguments(parser, "the result (best knobs, cost, curve)")


def run(args) -> int:
    from dcoc.api import tune_task
    from dcoc.cli.options import render_table
    from dcoc.results.plots import ascii_curve
    from dcoc.targets import get as get_target
    from dcoc.tuners import tuner_kwargs

    # validate before the progress bar starts: an error must be the only output
    out = Output(args)
    tuner_kwargs(args.tuner)
    tg = get_target(args.target)
    wl = tg.workload(args.workload)
    bd = tg.board(args.board or tg.default_board)
    hw = tg.parse_hw(args.hardware, bd.name) if args.hardware else tg.default_hw(bd)
    if args.records:
        from dcoc.paths import check_output_file

        check_output_file(args.records, "--records file")
    callbacks = []
    bar = None
    if out.progress:
        from dcoc.progress import Progress

        bar = Progress(args.trials, args.tuner)
        said: list = []

        def cb(tuner, inputs, results):
            if getattr(tuner, "recorded", 0) and not said:
                from dcoc.progress import resume_note

                said.append(True)
                resume_note(tuner.recorded, args.records, bar)
            bar.update(tuner.trials, f"best {tuner.best_cost * 1e3:.4f} ms"
                       if tuner.best_config is not None else "")

        callbacks.append(cb)
    try:
        r = tune_task(wl, hw=hw, target=tg.name, tuner=args.tuner, trials=args.trials, seed=args.seed,
                      records=args.records, n_workers=args.workers,
                      early_stopping=args.early_stopping, callbacks=callbacks,
                      wait=bool(getattr(args, "wait", False)))
    finally:
        if bar is not None:
            bar.close()
    out.print(f"{r.task_name} on {r.hw_name}, tuner {r.tuner}, seed {r.seed}: {r.trials} trials")
    curve = r.best_curve()
    out.print(ascii_curve([(t + 1, c * 1e3) for t, c in curve]))
    out.emit_json(r.to_json())
    if r.best_knobs is None:
        out.print("no valid schedule found")
        return 1
    out.print(render_table(["knob", "value"], [[k, v] for k, v in r.best_knobs.items()], right={1}))
    out.print(f"best {r.best_cost * 1e3:.4f} ms, {r.best_gops:.1f} GOPS "
              f"(found at trial {r.trials_to_reach(r.best_cost)})")
    return 0
