"""``dcoc plot``: tuning-curve PNGs from a run directory or records file."""
from __future__ import annotations

from dcoc.cli.options import Output, add_output_arguments

NAME = "plot"
HELP = "write tuning-curve PNGs for a `dcoc tune` work dir or a records file"
DESCRIPTION = """\
Write PNG plots: for a `dcoc tune` work dir (vta, llvm or cuda), curve.png (best
end-to-end latency vs trials, with the baseline of the run as a dashed line) and, for a
`dcoc tune --pareto` run, pareto.png (the throughput/area Pareto front against the board's
BRAM36/DSP/LUT budget); for any records file or a MetaSchedule database without
result.json, one task_<name>.png per task (best schedule cost vs trials, one line per
tuner/seed).

examples:
  dcoc plot dcoc_runs/resnet18_vta_pynq_dcoc_s0
  dcoc plot c2.jsonl --out plots/
  dcoc plot dcoc_runs/odd_llvm_dcoc_s0 --json -     # the files written, as JSON"""


def add_arguments(parser) -> None:
    parser.add_argument("paths", nargs="+", metavar="DIR_OR_RECORDS", help="work dirs or records files")
    parser.add_argument("--out", default=None, help="output directory (default: next to the input)")
    add_output_arguments(parser, "the list of files written", progress=False)


def run(args) -> int:
    import os

    from dcoc.errors import DcocError
    from dcoc.results.plots import plot_run_dir

    out = Output(args)
    if args.out:
        from dcoc.paths import ensure_writable_dir

        ensure_writable_dir(args.out, "--out directory")
    written = []
    for p in args.paths:
        if not os.path.exists(p):
            raise DcocError(f"no such run directory or records file: {p}")
        for f in plot_run_dir(p, args.out):
            out.print(f)
            written.append(f)
    if not written:
        raise DcocError("nothing to plot (no result.json, records.jsonl or MetaSchedule "
                        "database with measured records found)")
    out.emit_json({"files": written})
    return 0
