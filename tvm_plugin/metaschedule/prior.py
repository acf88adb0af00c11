"""The pre-trained start: a cost model learned from the zoo's tuning records, shipped with dcoc.

A new model's tasks know nothing at first: every dcoc tuner begins with a warm-up of
random schedules.  The prior is an XGBoost model on *program features* (MetaSchedule's
``PerStoreFeature`` rows of a scheduled program, summed and maxed over its stores:
:func:`tvm_plugin.metaschedule.features.sum_max`), which mean the same in every task, fitted
on the zoo's tuning records with each record's throughput divided by its task's best.
With it, :class:`~tvm_plugin.metaschedule.strategy.TunerStrategy` draws ``sample`` valid
random schedules per task and measures the ones the prior ranks best as the task's
warm-up (:meth:`Prior.rank`); the tuner's own model takes over from there.

Versioning: the model file carries the feature version it was trained on
(:data:`FEATURE_VERSION`: extractor, aggregation, width, TVM's major.minor).  Loading a
file whose version differs from this dcoc's is refused with one line
(:class:`PriorMismatch`), never used silently: features of another extractor would rank at
random.  ``prior=False`` (``dcoc tune --no-prior``) turns it off; ``prior=PATH`` loads
another file (``python -m scripts.train_cpu_prior`` makes one).

Files: ``data/cpu_prior.json`` (what it was trained on, its version and settings) next
to ``data/cpu_prior.ubj`` (the XGBoost booster).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np

from dcoc.errors import DcocError
from dcoc.search.msdb import FAILED_SECS

#: the program features the prior reads (what a model file must have been trained on)
FEATURE_VERSION = {"extractor": "PerStoreFeature", "aggregate": "sum_max", "dim": 328,
                   "tvm": "0.27"}
#: the shipped prior (meta JSON; the booster is the same name with ``.ubj``)
DEFAULT_PATH = os.path.join(os.path.dirname(__file__), "data", "cpu_prior.json")
#: random valid schedules per task the prior ranks for the warm-up
SAMPLE = 32


class PriorMismatch(DcocError):
    """A prior file trained on other program features than this dcoc extracts."""


def feature_version() -> dict:
    """This installation's feature version (TVM's major.minor from the running TVM)."""
    import tvm

    major_minor = ".".join(str(tvm.__version__).split(".")[:2])
    return {**FEATURE_VERSION, "tvm": major_minor}


@dataclass
class Prior:
    """A loaded pre-trained cost model: :meth:`predict` scores program features."""

    path: str
    meta: dict
    booster: object

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Predicted throughput / task best of program-feature rows ``[n, dim]`` (rows with
        NaN -- schedules that do not build -- get -inf)."""
        import xgboost as xgb

        X = np.asarray(X, dtype=np.float32)
        out = np.full(len(X), -np.inf)
        ok = np.isfinite(X).all(axis=1) if len(X) else np.zeros(0, bool)
        if ok.any():
            out[ok] = self.booster.predict(xgb.DMatrix(X[ok]))
        return out

    def rank(self, X: np.ndarray) -> np.ndarray:
        """Row indices, best predicted first (ties keep their order)."""
        return np.argsort(-self.predict(X), kind="stable")


def load_prior(spec=True) -> Prior | None:
    """``True``/None: the shipped prior; ``False``: none; a path: that file's (its meta JSON
    or booster).  A missing file, a file of another feature version or a broken one is a
    one-line :class:`DcocError` (:class:`PriorMismatch` for the version)."""
    if spec is False:
        return None
    path = DEFAULT_PATH if spec in (True, None) else str(spec)
    meta_path = path[:-4] + ".json" if path.endswith(".ubj") else path
    model_path = meta_path[:-5] + ".ubj" if meta_path.endswith(".json") else meta_path + ".ubj"
    if not os.path.isfile(meta_path) or not os.path.isfile(model_path):
        raise DcocError(f"pre-trained cost model {meta_path} (+ .ubj) not found; make one with "
                        "python -m scripts.train_cpu_prior or turn it off (--no-prior)")
    from dcoc.readfile import read_json

    meta = read_json(meta_path, "pre-trained cost model")
    if not isinstance(meta, dict):
        raise DcocError(f"pre-trained cost model {meta_path}: not a JSON object")
    want, got = feature_version(), meta.get("feature_version")
    if got != want:
        raise PriorMismatch(
            f"pre-trained cost model {meta_path} was trained on features {_fmt(got)}, this dcoc "
            f"extracts {_fmt(want)}: retrain it (python -m scripts.train_cpu_prior) or turn "
            "it off (--no-prior)")
    import xgboost as xgb

    booster = xgb.Booster()
    try:
        booster.load_model(model_path)
    except Exception as exc:  # noqa: BLE001 - a broken file: one line
        raise DcocError(f"pre-trained cost model {model_path} does not load: "
                        f"{' '.join(str(exc).split())[:160]}") from None
    if booster.num_features() != int(want["dim"]):
        raise PriorMismatch(f"pre-trained cost model {model_path} reads {booster.num_features()} "
                            f"features, this dcoc extracts {want['dim']}")
    return Prior(path=meta_path, meta=meta, booster=booster)


