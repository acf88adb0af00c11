"""Where a compiled model's CPU time goes, beside ONNX Runtime on the same threads.

    python -m scripts.profile_cpu resnet18 --trials 64        # tune, then profile
    python -m scripts.profile_cpu resnet18 --work-dir wd      # a tuned work dir's database
    python -m scripts.profile_cpu small_cnn                   # untuned

MODEL: a benchmark model of ``scripts.bench_metaschedule`` (``small_cnn``, ``transformer``,
``mobilenetv2`` and ``resnet18`` at 1x3x64x64, ``squeezenet``, ``shufflenet``), a zoo
name or an ONNX path.  Prints (and ``--json`` saves) the tables of
:func:`tvm_plugin.metaschedule.profile.format_profile`: the gap to ONNX Runtime split into
tuned kernels, untuned kernels and glue; per operator kind; the top fused functions;
ONNX Runtime's operators.
"""
from __future__ import annotations

import argparse
import json
import sys


def load(name: str):
    """(Model, ONNX source for ONNX Runtime) of a benchmark name, zoo name or ONNX path."""
    from scripts.bench_metaschedule import MODELS, load_model

    if name in MODELS:
        return load_model(name)
    from dcoc.runtime.compare import ort_source
    from tvm_plugin.frontend import load as load_onnx

    model = load_onnx(name)
    return model, ort_source(model)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.profile_cpu", description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--trials", type=int, default=None, help="tune with this many trials first")
    ap.add_argument("--work-dir", default=None,
                    help="tuning work dir (with --trials: tune into it; alone: use its database)")
    ap.add_argument("--tuner", default=None, help="tuner for --trials (default: dcoc's default)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None,
                    help="TVM runtime and ONNX Runtime threads (default: physical cores)")
    ap.add_argument("--no-prepack", action="store_true", help="compile without weight prepacking")
    ap.add_argument("--runs", type=int, default=20, help="profiled runs per side")
    ap.add_argument("--top", type=int, default=15, help="TVM functions listed")
    ap.add_argument("--json", default=None, help="write the profile as JSON here")
    a = ap.parse_args(argv)
    from dcoc.errors import DcocError

    if a.trials is not None and a.trials < 1:
        print("profile_cpu: --trials must be >= 1", file=sys.stderr)
        return 2
    try:
        from tvm_plugin.metaschedule.profile import format_profile, profile_model

        model, src = load(a.model)
        prof = profile_model(model, src, "llvm", trials=a.trials, work_dir=a.work_dir,
                             tuner=a.tuner, seed=a.seed, threads=a.threads,
                             prepack=False if a.no_prepack else None, runs=a.runs)
    except DcocError as exc:
        print(f"profile_cpu: {exc}", file=sys.stderr)
        return 2
    print(format_profile(prof, top=a.top))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(prof, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
