"""Every argument check of the public entry points, once: :func:`dcoc.api.tune`,
:func:`dcoc.api.tune_task` and the ``dcoc tune`` / ``dcoc tune-task`` handlers call these.

Each check raises a one-line :class:`dcoc.errors.DcocError` before any work starts
(``docs/architecture.md``, "Contracts").  ``cli=True`` names the command-line flags
instead of the keyword arguments.
"""
from __future__ import annotations

import functools
import inspect
import os

from dcoc.errors import DcocError


def one_line_keywords(func):
    """``func`` with a one-line :class:`DcocError` instead of Python's TypeError for an
    unknown keyword or a missing / surplus argument (its signature stays explicit)."""
    sig = inspect.signature(func)

    @functools.wraps(func)
    def checked(*args, **kwargs):
        try:
            sig.bind(*args, **kwargs)
        except TypeError as exc:
            raise DcocError(f"{func.__name__}(): {exc}; see help(dcoc.{func.__name__})") from None
        return func(*args, **kwargs)

    return checked


def as_int(value):
    """``value`` as an int when it is an integer (numpy's included, bool not), else None."""
    import operator

    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


#: the most trials one run takes (one simulation or measurement each)
MAX_TRIALS = 1_000_000


def check_int(name: str, value, low: int, high: int | None = None) -> int:
    v = as_int(value)
    if v is None or v < low or (high is not None and v > high):
        rng = f">= {low}" if high is None else f"in {low}..{high}"
        shown = repr(value) if len(repr(value)) <= 40 else f"{repr(value)[:20]}... ({len(repr(value))} digits)"
        raise DcocError(f"{name} must be {rng} (an integer), got {shown}")
    return v


def check_workers(n_workers) -> None:
    """``n_workers``: None (default) or an int in 0 .. 4 x the CPU cores."""
    if n_workers is None:
        return
    cap = 4 * (os.cpu_count() or 1)
    if as_int(n_workers) is None or not 0 <= n_workers <= cap:
        raise DcocError(f"n_workers (--workers) must be an integer in 0..{cap} (0 = in-process, "
                        f"at most 4 x the CPU cores), got {n_workers!r}")


def check_types(board=None, work_dir=None, records=None, input_shapes=None,
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
            and all(as_int(d) is not None and 0 < d < 2**31 for d in v)
            for k, v in input_shapes.items())
        if not ok:
            raise DcocError("input_shapes must map input names to shapes of positive integers "
                            "(below 2**31), "
                            f"e.g. {{'input': (1, 3, 224, 224)}}, got {str(input_shapes)[:80]}")
    if callable(callbacks) or not isinstance(callbacks, (list, tuple)) \
            or not all(callable(c) for c in callbacks):
        raise DcocError("callbacks must be a list of callables")


def check_time_budget(time_budget, cli: bool = False):
    """``time_budget``: None or seconds > 0."""
    if time_budget is None:
        return None
    try:
        ok = float(time_budget) > 0
    except (TypeError, ValueError):
        ok = False
    if not ok:
        shown = f"{time_budget:g}" if isinstance(time_budget, float) else repr(time_budget) \
            if isinstance(time_budget, str) else str(time_budget)
        raise DcocError(f"{'--time-budget' if cli else 'time_budget'} must be > 0 seconds, "
                        f"got {shown}")
    return time_budget


def check_cpu_settings(accelerator: bool, *, time_budget=None, flush_cache: bool = False,
                       runner="local", cli: bool = False) -> None:
    """The settings that only MetaSchedule tuning (llvm/cuda) has, refused on an accelerator."""
    if not accelerator:
        return
    if flush_cache:
        raise DcocError(f"{'--flush-cache' if cli else 'flush_cache'} times CPU kernels "
                        "(target llvm); the VTA simulator has no cache to flush")
    if time_budget is not None:
        if cli:
            raise DcocError("--time-budget bounds MetaSchedule tuning (--target llvm/cuda); an "
                            "accelerator run is bounded by --trials")
        raise DcocError("time_budget bounds MetaSchedule tuning (llvm/cuda targets); an "
                        "accelerator run is bounded by its trials")
    if runner != "local":
        raise DcocError("runner measures MetaSchedule candidates (llvm/cuda targets); an "
                        "accelerator run measures on its simulator")


def check_tune(*, target, tuner, trials, seed, board, work_dir, input_shapes, n_workers,
               time_budget, flush_cache, runner) -> bool:
    """The checks of :func:`dcoc.api.tune` that need no model: whether ``target`` is an
    accelerator."""
    check_types(board=board, work_dir=work_dir, input_shapes=input_shapes)
    if trials is not None:  # None: the default (or, with a time budget on llvm/cuda, no limit)
        check_int("trials", trials, 1, MAX_TRIALS)
    check_int("seed", seed, 0)
    check_workers(n_workers)
    from dcoc.targets import is_accelerator
    from dcoc.tuners import check

    accelerator = is_accelerator(target)
    check(tuner, accelerator)  # a one-line error for an unknown name or setting, before any work
    check_cpu_settings(accelerator, time_budget=time_budget, flush_cache=flush_cache, runner=runner)
    check_time_budget(time_budget)
    return accelerator


def check_model_inputs(module: bool, example_inputs, input_shapes) -> None:
    """A PyTorch module takes ``example_inputs`` (and no ``input_shapes``); nothing else does."""
    if example_inputs is not None and not module:
        raise DcocError("example_inputs is for a PyTorch nn.Module model")
    if module and input_shapes:
        raise DcocError("a PyTorch module takes its input shapes from example_inputs, not input_shapes")


def check_pareto(pareto: bool, accelerator: bool, hardware) -> None:
    if pareto and (not accelerator or hardware is not None):
        raise DcocError("pareto=True needs an accelerator co-design (the front is over the board's hardware "
                        "space, not one fixed config)")


def check_warm_start(warm_start, accelerator: bool, tuner, hardware) -> None:
    """``warm_start`` needs a DCOC-family tuner doing accelerator co-design."""
    if warm_start is None:
        return
    if not accelerator:
        raise DcocError("warm_start needs an accelerator target (vta co-design with a DCOC tuner)")
    from dcoc.tuners import DCOC_FAMILY, parse

    if parse(tuner)[0] not in DCOC_FAMILY or hardware is not None:
        raise DcocError("warm_start needs a DCOC tuner doing co-design (no fixed hardware)")


__all__ = ["as_int", "check_cpu_settings", "check_int", "check_model_inputs", "check_pareto",
           "check_time_budget", "check_tune", "check_types", "check_warm_start",
           "check_workers", "one_line_keywords"]