def _fmt(v) -> str:
    if not isinstance(v, dict):
        return repr(v)
    return "/".join(f"{k}={v[k]}" for k in sorted(v))


# ============================================================================ training
def records_features(work_dir: str, target=None) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """``[(task key, program features [n, dim], throughput / task best [n])]`` of every
    workload of a MetaSchedule database in ``work_dir`` (failed records: throughput 0)."""
    from tvm.s_tir import meta_schedule as ms

    from tvm_plugin.metaschedule.build import resolve_tvm_target
    from tvm_plugin.metaschedule.features import store_rows, sum_max
    from tvm_plugin.metaschedule.trace_space import make_tune_context

    db = ms.database.JSONDatabase(work_dir=work_dir)
    by_wl: dict = {}
    for rec in db.get_all_tuning_records():
        by_wl.setdefault(rec.workload.__chandle__(), (rec.workload, []))[1].append(rec)
    extractor = ms.feature_extractor.PerStoreFeature()
    out = []
    for i, (wl, recs) in enumerate(by_wl.values()):
        tgt = target or recs[0].target or resolve_tvm_target("llvm")
        ctx = make_tune_context(wl.mod, tgt, f"task{i}")
        schs, costs = [], []
        for rec in recs:
            sch = _replay(wl.mod, rec.trace, ctx)
            if sch is None:
                continue
            secs = [float(x) for x in rec.run_secs] if rec.run_secs is not None else []
            ok = bool(secs) and all(0.0 < s < FAILED_SECS for s in secs)
            schs.append(sch)
            costs.append(float(np.mean(secs)) if ok else np.inf)
        if not schs or not np.isfinite(costs).any():
            continue
        X = np.stack([sum_max(a) for a in store_rows(extractor, ctx, schs)])
        c = np.array(costs)
        y = np.where(np.isfinite(c), np.min(c) / c, 0.0)
        out.append((f"{os.path.basename(os.path.normpath(work_dir))}/{i}", X, y))
    return out


def _replay(mod, trace, ctx):
    """A record's trace applied to its workload, postprocessed (None if it fails)."""
    from tvm.s_tir import Schedule

    try:
        sch = Schedule(mod, debug_mask="none", error_render_level="none")
        trace.apply_to_schedule(sch, remove_postproc=True)
        for p in ctx.space_generator.postprocs:
            if not p.apply(sch):
                return None
        return sch
    except Exception:  # noqa: BLE001
        return None


#: the booster's settings (chosen on the zoo's records, before any evaluation model ran)
TRAIN_PARAMS = {"objective": "rank:pairwise", "eta": 0.1, "max_depth": 6, "min_child_weight": 2,
                "subsample": 0.8, "colsample_bytree": 0.8, "tree_method": "hist"}
ROUNDS = 200


def train(groups: list, seed: int = 0, rounds: int = ROUNDS):
    """An XGBoost ranker over tasks (one query group per task) on ``records_features``'s
    groups; returns the booster."""
    import xgboost as xgb

    X = np.concatenate([g[1] for g in groups])
    y = np.concatenate([g[2] for g in groups])
    qid = np.concatenate([np.full(len(g[2]), k) for k, g in enumerate(groups)])
    d = xgb.DMatrix(X, label=y, qid=qid)
    return xgb.train({**TRAIN_PARAMS, "seed": int(seed), "nthread": 2}, d, num_boost_round=int(rounds))


def save_prior(booster, meta: dict, path: str = DEFAULT_PATH) -> str:
    """Write ``path`` (meta JSON, with this dcoc's feature version) and its ``.ubj``."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    booster.save_model(path[:-5] + ".ubj")
    with open(path, "w") as f:
        json.dump({**meta, "feature_version": feature_version()}, f, indent=1, sort_keys=True)
        f.write("\n")
    return path


__all__ = ["DEFAULT_PATH", "FEATURE_VERSION", "Prior", "PriorMismatch", "SAMPLE", "feature_version",
           "load_prior", "records_features", "save_prior", "train"]
