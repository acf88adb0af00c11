"""The console and log side of MetaSchedule tuning: TVM's logging kept out of the console,
native stderr to a file, the per-task progress table and its measure callback."""
from __future__ import annotations

import contextlib
import io
import logging
import math
import os
import sys
import time


def say(progress, text: str) -> None:
    if progress is False or progress is None:
        return
    if callable(progress):
        progress(text)
        return
    print(text, file=sys.stderr, flush=True)


def silence_metaschedule(verbose: bool = False):
    """Keep MetaSchedule's INFO chatter (task tables) out of the console unless ``verbose``
    (it still goes to the log files in ``work_dir/logs``)."""
    lg = logging.getLogger("tvm.s_tir.meta_schedule")
    old = lg.level
    lg.setLevel(logging.INFO if verbose else logging.WARNING)
    return lg, old


@contextlib.contextmanager
def native_stderr_to(log_path: str, enabled: bool = True):
    """Send what native code writes to file descriptor 2 (TVM's C++ ``LOG(WARNING)``,
    LLVM, forked builder workers) to ``log_path`` for the duration; Python's
    ``sys.stderr`` keeps writing to the console (progress lines, errors)."""
    if not enabled:
        yield
        return
    try:
        py_on_fd2 = sys.stderr.fileno() == 2
    except (AttributeError, ValueError, OSError):
        py_on_fd2 = False  # e.g. captured by pytest: Python output does not use fd 2
    sys.stderr.flush()
    saved = os.dup(2)
    console = None
    old_stderr = sys.stderr
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        if py_on_fd2:
            console = os.fdopen(os.dup(saved), "w", buffering=1, encoding="utf-8",
                                errors="backslashreplace")
            sys.stderr = console
        os.dup2(log_fd, 2)
        yield
    finally:
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(saved, 2)
        os.close(saved)
        os.close(log_fd)
        if console is not None:
            sys.stderr = old_stderr
            console.close()


@contextlib.contextmanager
def metaschedule_logging_guard():
    """Work around TVM 0.27's ``create_loggers``: it crashes (``'NoneType' object has no
    attribute 'format'``) when the ``tvm.s_tir.meta_schedule`` logger holds an unnamed
    handler (e.g. pytest's log capture).  Unnamed handlers are detached for the call and
    put back afterwards."""
    lg = logging.getLogger("tvm.s_tir.meta_schedule")
    anon = [h for h in lg.handlers if h.get_name() is None]
    for h in anon:
        lg.removeHandler(h)
    try:
        yield
    finally:
        for h in anon:
            if h not in lg.handlers:
                lg.addHandler(h)


class TuningProgress:
    """Per-batch progress line and a final per-task table (peers.md section 5.5)."""

    def __init__(self, tasks, budget: int | None, progress, t0: float, recorded=None,
                 history=None):
        self.tasks = tasks  # list of dict(name, flop, weight)
        rec = recorded or {}
        self.best = [rec.get(i, (0, math.inf))[1] for i in range(len(tasks))]
        self.recorded = [rec.get(i, (0, math.inf))[0] for i in range(len(tasks))]
        self.trials = [0] * len(tasks)
        self.errors = [0] * len(tasks)
        self.budget = budget
        self.progress = progress
        self.t0 = t0
        self.total = 0
        self.offset = sum(self.recorded)  # trials recorded by earlier runs (resume)
        self.history: list = list(history or [])  # [trial, est. model latency ms]

    def n_unmeasured(self) -> int:
        """Tasks without a valid measured (or recorded) schedule."""
        return sum(1 for b in self.best if not math.isfinite(b))

    def estimate_ms(self) -> float:
        """Sum of weight x best kernel latency; inf while a task has no valid schedule."""
        if self.n_unmeasured():
            return math.inf
        return sum(t["weight"] * b for t, b in zip(self.tasks, self.best)) * 1e3

    def on_batch(self, task_id: int, runner_results) -> None:
        from tvm_plugin.metaschedule.strategy import runner_result

        for r in runner_results:
            m = runner_result(r)
            self.trials[task_id] += 1
            self.total += 1
            if m.valid:
                self.best[task_id] = min(self.best[task_id], m.cost)
            else:
                self.errors[task_id] += 1
        est = self.estimate_ms()
        if math.isfinite(est):  # 0-based trial index over the work dir's records, as for vta
            self.history.append([self.offset + self.total - 1, est])
        t = self.tasks[task_id]
        b = self.best[task_id]
        gf = t["flop"] / b / 1e9 if math.isfinite(b) and t["flop"] else 0.0
        est_s = f"{est:9.3f} ms" if math.isfinite(est) else "        -   "
        say(self.progress,
             f"[{self.total:5d}{'' if self.budget is None else f'/{self.budget}'}] "
             f"{time.perf_counter() - self.t0:7.1f}s  "
             f"task {task_id + 1:>2}/{len(self.tasks)} {t['name'][:34]:<34} "
             f"best {b * 1e3 if math.isfinite(b) else float('nan'):9.4f} ms {gf:7.1f} GFLOPS"
             f" | model est. {est_s}")

    def table(self) -> str:
        out = io.StringIO()
        hdr = (f"{'ID':>3} | {'Task':<36} | {'MFLOP':>9} | {'Weight':>6} | {'GFLOPS':>8} | "
               f"{'Latency ms':>10} | {'Wtd. ms':>9} | {'Trials':>6} | {'Errors':>6}")
        out.write(hdr + "\n" + "-" * len(hdr) + "\n")
        for i, (t, b) in enumerate(zip(self.tasks, self.best)):
            ok = math.isfinite(b)
            gf = t["flop"] / b / 1e9 if ok and t["flop"] else 0.0
            out.write(f"{i + 1:>3} | {t['name'][:36]:<36} | {t['flop'] / 1e6:9.2f} | "
                      f"{t['weight']:>6g} | {gf:8.2f} | "
                      + (f"{b * 1e3:10.4f} | {t['weight'] * b * 1e3:9.4f} | " if ok
                         else f"{'-':>10} | {'-':>9} | ")
                      + f"{self.trials[i] + self.recorded[i]:>6} | {self.errors[i]:>6}\n")
        out.write(f"total: {self.total} trials this run" +
                  (f" ({self.offset} recorded before)" if self.offset else "") + "; " +
                  self.estimate_text() + "\n")
        return out.getvalue()

    def estimate_text(self) -> str:
        est = self.estimate_ms()
        if math.isfinite(est):
            return f"estimated model latency {est:.3f} ms (sum of weight x best kernel latency)"
        return (f"no model estimate: {self.n_unmeasured()} of {len(self.tasks)} tasks have no "
                f"measured schedule")


def progress_callback(prog: TuningProgress):
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

    @derived_object
    class ProgressCallback(PyMeasureCallback):
        def apply(self, task_scheduler, task_id, measure_candidates, builder_results,
                  runner_results):
            prog.on_batch(int(task_id), runner_results)

    return ProgressCallback()
