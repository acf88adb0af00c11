"""Train the pre-trained CPU cost model dcoc ships (tvm_plugin/metaschedule/data/cpu_prior.*).

    python -m scripts.train_cpu_prior                    # tune the zoo (resumable), train, save
    python -m scripts.train_cpu_prior --work-dir W       # keep / reuse the tuning runs in W
    python -m scripts.train_cpu_prior --check            # leave-one-model-out check only

Data: the zoo only (``TRAINING``: ``small_cnn``, ``transformer``, ``mobilenetv2`` and
``resnet18`` at the MetaSchedule benchmark's 1x3x64x64, and ``mobilenetv2`` / ``resnet18``
at their own 224x224), each tuned for ``--minutes`` with dcoc's default tuner and no prior
(seed 0, a time budget).  No ``light_*`` model is used: they are what the prior is
evaluated on (``scripts.bench_cpu``).  Every record of every task becomes a row: its
program features (:func:`tvm_plugin.metaschedule.prior.records_features`) and its
throughput divided by its task's best; one XGBoost ranker is fitted over the tasks.

The check (printed, and saved in the model's meta JSON): for each zoo model, a ranker
trained on the other models ranks that model's records per task; reported is how close
the best of its top 8 comes to the task's best (mean over tasks) next to the expected best
of 8 records drawn at random -- the warm-up the prior replaces.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

#: (zoo model, input size or None for the MetaSchedule benchmark's) the prior learns from
TRAINING = (("small_cnn", None), ("transformer", None), ("mobilenetv2", None), ("resnet18", None),
            ("mobilenetv2", 224), ("resnet18", 224))
MINUTES = 3.0
TOP = 8


def job_name(name: str, size) -> str:
    return f"{name}_{size or 'bench'}"


def tune_zoo(root: str, minutes: float, seed: int = 0, log=print) -> list[str]:
    """Tune each TRAINING model into ``root/<job>`` (a finished one is kept); the dirs."""
    from dcoc.api.cpu import tune_metaschedule
    from scripts.bench_metaschedule import load_model
    from tvm_plugin.frontend import load

    dirs = []
    for name, size in TRAINING:
        wd = os.path.join(root, job_name(name, size))
        dirs.append(wd)
        if os.path.exists(os.path.join(wd, "result.json")):
            continue
        model = load_model(name)[0] if size is None else load(name)
        r = tune_metaschedule(model, "llvm", trials=None, seed=seed, work_dir=wd,
                              time_budget=minutes * 60.0, measure=False, baseline=False,
                              progress=False, prior=False)
        log(f"train_cpu_prior: {job_name(name, size)}: {r.extra['new_trials']} trials")
    return dirs


def _best_of(y: np.ndarray, k: int) -> float:
    """Expected max of k values drawn without replacement from y (exact, by rank)."""
    from math import comb

    v = np.sort(y)
    n = len(v)
    k = min(k, n)
    total = comb(n, k)
    return float(sum(v[i] * comb(i, k - 1) for i in range(k - 1, n)) / total)


def check(groups_by_model: dict, seed: int = 0) -> dict:
    """Leave-one-model-out: ``{model: (prior top-8 best, random 8 expected best)}``
    (means over the model's tasks with >= 16 records)."""
    from tvm_plugin.metaschedule.prior import train

    out = {}
    for held in groups_by_model:
        rest = [g for m, gs in groups_by_model.items() if m != held for g in gs]
        booster = train(rest, seed=seed)
        import xgboost as xgb

        ours, rand = [], []
        for _, X, y in groups_by_model[held]:
            if len(y) < 2 * TOP:
                continue
            pred = booster.predict(xgb.DMatrix(X))
            top = np.argsort(-pred, kind="stable")[:TOP]
            ours.append(float(np.max(y[top])))
            rand.append(_best_of(y, TOP))
        if ours:
            out[held] = (float(np.mean(ours)), float(np.mean(rand)), len(ours))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.train_cpu_prior",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--work-dir", default="dcoc_runs/cpu_prior",
                    help="the zoo's tuning runs (kept; a finished one is not tuned again)")
    ap.add_argument("--minutes", type=float, default=MINUTES, help="tuning time per zoo model")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="model meta JSON (default: the shipped one)")
    ap.add_argument("--check", action="store_true", help="only the leave-one-model-out check")
    a = ap.parse_args(argv)
    if a.minutes <= 0:
        print("train_cpu_prior: --minutes must be > 0", file=sys.stderr)
        return 2
    from tvm_plugin.metaschedule.prior import DEFAULT_PATH, ROUNDS, TRAIN_PARAMS, records_features, save_prior, train

    dirs = tune_zoo(a.work_dir, a.minutes, a.seed)
    by_model = {}
    for (name, size), wd in zip(TRAINING, dirs):
        by_model[job_name(name, size)] = records_features(wd)
        print(f"train_cpu_prior: {job_name(name, size)}: {len(by_model[job_name(name, size)])} "
              f"tasks, {sum(len(g[2]) for g in by_model[job_name(name, size)])} records",
              file=sys.stderr)
    cv = check(by_model, a.seed)
    print(f"leave-one-model-out: best of the prior's top {TOP} vs of {TOP} random records "
          "(throughput / task best, mean over tasks)")
    for m, (ours, rand, n) in cv.items():
        print(f"  {m:<18} prior {ours:.3f}  random {rand:.3f}  ({n} tasks)")
    if a.check:
        return 0
    groups = [g for gs in by_model.values() for g in gs]
    booster = train(groups, seed=a.seed)
    meta = {"models": [job_name(n, s) for n, s in TRAINING], "minutes": a.minutes, "seed": a.seed,
            "tasks": len(groups), "rows": int(sum(len(g[2]) for g in groups)),
            "params": TRAIN_PARAMS, "rounds": ROUNDS, "top": TOP,
            "leave_one_model_out": {m: {"prior": round(o, 4), "random": round(r, 4), "tasks": n}
                                    for m, (o, r, n) in cv.items()},
            "command": "python -m scripts.train_cpu_prior"}
    path = save_prior(booster, meta, a.out or DEFAULT_PATH)
    print(f"train_cpu_prior: wrote {path} ({meta['rows']} records of {meta['tasks']} tasks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
