"""MetaSchedule benchmark: the default dcoc strategy vs EvolutionarySearch vs ReplayTrace on llvm.

Workloads (real tasks from the zoo, through :mod:`tvm_plugin.frontend`):

* kernels: ``conv3x3`` = ResNet-18 ``conv2d_56x56_64x64_k3s1`` (fused with the folded
  BatchNorm + ReLU); ``conv1x1`` = ResNet-18's downsample ``conv2d_56x56_64x128_k1s2``;
  ``matmul`` = the transformer's FFN output projection ``dense_m128_n256_k1024``;
* whole models, tuned end to end with :func:`tvm_plugin.metaschedule.tuning.tune_model` (the
  budget is the model's, spread over its tasks by MetaSchedule's gradient task scheduler),
  compiled, measured, and compared with ONNX Runtime on the same cores: ``small_cnn``
  (alias ``model``: a small ResNet-style CNN, 1x3x32x32, deterministic weights),
  ``transformer`` (the zoo's, sequence 128), ``mobilenetv2`` and ``resnet18`` at
  1x3x64x64 -- the tuning set every MetaSchedule setting of dcoc was chosen on -- and,
  held out (``HELD_OUT_MODELS``, never used to choose anything): ``squeezenet`` and
  ``shufflenet``, the onnx wheel's ``light_squeezenet`` (SqueezeNet 1.0, 30 tasks) and
  ``light_shufflenet`` (39 tasks) at their own 1x3x224x224.

Every strategy gets the same budget (``--budgets``), the same builder (one
:class:`~tvm_plugin.metaschedule.build.PersistentBuilder` for the whole run) and the same
runner (``LocalRunner``, ``number=3, repeat=1, min_repeat_ms=10``), and the same candidates
per batch (kernels: 16; whole models: ``tune_model``'s, 16 or fewer so that the first round
gives every task a batch).  Strategies:

* ``surrogate`` (the default) or any dcoc tuner name or spec (``dcoc``,
  ``surrogate:select=confidence``): :class:`~tvm_plugin.metaschedule.strategy.TunerStrategy`
  with MetaSchedule's cost model ``"random"``, i.e. unused: the tuner's own ensemble learns
  on knob features; below ``ProgramConfig.few_trials_below`` (32) trials per task a
  DCOC-family tuner also ranks with program features shared by the model's tasks
  (docs/method.md, "MetaSchedule");
* ``evolutionary``: ``EvolutionarySearch(population_size=P)`` with MetaSchedule's XGBoost
  cost model (``P`` = 512, MetaSchedule's default; 128 in ``--quick``);
* ``replay-trace``: ``ReplayTrace`` (random decisions, no model).

Reported per run: the best schedule's latency (after the strategies of one
(workload, budget, seed) have run, their best records are rebuilt exactly as the builder
built them and timed in 3 alternating rounds -- each a median of 3 timings of >= 50 ms --
keeping each kernel's fastest round, so machine load hits all strategies alike and the
optimistic minimum of noisy tuning-time measurements favours no one), the best latency
seen during tuning (``best_tuning_ms``), and the tuning wall time.  For a model: the
compiled models of every strategy and ONNX Runtime timed in alternating rounds
(``time_evaluator``, median of 3 timings of >= 100 ms, fastest of 3 rounds).

What decides: latency and tuning-time ratios vs EvolutionarySearch per (workload, budget,
seed), measured in one run, aggregated as a geometric mean (< 1 = faster / less time);
for whole models also a paired Wilcoxon test on the log latencies over (model, seed) at
each budget, and the DCOC-family variants paired against ``surrogate`` the same way.

    python -m scripts.bench_metaschedule --budgets 64 256 1000 --seeds 0 1 2 \\
        --workloads small_cnn transformer mobilenetv2 resnet18
    python -m scripts.bench_metaschedule --quick          # a few minutes
    python -m scripts.bench_metaschedule --out rows.jsonl ...; --summarize rows.jsonl  # read-out

``run(...)`` returns the rows (one dict per run) and can write them as JSON lines
(``--out``) as they finish, so a long run can be inspected (and is not lost) midway.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time

from dcoc.search.msdb import FAILED_SECS

WORKLOADS = {
    "conv3x3": ("resnet18", "conv2d_56x56_64x64_k3s1"),
    "conv1x1": ("resnet18", "conv2d_56x56_64x128_k1s2"),
    "matmul": ("transformer", "dense_m128_n256_k1024"),
}
#: the default dcoc tuner (:data:`dcoc.tuners.DEFAULT`) and MetaSchedule's own strategies
DEFAULT = "surrogate"
STRATEGIES = (DEFAULT, "evolutionary", "replay-trace")
#: whole models: (zoo name or builder, input shapes or None)
MODELS = {
    "small_cnn": ("small_cnn", None),
    "transformer": ("transformer", None),
    "mobilenetv2": ("mobilenetv2", {"input": (1, 3, 64, 64)}),
    "resnet18": ("resnet18", {"input": (1, 3, 64, 64)}),
    # held out: never used to choose a setting of any strategy; the onnx wheel's real
    # topologies at their own 224x224 input
    "squeezenet": ("light_squeezenet", None),
    "shufflenet": ("light_shufflenet", None),
}
#: the models every MetaSchedule setting of dcoc was chosen on
TUNING_MODELS = ("small_cnn", "transformer", "mobilenetv2", "resnet18")
#: the evaluation set, disjoint from TUNING_MODELS
HELD_OUT_MODELS = ("squeezenet", "shufflenet")
ALIASES = {"model": "small_cnn"}


def run_dir_name(workload: str, budget: int, seed: int, strategy: str) -> str:
    """The name of one run's directory under ``--work-dir`` (``:`` of a spec becomes ``_``)."""
    return f"{workload}_{budget}_{seed}_{strategy.replace(':', '_')}"


