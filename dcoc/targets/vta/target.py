"""The VTA-style accelerator as a :class:`~dcoc.targets.base.Target`.

A thin wrapper over :mod:`dcoc.targets.vta` (hardware model, compiler, simulator, boards) and
:mod:`dcoc.targets.vta.spaces` (spaces, tasks, features): nothing here re-implements them.
"""
from __future__ import annotations

import re

from dcoc.errors import ConfigError, DcocError
from dcoc.targets.base import Layer, Target

#: software slots of the joint state; dense knobs map onto the conv slots
SLOTS = ("tile_h", "tile_w", "tile_ci", "tile_co", "oc_nthread", "h_nthread")
DENSE_SLOT = {"tile_b": 0, "tile_ci": 2, "tile_co": 3, "oc_nthread": 4}


class VTATarget(Target):
    name = "vta"
    label = "VTA"
    description = "VTA-style accelerator (GEMM core + SRAM buffers) on the cycle-level simulator"
    default_board = "pynq"
    core_knobs = ("batch", "block_in", "block_out")
    fit_knobs = ("log_uop_buff", "log_inp_buff", "log_wgt_buff", "log_acc_buff")
    slots = SLOTS
    shrink_order = ("tile_h", "tile_co", "tile_w", "tile_b", "tile_ci")
    #: conv2d with any groups (depthwise included), dense, batch_matmul
    task_kinds = ("conv2d", "depthwise_conv2d", "grouped_conv2d", "dense", "batch_matmul")

    def __init__(self, extended_cores: bool = False):
        from dcoc.targets.vta import BOARDS
        from dcoc.targets.vta.spaces import HW_KNOBS

        self.boards = BOARDS
        self.hw_knobs = HW_KNOBS
        #: also search cores stock tvm-vta cannot build (non-square, relaxed encoding)
        self.extended_cores = bool(extended_cores)
        self.options = {"extended_cores": True} if extended_cores else {}

    def with_options(self, **options):
        """This target with ``extended_cores=True``: the hardware space also holds the
        cores stock tvm-vta cannot build (:mod:`dcoc.targets.vta.buildflow`)."""
        unknown = set(options) - {"extended_cores"}
        if unknown:
            raise ConfigError(f"the vta target has no option {sorted(unknown)[0]!r}")
        return type(self)(**options)

    # ---------------------------------------------------------------- hardware
    def board(self, name):
        if isinstance(name, str):
            from dcoc.targets.vta import get_board

            return get_board(name)
        return name

    def hw_space(self, board, ranges=None):
        from dcoc.targets.vta.spaces import hw_space

        return hw_space(self.board(board), ranges, self.extended_cores)

    def make_hw(self, values, board):
        from dcoc.targets.vta.spaces import make_hw

        return make_hw(values, self.board(board))

    def baseline_hw(self, board):
        from dcoc.targets.vta import HWConfig

        bd = self.board(board)
        return HWConfig.preset("pynq") if bd.name == "pynq" else bd.default_hw()

    def baseline_label(self, board) -> str:
        bd = self.board(board)
        return ("pynq preset" if bd.name == "pynq" else f"{bd.name} default 1x16x16") + " + default schedules"

    def parse_hw(self, spec, board=None):
        """An HWConfig from a config, a preset or config name (a name without
        ``_<F>MHz_bus<B>`` takes ``board``'s clock and bus), or a dict of HWConfig fields."""
        from dcoc.targets.vta import HWConfig

        if spec is None or isinstance(spec, HWConfig):
            return spec
        if isinstance(spec, str):
            bname = board if isinstance(board, str) or board is None else board.name
            return HWConfig.parse(spec, board=bname)
        if isinstance(spec, dict):
            try:
                return HWConfig(**{k: v for k, v in spec.items() if k != "name"})
            except TypeError as exc:
                raise ConfigError(f"bad hardware dict: {exc}") from None
        raise ConfigError(f"hardware must be an HWConfig, a preset/config name or a dict, "
                          f"got {type(spec).__name__}")

    def violations(self, hw, board):
        bd = self.board(board)
        problems = list(bd.violations(hw))
        if hw.freq_mhz > bd.freq_mhz:
            problems.append(f"clock {hw.freq_mhz:g} MHz > {bd.freq_mhz:g} MHz of {bd.name}")
        elif hw.freq_mhz > bd.clock_mhz(hw):
            problems.append(f"clock {hw.freq_mhz:g} MHz > {bd.clock_mhz(hw):g} MHz this core "
                            f"achieves on {bd.name} (adder-tree depth / LUT congestion model)")
        if hw.bus_bytes > bd.bus_bytes:
            problems.append(f"{hw.bus_bytes}-byte bus > {bd.bus_bytes}-byte bus of {bd.name}")
        return problems

    def resources(self, hw, board):
        return self.board(board).usage(hw)

    def layer_from_record(self, row: dict):
        return layer_from_record(row, self)

    def budgets(self, board):
        from dcoc.targets.vta.hardware import LUT_UTIL_LIMIT

        bd = self.board(board)
        return {"bram36": (bd.bram_usable, f"usable BRAM36 ({bd.bram_usable})"),
                "dsp": (bd.dsp, f"DSP ({bd.dsp})"),
                "lut": (LUT_UTIL_LIMIT * bd.lut, f"{int(LUT_UTIL_LIMIT * 100)}% LUT ({int(LUT_UTIL_LIMIT * bd.lut)})")}

    config_file_description = ("the hardware config in VTA's own format (the keys of tvm-vta's "
                               "`config/vta_config.json`)")

    def export_config(self, hw, board):
        return hw.to_vta_config(target=self.board(board).name)

    def hw_from_export(self, config, report):
        from dcoc.targets.vta import HWConfig

        return HWConfig.from_vta_config(config, freq_mhz=float(report["clock_mhz"]),
                                        bus_bytes=int(report["bus_bytes"]))

    def hardware_report(self, hw):
        return {"core": {"batch": hw.batch, "block_in": hw.block_in, "block_out": hw.block_out,
                         "peak_gops": hw.peak_gops},
                "buffers": {b: {"bytes": 1 << getattr(hw, f"log_{b}_buff"),
                                "depth": getattr(hw, f"{b}_depth")}
                            for b in ("uop", "inp", "wgt", "acc")},
                "bram36_per_buffer": hw.bram36()}

    def build_notes(self, hw, board):
        from dcoc.targets.vta.buildflow import build_notes

        return build_notes(hw, self.board(board).name)

    def hw_notes(self, hw, board):
        from dcoc.targets.vta.buildflow import hw_notes

        return hw_notes(hw, self.board(board).name)

    def describe_hw(self, hw, board):
        r = self.resources(hw, board)
        return (f"{hw.name}  ({hw.batch}x{hw.block_in}x{hw.block_out} GEMM, {hw.freq_mhz:g} MHz, "
                f"{hw.bus_bytes} B bus; BRAM36 {r.get('bram36', '?')}, DSP {r.get('dsp', '?')}, "
                f"LUT {r.get('lut', '?')} on {self.board(board).name})")

    # ---------------------------------------------------------------- workloads
    def layers(self, tasks):
        """One layer per task and fused epilogue (:func:`dcoc.targets.vta.report.model_layers`):
        the residual and the plain occurrences of a workload are tuned separately."""
        from dcoc.targets.vta.report import model_layers

        mls, cpu_tasks = model_layers(tasks)
        layers = [Layer(ml.name, ml.workload, ml.count, ml.kind, epilogue=ml.epilogue)
                  for ml in mls]
        cpu = [(t.name, t.kind, int(t.weight)) for t, _ in cpu_tasks]
        for t in getattr(tasks, "cpu_ops", []) or []:
            cpu.append((t.name, t.kind, int(t.weight)))
        return layers, cpu

    def cpu_reason(self, task):
        """A VTA task whose workload VTA cannot run: why; else the frontend's reason."""
        from dcoc.errors import WorkloadError
        from dcoc.targets.vta import workload_from_task

        if getattr(task, "device", None) == "vta":
            try:
                workload_from_task(task)
            except WorkloadError as exc:
                return str(exc)
        return super().cpu_reason(task)

    def workload(self, spec):
        from dcoc.targets.vta import Conv2DWorkload, DenseWorkload, workload_from_task

        if isinstance(spec, (Conv2DWorkload, DenseWorkload)):
            return spec
        if isinstance(spec, str):
            return parse_workload(spec)
        return workload_from_task(spec)[0]

    def layer(self, workload, name=None):
        from dcoc.targets.vta import Conv2DWorkload

        wl = self.workload(workload)
        return Layer(name or wl.name, wl, 1, "conv2d" if isinstance(wl, Conv2DWorkload) else "dense",
                     epilogue="default")

    def model_epilogue(self):
        """A model layer's epilogue when none is given: bias, rounding, shift, clip
        (:data:`dcoc.targets.vta.report.MODEL_EPILOGUE`; :meth:`layers` gives each its own)."""
        from dcoc.targets.vta.report import MODEL_EPILOGUE

        return MODEL_EPILOGUE

    def describe_epilogue(self, layer):
        from dcoc.targets.vta.report import epilogue_label

        return epilogue_label(_epilogue(layer.epilogue))

    def workload_key(self, layer):
        from dcoc.targets.vta.spaces import workload_key

        return workload_key(layer.workload, layer.epilogue)

    def sw_space(self, layer, hw):
        from dcoc.targets.vta.spaces import sw_space

        return sw_space(layer.workload, hw, layer.epilogue)

    def task(self, layer, hw):
        from dcoc.targets.vta.spaces import vta_task

        return vta_task(layer.workload, hw, name=layer.name, epilogue=layer.epilogue)

    def default_schedule(self, layer, hw, space=None):
        """:func:`dcoc.targets.vta.default_knobs` for the layer's epilogue if it is valid in
        ``space`` (None otherwise)."""
        from dcoc.targets.vta import default_knobs

        space = space if space is not None else self.sw_space(layer, hw)
        try:
            k = default_knobs(layer.workload, hw, epilogue=_epilogue(layer.epilogue))
        except DcocError:
            return None
        return k if k is not None and space.is_valid(k) else None

    def ideal_seconds(self, layer, hw):
        from dcoc.targets.timing import compute_seconds

        return compute_seconds(layer.workload.macs, hw.batch * hw.block_in * hw.block_out, hw.freq_mhz)

    def bound_seconds(self, layer, hw):
        """GEMM micro-ops of the padded work (batch, input and output channels rounded up
        to BATCH, BLOCK_IN, BLOCK_OUT; a grouped conv: an output block's packed group's
        input blocks), one per cycle."""
        from dcoc.targets.vta.grouped import conv_groups
        from dcoc.targets.vta.workloads import _ceil

        wl = layer.workload
        if layer.kind == "dense":
            n, ci, co, rest = wl.batch, wl.in_features, wl.out_features, 1
            blocks = _ceil(ci, hw.block_in) * _ceil(co, hw.block_out)
        else:
            n, gb = wl.batch, conv_groups(wl, hw.block_in, hw.block_out)
            rest = wl.out_height * wl.out_width * wl.kernel[0] * wl.kernel[1]
            blocks = gb.ci_blocks * gb.out_blocks
        uops = _ceil(n, hw.batch) * blocks * rest
        return uops / (hw.freq_mhz * 1e6)

    def memory_seconds(self, layer, hw):
        """The bytes the layer must move (int8 input, weights, output; int32 bias and
        residual when its epilogue has them) at the memory port's ``bus_bytes`` per cycle
        (:func:`dcoc.targets.vta.report.roofline_seconds`)."""
        from dcoc.targets.vta.report import roofline_seconds

        return roofline_seconds(layer.workload, hw, _epilogue(layer.epilogue),
                                memory_only=True)

    def measurer(self, n_workers=None):
        from dcoc.targets.vta import VTASimMeasurer

        return VTASimMeasurer(n_workers=n_workers)

    # ------------------------------------------------------- co-design helpers
    def slot(self, layer, knob):
        return DENSE_SLOT[knob] if layer.kind == "dense" else SLOTS.index(knob)

    def sw_union(self, layer, hs):
        from types import SimpleNamespace

        from dcoc.targets.vta import space_for

        u = [set() for _ in SLOTS]
        for b in hs.knob("batch").choices:
            for bi in hs.knob("block_in").choices:
                for bo in hs.knob("block_out").choices:
                    core = SimpleNamespace(batch=b, block_in=bi, block_out=bo)
                    for name, vals in space_for(layer.workload, core).items():
                        u[self.slot(layer, name)].update(vals)
        return [tuple(sorted(s)) if s else (1,) for s in u]

    def descriptor(self, layer):
        wl = layer.workload
        if layer.kind == "conv2d":
            return [wl.height, wl.width, wl.in_channels, wl.out_channels, wl.kernel[0], wl.kernel[1],
                    wl.stride[0], wl.out_height, wl.out_width]
        return [wl.batch, 1, wl.in_features, wl.out_features, 1, 1, 1, wl.batch, 1]

    def transfer(self, layer, src_hw, src_knobs, hw, space):
        out = super().transfer(layer, src_hw, src_knobs, hw, space) if src_knobs is not None else None
        if out is None:  # the heuristic for the layer's epilogue
            from dcoc.targets.vta import default_knobs

            try:
                out = default_knobs(layer.workload, hw, epilogue=_epilogue(layer.epilogue))
            except DcocError:
                out = None
        return out

    def scale_knob(self, name, value, src_hw, hw):
        if name == "tile_ci":
            return value * src_hw.block_in / hw.block_in
        if name == "tile_co":
            return value * src_hw.block_out / hw.block_out
        if name == "tile_b":
            return value * src_hw.batch / hw.batch
        return value


