"""Accelerator co-design of a whole model (``dcoc.tune(model, target="vta" | "systolic")``):
the layers the target runs, a :class:`dcoc.codesign.Session` driven by the tuner's driver,
then the result (baseline, CPU layers, resources, optionally the Pareto front)."""
from __future__ import annotations

import math
import os
import time

from dcoc.errors import ConfigError, DcocError
from dcoc.results.result import TuneResult
from dcoc.tuners import describe


def _records(records):
    from dcoc.search.records import Records

    if records is None or isinstance(records, Records):
        return records
    return Records(records)


def _measurer(measurer, n_workers, target):
    """(the measurer, whether it is ours to close): a name of
    :data:`dcoc.search.measure.REGISTRY`, an object, or the target's own (``n_workers``
    already checked by :func:`dcoc.api.checks.check_workers`)."""
    if isinstance(measurer, str):  # a name of dcoc.search.measure.REGISTRY, with its defaults
        from dcoc.search.measure import create_measurer

        kw = {"target": target, "n_workers": n_workers} if measurer.strip().lower() == "simulator" else {}
        return create_measurer(measurer, **kw), True
    if measurer is not None:
        return measurer, False
    from dcoc.targets import get

    return get(target).measurer(n_workers=n_workers), True


def _tune_accelerator(tg, bd, model, *, trials: int, tuner, seed: int, work_dir: str,
                      resume: bool, hardware, input_shapes, measurer, n_workers, progress: bool,
                      model_path, warm_start, baseline, config) -> TuneResult:
    """Co-design (or, with ``hardware``, software-only tuning) on target ``tg`` within
    board ``bd``; the result is saved to ``work_dir/result.json``."""
    from dcoc.codesign.prior import LAYERS_FILE, as_prior, write_layers
    from dcoc.search.records import Records
    from tvm_plugin.frontend import model_tasks

    hardware = tg.parse_hw(hardware, bd.name)
    if hardware is not None:
        tg.check_fits(hardware, bd)
    prior = as_prior(warm_start, tg.name, bd.name) if warm_start is not None else None
    tasks = model_tasks(model, tg.frontend_target, input_shapes)
    layers, cpu = _check_layers(tg, tasks, model, trials)
    from dcoc.workdir import claim_work_dir, model_identity

    claim_work_dir(work_dir, {**model_identity(model, input_shapes), "target": tg.name,
                              "board": bd.name})
    records = Records(os.path.join(work_dir, "records.jsonl"))
    if hardware is not None:
        _check_schedulable(layers, hardware, tg)
    m, own = _measurer(measurer, n_workers, tg.name)
    bar = _ProgressBar(trials, f"{tuner}") if progress else None
    t0 = time.perf_counter()
    write_layers(os.path.join(work_dir, LAYERS_FILE), layers)  # lets later runs warm-start from this one
    session = _session(layers, m, trials, tuner, seed, records, resume, bar, tg)
    driver_kw = {k: v for k, v in (("prior", prior), ("baseline", baseline), ("config", config))
                 if v is not None}
    try:
        driver = _run_driver(session, bd, tuner, seed, hardware, driver_kw)
    finally:
        if bar is not None:
            bar.close()
        if own:
            m.close()
    res = _result(tg, bd, session, driver, layers, tasks, cpu, tuner=tuner, seed=seed,
                  model=model, work_dir=work_dir, records=records, t0=t0,
                  input_shapes=input_shapes, model_path=model_path)
    res.save(os.path.join(work_dir, "result.json"))
    return res


def _check_layers(tg, tasks, model, trials: int):
    """(the layers ``tg`` runs, the CPU layers); one-line errors for a model without any
    and for fewer trials than layers."""
    layers, cpu = tg.layers(tasks)
    if not layers:
        raise DcocError(f"model {getattr(tasks, 'model', model)} has no layer {tg.label} can run "
                        f"(CPU operators: {', '.join(sorted({c[0] for c in cpu})) or 'none'})")
    if trials < len(layers):
        raise DcocError(f"model {getattr(tasks, 'model', model)} has {len(layers)} {tg.label} layers and "
                        f"every one needs a schedule: trials must be >= {len(layers)}, got {trials}")
    return layers, cpu


def _session(layers, measurer, trials, tuner, seed, records, resume, bar, tg):
    from dcoc import codesign as cd

    return cd.Session(layers, measurer, trials, tuner, seed, records, resume, progress=bar, target=tg)