def small_cnn():
    """The benchmark's whole model: a small ResNet-style CNN (ONNX ModelProto)."""
    from dcoc_models._netbuilder import NetBuilder

    nb = NetBuilder("small_cnn", seed=7)
    x = nb.input("input", (1, 3, 32, 32))
    x = nb.relu(nb.bn(nb.conv(x, 16, 3, name="stem"), name="stem_bn"), name="stem_relu")
    y = nb.relu(nb.bn(nb.conv(x, 16, 3, name="b1c1"), name="b1bn1"), name="b1r1")
    y = nb.bn(nb.conv(y, 16, 3, name="b1c2"), name="b1bn2")
    x = nb.relu(nb.add(y, x, name="b1add"), name="b1r2")
    x = nb.relu(nb.bn(nb.conv(x, 32, 3, stride=2, name="down"), name="down_bn"), name="down_r")
    x = nb.flatten(nb.global_avgpool(x, name="gap"), name="flat")
    nb.output(nb.gemm(x, 10, name="fc"))
    return nb.model()


def _task(model: str, name: str, target):
    from tvm_plugin.frontend import model_tasks

    tl = model_tasks(model, target, weights=False)
    return tl.by_name(name)


def _strategy(spec: str, seed: int, population: int):
    """(strategy, cost model) of a kernel run: a dcoc tuner name or spec, ``evolutionary``
    or ``replay-trace`` (:func:`tvm_plugin.metaschedule.strategy.make_strategy`)."""
    from tvm_plugin.metaschedule.strategy import make_strategy

    return make_strategy(spec, seed=seed, population=population)


def load_model(name: str):
    """(Model with weights, ONNX source for ONNX Runtime) of a benchmark model."""
    from dcoc.runtime.compare import ort_source
    from tvm_plugin.frontend import load

    src, shapes = MODELS[name]
    if src == "small_cnn":
        proto = small_cnn()
        return load(proto, name="small_cnn"), proto.SerializeToString()
    model = load(src, input_shapes=shapes, name=name)
    return model, ort_source(model)


