"""Public Python API: :func:`tune` (a whole model) and :func:`tune_task` (one VTA workload).

Both are thin: they resolve inputs, build the pieces (tasks, spaces, measurer, records)
and hand over to the drivers in :mod:`dcoc.codesign` (accelerators) or
:mod:`tvm_plugin.metaschedule.tuning` (llvm/cuda).  Algorithms live in :mod:`dcoc.tuners`
and :mod:`dcoc.method`.
"""
from __future__ import annotations

import math
import os
import re
import time

from dcoc.errors import ConfigError, DcocError
from dcoc.results.result import TaskResult, TuneResult
from dcoc.targets import DEFAULT_TARGET
from dcoc.tuners import DEFAULT as DEFAULT_TUNER
from dcoc.tuners import describe

__all__ = ["tune", "tune_task", "TuneResult", "TaskResult", "default_work_dir"]


# ------------------------------------------------------------------------- helpers
def _hw(hardware, board=None, target=DEFAULT_TARGET):
    """A hardware config of ``target`` from a config, a preset or config name (VTA: a name
    without ``_<F>MHz_bus<B>`` takes ``board``'s clock and bus), or a dict of its fields."""
    from dcoc.targets import get

    return get(target).parse_hw(hardware, board)


def _records(records):
    from dcoc.search.records import Records

    if records is None or isinstance(records, Records):
        return records
    return Records(records)


def _measurer(measurer, n_workers, target=DEFAULT_TARGET):
    if isinstance(measurer, str):  # a name of dcoc.search.measure.REGISTRY, with its defaults
        from dcoc.search.measure import create_measurer

        kw = {"target": target, "n_workers": n_workers} if measurer.strip().lower() == "simulator" else {}
        return create_measurer(measurer, **kw), True
    if measurer is not None:
        return measurer, False
    if n_workers is not None and int(n_workers) < 0:
        raise DcocError(f"n_workers (--workers) must be >= 0 (0 = in-process), got {n_workers}")
    from dcoc.targets import get

    return get(target).measurer(n_workers=n_workers), True


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", str(text)).strip("-") or "model"


def default_work_dir(model, target: str, board: str | None, tuner: str, seed: int,
                     hardware: str | None = None, input_shapes: dict | None = None) -> str:
    """``dcoc_runs/<model>[_in-<shapes>]_<target>[_<board>][_hw-<hardware>]_<tuner>_s<seed>``:
    rerunning the same command finds the same directory and resumes; a software-only run on
    fixed ``hardware`` (its name) and a run at other ``input_shapes`` get their own
    directories."""
    name = os.path.splitext(os.path.basename(str(model)))[0] if not hasattr(model, "graph") else "model"
    parts = [_slug(name)]
    if input_shapes:
        parts.append("in-" + "-".join(_slug("x".join(str(int(d)) for d in shape))
                                      for _, shape in sorted(input_shapes.items())))
    parts.append(_slug(target))
    if board:
        parts.append(board)
    if hardware:
        parts.append("hw-" + _slug(hardware))
    parts.append(_slug(tuner))
    parts.append(f"s{seed}")
    return os.path.join("dcoc_runs", "_".join(parts))