def _run_driver(session, bd, tuner, seed, hardware, driver_kw: dict):
    """Run the tuner's driver until the budget is spent; returns the driver."""
    from dcoc import codesign as cd

    if hardware is not None:
        cd.default_schedules(session, hardware)
    driver = cd.make_driver(session, bd, tuner, seed, hardware=hardware, **driver_kw)
    session.run(driver)
    if hardware is not None and session.latency(hardware.name) is None:
        missing = [session.layers[li].name for li in driver.missing()]
        if missing:
            raise DcocError(f"layer {missing[0]} has no valid schedule on hardware {hardware.name}"
                            + (f" (nor {len(missing) - 1} other layer(s))" if len(missing) > 1 else ""))
    return driver


def _result(tg, bd, session, driver, layers, tasks, cpu, *, tuner, seed, model, work_dir,
            records, t0, input_shapes, model_path) -> TuneResult:
    """The TuneResult of a finished session."""
    # baseline: the board's reference hardware with default schedules (not counted as trials)
    baseline = _baseline_latency(layers, tg.baseline_hw(bd), tg)
    best_hw = session.best_hw
    if best_hw is None:
        raise DcocError("no complete schedule was found within the trial budget; raise --trials")
    hw = session.hw[best_hw]
    layer_rows = _layer_rows(layers, hw, session)
    cpu_est = _cpu_estimate(tasks, cpu)
    by_name = {t.name: t for t in list(tasks) + list(getattr(tasks, "cpu_ops", []) or [])}
    for row in cpu_est["layers"]:  # why each stays on the CPU (the summary says it)
        if row["layer"] in by_name:
            row["reason"] = tg.cpu_reason(by_name[row["layer"]])
    # the whole-model latency dcoc run measures: count x time per layer, summed by the same
    # function (for VTA the layers carry their epilogues, so run times the same work)
    from dcoc.targets.timing import model_seconds

    latency = model_seconds((layer.count, session.best[(best_hw, li)][0])
                            for li, layer in enumerate(layers))
    notes = tg.hw_notes(hw, bd)  # buildable? what its latencies rest on
    return TuneResult(
        target=tg.name, tuner=tuner, seed=seed, latency_ms=latency * 1e3,
        baseline_latency_ms=baseline * 1e3, trials=session.trials, hardware=hw,
        schedules=session.schedules(best_hw),
        history=[(t, lat * 1e3) for t, lat in session.history if math.isfinite(lat)],
        layers=layer_rows, cpu_layers=cpu_est["layers"],
        cpu_latency_ms=cpu_est["ms"], cpu_method=cpu_est["method"],
        board=bd.name, method=describe(tuner),
        model=getattr(tasks, "model", str(model)), work_dir=work_dir,
        database_path=records.path, wall_seconds=time.perf_counter() - t0,
        extra={"hardware_explored": len(session.hw), "replayed_trials": session.replayed,
               "search": _describe_run(driver, session),
               "resources": tg.resources(hw, bd),
               **({"target_options": dict(tg.options)} if tg.options else {}),
               **({"hw_notes": notes} if notes else {})},
        input_shapes={k: tuple(int(d) for d in v) for k, v in input_shapes.items()}
        if input_shapes else None,
        model_path=model_path,
    )


def _add_pareto(res: TuneResult, measurer, n_workers, target) -> None:
    """The board's whole hardware space, searched + estimated (:mod:`dcoc.results.pareto`),
    into ``res`` (saved again)."""
    from dcoc.results.pareto import evaluate_run

    m, own = _measurer(measurer, n_workers, target)
    try:
        ev = evaluate_run(res.work_dir, measurer=m)
    finally:
        if own:
            m.close()
    res.pareto = ev["front"]
    res.extra["pareto"] = ev["stats"]
    res.save(os.path.join(res.work_dir, "result.json"))