def _best_kernel(db, mod, target):
    """(time_evaluator function, args) of the best record of ``mod`` in ``db``, or None."""
    import numpy as np
    import tvm
    from tvm.s_tir import Schedule

    from tvm_plugin.metaschedule.build import kernel_evaluator

    if not db.has_workload(mod):
        return None
    top = db.get_top_k(db.commit_workload(mod), 1)
    if not len(top):
        return None
    rec = top[0]
    sch = Schedule(mod)
    rec.trace.apply_to_schedule(sch, remove_postproc=False)
    dev = tvm.device("cpu" if target.kind.name == "llvm" else target.kind.name, 0)
    rng = np.random.default_rng(0)
    args = []
    for info in rec.args_info:
        shape = [int(s) for s in info.shape]
        dt = str(info.dtype)
        a = rng.standard_normal(shape).astype(dt) if "float" in dt else np.zeros(shape, dt)
        args.append(tvm.runtime.tensor(a, dev))
    return kernel_evaluator(sch.mod, target, dev, min_repeat_ms=50), args  # as the builder built it


def _remeasure_interleaved(kernels: dict, rounds: int = 3) -> dict:
    """Time several kernels in alternating rounds (so that machine load hits all of them
    alike): {name: min over rounds of the median of 3 timings of >= 50 ms, in ms}."""
    import numpy as np

    best = {k: math.inf for k in kernels}
    for _ in range(rounds):
        for k, fa in kernels.items():
            if fa is None:
                continue
            f, args = fa
            best[k] = min(best[k], float(np.median([float(x) for x in f(*args).results])) * 1e3)
    return {k: (v if math.isfinite(v) else math.nan) for k, v in best.items()}


def _tune_task(task, strategy, cost_model, budget, seed, builder, runner, work_dir,
               per_iter) -> dict:
    from tvm.s_tir import meta_schedule as ms

    from tvm_plugin.metaschedule.progress import metaschedule_logging_guard, silence_metaschedule
    from tvm_plugin.metaschedule.trace_space import make_tune_context

    et = task.ms_task
    os.makedirs(work_dir, exist_ok=True)
    lg, old = silence_metaschedule()
    try:
        with metaschedule_logging_guard():
            from tvm.s_tir.meta_schedule.logging import get_loggers_from_work_dir

            logger = get_loggers_from_work_dir(work_dir, [et.task_name])[0]
        ctx = make_tune_context(et.dispatched[0], et.target, et.task_name, strategy=strategy,
                                seed=seed, logger=logger)
        db = ms.database.MemoryDatabase()
        t0 = time.perf_counter()
        ms.tune_tasks(tasks=[ctx], task_weights=[1.0], work_dir=work_dir,
                      max_trials_global=budget, num_trials_per_iter=per_iter, builder=builder,
                      runner=runner, database=db, cost_model=cost_model)
        wall = time.perf_counter() - t0
    finally:
        lg.setLevel(old)
    recs = [r for r in db.get_all_tuning_records()]
    secs = [sum(float(x) for x in r.run_secs) / len(r.run_secs) for r in recs if r.run_secs]
    valid = [s for s in secs if s < FAILED_SECS]
    return {"trials": len(recs), "valid": len(valid),
            "best_tuning_ms": min(valid) * 1e3 if valid else math.nan,
            "tune_s": wall, "_kernel": _best_kernel(db, ctx.mod, et.target)}


def time_models(exes: dict, target, model, onnx_src, inputs: dict, threads: int,
                rounds: int = 3) -> dict:
    """Compiled models and ONNX Runtime timed in alternating rounds (median of 3 timings
    of >= 100 ms each; fastest round kept): {strategy or "onnxruntime": ms}. ``onnx_src``:
    the ONNX model as a path or serialized bytes (what ONNX Runtime loads)."""
    from tvm_plugin.metaschedule.build import measure_latency

    arrays = [inputs[n] for n in model.input_shapes]
    best = {k: math.inf for k in list(exes) + ["onnxruntime"]}
    for _ in range(rounds):
        for k, ex in exes.items():
            best[k] = min(best[k], measure_latency(ex, target, arrays, repeat=3)["median_ms"])
        best["onnxruntime"] = min(best["onnxruntime"], _ort_latency(onnx_src, inputs, threads, 3))
    return best


