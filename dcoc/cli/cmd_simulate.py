"""``dcoc simulate``: per-layer VTA timing of a model on the bundled simulator."""
from __future__ import annotations

from dcoc.cli.options import (
    Output,
    add_hardware_argument,
    add_model_arguments,
    add_output_arguments,
    parse_input_shapes,
)
from dcoc.errors import ConfigError

NAME = "simulate"
HELP = "simulate a model's VTA layers (default schedules) and print per-layer cycles and time"
DESCRIPTION = """\
Extract MODEL's tasks for the VTA target, compile every conv2d/dense layer that VTA runs
with its default schedule (or the knobs given with --knobs) for the hardware config, and
simulate it on dcoc's VTA model (cycle-level: load/compute/store modules, dependency
tokens, shared DRAM port; see docs/vta.md).  A layer is a workload with its fused
epilogue (bias, residual add, rounding, clip): a workload that occurs with and without a
residual is two layers (the second named ..._res).  Prints one row per layer (count,
cycles, time, GOPS, roofline = the fraction of the layer's compute/bandwidth bound
reached, epilogue, schedule) -- the table `dcoc run` prints --, the end-to-end
accelerator time (sum of count x time, what `dcoc tune` reports and `dcoc run`
measures), and the layers that stay on the CPU with their counts.

--board picks the FPGA (pynq, ultra96, zcu104): its clock, bus width and default config;
--hardware overrides the config with a preset (pynq, pynq_4x8, ultra96, zcu104) or a name such
as 1x16x16_i8w8a32_15_15_18_17 (clock and bus then come from the board).  The config must
fit the board's BRAM/DSP/LUT budget.

examples:
  dcoc simulate resnet18 --board pynq
  dcoc simulate resnet18 --board pynq --hardware pynq_4x8
  dcoc simulate model.onnx --input-shape input:1,3,224,224 --json -"""

_BOARD_PRESET = {"pynq": "pynq", "ultra96": "ultra96", "zcu104": "zcu104"}


def add_arguments(parser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--board", default="pynq", metavar="BOARD",
                        help="FPGA board: pynq (default), ultra96, zcu104")
    add_hardware_argument(parser, "hardware config: a preset (pynq, pynq_4x8, ultra96, zcu104) or a "
                                  "name like 1x16x16_i8w8a32_15_15_18_17 (default: the board's)",
                          metavar="PRESET_OR_NAME")
    parser.add_argument("--knobs", default=None, metavar="FILE.json",
                        help="JSON {layer name: {knob: value}} (or a `dcoc tune --json` "
                             "result) to use instead of default schedules for some layers")
    add_output_arguments(parser, "the report", progress=False)


def resolve_hw(board_name: str, hw_text: str | None):
    """(Board, HWConfig) for the command-line flags; ConfigError on bad input."""
    from dcoc.targets.vta.hardware import HWConfig, get_board

    board = get_board(board_name)
    hw = HWConfig.parse(hw_text, board=board.name) if hw_text else \
        HWConfig.preset(_BOARD_PRESET[board.name])
    bad = board.violations(hw)
    if bad:
        raise ConfigError(f"{hw.name} does not fit {board.name}: {'; '.join(bad)}")
    return board, hw


def _load_knobs(path: str | None) -> dict:
    if not path:
        return {}
    from dcoc.readfile import read_json

    data = read_json(path, "--knobs file", ConfigError, expect=None)
    if isinstance(data, dict) and isinstance(data.get("schedules"), dict):
        data = data["schedules"]  # a `dcoc tune --json` result
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ConfigError(f"--knobs file {path} must map layer names to knob dicts (or be a "
                          "dcoc tune result JSON)")
    return data


def run(args) -> int:
    from dcoc.targets.vta.report import simulate_model

    out = Output(args)
    board, hw = resolve_hw(args.board, args.hardware)
    knobs = _load_knobs(args.knobs)
    shapes = parse_input_shapes(args.input_shape)
    from tvm_plugin.frontend import model_tasks  # lazy: only this step needs TVM

    tasks = model_tasks(args.model, target="vta", input_shapes=shapes)
    from dcoc.targets.vta.report import model_layers

    names = {t.name for t in tasks} | {ly.name for ly in model_layers(tasks)[0]}
    unknown = sorted(set(knobs) - names)
    if unknown:
        raise ConfigError(f"--knobs names unknown task(s): {', '.join(unknown)}")
    report = simulate_model(tasks, hw, knobs)
    data = report.as_dict()
    data["board"] = board.name
    out.emit_json(data)
    out.print(f"board {board.name} ({board.part})")
    out.print(report.table())
    return 0 if report.valid else 1