def _describe_run(driver, session) -> str:
    """How the co-design driver spent the trials, in words (the summary's ``search`` line)."""
    from dcoc import codesign as cd

    if hasattr(driver, "describe_run"):
        text = driver.describe_run()
    elif isinstance(driver, cd.SoftwareTuning):
        text = (f"software only on {driver.hw.name}: every layer's default schedule, then one tuner per "
                "layer, budget to the layer with the most to gain")
    elif isinstance(driver, cd.SweepCoDesign):
        text = "sweep co-design: every core shape, then buffer variants of the best, then local search"
    elif isinstance(driver, cd.NestedCoDesign):
        text = "nested co-design: the tuner picks hardware, a fixed software budget per config"
    elif isinstance(driver, cd.JointCoDesign):
        text = "joint co-design: one tuner per layer over hardware x schedule knobs, told the model latency"
    else:
        text = type(driver).__name__
    if not isinstance(driver, cd.SoftwareTuning):
        n = len(session.hw)
        text += f"; {n} hardware config{'s' if n != 1 else ''} explored"
    return text + (f"; {session.replayed} trials replayed from the records" if session.replayed else "")


def _cpu_estimate(tasks, cpu) -> dict:
    """The layers left on the CPU, timed on this host (:mod:`dcoc.results.cpu_layers`);
    ``ms`` None (and the reason in ``method``) when they cannot be timed."""
    rows = [{"layer": n, "kind": k, "count": c} for n, k, c in cpu]
    if not rows:
        return {"ms": 0.0, "method": "no layer left on the CPU", "layers": rows}
    from dcoc.results.cpu_layers import estimate_cpu_layers

    try:
        return estimate_cpu_layers(tasks, names=[r["layer"] for r in rows])
    except Exception as exc:  # noqa: BLE001 - a missing estimate must not lose the tuning result
        return {"ms": None, "method": f"not timed: {' '.join(str(exc).split())[:200]}", "layers": rows}


def _check_schedulable(layers, hw, tg) -> None:
    """DcocError unless every layer has at least one valid schedule on ``hw`` (software-only
    tuning cannot complete the model otherwise, whatever the budget)."""
    from collections import Counter

    empty, reasons = [], Counter()
    for layer in layers:
        space = tg.sw_space(layer, hw)
        ok = False
        for cfg in space:
            why = space.check(cfg)
            if why is None:
                ok = True
                break
            if not empty:
                reasons[" ".join(str(why).split())[:120]] += 1
        if not ok:
            empty.append(layer.name)
    if empty:
        names = ", ".join(empty[:4]) + (f" and {len(empty) - 4} more" if len(empty) > 4 else "")
        why = reasons.most_common(1)[0][0] if reasons else "no schedule fits"
        raise ConfigError(f"hardware {hw.name} has no valid schedule for {len(empty)} of "
                          f"{len(layers)} layers ({names}; e.g. {why}): choose hardware with "
                          "larger buffers (a bigger --hardware), not more --trials")


def _baseline_latency(layers, hw, target=None) -> float:
    """Accelerator time of the layers on ``hw`` with the default schedules (same epilogue
    and default-schedule rule as the tuning run, so the two are comparable)."""
    from dcoc import codesign as cd
    from dcoc.targets import get

    tg = get(target)
    s = cd.Session(layers, tg.measurer(n_workers=0), len(layers), "baseline", 0, target=tg)
    cd.default_schedules(s, hw)
    lat = s.latency(hw.name)
    return lat if lat is not None else float("inf")


def _layer_rows(layers, hw, session) -> list[dict]:
    tg = session.target
    rows = []
    for li, layer in enumerate(layers):
        cost, knobs = session.best[(hw.name, li)]
        rows.append({
            "layer": layer.name, "kind": layer.kind, "count": layer.count, "device": tg.name,
            "knobs": knobs, "ms": cost * 1e3, "cycles": tg.cycles(cost, hw),
            "gops": 2 * layer.workload.macs / cost / 1e9,
            "utilization": layer.ideal_seconds(hw) / cost,
            "roofline": tg.roofline(layer, hw, cost), "total_ms": cost * layer.count * 1e3,
            "epilogue": tg.describe_epilogue(layer),
        })
    return rows


class _ProgressBar:
    """Progress over trials showing the best model latency so far (a bar on a terminal, a
    plain line every tenth of the budget otherwise: :class:`dcoc.progress.Progress`)."""

    def __init__(self, total: int, desc: str):
        from dcoc.progress import Progress

        self.bar = Progress(total, desc)

    def __call__(self, session):
        lat = session.best_latency
        self.bar.update(session.trials, f"best {lat * 1e3:.3f} ms on {session.best_hw}"
                        if math.isfinite(lat) else "")

    def close(self):
        self.bar.close()
