"""``dcoc plot``: tuning-curve PNGs from a run directory or records file."""
from __future__ import annotations

NAME = "plot"
HELP = "write tuning-curve PNGs for a `dcoc tune` work dir or a records file"
DESCRIPTION = """\
Write PNG plots: for a `dcoc tune` work dir, curve.png (best end-to-end latency vs trials,
with the pynq-preset baseline) and, for a `dcoc tune --pareto` run, pareto.png (the
throughput/area Pareto front against the board's BRAM36/DSP/LUT budget); for any records file, one task_<name>.png per task (best
schedule cost vs trials, one line per tuner/seed).

examples:
  dcoc plot dcoc_runs/resnet18_vta_pynq_dcoc_s0
  dcoc plot c2.jsonl --out plots/"""


def add_arguments(parser) -> None:
    parser.add_argument("paths", nargs="+", metavar="DIR_OR_RECORDS", help="work dirs or records files")
    parser.add_argument("--out", default=None, help="output directory (default: next to the input)")


def run(args) -> int:
    import os

    from dcoc.errors import DcocError
    from dcoc.plots import plot_run_dir

    total = 0
    for p in args.paths:
        if not os.path.exists(p):
            raise DcocError(f"no such run directory or records file: {p}")
        for f in plot_run_dir(p, args.out):
            print(f)
            total += 1
    if not total:
        raise DcocError("nothing to plot (no result.json or records.jsonl found)")
    return 0
