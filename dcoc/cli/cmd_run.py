"""``dcoc run``: the whole quantized model on the tuned accelerator (simulated)."""
from __future__ import annotations

import sys
import warnings

from dcoc.cli.options import (
    Output,
    add_hardware_argument,
    add_model_arguments,
    add_output_arguments,
    parse_input_shapes,
)

NAME = "run"
HELP = "run a model quantized to int8 on the (tuned) VTA simulator, bit-exact vs an integer reference"
DESCRIPTION = """\
Quantize MODEL post-training to int8 (power-of-two scales, so requantization is VTA's
shift/clip epilogue), partition it BYOC-style (FuseOpsByPattern), compile every layer VTA
runs with its tuned schedule for the hardware and execute it on dcoc's VTA simulator
(functional and timed); the other operators run on the CPU through TVM, all in one TVM
executable.  Then compare the outputs bit for bit with an independent integer reference
of the same quantized graph, and with the float model under ONNX Runtime (cosine
similarity, top-1 agreement).  See docs/run.md.

--inputs FILE.npz holds one array per model input, of the input's shape or with a leading
axis of N samples.  --calibration FILE.npz likewise (default: random inputs, with a
warning).  --schedules takes the result JSON of `dcoc tune` (its hardware is used unless
--hardware is given) or a {task: knobs} map; layers without a schedule use the default
heuristic.  Exit status 1 when the simulator's outputs are not bit-exact.

examples:
  dcoc tune resnet18 --board pynq --trials 500 --json result.json
  dcoc run resnet18 --schedules result.json --inputs x.npz
  dcoc run resnet18 --hardware pynq --input-shape input:1,3,64,64 --json -
  dcoc run light_squeezenet --hardware 1x8x32_i8w8a32_15_15_17_17"""


def add_arguments(parser) -> None:
    add_model_arguments(parser)
    add_hardware_argument(parser, "hardware config: a preset (pynq, pynq_4x8, ultra96, zcu104) or a "
                                  "name like 1x16x16_i8w8a32_15_15_18_17 (default: the one in "
                                  "--schedules, else pynq)")
    parser.add_argument("--board", default="pynq", metavar="BOARD",
                        help="board whose clock and bus a config name without them gets "
                             "(default pynq)")
    parser.add_argument("--schedules", default=None, metavar="RESULT.json",
                        help="`dcoc tune` result JSON, or {task name: knobs}")
    parser.add_argument("--inputs", default=None, metavar="X.npz",
                        help="model inputs (default: one random sample, with a warning)")
    parser.add_argument("--calibration", default=None, metavar="CAL.npz",
                        help="calibration inputs (default: random, with a warning)")
    parser.add_argument("--calibration-samples", type=int, default=4, metavar="N",
                        help="random calibration samples when --calibration is not given "
                             "(default 4)")
    parser.add_argument("--seed", type=int, default=0, help="seed of generated inputs")
    add_output_arguments(parser, "{bit_exact, cosine, top1_agreement, latency_ms, layers, cpu_layers, ...}",
                         verbose_help="more detail: the stages as they run, also when stderr is not a "
                                      "terminal (default: only on a terminal)")


def run(args) -> int:
    from dcoc.api.run import run as run_model
    from dcoc.errors import DcocError
    from dcoc.runtime.quantize import CalibrationWarning

    out = Output(args)  # checks a --json PATH before the run
    if args.calibration_samples < 1:
        raise DcocError(f"--calibration-samples must be >= 1, got {args.calibration_samples}")
    shapes = parse_input_shapes(args.input_shape)
    def show(message, category, filename, lineno, file=None, line=None):
        print(f"dcoc: warning: {message}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.simplefilter("always", CalibrationWarning)
        warnings.showwarning = show
        res = run_model(args.model, hardware=args.hardware, schedules=args.schedules,
                        inputs=args.inputs, calibration=args.calibration,
                        calibration_samples=args.calibration_samples, board=args.board,
                        input_shapes=shapes, seed=args.seed,
                        progress=out.verbose or (out.progress and sys.stderr.isatty()))
    out.emit_json(res.to_json(), default=_default)
    out.print(res.summary())
    if out.json_path not in (None, "-"):
        out.print(f"result written to {out.json_path}")
    return 0 if res.bit_exact else 1


def _default(o):
    if hasattr(o, "item"):
        return o.item()
    return str(o)