def _ort_latency(model_src, inputs: dict, threads: int, repeat: int = 7) -> float:
    """ONNX Runtime latency (ms) of a model (path or serialized bytes) on ``threads`` threads."""
    import numpy as np
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    s = ort.InferenceSession(model_src, so,
                             providers=["CPUExecutionProvider"])
    for _ in range(5):
        s.run(None, inputs)
    ts = []
    for _ in range(repeat):
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < 0.1:
            s.run(None, inputs)
            n += 1
        ts.append((time.perf_counter() - t0) / n)
    return float(np.median(ts)) * 1e3


def run(budgets=(64, 256), seeds=(0, 1, 2), workloads=("conv3x3", "conv1x1", "matmul", "model"),
        strategies=STRATEGIES, quick: bool = False, population: int | None = None,
        per_iter: int = 16, work_root: str | None = None, out: str | None = None,
        log=print, flush_cache: bool = False) -> list[dict]:
    """Run the benchmark; returns one row per (workload, budget, seed, strategy) plus the
    ONNX Runtime row of the model.  ``quick``: budget 16, seed 0, population 128.
    ``flush_cache``: every strategy's candidates are timed cold -- one run per repeat, each
    after MetaSchedule's ``enable_cpu_cache_flush`` (``number=1, repeat=10,
    min_repeat_ms=0``), as a kernel meets its weights inside a whole model; rows say
    ``flush_cache: true`` and ``evaluator``."""
    from scripts.bench_sw import check_specs
    from tvm_plugin.frontend import resolve_target
    from tvm_plugin.metaschedule.build import close_builder, evaluator_config, make_builder, make_runner
    from tvm_plugin.metaschedule.strategy import MS_STRATEGIES
    from tvm_plugin.metaschedule.tuning import tune_model

    check_specs([s for s in strategies if s not in MS_STRATEGIES])  # a typo fails before tuning

    if quick:
        budgets, seeds = (16,), (0,)
        population = population or 128
    population = population or 512
    target = resolve_target("llvm")
    root = work_root or tempfile.mkdtemp(prefix="dcoc-bench-ms-")
    builder = make_builder("persistent")
    cold = evaluator_config(flush_cache=True) if flush_cache else None
    runner = make_runner("local", evaluator=cold)  # the kernel workloads' (whole models:
    # tune_model builds its own, cold with flush_cache, and its work dir records the timing)
    rows: list[dict] = []
    sink = open(out, "a", encoding="utf-8") if out else None

    def emit(row):
        rows.append(row)
        if sink:
            sink.write(json.dumps(row) + "\n")
            sink.flush()
        log(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                     for k, v in row.items()))

    try:
        workloads = tuple(dict.fromkeys(ALIASES.get(w, w) for w in workloads))
        tasks = {w: _task(*WORKLOADS[w], target) for w in workloads if w in WORKLOADS}
        models: dict = {}
        threads = int(target.tvm.attrs.get("num-cores", 1))
        for w in workloads:
            if w in MODELS:
                from tvm_plugin.metaschedule.build import random_inputs

                model, src = load_model(w)
                inputs = random_inputs(model.input_shapes, model.input_dtypes, seed=0)
                models[w] = (model, src, inputs)
                emit(  # a first, stand-alone ONNX Runtime timing (each group re-times it)
                    {"workload": w, "task": model.name, "strategy": "onnxruntime",
                     "best_ms": _ort_latency(src, inputs, threads), "threads": threads})
        # budget outermost: a long run that is stopped early still has complete budgets
        for budget in budgets:
            for w in workloads:
                for seed in seeds:
                    group = []
                    for s in strategies:
                        wd = os.path.join(root, run_dir_name(w, budget, seed, s))
                        if w in models:
                            model = models[w][0]
                            res = tune_model(model, target, trials=budget, tuner=s, seed=seed,
                                             population=population, work_dir=wd,
                                             builder=builder, flush_cache=flush_cache,
                                             progress=False, baseline=(s == strategies[0]))
                            row = {"workload": w, "task": model.name, "budget": budget,
                                   "seed": seed, "strategy": s,
                                   "trials": res.extra["new_trials"],
                                   "tune_model_ms": res.latency_ms,
                                   "tune_s": res.extra["tuning_seconds"],
                                   "_exe": res.executable}
                            if s == strategies[0]:
                                row["untuned_ms"] = res.baseline_latency_ms
                        else:
                            task = tasks[w]
                            strat, cm = _strategy(s, seed, population)
                            row = {"workload": w, "task": task.name, "budget": budget,
                                   "seed": seed, "strategy": s,
                                   **_tune_task(task, strat, cm, budget, seed, builder, runner,
                                                wd, per_iter)}
                        if flush_cache:
                            row["flush_cache"] = True
                            row["evaluator"] = (f"number={cold.number},repeat={cold.repeat},"
                                                f"min_repeat_ms={cold.min_repeat_ms}")
                        group.append(row)
                        if not work_root:  # --work-dir: keep each run's database + result
                            shutil.rmtree(wd, ignore_errors=True)
                    kernels = {r["strategy"]: r.pop("_kernel") for r in group if "_kernel" in r}
                    if kernels:
                        for r, (k, v) in zip(group, _remeasure_interleaved(kernels).items()):
                            r["best_ms"] = v
                    exes = {r["strategy"]: r.pop("_exe") for r in group if "_exe" in r}
                    if exes:
                        model, src, inputs = models[w]
                        t = time_models(exes, target.tvm, model, src, inputs, threads)
                        for r in group:
                            r["best_ms"], r["ort_ms"] = t[r["strategy"]], t["onnxruntime"]
                    for r in group:
                        emit(r)
    finally:
        close_builder(builder)
        if sink:
            sink.close()
        if not work_root:
            shutil.rmtree(root, ignore_errors=True)
    return rows


