"""Co-design of one accelerator for a mix of models (``dcoc.tune([m1, m2, ...], weights=...)``).

:func:`dcoc.api.tune.tune` checks, resolves the target and board, takes the work dir's lock
and hands a list of models to :func:`tune_mix`, which reuses the single-model pieces of
:mod:`dcoc.api.accelerator`: the models' layers are merged into one
:class:`dcoc.codesign.mix.MixSession` (a layer several models share is measured once), the
tuner's driver searches it with the whole budget, and each model gets its own
:class:`~dcoc.results.result.TuneResult` on the shared hardware.  With ``singles`` every
model is also co-designed alone (``trials / len(models)`` trials, in
``WORK_DIR/singles/<model>``) and every other model's schedules are tuned on that design's
hardware with the same per-model budget (``WORK_DIR/singles/<other>-on-<model>``): what
designing for one model costs the others.
"""
from __future__ import annotations

import math
import os
import time

from dcoc.errors import DcocError
from dcoc.results.mix import MixResult, layers_file
from dcoc.results.mix import slug as _slug

SINGLES_DIR = "singles"


def check_mix(models, weights, objective, accelerator: bool) -> list[float]:
    """One-line errors for a bad mix; returns the weights (default: 1 per model)."""
    import numbers

    from dcoc.codesign.mix import check_objective

    if not accelerator:
        raise DcocError("a model mix needs an accelerator target (vta, systolic): one hardware "
                        "config is designed for all models")
    if len(models) < 2:
        raise DcocError(f"a model mix needs two or more models, got {len(models)}; tune one model alone")
    for m in models:
        if not (isinstance(m, (str, os.PathLike)) or hasattr(m, "SerializeToString")):
            raise DcocError(f"a model of a mix must be an ONNX path, a zoo name or an onnx.ModelProto, "
                            f"got {type(m).__name__}")
    check_objective(objective)
    if weights is None:
        return [1.0] * len(models)
    if isinstance(weights, (str, bytes)) or not hasattr(weights, "__len__") or len(weights) != len(models):
        raise DcocError(f"weights must give one number per model ({len(models)}), got {weights!r}")
    out = []
    for w in weights:
        if isinstance(w, bool) or not isinstance(w, numbers.Real) or not (math.isfinite(w) and w > 0):
            raise DcocError(f"every weight must be a positive number, got {w!r}")
        out.append(float(w))
    return out


def model_names(models) -> list[str]:
    """Each model's short name (a zoo name, an ONNX file's stem); one-line error on a repeat."""
    from dcoc.workdir import model_identity

    names = [model_identity(m)["model"] for m in models]
    seen = set()
    for n in names:
        if n in seen:
            raise DcocError(f"model {n} is given twice: a mix lists each model once (its weight "
                            "says how much it counts)")
        seen.add(n)
    return names


