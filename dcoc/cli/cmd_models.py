"""``dcoc models``: the model zoo and the light_* models, with parameter and MAC counts."""
from __future__ import annotations

import os
import time

from dcoc.cli.options import Output, add_output_arguments, fmt_count, render_table

NAME = "models"
HELP = "list the bundled models (zoo + onnx light_* models) with parameters and MACs"
DESCRIPTION = """\
List the models `dcoc tasks`, `dcoc simulate` and `dcoc tune` accept by name.

zoo:        built by dcoc from code on first use (fixed-seed weights, bit-identical on every
            machine) and cached in $DCOC_CACHE/models (default $XDG_CACHE_HOME/dcoc/models, else
            ~/.cache/dcoc/models); a damaged cached file is detected and rebuilt.
onnx-light: real CNN topologies shipped inside the onnx wheel with constant weights (the
            shapes and therefore the tuning workloads are real; the outputs are not).

Parameters include BatchNorm statistics; MACs are those of conv/dense/matmul for the input
shapes shown (batch 1).  No weights are generated to list the zoo.

examples:
  dcoc models
  dcoc models --build          # build (or check) every zoo model now, print cache paths
  dcoc models --json -         # JSON on stdout"""


def add_arguments(parser) -> None:
    parser.add_argument("--build", action="store_true",
                        help="build every zoo model that is not cached yet and show its file")
    parser.add_argument("--zoo-only", action="store_true",
                        help="leave out the light_* models of the onnx wheel")
    add_output_arguments(parser, "the model list", progress=False)


def _shape(shapes: dict) -> str:
    return "; ".join(f"{n}:{'x'.join(str(d) for d in s)}" for n, s in shapes.items())


def run(args) -> int:
    import dcoc_models

    out = Output(args)
    infos = dcoc_models.list_models(include_light=not args.zoo_only)
    files: dict[str, tuple[str, float, float]] = {}
    if args.build:
        for info in infos:
            if info.source != "zoo":
                continue
            t0 = time.perf_counter()
            path = dcoc_models.get(info.name)
            size = os.path.getsize(path)
            if os.path.exists(path + ".data"):
                size += os.path.getsize(path + ".data")
            files[info.name] = (path, size, time.perf_counter() - t0)
    if out.json_path is not None:
        data = [{"name": i.name, "source": i.source, "description": i.description,
                "params": i.params, "macs": i.macs,
                "input_shapes": {k: list(v) for k, v in i.input_shapes.items()},
                **({"path": files[i.name][0], "bytes": files[i.name][1]}
                   if i.name in files else {})} for i in infos]
        out.emit_json(data)
        if out.json_to_stdout:
            return 0
    rows = [[i.name, i.source, _shape(i.input_shapes), fmt_count(i.params),
             fmt_count(i.macs), i.description] for i in infos]
    out.print(render_table(["model", "source", "input", "params", "MACs", "description"], rows,
                       right={3, 4}))
    if files:
        out.print()
        for name, (path, size, secs) in files.items():
            out.print(f"{name}: {path} ({size / 2**20:.1f} MiB, {secs:.1f} s)")
    else:
        out.print(f"\nzoo cache: {dcoc_models.cache_dir()}")
    return 0