# ------------------------------------------------------------------------ tune_task
def tune_task(workload, hw=None, tuner: str = DEFAULT_TUNER, trials: int = 200, seed: int = 0,
              records=None, measurer=None, n_workers: int | None = None,
              early_stopping: int | None = None, callbacks=(), resume: bool = True,
              target: str = DEFAULT_TARGET, board: str | None = None, **tuner_kwargs) -> TaskResult:
    """Tune one accelerator workload's schedule.

    Parameters
    ----------
    workload: the target's workload (VTA: a :class:`dcoc.vta.Conv2DWorkload` /
        :class:`~dcoc.vta.DenseWorkload`, a :class:`dcoc.tasks.Task` of kind conv2d / dense,
        or a spec such as ``"C2"`` / ``"conv:H,W,CI,CO,K,S,P"`` / ``"dense:N,K,M"``).
    hw: a hardware config of the target, a preset name (VTA: ``"pynq"``) or a config name;
        default: the default config of ``board`` (VTA on pynq: the ``pynq`` preset).
    tuner: a name of :func:`dcoc.tuners.names` (``surrogate``, the default; ``dcoc``, the
        paper's method; ``dcoc-frozen``; the baselines ``xgb``, ``rl``, ``chameleon``, ``ga``,
        ``random``, ``grid``, ``sweep``), a ``NAME:key=value`` spec or a Tuner subclass.
    trials: measurement budget.
    seed: the one seed.
    records: a JSONL path or :class:`dcoc.search.Records`; measurements are appended as they
        happen, and a rerun with the same tuner/seed resumes from them.
    measurer: default: the target's measurer (VTA: :class:`dcoc.vta.VTASimMeasurer`)
        with ``n_workers`` processes.
    target: an accelerator target of :func:`dcoc.targets.available` (``vta``, ``systolic``).
    board: the board whose clock/bus a hardware name takes (default: the target's default).
    tuner_kwargs: passed to the tuner (e.g. ``config=DCOCConfig(...)`` for the DCOC family).
    """
    from dcoc.targets import get as get_target
    from dcoc.tuners import create, get_tuner

    tg = get_target(target)
    bd = tg.board(board or tg.default_board)
    hw = tg.default_hw(bd) if hw is None else tg.parse_hw(hw, bd.name)
    layer = tg.layer(workload)
    if int(trials) < 1:
        raise DcocError(f"trials must be >= 1, got {trials}")
    task = tg.task(layer, hw)
    tuner_obj = create(tuner, task, seed=seed, **tuner_kwargs)
    m, own = _measurer(measurer, n_workers, tg.name)
    try:
        tuner_obj.tune(int(trials), m, early_stopping=early_stopping, callbacks=callbacks,
                       records=_records(records), resume=resume)
    finally:
        if own:
            m.close()
    name = tuner if isinstance(tuner, str) else get_tuner(tuner).name
    return TaskResult(task.name, name, seed, tuner_obj.best_config, tuner_obj.best_cost,
                      tuner_obj.trials, list(tuner_obj.history), hw.name, task.flop)