def _epilogue(ep):
    from dcoc.targets.vta.spaces import _epilogue as norm

    return norm(ep)


def parse_workload(spec: str):
    """A workload from a CLI spec: ``C2`` (ResNet-18 layer), ``conv:H,W,CI,CO,K,S,P`` or
    ``dense:N,K,M`` (rows, in features, out features)."""
    import dcoc.targets.vta as vta
    from dcoc.errors import DcocError
    from dcoc.targets.catalogue import RESNET18_CONV
    from dcoc.targets.vta.catalogue import resnet18_layer

    s = spec.strip()
    if s.upper() in RESNET18_CONV:
        return resnet18_layer(s)
    kind, _, nums = s.partition(":")
    try:
        v = [int(x) for x in nums.replace("x", ",").split(",") if x.strip()]
    except ValueError:
        v = []
    if kind == "conv" and len(v) == 7:
        h, w, ci, co, k, st, p = v
        return vta.Conv2DWorkload(batch=1, height=h, width=w, in_channels=ci, out_channels=co,
                                  kernel=(k, k), stride=(st, st), padding=(p, p))
    if kind == "dense" and len(v) == 3:
        return vta.DenseWorkload(batch=v[0], in_features=v[1], out_features=v[2])
    raise DcocError(f"bad workload '{spec}': expected C2..C11, conv:H,W,CI,CO,K,S,P or dense:N,K,M")


