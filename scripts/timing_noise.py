"""A/A check of the MetaSchedule benchmark's model timing: how far apart two timings of
one and the same compiled model land under the benchmark's own procedure.

``scripts.bench_metaschedule`` times the compiled models of a group (and ONNX Runtime) in
alternating rounds (``time_models``) and reports per-group latency ratios.  This script
tunes one model briefly (``--trials``, DCOC, ``--seed``), then times that executable

* stand-alone, ``--repeats`` times in a row (``measure_latency``, median of 3 timings), and
* ``--groups`` times as two "strategies" ``x`` and ``y`` that are the same executable,
  exactly as a benchmark group is timed: ``x / y`` is pure timing noise (1.000 = none).

A per-group ratio of two strategies within this spread says nothing on its own; only the
paired test over groups does.

    python -m scripts.timing_noise --model mobilenetv2 --trials 66     # ~3 min on 2 cores
"""
from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time


def main(argv=None) -> int:
    from scripts.bench_metaschedule import MODELS, load_model, time_models

    ap = argparse.ArgumentParser(prog="python -m scripts.timing_noise",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="mobilenetv2", choices=list(MODELS))
    ap.add_argument("--trials", type=int, default=66, help="tuning budget (a schedule per task)")
    ap.add_argument("--seed", type=int, default=99, help="tuning seed (not an evaluation seed)")
    ap.add_argument("--repeats", type=int, default=6, help="stand-alone timings in a row")
    ap.add_argument("--groups", type=int, default=4, help="A/A groups timed as the benchmark does")
    args = ap.parse_args(argv)

    from tvm_plugin.build import measure_latency, random_inputs
    from tvm_plugin.frontend import resolve_target
    from tvm_plugin.tune import tune_model

    tgt = resolve_target("llvm")
    threads = int(tgt.tvm.attrs.get("num-cores", 1))
    model, src = load_model(args.model)
    inputs = random_inputs(model.input_shapes, model.input_dtypes, seed=0)
    arrays = [inputs[n] for n in model.input_shapes]
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="dcoc-noise-") as wd:
        res = tune_model(model, tgt, trials=args.trials, tuner="dcoc", seed=args.seed,
                         work_dir=wd, progress=False, baseline=False)
    ex = res.executable
    print(f"{args.model}: tuned with {args.trials} trials in {time.time() - t0:.0f} s; "
          f"latency taken right after tuning {res.latency_ms:.4f} ms", flush=True)
    alone = [measure_latency(ex, tgt.tvm, arrays, repeat=3)["median_ms"]
             for _ in range(args.repeats)]
    print(f"stand-alone x{args.repeats}: " + " ".join(f"{v:.4f}" for v in alone)
          + f"  (max / min {max(alone) / min(alone):.3f})", flush=True)
    logs = []
    for i in range(args.groups):
        t = time_models({"x": ex, "y": ex}, tgt.tvm, model, src, inputs, threads)
        logs.append(math.log(t["x"] / t["y"]))
        print(f"A/A group {i}: x {t['x']:.4f} ms, y {t['y']:.4f} ms, x / y {t['x'] / t['y']:.3f}, "
              f"ONNX Runtime {t['onnxruntime']:.4f} ms", flush=True)
    rms = math.exp(math.sqrt(sum(v * v for v in logs) / len(logs)))
    print(f"A/A: x / y spread {min(math.exp(v) for v in logs):.3f}-"
          f"{max(math.exp(v) for v in logs):.3f}, root-mean-square factor {rms:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