def _gmean(xs):
    xs = [x for x in xs if x and math.isfinite(x) and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan


def summarize(rows: list[dict], ref: str = "evolutionary") -> str:
    """Markdown table: per (workload, budget, strategy) medians over seeds, and the
    per-seed ratios vs ``ref`` (geometric mean)."""
    by = {}
    for r in rows:
        if r.get("strategy") == "onnxruntime":
            continue
        by.setdefault((r["workload"], r["budget"]), {}).setdefault(r["strategy"], []).append(r)
    lines = ["| workload | budget | strategy | best ms (median) | tuning s (median) | "
             f"latency / {ref} | time / {ref} |", "|---|---|---|---|---|---|---|"]
    for (w, b), per in by.items():
        refs = {r["seed"]: r for r in per.get(ref, [])}
        for s, rs in per.items():
            lat = statistics.median([r["best_ms"] for r in rs])
            ts = statistics.median([r["tune_s"] for r in rs])
            lr = _gmean([r["best_ms"] / refs[r["seed"]]["best_ms"] for r in rs if r["seed"] in refs])
            tr = _gmean([r["tune_s"] / refs[r["seed"]]["tune_s"] for r in rs if r["seed"] in refs])
            lines.append(f"| {w} | {b} | {s} | {lat:.4f} | {ts:.1f} | {lr:.3f} | {tr:.3f} |")
    ort = {ALIASES.get(r["workload"], r["workload"]): r for r in rows
           if r.get("strategy") == "onnxruntime"}
    for (w, b), per in by.items():
        w = ALIASES.get(w, w)
        if w not in MODELS:
            continue
        lines.append("")
        if w in ort:
            lines.append(f"{w}: ONNX Runtime (CPU EP, {ort[w].get('threads')} threads), stand-alone "
                         f"timing at start {ort[w]['best_ms']:.4f} ms (compare the alongside timings)")
        for s, rs in per.items():
            lat = statistics.median([r["best_ms"] for r in rs])
            ratio = _gmean([r["best_ms"] / r["ort_ms"] for r in rs if r.get("ort_ms")])
            ort_here = statistics.median([r["ort_ms"] for r in rs if r.get("ort_ms")] or [math.nan])
            lines.append(f"{w} tuned with {s} at budget {b}: {lat:.4f} ms vs ONNX Runtime "
                         f"{ort_here:.4f} ms timed alongside = {ratio:.2f}x (geomean over seeds)")
        unt = [r["untuned_ms"] for rs in per.values() for r in rs if "untuned_ms" in r]
        if unt:
            lines.append(f"{w} untuned (same pipeline, no schedules): {statistics.median(unt):.3f} ms")
    lines += model_ratios(rows, ref)
    lines += model_ablations(rows)
    return "\n".join(lines)


def _model_runs(rows: list[dict]) -> dict:
    """Whole-model rows as {budget: {strategy: {(model, seed): row}}} (ONNX Runtime's out):
    the pairing behind every model read-out."""
    per: dict = {}
    for r in rows:
        w = ALIASES.get(r.get("workload"), r.get("workload"))
        if w in MODELS and r.get("strategy") != "onnxruntime":
            per.setdefault(r["budget"], {}).setdefault(r["strategy"], {})[(w, r["seed"])] = r
    return per


def _vs_ref(per: dict, ref: str):
    """Per budget (sorted) and strategy other than ``ref`` sharing (model, seed) pairs with it
    (``per`` from :func:`_model_runs`): ``(budget, strategy, keys, refs, runs, latency
    ratio, paired test on the log latencies)``."""
    from dcoc.stats import ratio_test

    for b in sorted(per):
        refs = per[b].get(ref, {})
        for s, rs in per[b].items():
            keys = [k for k in rs if k in refs]
            if s != ref and keys:
                lr, t = ratio_test([refs[k]["best_ms"] for k in keys],
                                   [rs[k]["best_ms"] for k in keys])
                yield b, s, keys, refs, rs, lr, t


def model_ratios(rows: list[dict], ref: str = "evolutionary") -> list[str]:
    """Per budget and strategy, over every (model, seed): geomean latency and tuning-time
    ratios vs ``ref`` and a paired Wilcoxon test on the logs of the latencies (the test of
    the geomean ratio)."""
    from dcoc.stats import fmt_p

    per = _model_runs(rows)
    if not per:
        return []
    out = ["", f"Whole models, every (model, seed) pair, vs {ref} (geomean ratio, < 1: faster / "
           "less tuning time; Wilcoxon on the log latencies):", "",
           "| budget | strategy | pairs | latency ratio | time ratio | better/worse | p |",
           "|---|---|---|---|---|---|---|"]
    for b, s, keys, refs, rs, lr, t in _vs_ref(per, ref):
        tr = _gmean([rs[k]["tune_s"] / refs[k]["tune_s"] for k in keys])
        out.append(f"| {b} | {s} | {len(keys)} | {lr:.3f} | {tr:.3f} | {t.better}/{t.worse} | "
                   f"{fmt_p(t.p)} |")
    return out


def _dcoc_family(spec: str) -> bool:
    from dcoc.tuners import DCOC_FAMILY, parse

    return parse(spec)[0] in DCOC_FAMILY


def model_ablations(rows: list[dict], ref: str = DEFAULT) -> list[str]:
    """DCOC-family variants (``dcoc``, ``dcoc-frozen``, ``surrogate:...`` specs) against
    ``ref`` on the same (model, seed) pairs: geomean latency ratio and a paired Wilcoxon test
    on the logs of the latencies, per budget."""
    from dcoc.stats import fmt_p

    out = []
    for b, s, keys, _, _, lr, t in _vs_ref(_model_runs(rows), ref):
        if not _dcoc_family(s):
            continue
        if not out:
            out = ["", f"DCOC-family variants on whole models, vs {ref} (ratio < 1: the variant "
                   "is faster):", "", "| budget | variant | pairs | latency ratio | "
                   "better/worse | p |", "|---|---|---|---|---|---|"]
        out.append(f"| {b} | {s} | {len(keys)} | {lr:.3f} | {t.better}/{t.worse} | {fmt_p(t.p)} |")
    return out


def model_pairs(rows: list[dict], strategy: str, ref: str = DEFAULT) -> list[str]:
    """One line per (model, budget, seed) run by both ``strategy`` and ``ref``: both
    latencies, tuning times and the latency ratio (the groups behind the geomeans)."""
    groups = {}
    for b, per in _model_runs(rows).items():
        rs, refs = per.get(strategy, {}), per.get(ref, {})
        for w, seed in rs:
            if (w, seed) in refs:
                groups[(w, b, seed)] = rs[(w, seed)], refs[(w, seed)]
    out = [f"| {w} | {b} | {seed} | {r['best_ms']:.4f} | {a['best_ms']:.4f} | "
           f"{a['best_ms'] / r['best_ms']:.3f} | {r['tune_s']:.0f} / {a['tune_s']:.0f} |"
           for (w, b, seed), (a, r) in sorted(groups.items())]
    if out:
        out = ["", f"Per group, {strategy} (A) vs {ref} (B):", "",
               "| model | budget | seed | B ms | A ms | A / B | tuning s (B / A) |",
               "|---|---|---|---|---|---|---|"] + out
    return out


def read_rows(paths) -> list[dict]:
    """The rows of one or more ``--out`` files (JSON lines)."""
    from dcoc.errors import DcocError

    rows = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                rows += [json.loads(ln) for ln in f if ln.strip()]
        except OSError as e:
            raise DcocError(f"cannot read benchmark rows from {path}: {e.strerror}") from None
        except json.JSONDecodeError as e:
            raise DcocError(f"{path} is not a JSON-lines file of benchmark rows: {e}") from None
    for r in rows:
        if not isinstance(r, dict) or not {"workload", "strategy", "best_ms"} <= set(r):
            raise DcocError("not a benchmark row (needs workload, strategy and best_ms): "
                            f"{json.dumps(r)[:80]}")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.bench_metaschedule",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--budgets", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--workloads", nargs="+", default=list(WORKLOADS) + ["small_cnn"],
                    choices=list(WORKLOADS) + list(MODELS) + list(ALIASES),
                    help="kernels (conv3x3 conv1x1 matmul) and whole models: the tuning set "
                         "small_cnn transformer mobilenetv2 resnet18 (model = small_cnn) and "
                         "the held-out squeezenet shufflenet (224x224, never used to choose "
                         "a hyperparameter)")
    ap.add_argument("--strategies", nargs="+", default=list(STRATEGIES),
                    help="evolutionary, replay-trace, or any dcoc tuner name or NAME:key=value "
                         f"spec (surrogate, dcoc, surrogate:select=confidence); default: "
                         f"{' '.join(STRATEGIES)}")
    ap.add_argument("--population", type=int, default=None,
                    help="EvolutionarySearch population (default 512; 128 with --quick)")
    ap.add_argument("--quick", action="store_true", help="budget 16, seed 0 (a few minutes)")
    ap.add_argument("--flush-cache", action="store_true",
                    help="time every strategy's candidates cold: one run per repeat, each after "
                         "flushing the CPU caches (number=1, repeat=10, min_repeat_ms=0), as a "
                         "kernel meets its weights inside a whole model; rows carry "
                         "flush_cache: true and the evaluator -- give such runs their own --out "
                         "and --work-dir")
    ap.add_argument("--out", default=None, help="append rows as JSON lines to this file")
    ap.add_argument("--work-dir", default=None,
                    help="keep every run's work directory (database, result.json, logs) here, "
                         "one per (workload, budget, seed, strategy)")
    ap.add_argument("--summarize", nargs="+", metavar="FILE", default=None,
                    help="run nothing: print the read-out of earlier --out files (ratios vs "
                         f"--ref, DCOC-family variants vs {DEFAULT} with Wilcoxon p, and "
                         "per-group ratios)")
    ap.add_argument("--ref", default="evolutionary",
                    help="with --summarize: the reference strategy of the ratios")
    args = ap.parse_args(argv)
    if args.summarize:
        from dcoc.errors import DcocError

        try:
            rows = read_rows(args.summarize)
        except DcocError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(summarize(rows, ref=args.ref))
        for s in dict.fromkeys(r["strategy"] for r in rows if r.get("strategy") != "onnxruntime"):
            refs = [args.ref] + ([DEFAULT] if _dcoc_family(s) and s != DEFAULT else [])
            for ref in dict.fromkeys(r for r in refs if r != s):
                pairs = model_pairs(rows, s, ref)
                if pairs:
                    print("\n".join(pairs))
        return 0
    rows = run(args.budgets, args.seeds, tuple(args.workloads), tuple(args.strategies),
               quick=args.quick, population=args.population, out=args.out,
               work_root=args.work_dir, log=lambda s: print(s, file=sys.stderr, flush=True),
               flush_cache=args.flush_cache)
    print(summarize(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
