"""How well does a pooled program model rank a cold task's candidates?  Offline replay.

DCOC's MetaSchedule strategy ranks a cold task's candidates (a task with a handful of its
own measurements) by one model fitted on the other tasks' pooled rows and the task's own
rows (``TaskProblem._refit_program``: program features = sum and max over MetaSchedule's
per-store features, each task's throughput divided by its own best).  With ~1000 pooled
rows and 3-10 own ones, the task's own measurements hardly steer the fit.  This script
replays that situation from kept benchmark work dirs (``scripts.bench_metaschedule
--work-dir D``), so that ways of fitting can be compared on many tasks at once without a
tuning run:

* every measured record of every work dir is featurized (its trace replayed on its
  workload; MetaSchedule's ``PerStoreFeature``, as the strategy does) and grouped by
  workload across the dirs (same structural hash), its throughput the measured one;
* for each task T with enough records and each repetition: ``k`` of T's records are
  "own" rows (drawn at random), the pool is ``--pool-rows`` rows drawn from every other
  task's records (each task's throughput divided by its best; the strategy's pool holds at
  most 1024), and the rest of T's records are the candidates;
* each fitting variant ranks the candidates; the score is the best true throughput among
  its top ``m`` divided by the best among all candidates (1 = it would have measured the
  best one), paired across variants on the same draws (exact Wilcoxon signed-rank test
  against ``--ref``).

Variants (``--variants``): ``pool+own`` (today's fit: own rows weigh as one pooled row
each), ``pool+own:W`` (own rows repeated W times), ``own`` (own rows only), ``pool``
(pool only), ``random``.  Knob features (the own rows' extra columns in the real fit) are
left out: the replay compares only how own and pooled rows are weighted.

Caveat: the candidates are records some tuner already chose to measure (from dcoc and
EvolutionarySearch runs), not the walks and random points a cold task really ranks; a
better ranking here is a reason for an A/B test, not a result.

    python -m scripts.ms_rank_replay D/mobilenetv2_256_46_dcoc D/mobilenetv2_256_46_evolutionary \
        --k 3 6 --m 4 --reps 5
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

import numpy as np

from scripts.bench_metaschedule import dir_name


def featurize_dirs(dirs: list[str]) -> dict:
    """{workload hash: {"name", "X" [n, 2 x 164], "thr" [n]}}: every valid record's program
    features (``tvm_plugin.features``, as the strategy computes them) and throughput."""
    import tvm_ffi
    from tvm.s_tir import Schedule
    from tvm.s_tir import meta_schedule as ms

    from dcoc.progress import Progress
    from dcoc.search.msdb import FAILED_SECS, RECORDS_FILE, WORKLOADS_FILE, task_names
    from tvm_plugin.features import store_rows, sum_max
    from tvm_plugin.space import make_tune_context

    out: dict = {}
    extractor = ms.feature_extractor.PerStoreFeature()
    bar = Progress(len(dirs), "featurizing", unit="work dir", every=1)
    for run, d in enumerate(dirs):
        bar.update(run, dir_name(d))
        names = task_names(d)
        db = ms.database.JSONDatabase(path_workload=os.path.join(d, WORKLOADS_FILE),
                                      path_tuning_record=os.path.join(d, RECORDS_FILE),
                                      allow_missing=False)
        ctxs: dict = {}
        for rec in db.get_all_tuning_records():
            secs = [float(x) for x in rec.run_secs] if rec.run_secs is not None else []
            if not secs or not all(math.isfinite(s) and s < FAILED_SECS for s in secs):
                continue
            mod = rec.workload.mod
            h = str(tvm_ffi.structural_hash(mod) & 0xFFFFFFFFFFFFFFFF)
            if h not in ctxs:
                ctxs[h] = make_tune_context(mod, rec.target, names.get(h, h))
            sch = Schedule(mod)
            try:
                rec.trace.apply_to_schedule(sch, remove_postproc=False)
            except Exception:  # noqa: BLE001 - a trace that does not replay is skipped
                continue
            e = out.setdefault(h, {"name": names.get(h, h), "X": [], "thr": []})
            e["X"].append(sum_max(store_rows(extractor, ctxs[h], [sch])[0]))
            e["thr"].append(1.0 / (sum(secs) / len(secs)))
    bar.update(len(dirs))
    bar.close()
    for e in out.values():
        e["X"], e["thr"] = np.stack(e["X"]), np.array(e["thr"])
    return out


def _model(seed: int):
    from dcoc.core import DCOCConfig, ensemble

    return ensemble(DCOCConfig(), seed)


def rank_scores(data: dict, variants: list[str], ks: list[int], m: int, reps: int,
                seed: int = 0, min_records: int = 12, pool_rows: int = 1024,
                progress: bool = False) -> list[dict]:
    """One row per (task, k, rep): the score of every variant on the same draw
    (``progress``: a display on stderr, draws done)."""
    from dcoc.progress import Progress

    rng = np.random.default_rng(seed)
    tasks = [h for h, e in data.items() if len(e["thr"]) >= min_records]
    rows = []
    bar = Progress(len(tasks) * len(ks) * reps, "ms_rank_replay", unit="draw") if progress else None
    for h in tasks:
        e = data[h]
        others = [data[o] for o in data if o != h]
        Xp = np.concatenate([o["X"] for o in others])
        yp = np.concatenate([o["thr"] / o["thr"].max() for o in others])
        for k in ks:
            for rep in range(reps):
                idx = rng.permutation(len(e["thr"]))
                own, cand = idx[:k], idx[k:]
                sub = rng.permutation(len(yp))[:pool_rows]
                yo = e["thr"][own] / e["thr"][own].max()
                true = e["thr"][cand]
                row = {"task": e["name"], "k": k, "rep": rep, "n_cand": len(cand)}
                for v in variants:
                    row[v] = _score(v, e["X"][own], yo, Xp[sub], yp[sub], e["X"][cand], true, m,
                                    int(rng.integers(1 << 31)))
                rows.append(row)
                if bar is not None:
                    bar.update(len(rows), e["name"])
    if bar is not None:
        bar.close()
    return rows


def _score(variant: str, Xo, yo, Xp, yp, Xc, true, m: int, seed: int) -> float:
    name, _, arg = variant.partition(":")
    if name == "random":
        pick = np.random.default_rng(seed).permutation(len(true))[:m]
        return float(true[pick].max() / true.max())
    if name == "pool":
        X, y = Xp, yp
    elif name == "own":
        X, y = Xo, yo
    elif name == "pool+own":
        w = int(arg) if arg else 1
        X = np.concatenate([Xp] + [Xo] * w)
        y = np.concatenate([yp] + [yo] * w)
    else:
        raise SystemExit(f"ms_rank_replay: unknown variant '{variant}'")
    mu = _model(seed).fit(X, y).predict(Xc)
    pick = np.argsort(-mu, kind="stable")[:m]
    return float(true[pick].max() / true.max())


def summarize(rows: list[dict], variants: list[str], ref: str) -> str:
    from scipy.stats import wilcoxon

    out = ["| k | variant | draws | mean score | median | vs " + ref + " better/worse | p |",
           "|---|---|---|---|---|---|---|"]
    for k in sorted({r["k"] for r in rows}):
        rk = [r for r in rows if r["k"] == k]
        for v in variants:
            a = np.array([r[v] for r in rk])
            b = np.array([r[ref] for r in rk])
            d = a - b
            better, worse = int((d > 1e-12).sum()), int((d < -1e-12).sum())
            p = float("nan")
            if v != ref and better + worse:
                p = float(wilcoxon(a, b, zero_method="wilcox").pvalue)
            out.append(f"| {k} | {v} | {len(a)} | {a.mean():.3f} | {np.median(a):.3f} | "
                       f"{better}/{worse} | {p:.3g} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("dirs", nargs="+", help="work dirs kept by bench_metaschedule --work-dir")
    ap.add_argument("--k", type=int, nargs="+", default=[3, 6], help="own rows of the cold task")
    ap.add_argument("--m", type=int, default=4, help="candidates measured per draw (batch)")
    ap.add_argument("--reps", type=int, default=5, help="draws per task and k")
    ap.add_argument("--min-records", type=int, default=12, help="tasks with fewer records are left out")
    ap.add_argument("--pool-rows", type=int, default=1024, help="pooled rows per draw (the strategy's cap)")
    ap.add_argument("--variants", nargs="+",
                    default=["pool+own", "pool+own:10", "pool+own:50", "own", "pool", "random"])
    ap.add_argument("--ref", default="pool+own")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="write the per-draw rows here (JSON lines)")
    a = ap.parse_args(argv)
    from dcoc.search.msdb import ms_database_dir

    for d in a.dirs:
        if not os.path.isdir(d) or ms_database_dir(d) != d:
            print(f"ms_rank_replay: {d} holds no MetaSchedule database", file=sys.stderr)
            return 2
    if a.ref not in a.variants:
        a.variants.insert(0, a.ref)
    data = featurize_dirs(a.dirs)
    rows = rank_scores(data, a.variants, a.k, a.m, a.reps, a.seed, a.min_records, a.pool_rows,
                       progress=True)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    n_tasks = len({r["task"] for r in rows})
    print(f"{len(a.dirs)} work dirs, {sum(len(e['thr']) for e in data.values())} records, "
          f"{n_tasks} tasks with >= {a.min_records} records; top-{a.m} score = best true "
          f"throughput among the variant's top {a.m} / best among the candidates")
    print(summarize(rows, a.variants, a.ref))
    return 0


if __name__ == "__main__":
    sys.exit(main())