def tune_mix(tg, bd, models, *, weights, objective: str, singles: bool, trials: int, tuner,
             seed: int, work_dir: str, resume: bool, hardware, measurer, n_workers, progress: bool,
             pareto: bool, model_paths, config, baseline=None) -> MixResult:
    """Co-design (or, with ``hardware``, software-only tuning) for all ``models`` on target
    ``tg`` within board ``bd``; the result is saved to ``work_dir/result.json``."""
    from dcoc.api.accelerator import _check_schedulable, _measurer, _ProgressBar, _run_driver
    from dcoc.codesign.mix import MixSession, merge_layers
    from dcoc.codesign.prior import write_layers
    from dcoc.search.records import Records
    from dcoc.workdir import claim_work_dir, model_identity

    hardware = tg.parse_hw(hardware, bd.name)
    if hardware is not None:
        tg.check_fits(hardware, bd)
    names = model_names(models)
    parts = [_model_layers(tg, m) for m in models]
    per = trials // len(models)
    if singles and hardware is None:
        for name, (_, layers, _) in zip(names, parts):
            if per < len(layers):
                raise DcocError(f"the single-model designs get trials / models = {per} trials each, but "
                                f"{name} has {len(layers)} {tg.label} layers: raise trials to at least "
                                f"{len(layers) * len(models)} (or singles=False, --no-singles)")
    n_layers = len(merge_layers([p[1] for p in parts], weights)[0])
    if n_layers > trials:
        raise DcocError(f"the mix has {n_layers} distinct {tg.label} layers and every one needs "
                        f"a schedule: trials must be >= {n_layers}, got {trials}")
    claim_work_dir(work_dir, {"model": "+".join(names), "models": [model_identity(m) for m in models],
                              "target": tg.name, "board": bd.name})
    records = Records(os.path.join(work_dir, "records.jsonl"))
    for name, (_, layers, _) in zip(names, parts):
        write_layers(os.path.join(work_dir, layers_file(name)), layers)
    m, own = _measurer(measurer, n_workers, tg.name)
    bar = _ProgressBar(trials, f"mix {tuner}") if progress else None
    t0 = time.perf_counter()
    try:
        session = MixSession([p[1] for p in parts], weights, objective, m, trials, tuner, seed,
                             records, resume, progress=bar, target=tg)
        if hardware is not None:
            _check_schedulable(session.layers, hardware, tg)
        driver_kw = {k: v for k, v in (("baseline", baseline), ("config", config)) if v is not None}
        driver = _run_driver(session, bd, tuner, seed, hardware, driver_kw)
        if bar is not None:
            bar.close()
            bar = None
        res = _result(tg, bd, session, driver, models, names, parts, model_paths, tuner=tuner, seed=seed,
                      work_dir=work_dir, records=records, t0=t0)
        if singles and hardware is None:
            res.singles = _singles(tg, bd, models, names, model_paths, res, per, m,
                                   tuner=tuner, seed=seed, work_dir=work_dir, resume=resume,
                                   progress=progress, driver_kw=driver_kw)
        if pareto:
            _add_pareto(res, session, records, m)
    finally:
        if bar is not None:
            bar.close()
        if own:
            m.close()
    res.wall_seconds = time.perf_counter() - t0
    res.save(os.path.join(work_dir, "result.json"))
    return res


def _model_layers(tg, model):
    """(tasks, the layers ``tg`` runs, the CPU layers) of one model."""
    from dcoc.api.accelerator import _check_layers
    from tvm_plugin.frontend import model_tasks

    tasks = model_tasks(model, tg.frontend_target, None)
    layers, cpu = _check_layers(tg, tasks, model, 10 ** 9)  # the trials are checked on the mix
    return tasks, layers, cpu


def _result(tg, bd, session, driver, models, names, parts, model_paths, *, tuner, seed,
            work_dir, records, t0) -> MixResult:
    """The MixResult of a finished mix session (singles and Pareto front not yet added)."""
    from dcoc.api.accelerator import _baseline_latency, _describe_run
    from dcoc.codesign.mix import combine

    if session.best_hw is None:
        raise DcocError("no complete schedule was found within the trial budget; raise --trials")
    hw = session.hw[session.best_hw]
    results = [_model_result(tg, bd, session, i, hw, model, parts[i], model_paths[i], tuner=tuner,
                             seed=seed, work_dir=work_dir, records=records, t0=t0)
               for i, model in enumerate(models)]
    base = [_baseline_latency(p[1], tg.baseline_hw(bd), tg) * 1e3 for p in parts]
    for r, b in zip(results, base):
        r.baseline_latency_ms = b
    objective = combine([r.latency_ms for r in results], session.weights, session.objective)
    return MixResult(
        target=tg.name, board=bd.name, tuner=tuner, seed=seed, trials=session.trials,
        objective=session.objective, weights=list(session.weights), hardware=hw,
        objective_ms=objective, baseline_objective_ms=combine(base, session.weights, session.objective),
        models=results, history=[(t, lat * 1e3) for t, lat in session.history if math.isfinite(lat)],
        work_dir=work_dir,
        extra={"layers": len(session.layers), "shared": session.shared,
               "hardware_explored": len(session.hw), "replayed_trials": session.replayed,
               "search": _describe_run(driver, session), "resources": tg.resources(hw, bd),
               "model_names": names})