# ----------------------------------------------------------------------------- tune
def tune(model, target=DEFAULT_TARGET, board: str | None = None, trials: int = 2000,
         tuner: str = DEFAULT_TUNER, seed: int = 0, work_dir: str | None = None, resume: bool = True,
         hardware=None, input_shapes: dict | None = None, measurer=None,
         n_workers: int | None = None, progress: bool = False, pareto: bool = False,
         **kwargs) -> TuneResult:
    """Tune a whole model.

    Parameters
    ----------
    model: an ONNX path, an ``onnx.ModelProto``, a zoo name (``resnet18``, ``mobilenetv2``,
        ``vgg16``, ``transformer``) or a ``light_*`` model name.
    target: an accelerator target of :func:`dcoc.targets.available` (``"vta"``: co-design on
        the VTA simulator; ``"systolic"``: a weight-stationary systolic array, analytic
        model), or ``"llvm"`` / ``"cuda"`` / a TVM Target / a JSON dict (MetaSchedule with
        the DCOC search strategy).
    board: accelerator targets: the FPGA budget (vta: ``pynq`` (default), ``ultra96``,
        ``zcu104``; systolic: ``arty-a7`` (default), ``kv260``).
    trials: measurement budget (one trial = one simulated or measured schedule).
    tuner: a name of :func:`dcoc.tuners.names` -- ``surrogate`` (the default: the XGBoost
        ensemble's own search, top-k), ``dcoc`` (the paper's agents + confidence sampling),
        ``dcoc-frozen``, or a baseline (``xgb``, ``rl``, ``chameleon``, ``ga``, ``random``,
        ``grid``, ``sweep``) -- or a ``NAME:key=value`` spec (``surrogate:select=confidence``).
        Each name runs the same algorithm per layer, in co-design and in MetaSchedule;
        accelerator co-design of the baselines is joint (``baseline="nested"`` for the
        hardware-outer/software-inner search).
    seed: the one seed.
    work_dir: records (``records.jsonl``) and results go here; default
        :func:`default_work_dir` (the same command resumes the same run).
    resume: reuse the records in ``work_dir`` (nothing recorded is measured again).
    hardware: accelerator targets: a fixed hardware config (or preset/name, e.g. VTA ``pynq``,
        systolic ``ws16x16_i15w15o15``): tune software only.
    input_shapes: ``{input name: shape}`` for models with dynamic input dimensions.
    progress: show progress on stderr (a bar on a terminal, a line every N trials otherwise).
    verbose (keyword, llvm/cuda): TVM's own logs and native warnings on the console instead
        of ``work_dir/logs/tvm.log``.
    pareto: accelerator co-design: also return the throughput/area Pareto front over every
        hardware config the search completed (``result.pareto``, :mod:`dcoc.results.pareto`).
    warm_start (keyword, DCOC co-design): run directories or ``records.jsonl`` files of
        earlier co-design runs of *other* models on the same target/board: their measurements
        pre-fit DCOC's cost models and their best hardware configs are scored first
        (:mod:`dcoc.codesign.prior`).  Not counted as trials, never written to this run's
        records.
    """
    from dcoc.tuners import tuner_kwargs

    tuner_kwargs(tuner)  # a one-line error for an unknown name or setting, before any work
    if int(trials) < 1:
        raise DcocError(f"trials must be >= 1, got {trials}")
    from dcoc.targets import get as get_target
    from dcoc.targets import is_accelerator

    is_acc = is_accelerator(target)
    tname = get_target(target).name if is_acc else None
    if is_acc and board is None:
        board = get_target(tname).default_board
    if pareto and (not is_acc or hardware is not None):
        raise DcocError("pareto=True needs an accelerator co-design (the front is over the hardware "
                        "configs the search completed)")
    label = getattr(model, "name", None) or model
    if work_dir is None:
        hw_name = None
        if is_acc and hardware is not None:
            hw_name = _hw(hardware, str(board).strip().lower() if isinstance(board, str) else None, tname).name
        work_dir = default_work_dir(label, tname if is_acc else _target_label(target),
                                    board if is_acc else None, tuner, seed, hw_name, input_shapes)
    if not is_acc:
        if kwargs.get("warm_start") is not None:
            raise DcocError("warm_start needs an accelerator target (vta co-design with a DCOC tuner)")
        kwargs.pop("warm_start", None)
        from tvm_plugin.metaschedule.tuning import tune_model

        # MetaSchedule's JSONDatabase in work_dir is always reused: refuse to silently resume
        if not resume and os.path.exists(os.path.join(work_dir, "database_tuning_record.json")):
            raise DcocError(f"resume=False: {work_dir} already holds a MetaSchedule database, "
                            "which llvm/cuda tuning always reuses; choose a new work_dir")
        if n_workers is not None and int(n_workers) < 0:
            raise DcocError(f"n_workers (--workers) must be >= 0, got {n_workers}")
        return tune_model(model, target, trials=int(trials), tuner=tuner, seed=seed, work_dir=work_dir,
                          input_shapes=input_shapes, progress=progress, **kwargs)
    kwargs.pop("verbose", None)  # the accelerator path runs no TVM code that logs
    if kwargs.get("warm_start") is not None:
        from dcoc.tuners import DCOC_FAMILY, parse

        if parse(tuner)[0] not in DCOC_FAMILY or hardware is not None:
            raise DcocError("warm_start needs a DCOC tuner doing co-design (no fixed hardware)")
    res = _tune_accelerator(tname, model, board, int(trials), tuner, seed, work_dir, resume,
                           hardware, input_shapes, measurer, n_workers, progress, **kwargs)
    if pareto:  # from the run's records + the resource model (dcoc.results.pareto)
        from dcoc.results.pareto import front_from_run

        res.pareto = front_from_run(res.work_dir)[0]
        res.save(os.path.join(res.work_dir, "result.json"))
    return res


def _target_label(target) -> str:
    if isinstance(target, str):
        return target.split()[0]
    if isinstance(target, dict):
        return str(target.get("kind", "target"))
    return str(getattr(getattr(target, "kind", None), "name", "target"))


