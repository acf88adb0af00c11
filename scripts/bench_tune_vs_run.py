"""Tune vs run: the latency ``dcoc tune`` reports against the one ``dcoc run`` measures.

For each model and board: tune (seed 0, a small trial budget), then run the quantized
model with the tuned result on the functional simulator, and report both latencies, their
relative difference, and how many layers ``run`` had to re-tile ("adapted"; should be 0).
The two must agree within 1% (docs/run.md, "Tuned vs measured").

    python -m scripts.bench_tune_vs_run                         # resnet18, mobilenetv2, mini_resnet
    python -m scripts.bench_tune_vs_run --models mini_resnet --boards pynq --trials 60
    python -m scripts.bench_tune_vs_run --input-size 64          # smaller inputs: faster

``mini_resnet`` is a small ResNet (two residual stages; the 3x3 conv of each stage occurs
with and without a residual add) built here.  Importable without side effects:
:func:`run` returns the rows.
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import warnings

MODELS = ("resnet18", "mobilenetv2", "mini_resnet")
BOARDS = ("pynq", "ultra96")


def mini_resnet(image: int = 32, seed: int = 3):
    """A small ResNet as an ONNX ModelProto: stem conv (CPU), two BasicBlocks at 32
    channels (conv1 plain, conv2 + residual), a stride-2 block to 64 channels with a 1x1
    projection, one more block, global average pool, fc 64 -> 10."""
    from dcoc_models._netbuilder import NetBuilder

    nb = NetBuilder("mini_resnet", seed=seed)
    x = nb.input("input", (1, 3, image, image))
    x = nb.relu(nb.bn(nb.conv(x, 32, 3, name="stem"), name="stem_bn"), name="stem_relu")
    cin = 32
    for i, (c, s) in enumerate([(32, 1), (32, 1), (64, 2), (64, 1)]):
        y = nb.relu(nb.bn(nb.conv(x, c, 3, stride=s, name=f"b{i}c1"), name=f"b{i}bn1"),
                    name=f"b{i}r1")
        y = nb.bn(nb.conv(y, c, 3, name=f"b{i}c2"), name=f"b{i}bn2")
        idn = x
        if s != 1 or cin != c:
            idn = nb.bn(nb.conv(x, c, 1, stride=s, name=f"b{i}down"), name=f"b{i}dbn")
        x = nb.relu(nb.add(y, idn, name=f"b{i}add"), name=f"b{i}r2")
        cin = c
    x = nb.flatten(nb.global_avgpool(x, name="gap"), name="flat")
    nb.output(nb.gemm(x, 10, name="fc"))
    return nb.model()


def _model_source(name: str, tmp: str):
    if name == "mini_resnet":
        import onnx

        path = os.path.join(tmp, "mini_resnet.onnx")
        if not os.path.exists(path):
            onnx.save(mini_resnet(), path)
        return path
    return name


def tune_vs_run(model: str, board: str, trials: int, seed: int = 0,
                input_shapes: dict | None = None, work_root: str | None = None) -> dict:
    """One row: tune ``model`` on ``board``, run the result, compare the latencies."""
    from dcoc.api import tune
    from dcoc.api.run import run

    tmp = work_root or tempfile.mkdtemp(prefix="dcoc_tvr_")
    src = _model_source(model, tmp)
    wd = os.path.join(tmp, f"{model}_{board}_t{trials}_s{seed}")
    t0 = time.perf_counter()
    res = tune(src, board=board, trials=trials, seed=seed, work_dir=wd, resume=False,
               input_shapes=input_shapes, n_workers=0)
    t_tune = time.perf_counter() - t0
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rr = run(src, schedules=res, board=board, input_shapes=input_shapes, seed=seed,
                 compare_float=False)
    t_run = time.perf_counter() - t0
    adapted = getattr(rr, "adapted", None)
    if adapted is None:  # a RunResult without the field: count the layers marked with a note
        adapted = sorted({ly["layer"] for ly in rr.layers if ly.get("note")})
    return {"model": model, "board": board, "trials": trials, "seed": seed,
            "hardware": res.hardware.name, "tune_ms": res.latency_ms, "run_ms": rr.latency_ms,
            "diff_pct": (rr.latency_ms / res.latency_ms - 1) * 100,
            "adapted": len(adapted), "bit_exact": bool(rr.bit_exact),
            "wall_tune_s": round(t_tune, 1), "wall_run_s": round(t_run, 1)}


def run(models=MODELS, boards=BOARDS, trials: int = 100, seed: int = 0,
        input_size: int | None = None) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="dcoc_tvr_") as tmp:
        for m in models:
            for b in boards:
                shapes = None
                if input_size and m != "mini_resnet":
                    shapes = {"input": (1, 3, input_size, input_size)}
                rows.append(tune_vs_run(m, b, trials, seed, shapes, tmp))
    return rows


def table(rows: list[dict]) -> str:
    from dcoc.results.text import render_table

    return render_table(
        ["model", "board", "trials", "tune ms", "run ms", "run vs tune", "adapted", "bit-exact"],
        [[r["model"], r["board"], r["trials"], f"{r['tune_ms']:.3f}", f"{r['run_ms']:.3f}",
          f"{round(r['diff_pct'], 2) + 0.0:+.2f}%", r["adapted"], "yes" if r["bit_exact"] else "NO"]
         for r in rows], {2, 3, 4, 5, 6})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--boards", default=",".join(BOARDS))
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--input-size", type=int, default=None,
                    help="zoo models' input height = width (default: their own, 224)")
    ap.add_argument("--json", default=None, help="also write the rows to this file")
    a = ap.parse_args(argv)
    rows = run(a.models.split(","), a.boards.split(","), a.trials, a.seed, a.input_size)
    print(table(rows))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    bad = [r for r in rows if abs(r["diff_pct"]) > 1.0 or r["adapted"] or not r["bit_exact"]]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
