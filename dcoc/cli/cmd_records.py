"""``dcoc records``: inspect and merge tuning records."""
from __future__ import annotations

from dcoc.cli.options import Output, add_hardware_argument, add_output_arguments

NAME = "records"
HELP = "summarize (best per task and hardware) or merge JSONL tuning records"
DESCRIPTION = """\
Print the best record per (task, hardware) of one or more records files, or merge them.
A file may also be a MetaSchedule database -- the work dir of `dcoc tune --target llvm`
or its database_tuning_record.json -- whose candidates are summarized the same way
(hardware = the target's CPU/arch; knobs are MetaSchedule traces, not shown).

examples:
  dcoc records dcoc_runs/resnet18_vta_pynq_dcoc_s0/records.jsonl
  dcoc records dcoc_runs/odd_llvm_dcoc_s0                    # MetaSchedule database
  dcoc records a.jsonl b.jsonl --merge all.jsonl
  dcoc records runs/*.jsonl --hardware 1x16x16_i8w8a32_15_15_18_17 --top 3 --task vta:conv2d_56x56_64x64_k3s1
  dcoc records c2.jsonl --json -"""


def add_arguments(parser) -> None:
    parser.add_argument("files", nargs="+", metavar="RECORDS",
                        help="JSONL records files, or MetaSchedule work dirs / databases")
    parser.add_argument("--merge", metavar="OUT", default=None, help="merge the files into OUT (must not exist)")
    add_hardware_argument(parser, "only this hardware name")
    parser.add_argument("--task", default=None, help="only this task key; with --top, list its best records")
    parser.add_argument("--top", type=int, default=1, help="records per task to show (default: 1)")
    add_output_arguments(parser, "the rows shown and the counts", progress=False)


def load_any(path: str):
    """A :class:`~dcoc.search.records.Records` from a records file or a MetaSchedule
    database (work dir or file); RecordsError (one line) otherwise."""
    import os

    from dcoc.errors import RecordsError
    from dcoc.search.msdb import load_ms_rows, ms_database_dir
    from dcoc.search.records import Records

    ms_dir = ms_database_dir(path)
    if ms_dir is not None:
        db = Records(None)
        db.rows = load_ms_rows(ms_dir)
        return db
    if os.path.isdir(path):
        rec = os.path.join(path, "records.jsonl")
        if os.path.isfile(rec):
            return Records.load(rec)
        raise RecordsError(f"{path} is a directory with neither records.jsonl nor a "
                           "MetaSchedule database")
    return Records.load(path)


def run(args) -> int:
    from dcoc.cli.options import render_table
    from dcoc.errors import DcocError
    from dcoc.search.records import Records

    out = Output(args)
    if args.top < 1:
        raise DcocError(f"--top must be >= 1, got {args.top}")
    if args.merge:
        import os

        from dcoc.paths import check_output_file

        if os.path.exists(args.merge):
            raise DcocError(f"merge output already exists: {args.merge}")
        check_output_file(args.merge, "--merge file")
        dbs = [load_any(p) for p in args.files]
        m = Records.merge_rows([db.rows for db in dbs], args.merge)
        out.print(f"merged {len(m)} records into {args.merge}")
        out.emit_json({"merged": len(m), "out": args.merge})
        return 0
    dbs = [load_any(p) for p in args.files]
    db = dbs[0] if len(dbs) == 1 else Records.merge_rows([d.rows for d in dbs])
    shown = []
    if args.task:
        shown = db.topk(args.task, hw=args.hardware, k=args.top)
    else:
        shown = [r for _, r in sorted(db.best_per_task(hw=args.hardware).items(),
                                      key=lambda kv: (kv[0][0], str(kv[0][1])))]
    rows = [[r["task"], r["hw"] or "-", f"{r['cost'] * 1e3:.4f}", r.get("tuner", ""), r["knobs"] or "-"]
            for r in shown]
    n_valid = sum(1 for r in db if r.get("valid"))
    out.print(render_table(["task", "hardware", "best ms", "tuner", "knobs"], rows, right={2}))
    n_hw = len([h for h in db.hardware() if h is not None])
    out.print(f"{len(db)} records ({n_valid} valid), {n_hw} hardware configs")
    out.emit_json({"records": len(db), "valid": n_valid, "hardware": db.hardware(),
                   "best": [{"task": r["task"], "hw": r["hw"], "cost": r["cost"],
                             "ms": r["cost"] * 1e3, "tuner": r.get("tuner"), "seed": r.get("seed"),
                             "knobs": r["knobs"]} for r in shown]})
    return 0