_CONV = re.compile(r"conv2d_(\d+)x(\d+)_(\d+)x(\d+)_k(\d+)(?:x(\d+))?s(\d+)(?:x(\d+))?(?:_g(\d+))?"
                   r"(?:_b(\d+))?")
_DENSE = re.compile(r"dense_m(\d+)_n(\d+)_k(\d+)")


def layer_from_record(r: dict, tg):
    """A records row's layer, best effort without ``layers.json`` (VTA workload names): the
    conv2d padding is the one whose MAC count matches the recorded throughput; None if
    unresolvable."""
    from dcoc.targets.vta.workloads import Conv2DWorkload, DenseWorkload

    key = r.get("task", "")
    name = key.split(":")[1] if key.count(":") >= 1 else key
    m = _DENSE.fullmatch(name)
    if m:
        wl = DenseWorkload(batch=int(m[1]), in_features=int(m[3]), out_features=int(m[2]))
        kind = "dense"
        cands = [wl]
    else:
        m = _CONV.fullmatch(name)
        if not m:
            return None
        h, w, ci, co, kh = (int(m[i]) for i in range(1, 6))
        kw = int(m[6] or kh)
        sh = int(m[7])
        sw = int(m[8] or sh)
        g = int(m[9] or 1)
        b = int(m[10] or 1)
        info = r.get("info") or {}
        macs = None
        if r.get("valid") and info.get("gops") and r.get("cost"):
            macs = info["gops"] * 1e9 * float(r["cost"]) / 2
        cands = []
        for p in sorted(range(max(kh, kw) + 1), key=lambda p: abs(p - kh // 2)):
            try:
                cands.append(Conv2DWorkload(batch=b, height=h, width=w, in_channels=ci, out_channels=co,
                                            kernel=(kh, kw), stride=(sh, sw), padding=(p, p),
                                            groups=g))
            except DcocError:
                continue
        if macs is not None:
            cands = [c for c in cands if abs(c.macs - macs) <= 1e-3 * macs] or cands[:1]
        kind = "conv2d"
    from dcoc.targets.vta.report import layer_epilogue

    eps = [tg.model_epilogue()] + [layer_epilogue(b, r) for b, r in ((True, True), (False, False),
                                                                    (False, True))]
    for ep in eps + ["default"]:
        layer = Layer(r.get("task_name") or cands[0].name, cands[0], 1, kind, epilogue=ep)
        if layer.key == key:
            return layer
    return None