def _model_result(tg, bd, session, i, hw, model, part, model_path, *, tuner, seed, work_dir,
                  records, t0):
    """Model ``i``'s TuneResult on the mix's hardware (baseline filled in by the caller;
    ``trials`` and ``history``: the whole mix's trials, no curve of its own)."""
    from types import SimpleNamespace

    from dcoc.api.accelerator import _cpu_estimate, _layer_rows
    from dcoc.results.result import TuneResult
    from dcoc.targets.timing import model_seconds
    from dcoc.tuners import describe

    tasks, layers, cpu = part
    best = session.model_best(hw.name, i)
    view = SimpleNamespace(target=tg, best={(hw.name, j): b for j, b in enumerate(best)})
    cpu_est = _cpu_estimate(tasks, cpu)
    latency = model_seconds((layer.count, b[0]) for layer, b in zip(layers, best))
    return TuneResult(
        target=tg.name, tuner=tuner, seed=seed, latency_ms=latency * 1e3, baseline_latency_ms=math.nan,
        trials=session.trials, hardware=hw, schedules=session.model_schedules(hw.name, i),
        layers=_layer_rows(layers, hw, view), cpu_layers=cpu_est["layers"],
        cpu_latency_ms=cpu_est["ms"], cpu_method=cpu_est["method"], board=bd.name,
        method=describe(tuner), model=getattr(tasks, "model", str(model)), work_dir=work_dir,
        database_path=records.path, wall_seconds=time.perf_counter() - t0, model_path=model_path,
        extra={"mix_weight": session.weights[i]})


def _singles(tg, bd, models, names, model_paths, res, per: int, measurer, *, tuner, seed,
             work_dir, resume, progress, driver_kw: dict) -> list[dict]:
    """Each model's own co-design (``per`` trials) evaluated on the whole mix: the other
    models' schedules tuned on its hardware with ``per`` trials each."""
    from dcoc.api.accelerator import _tune_accelerator
    from dcoc.codesign.mix import combine
    from dcoc.workdir import lock_work_dir

    def run(i, sub, hardware=None):
        path = os.path.join(work_dir, SINGLES_DIR, sub)
        with lock_work_dir(path):
            return _tune_accelerator(tg, bd, models[i], trials=per, tuner=tuner, seed=seed,
                                     work_dir=path, resume=resume, hardware=hardware,
                                     input_shapes=None, measurer=measurer, n_workers=None,
                                     progress=progress, model_path=model_paths[i], warm_start=None,
                                     baseline=driver_kw.get("baseline"), config=driver_kw.get("config"))

    out = []
    for i, name in enumerate(names):
        own = run(i, _slug(name))
        lat = {res.models[j].model: (own.latency_ms if j == i else
                                     run(j, f"{_slug(names[j])}-on-{_slug(name)}", own.hardware).latency_ms)
               for j in range(len(models))}
        out.append({"design": res.models[i].model, "hardware": own.hardware.name,
                    "latency_ms": lat, "objective_ms": combine(list(lat.values()), res.weights, res.objective),
                    "trials": per * len(models)})
    return out


def _add_pareto(res: MixResult, session, records, measurer) -> None:
    """The front over the board's hardware space of the weighted objective vs resources."""
    from dcoc.results.pareto import estimate_points, pareto_front
    from dcoc.search.records import Records

    rows = Records.load(records.path).rows
    pts, stats = estimate_points(rows, session.layers, res.board, res.target, measurer=measurer)
    res.pareto = pareto_front(pts)
    res.extra["pareto"] = {**stats, "latency": "weighted sum of the models' latencies (ms)"}


def export_mix(source, path: str) -> dict:
    """Export a MixResult or a mix run's work dir (:func:`dcoc.results.mix.export_mix`)."""
    from dcoc.results.export import read_source
    from dcoc.results.mix import export_mix as write

    data, work_dir, _ = read_source(source)
    return write(data, work_dir, os.fspath(path))


__all__ = ["check_mix", "export_mix", "model_names", "tune_mix"]