def _tune_accelerator(target, model, board, trials, tuner, seed, work_dir, resume, hardware,
                      input_shapes, measurer, n_workers, progress, **kwargs) -> TuneResult:
    from dcoc import codesign as cd
    from dcoc.search.records import Records
    from dcoc.targets import get as get_target
    from tvm_plugin.frontend import model_tasks

    tg = get_target(target)
    bd = tg.board(board)
    hardware = tg.parse_hw(hardware, bd.name)
    if hardware is not None:
        tg.check_fits(hardware, bd)
    from dcoc.codesign.prior import LAYERS_FILE, as_prior, write_layers

    if kwargs.get("warm_start") is not None:  # other models' runs (dcoc.codesign.prior)
        kwargs["prior"] = as_prior(kwargs.pop("warm_start"), tg.name, bd.name)
    kwargs.pop("warm_start", None)
    tasks = model_tasks(model, tg.frontend_target, input_shapes)
    layers, cpu = tg.layers(tasks)
    if not layers:
        raise DcocError(f"model {getattr(tasks, 'model', model)} has no layer {tg.label} can run "
                        f"(CPU operators: {', '.join(sorted({c[0] for c in cpu})) or 'none'})")
    if trials < len(layers):
        raise DcocError(f"model {getattr(tasks, 'model', model)} has {len(layers)} {tg.label} layers and "
                        f"every one needs a schedule: trials must be >= {len(layers)}, got {trials}")
    if measurer is None and n_workers is not None and int(n_workers) < 0:
        raise DcocError(f"n_workers (--workers) must be >= 0 (0 = in-process), got {n_workers}")
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
    session = cd.Session(layers, m, trials, tuner, seed, records, resume, progress=bar, target=tg)
    try:
        if hardware is not None:
            cd.default_schedules(session, hardware)
        driver = cd.make_driver(session, bd, tuner, seed, hardware=hardware, **kwargs)
        session.run(driver)
        if hardware is not None and session.latency(hardware.name) is None:
            missing = [session.layers[li].name for li in driver.missing()]
            if missing:
                raise DcocError(f"layer {missing[0]} has no valid schedule on hardware {hardware.name}"
                                + (f" (nor {len(missing) - 1} other layer(s))" if len(missing) > 1 else ""))
    finally:
        if bar is not None:
            bar.close()
        if own:
            m.close()
    # baseline: the board's reference hardware with default schedules (not counted as trials)
    baseline = _baseline_latency(layers, tg.baseline_hw(bd), tg)
    best_hw = session.best_hw
    if best_hw is None:
        raise DcocError("no complete schedule was found within the trial budget; raise --trials")
    hw = session.hw[best_hw]
    layer_rows = _layer_rows(layers, hw, session)
    # the whole-model latency dcoc run measures: count x time per layer, summed by the same
    # function (for VTA the layers carry their epilogues, so run times the same work)
    from dcoc.vta.report import model_seconds

    latency = model_seconds((layer.count, session.best[(best_hw, li)][0])
                            for li, layer in enumerate(layers))
    res = TuneResult(
        target=tg.name, tuner=tuner, seed=seed, latency_ms=latency * 1e3,
        baseline_latency_ms=baseline * 1e3, trials=session.trials, hardware=hw,
        schedules=session.schedules(best_hw),
        history=[(t, lat * 1e3) for t, lat in session.history if math.isfinite(lat)],
        layers=layer_rows, cpu_layers=[{"layer": n, "kind": k, "count": c} for n, k, c in cpu],
        board=bd.name, method=describe(tuner),
        model=getattr(tasks, "model", str(model)), work_dir=work_dir,
        database_path=records.path, wall_seconds=time.perf_counter() - t0,
        extra={"hardware_explored": len(session.hw), "replayed_trials": session.replayed,
               "resources": tg.resources(hw, bd)},
        input_shapes={k: tuple(int(d) for d in v) for k, v in input_shapes.items()}
        if input_shapes else None,
    )
    res.save(os.path.join(work_dir, "result.json"))
    return res


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
