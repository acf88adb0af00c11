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
    _check_workers(n_workers)
    from dcoc.targets import get

    return get(target).measurer(n_workers=n_workers), True


def _check_workers(n_workers) -> None:
    """``n_workers``: None (default) or an int in 0 .. 4 x the CPU cores."""
    if n_workers is None:
        return
    cap = 4 * (os.cpu_count() or 1)
    if _as_int(n_workers) is None or not 0 <= n_workers <= cap:
        raise DcocError(f"n_workers (--workers) must be an integer in 0..{cap} (0 = in-process, "
                        f"at most 4 x the CPU cores), got {n_workers!r}")


def _as_int(value):
    """``value`` as an int when it is an integer (numpy's included, bool not), else None."""
    import operator

    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _check_int(name: str, value, low: int) -> int:
    v = _as_int(value)
    if v is None or v < low:
        raise DcocError(f"{name} must be >= {low} (an integer), got {value!r}")
    return v


def _check_types(board=None, work_dir=None, records=None, input_shapes=None,
                 callbacks=()) -> None:
    """One-line DcocErrors for arguments of the wrong type (before any work)."""
    if board is not None and not isinstance(board, str):
        raise DcocError(f"board must be a board name (a string), got {type(board).__name__}")
    if work_dir is not None and not isinstance(work_dir, (str, os.PathLike)):
        raise DcocError(f"work_dir must be a path, got {type(work_dir).__name__}")
    from dcoc.search.records import Records

    if records is not None and not isinstance(records, (str, os.PathLike, Records)):
        raise DcocError(f"records must be a JSONL path or a Records object, got "
                        f"{type(records).__name__}")
    if input_shapes is not None:
        ok = isinstance(input_shapes, dict) and all(
            isinstance(k, str) and isinstance(v, (list, tuple))
            and all(_as_int(d) is not None and d > 0 for d in v) for k, v in input_shapes.items())
        if not ok:
            raise DcocError("input_shapes must map input names to shapes of positive integers, "
                            f"e.g. {{'input': (1, 3, 224, 224)}}, got {str(input_shapes)[:80]}")
    if callable(callbacks) or not isinstance(callbacks, (list, tuple)) \
            or not all(callable(c) for c in callbacks):
        raise DcocError("callbacks must be a list of callables")


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
    workload: the target's workload (VTA: a :class:`dcoc.targets.vta.Conv2DWorkload` /
        :class:`~dcoc.targets.vta.DenseWorkload`, a :class:`dcoc.tasks.Task` of kind conv2d / dense,
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
    measurer: default: the target's measurer (VTA: :class:`dcoc.targets.vta.VTASimMeasurer`)
        with ``n_workers`` processes.
    target: an accelerator target of :func:`dcoc.targets.available` (``vta``, ``systolic``).
    board: the board whose clock/bus a hardware name takes (default: the target's default).
    tuner_kwargs: passed to the tuner (e.g. ``config=DCOCConfig(...)`` for the DCOC family);
        ``wait=True``: another process appending to the ``records`` path holds its lock: wait
        for it instead of a :class:`dcoc.workdir.WorkDirBusy` error.
    """
    call = dict(locals())  # the arguments as given (a locked rerun passes them on)
    from dcoc.targets import get as get_target
    from dcoc.tuners import create, get_tuner

    _check_types(board=board, records=records, callbacks=callbacks)
    tg = get_target(target)
    bd = tg.board(board or tg.default_board)
    hw = tg.default_hw(bd) if hw is None else tg.parse_hw(hw, bd.name)
    layer = tg.layer(workload)
    _check_int("trials", trials, 1)
    _check_int("seed", seed, 0)
    if early_stopping is not None:
        _check_int("early_stopping", early_stopping, 1)
    _check_workers(n_workers)
    task = tg.task(layer, hw)
    wait = bool(tuner_kwargs.pop("wait", False))
    if isinstance(records, (str, os.PathLike)):
        from dcoc.workdir import held_here, lock_records

        if not held_here(records):  # one run at a time per records file
            with lock_records(records, wait):
                extra = call.pop("tuner_kwargs")
                return tune_task(**call, **extra)
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
         example_inputs=None, **kwargs) -> TuneResult:
    """Tune a whole model.

    Parameters
    ----------
    model: an ONNX path, an ``onnx.ModelProto``, a zoo name (``resnet18``, ``mobilenetv2``,
        ``vgg16``, ``transformer``), a ``light_*`` model name, or a PyTorch ``nn.Module``
        (with ``example_inputs``; exported to ONNX in the work dir,
        :mod:`tvm_plugin.frontend.pytorch`).
    example_inputs: a PyTorch module's example input tensor(s) (a tensor or a tuple): their
        shapes are the model's input shapes.
    target: an accelerator target of :func:`dcoc.targets.available` (``"vta"``: co-design on
        the VTA simulator; ``"systolic"``: a weight-stationary systolic array, tile-stream
        simulator), or ``"llvm"`` / ``"cuda"`` / a TVM Target / a JSON dict (MetaSchedule with
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
    wait (keyword): another process tuning in ``work_dir`` holds its lock
        (:func:`dcoc.workdir.lock_work_dir`): wait for it instead of a
        :class:`dcoc.workdir.WorkDirBusy` error.
    pareto: accelerator co-design: also return the throughput/area Pareto front over the
        board's whole feasible hardware space (``result.pareto``; each design ``measured``
        by the search or ``estimated`` with transferred/default schedules;
        :func:`dcoc.results.pareto.estimate_points`).
    warm_start (keyword, DCOC co-design): run directories or ``records.jsonl`` files of
        earlier co-design runs of *other* models on the same target/board: their measurements
        pre-fit DCOC's cost models and their best hardware configs are scored first
        (:mod:`dcoc.codesign.prior`).  Not counted as trials, never written to this run's
        records.
    """
    call = dict(locals())  # the arguments as given (a locked rerun passes them on)
    _check_types(board=board, work_dir=work_dir, input_shapes=input_shapes)
    _check_int("trials", trials, 1)
    _check_int("seed", seed, 0)
    _check_workers(n_workers)
    from dcoc.targets import get as get_target
    from dcoc.targets import is_accelerator
    from dcoc.tuners import check

    is_acc = is_accelerator(target)
    check(tuner, is_acc)  # a one-line error for an unknown name or setting, before any work
    if is_acc and kwargs.get("time_budget") is not None:
        raise DcocError("time_budget bounds MetaSchedule tuning (llvm/cuda targets); an "
                        "accelerator run is bounded by its trials")
    tname = get_target(target).name if is_acc else None
    if is_acc and board is None:
        board = get_target(tname).default_board
    if pareto and (not is_acc or hardware is not None):
        raise DcocError("pareto=True needs an accelerator co-design (the front is over the board's hardware "
                        "space, not one fixed config)")
    module = _is_torch_module(model)
    if example_inputs is not None and not module:
        raise DcocError("example_inputs is for a PyTorch nn.Module model")
    if module and input_shapes:
        raise DcocError("a PyTorch module takes its input shapes from example_inputs, not input_shapes")
    label = type(model).__name__ if module else (getattr(model, "name", None) or model)
    if work_dir is None:
        hw_name = None
        if is_acc and hardware is not None:
            hw_name = _hw(hardware, str(board).strip().lower() if isinstance(board, str) else None, tname).name
        work_dir = default_work_dir(label, tname if is_acc else _target_label(target),
                                    board if is_acc else None, tuner, seed, hw_name, input_shapes)
    from dcoc.workdir import held_here, lock_work_dir

    if not held_here(work_dir):  # one run at a time per work dir (wait=True: queue up)
        with lock_work_dir(work_dir, wait=bool(kwargs.pop("wait", False))):
            extra = call.pop("kwargs")
            return tune(**{**call, "work_dir": work_dir}, **extra)
    kwargs.pop("wait", None)
    if module:  # to an ONNX file in the work dir: the model every later step loads
        from tvm_plugin.frontend.pytorch import module_to_onnx

        model = module_to_onnx(model, example_inputs, os.path.join(work_dir, _slug(label) + ".onnx"))
    model_path = _model_path(model)
    if not is_acc:
        from tvm_plugin.frontend.targets import require_device

        require_device(target)  # a GPU target without a GPU: one line, before any work
        if kwargs.get("warm_start") is not None:
            raise DcocError("warm_start needs an accelerator target (vta co-design with a DCOC tuner)")
        kwargs.pop("warm_start", None)
        from tvm_plugin.metaschedule.tuning import tune_model

        # MetaSchedule's JSONDatabase in work_dir is always reused: refuse to silently resume
        if not resume and os.path.exists(os.path.join(work_dir, "database_tuning_record.json")):
            raise DcocError(f"resume=False: {work_dir} already holds a MetaSchedule database, "
                            "which llvm/cuda tuning always reuses; choose a new work_dir")
        res = tune_model(model, target, trials=int(trials), tuner=tuner, seed=seed, work_dir=work_dir,
                         input_shapes=input_shapes, progress=progress, **kwargs)
        if model_path or input_shapes:  # what export / a later load need to find the model again
            res.model_path = model_path
            res.input_shapes = res.input_shapes or ({k: tuple(int(d) for d in v) for k, v in input_shapes.items()}
                                                    if input_shapes else None)
            res.save(os.path.join(res.work_dir, "result.json"))
        return res
    kwargs.pop("verbose", None)  # the accelerator path runs no TVM code that logs
    if kwargs.get("warm_start") is not None:
        from dcoc.tuners import DCOC_FAMILY, parse

        if parse(tuner)[0] not in DCOC_FAMILY or hardware is not None:
            raise DcocError("warm_start needs a DCOC tuner doing co-design (no fixed hardware)")
    res = _tune_accelerator(tname, model, board, int(trials), tuner, seed, work_dir, resume,
                           hardware, input_shapes, measurer, n_workers, progress,
                           model_path=model_path, **kwargs)
    if pareto:  # the board's whole hardware space: searched + estimated (dcoc.results.pareto)
        from dcoc.results.pareto import evaluate_run

        m, own = _measurer(measurer, n_workers, tname)
        try:
            ev = evaluate_run(res.work_dir, measurer=m)
        finally:
            if own:
                m.close()
        res.pareto = ev["front"]
        res.extra["pareto"] = ev["stats"]
        res.save(os.path.join(res.work_dir, "result.json"))
    return res


def _is_torch_module(model) -> bool:
    """True for a PyTorch ``nn.Module`` (torch is only looked at when already imported)."""
    import sys

    torch = sys.modules.get("torch")
    return torch is not None and isinstance(model, torch.nn.Module)


def _model_path(model) -> str | None:
    """How to load ``model`` again: an existing file's absolute path, a name as given, or
    None (an in-memory ONNX model)."""
    if isinstance(model, (str, os.PathLike)):
        p = os.fspath(model)
        return os.path.abspath(p) if os.path.isfile(p) else p
    return None


def _target_label(target) -> str:
    if isinstance(target, str):
        return target.split()[0]
    if isinstance(target, dict):
        return str(target.get("kind", "target"))
    return str(getattr(getattr(target, "kind", None), "name", "target"))


def _tune_accelerator(target, model, board, trials, tuner, seed, work_dir, resume, hardware,
                      input_shapes, measurer, n_workers, progress, model_path=None,
                      **kwargs) -> TuneResult:
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
    cpu_est = _cpu_estimate(tasks, cpu)
    # the whole-model latency dcoc run measures: count x time per layer, summed by the same
    # function (for VTA the layers carry their epilogues, so run times the same work)
    from dcoc.targets.vta.report import model_seconds

    latency = model_seconds((layer.count, session.best[(best_hw, li)][0])
                            for li, layer in enumerate(layers))
    res = TuneResult(
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
               "resources": tg.resources(hw, bd)},
        input_shapes={k: tuple(int(d) for d in v) for k, v in input_shapes.items()}
        if input_shapes else None,
        model_path=model_path,
    )
    res.save(os.path.join(work_dir, "result.json"))
    return res


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
        return estimate_cpu_layers(tasks)
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
