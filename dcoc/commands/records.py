"""``dcoc records``: inspect and merge tuning records."""
from __future__ import annotations

NAME = "records"
HELP = "summarize (best per task and hardware) or merge JSONL tuning records"
DESCRIPTION = """\
Print the best record per (task, hardware) of one or more records files, or merge them.

examples:
  dcoc records dcoc_runs/resnet18_vta_pynq_dcoc_s0/records.jsonl
  dcoc records a.jsonl b.jsonl --merge all.jsonl
  dcoc records runs/*.jsonl --hw 1x16x16_i8w8a32_15_15_18_17 --top 3 --task vta:conv2d_56x56_64x64_k3s1"""


def add_arguments(parser) -> None:
    parser.add_argument("files", nargs="+", metavar="RECORDS", help="JSONL records files")
    parser.add_argument("--merge", metavar="OUT", default=None, help="merge the files into OUT (must not exist)")
    parser.add_argument("--hw", default=None, help="only this hardware name")
    parser.add_argument("--task", default=None, help="only this task key; with --top, list its best records")
    parser.add_argument("--top", type=int, default=1, help="records per task to show (default: 1)")


def run(args) -> int:
    from dcoc.commands._common import render_table
    from dcoc.search.records import Records

    if args.merge:
        m = Records.merge(args.files, args.merge)
        print(f"merged {len(m)} records into {args.merge}")
        return 0
    db = Records.merge(args.files) if len(args.files) > 1 else Records.load(args.files[0])
    rows = []
    if args.task:
        for r in db.topk(args.task, hw=args.hw, k=args.top):
            rows.append([r["task"], r["hw"], f"{r['cost'] * 1e3:.4f}", r.get("tuner", ""), r["knobs"]])
    else:
        for (task, hw), r in sorted(db.best_per_task(hw=args.hw).items()):
            rows.append([task, hw, f"{r['cost'] * 1e3:.4f}", r.get("tuner", ""), r["knobs"]])
    n_valid = sum(1 for r in db if r.get("valid"))
    print(render_table(["task", "hardware", "best ms", "tuner", "knobs"], rows, right={2}))
    print(f"{len(db)} records ({n_valid} valid), {len(db.hardware())} hardware configs")
    return 0
