"""Calibration of dcoc's VTA timing model against every usable measured FPGA layer time.

Data: every ``conv2d_packed.vta`` record of TVM's TopHub log ``vta_v0.10.log``
(tlc-pack/tophub at f05376e; the first column of :data:`ROWS` is the file line): the mean
time of each tuned layer with the schedule that produced it, measured on a PYNQ-Z1
(100 MHz) with the 1x16 bitstream (batch 1) and the 4x8 bitstream (batch 4), shift/clip
epilogue.  The Yolo-tiny block repeats the ResNet-18 times (same timestamps) under other
shapes and is not used.  Campaigns (bitstream and the records' dates):
``1x16 July`` (ResNet-18), ``1x16 August`` (ResNet-50, AlexNet, VGG-16), ``4x8 July``
(ResNet-18), ``4x8 August`` (ResNet-50); :mod:`dcoc.targets.vta.calibration` describes them
and the one setup quantity that differs (``write_response_ns`` of the August 1x16 campaign).

Split (declared before any fit): **fit** = the ResNet-18 and ResNet-50 rows of both
bitstreams (every constant is chosen on them); **evaluation** = the AlexNet and VGG-16 rows
(1x16 August), on which nothing is chosen -- their errors are printed, never fitted.

    python -m scripts.calibrate_vta                 # errors, ranks, constants with sources (~5 s)
    python -m scripts.calibrate_vta --fit           # redo the grid fit on the fit rows (~3 min)
    python -m scripts.calibrate_vta --sensitivity   # + design decisions per constant (< 1 min)
    python -m scripts.calibrate_vta --set dram_latency_ns=700

Also checked (not fitted): the LSTM cell's ``dense_packed.vta`` record (1x16), which dcoc
offloads; the 4x8 dense record's tensors have 1x16 blocks and cannot be run on a 4x8 core.
``conv2d_transpose_packed.vta`` (DCGAN) is not offloaded by dcoc (transposed convolutions
run on the CPU), so its three records are not used.

Exit status 1 when a target of :data:`TARGETS` is missed.
"""
from __future__ import annotations

import argparse
import itertools
import time
from dataclasses import replace

from dcoc.targets.vta.calibration import SOURCE as TOPHUB

#: (file line, network, campaign, batch, (H, CI, CO, K, S, pad), knobs, measured ms);
#: knobs = (tile_h, tile_w, tile_ci, tile_co, oc_nthread, h_nthread), each the inner factor
#: of the record's split
ROWS = [
    (16, "ResNet-18", "1x16 July", 1, (14, 256, 512, 3, 2, 1), (7, 7, 1, 16, 2, 1), 3.994),
    (17, "ResNet-18", "1x16 July", 1, (7, 512, 512, 3, 1, 1), (7, 7, 1, 16, 2, 1), 7.348),
    (18, "ResNet-18", "1x16 July", 1, (28, 128, 256, 3, 2, 1), (14, 14, 1, 4, 2, 1), 2.669),
    (19, "ResNet-18", "1x16 July", 1, (14, 256, 256, 3, 1, 1), (14, 14, 1, 4, 2, 1), 4.934),
    (20, "ResNet-18", "1x16 July", 1, (56, 64, 128, 3, 2, 1), (7, 28, 1, 4, 2, 1), 2.966),
    (21, "ResNet-18", "1x16 July", 1, (28, 128, 128, 3, 1, 1), (14, 28, 1, 2, 1, 2), 5.183),
    (22, "ResNet-18", "1x16 July", 1, (56, 64, 64, 3, 1, 1), (8, 56, 1, 2, 2, 1), 5.699),
    (23, "ResNet-18", "1x16 July", 1, (56, 64, 128, 1, 2, 0), (7, 28, 1, 4, 1, 2), 1.349),
    (24, "ResNet-18", "1x16 July", 1, (28, 128, 256, 1, 2, 0), (7, 14, 1, 8, 2, 1), 1.029),
    (25, "ResNet-18", "1x16 July", 1, (14, 256, 512, 1, 2, 0), (7, 7, 1, 16, 2, 1), 1.081),
    (27, "ResNet-50", "1x16 August", 1, (14, 1024, 2048, 1, 2, 0), (7, 7, 1, 16, 2, 1), 20.895),
    (28, "ResNet-50", "1x16 August", 1, (28, 512, 1024, 1, 2, 0), (7, 14, 1, 8, 2, 1), 23.147),
    (29, "ResNet-50", "1x16 August", 1, (56, 256, 512, 1, 2, 0), (1, 28, 8, 32, 1, 2), 29.658),
    (30, "ResNet-50", "1x16 August", 1, (56, 64, 64, 1, 1, 0), (8, 56, 2, 2, 2, 1), 11.032),
    (31, "ResNet-50", "1x16 August", 1, (56, 256, 64, 1, 1, 0), (4, 56, 2, 4, 1, 2), 13.712),
    (32, "ResNet-50", "1x16 August", 1, (56, 64, 64, 3, 1, 1), (56, 8, 1, 2, 2, 1), 15.105),
    (33, "ResNet-50", "1x16 August", 1, (56, 64, 256, 1, 1, 0), (8, 56, 2, 2, 2, 1), 44.245),
    (34, "ResNet-50", "1x16 August", 1, (56, 256, 128, 1, 1, 0), (4, 56, 4, 4, 1, 2), 27.401),
    (35, "ResNet-50", "1x16 August", 1, (56, 128, 128, 3, 2, 1), (28, 7, 1, 4, 2, 1), 10.068),
    (36, "ResNet-50", "1x16 August", 1, (28, 512, 128, 1, 1, 0), (7, 28, 4, 4, 1, 2), 7.961),
    (37, "ResNet-50", "1x16 August", 1, (28, 128, 128, 3, 1, 1), (28, 7, 1, 4, 2, 1), 9.966),
    (38, "ResNet-50", "1x16 August", 1, (28, 128, 512, 1, 1, 0), (14, 28, 2, 2, 2, 1), 23.170),
    (39, "ResNet-50", "1x16 August", 1, (28, 512, 256, 1, 1, 0), (4, 28, 4, 8, 2, 1), 15.749),
    (40, "ResNet-50", "1x16 August", 1, (28, 256, 256, 3, 2, 1), (14, 7, 1, 8, 2, 1), 7.472),
    (41, "ResNet-50", "1x16 August", 1, (14, 1024, 256, 1, 1, 0), (14, 14, 4, 4, 2, 1), 5.023),
    (42, "ResNet-50", "1x16 August", 1, (14, 256, 256, 3, 1, 1), (14, 7, 1, 8, 2, 1), 7.412),
    (43, "ResNet-50", "1x16 August", 1, (14, 256, 1024, 1, 1, 0), (14, 14, 2, 4, 2, 1), 12.623),
    (44, "ResNet-50", "1x16 August", 1, (14, 1024, 512, 1, 1, 0), (14, 14, 4, 4, 2, 1), 10.045),
    (45, "ResNet-50", "1x16 August", 1, (14, 512, 512, 3, 2, 1), (7, 7, 1, 16, 2, 1), 8.859),
    (46, "ResNet-50", "1x16 August", 1, (7, 2048, 512, 1, 1, 0), (7, 7, 16, 16, 2, 1), 4.419),
    (47, "ResNet-50", "1x16 August", 1, (7, 512, 512, 3, 1, 1), (7, 7, 1, 16, 2, 1), 8.352),
    (48, "ResNet-50", "1x16 August", 1, (7, 512, 2048, 1, 1, 0), (7, 7, 8, 16, 2, 1), 8.551),
    (50, "AlexNet", "1x16 August", 1, (27, 64, 192, 5, 1, 2), (27, 9, 1, 3, 2, 1), 16.328),
    (51, "AlexNet", "1x16 August", 1, (13, 192, 384, 3, 1, 1), (13, 13, 1, 6, 2, 1), 7.978),
    (52, "AlexNet", "1x16 August", 1, (13, 384, 256, 3, 1, 1), (13, 13, 1, 4, 2, 1), 8.601),
    (53, "AlexNet", "1x16 August", 1, (13, 256, 256, 3, 1, 1), (13, 13, 1, 4, 2, 1), 6.473),
    (55, "VGG-16", "1x16 August", 1, (112, 64, 128, 3, 1, 1), (112, 4, 1, 2, 2, 1), 123.668),
    (56, "VGG-16", "1x16 August", 1, (112, 128, 128, 3, 1, 1), (56, 14, 1, 1, 2, 1), 167.837),
    (57, "VGG-16", "1x16 August", 1, (56, 128, 256, 3, 1, 1), (56, 8, 1, 2, 2, 1), 79.222),
    (58, "VGG-16", "1x16 August", 1, (56, 256, 256, 3, 1, 1), (56, 4, 1, 4, 2, 1), 117.228),
    (59, "VGG-16", "1x16 August", 1, (28, 256, 512, 3, 1, 1), (28, 4, 1, 8, 2, 1), 58.691),
    (60, "VGG-16", "1x16 August", 1, (28, 512, 512, 3, 1, 1), (28, 7, 1, 4, 2, 1), 96.714),
    (61, "VGG-16", "1x16 August", 1, (14, 512, 512, 3, 1, 1), (14, 7, 1, 8, 2, 1), 24.276),
    (79, "ResNet-18", "4x8 July", 4, (56, 64, 64, 3, 1, 1), (2, 56, 1, 8, 1, 2), 21.352),
    (80, "ResNet-18", "4x8 July", 4, (56, 64, 128, 3, 2, 1), (7, 28, 1, 4, 2, 1), 11.108),
    (81, "ResNet-18", "4x8 July", 4, (56, 64, 128, 1, 2, 0), (1, 28, 8, 16, 1, 2), 2.839),
    (82, "ResNet-18", "4x8 July", 4, (28, 128, 128, 3, 1, 1), (2, 28, 1, 16, 1, 2), 19.935),
    (83, "ResNet-18", "4x8 July", 4, (28, 128, 256, 3, 2, 1), (7, 14, 1, 8, 1, 2), 10.057),
    (84, "ResNet-18", "4x8 July", 4, (28, 128, 256, 1, 2, 0), (1, 14, 16, 32, 1, 2), 2.199),
    (85, "ResNet-18", "4x8 July", 4, (14, 256, 256, 3, 1, 1), (14, 14, 1, 4, 2, 1), 19.220),
    (86, "ResNet-18", "4x8 July", 4, (14, 256, 512, 3, 2, 1), (7, 7, 1, 16, 2, 1), 9.691),
    (87, "ResNet-18", "4x8 July", 4, (14, 256, 512, 1, 2, 0), (1, 7, 16, 32, 2, 1), 2.755),
    (88, "ResNet-18", "4x8 July", 4, (7, 512, 512, 3, 1, 1), (7, 7, 1, 16, 2, 1), 18.923),
    (90, "ResNet-50", "4x8 August", 4, (14, 1024, 2048, 1, 2, 0), (1, 7, 16, 32, 2, 1), 56.345),
    (91, "ResNet-50", "4x8 August", 4, (28, 512, 1024, 1, 2, 0), (1, 14, 8, 32, 2, 1), 31.704),
    (92, "ResNet-50", "4x8 August", 4, (56, 256, 512, 1, 2, 0), (1, 28, 8, 16, 2, 1), 27.181),
    (93, "ResNet-50", "4x8 August", 4, (56, 64, 64, 1, 1, 0), (2, 56, 4, 4, 1, 2), 5.980),
    (94, "ResNet-50", "4x8 August", 4, (56, 256, 64, 1, 1, 0), (2, 56, 4, 8, 1, 2), 13.029),
    (95, "ResNet-50", "4x8 August", 4, (56, 64, 64, 3, 1, 1), (2, 56, 1, 8, 1, 2), 20.735),
    (96, "ResNet-50", "4x8 August", 4, (56, 64, 256, 1, 1, 0), (2, 56, 4, 8, 1, 2), 17.957),
    (97, "ResNet-50", "4x8 August", 4, (56, 256, 128, 1, 1, 0), (1, 56, 2, 16, 1, 2), 24.745),
    (98, "ResNet-50", "4x8 August", 4, (56, 128, 128, 3, 2, 1), (28, 4, 1, 8, 2, 1), 21.031),
    (99, "ResNet-50", "4x8 August", 4, (28, 512, 128, 1, 1, 0), (2, 28, 2, 16, 1, 2), 11.253),
    (100, "ResNet-50", "4x8 August", 4, (28, 128, 128, 3, 1, 1), (14, 28, 1, 2, 1, 2), 19.672),
    (101, "ResNet-50", "4x8 August", 4, (28, 128, 512, 1, 1, 0), (2, 28, 4, 16, 1, 2), 13.097),
    (102, "ResNet-50", "4x8 August", 4, (28, 512, 256, 1, 1, 0), (2, 28, 8, 16, 1, 2), 19.059),
    (103, "ResNet-50", "4x8 August", 4, (28, 256, 256, 3, 2, 1), (7, 14, 1, 8, 1, 2), 19.170),
    (104, "ResNet-50", "4x8 August", 4, (14, 1024, 256, 1, 1, 0), (7, 14, 8, 8, 2, 1), 9.671),
    (105, "ResNet-50", "4x8 August", 4, (14, 256, 256, 3, 1, 1), (14, 14, 1, 4, 2, 1), 19.067),
    (106, "ResNet-50", "4x8 August", 4, (14, 256, 1024, 1, 1, 0), (2, 14, 8, 32, 2, 1), 10.704),
    (107, "ResNet-50", "4x8 August", 4, (14, 1024, 512, 1, 1, 0), (2, 14, 16, 32, 2, 1), 18.075),
    (108, "ResNet-50", "4x8 August", 4, (14, 512, 512, 3, 2, 1), (7, 7, 1, 16, 2, 1), 18.829),
    (109, "ResNet-50", "4x8 August", 4, (7, 2048, 512, 1, 1, 0), (7, 7, 16, 8, 2, 1), 9.696),
    (110, "ResNet-50", "4x8 August", 4, (7, 512, 512, 3, 1, 1), (7, 7, 1, 16, 2, 1), 18.812),
    (111, "ResNet-50", "4x8 August", 4, (7, 512, 2048, 1, 1, 0), (7, 7, 8, 16, 2, 1), 9.557),
]
KNOB_NAMES = ("tile_h", "tile_w", "tile_ci", "tile_co", "oc_nthread", "h_nthread")
FIT_NETWORKS = ("ResNet-18", "ResNet-50")
EVAL_NETWORKS = ("AlexNet", "VGG-16")
#: the LSTM cell's dense record (1x16, line 63): (batch, in, out), knobs, measured ms
DENSE_ROW = (63, (1, 256, 128), {"tile_b": 1, "tile_ci": 16, "tile_co": 1, "oc_nthread": 1}, 0.141)
#: MobileNet-G's group_conv2d_packed.vta records (1x16, November 2019: a fifth campaign, not
#: fitted): (file line, (H = W, CI = CO, stride, groups), knobs, measured ms)
GROUPED_ROWS = [
    (69, (112, 32, 1, 2), (14, 56, 1, 1, 2, 1), 5.172),
    (70, (112, 64, 2, 4), (4, 56, 1, 1, 1, 2), 4.511),
    (71, (56, 128, 1, 8), (14, 56, 1, 1, 1, 2), 5.159),
    (72, (56, 128, 2, 8), (7, 28, 1, 1, 2, 1), 2.038),
    (73, (28, 256, 1, 16), (28, 28, 1, 1, 2, 1), 2.614),
    (74, (28, 256, 2, 16), (14, 14, 1, 1, 2, 1), 1.105),
    (75, (14, 512, 1, 32), (14, 14, 1, 1, 2, 1), 1.589),
    (76, (14, 512, 2, 32), (7, 7, 1, 1, 2, 1), 0.962),
    (77, (7, 1024, 1, 64), (7, 7, 1, 1, 2, 1), 1.489),
]
#: (what, limit) of every target the script checks; mean/max |error| in %, rank correlation
TARGETS = {"evaluation mean": 10.0, "evaluation max": 20.0,
           "ResNet-50 1x16 mean": 10.0, "ResNet-18 1x16 mean": 5.0, "ResNet-18 4x8 mean": 5.0,
           "ResNet-50 4x8 mean": 5.0, "rank correlation": 0.9}

#: every timing constant: (value source, stated uncertainty as (low, high) or None when
#: the value is exact by construction).  "fitted" constants were chosen by ``--fit`` on
#: the fit rows.
SOURCES = {
    "dram_latency_ns": ("fitted (fit rows): read round trip per DMA row, PL -> "
                        "SmartConnect -> S_AXI_ACP -> SCU/L2; each row is one HLS memcpy "
                        "(vta.cc load_2d / load_pad_2d)", (550.0, 750.0)),
    "write_latency_ns": ("fitted (fit rows): per STORE row; writes are posted "
                         "(AXI write channel, no read round trip)", (0.0, 200.0)),
    "burst_overhead": ("fitted (fit rows): idle bus cycles between the 16-beat "
                       "bursts of one row", (0, 1)),
    "max_burst_beats": ("Vivado HLS m_axi default max_read/write_burst_length = 16 (UG902)",
                        None),
    "write_response_ns": ("setup of a campaign (0: posted writes; the 1x16 August campaign's "
                          "value is fitted on its fit rows): wait per stored output vector for "
                          "its write response", None),
    "insn_overhead": ("estimate: command-FIFO dequeue + decode + dependency-FIFO checks per "
                      "instruction (vta.cc load/compute/store top functions)", (4, 16)),
    "gemm_ii": ("vta.cc READ_GEMM_UOP: PIPELINE II = 1; hardware.rst", None),
    "gemm_depth": ("vta-reference §3.3 modelling proposal (~5 fill cycles)", (3, 8)),
    "gemm_loop_overhead": ("0: the micro-op loop nest runs as one pipeline (vta.cc)", None),
    "alu_ii": ("vta.cc READ_ALU_UOP: PIPELINE II = 2; hardware.rst (one ACC read port)", None),
    "alu_depth": ("vta-reference §3.3 modelling proposal (~4)", (2, 8)),
    "alu_loop_overhead": ("0: as gemm_loop_overhead", None),
    "pad_cycles": ("vta.cc reset_mem: one padding element per cycle (inner loop unrolled)",
                   None),
    "coherent_cache_kib": ("UG585 §3.4: PL310 L2, 512 KB on the Zynq-7000", None),
    "l2_ways": ("UG585 §3.4: 8-way set associative", None),
    "l2_line_bytes": ("UG585 §3.4: 32-byte lines", None),
    "coherent_cache_bus_bytes": ("pkg_config.py: 64-bit ACP = the Zynq-7000 targets", None),
    "l2_start": ("model state: warm here (TopHub's repeated single-layer runs); cold (the "
                 "default) for whole-model timing", None),
    "ddr_miss_latency_ns": ("estimate: one DDR3 access behind an L2 miss (not identifiable "
                            "from the rows: weight rows are 9-18 bursts long)", (0.0, 300.0)),
    "ddr_miss_burst_ns": ("fitted (fit rows): four 32-byte line fills per "
                          "128-byte burst from DDR", (120.0, 200.0)),
}

#: the grid ``--fit`` searches: the shared constants, and the August 1x16 setup's
#: write-response wait (applied to that campaign only)
FIT_GRID = {
    "dram_latency_ns": [float(x) for x in range(550, 751, 50)],
    "burst_overhead": [0, 1],
    "ddr_miss_burst_ns": [120.0, 160.0, 200.0],
    "write_latency_ns": [0.0, 100.0, 200.0],
}
SETUP_GRID = {"1x16 August": {"write_response_ns": [float(x) for x in range(600, 1001, 50)]}}


def split_of(network: str) -> str:
    return "fit" if network in FIT_NETWORKS else "evaluation"


def _workload(batch, shape):
    from dcoc.targets.vta import Conv2DWorkload

    h, ci, co, k, s, p = shape
    return Conv2DWorkload(batch, h, h, ci, co, k, s, p)


def _preset(camp: str) -> str:
    return "pynq" if camp.startswith("1x16") else "pynq_4x8"


def run(timing=None, rows=ROWS, setups=None) -> list[dict]:
    """One dict per measured layer: modelled vs measured ms and the error, each row timed
    with its campaign's setup (``setups``: campaign -> constants; default: the module's)."""
    from dcoc.targets.vta import HWConfig, TimingParams, simulate
    from dcoc.targets.vta.calibration import CAMPAIGNS

    base = timing or TimingParams(l2_start="warm")  # repeated single-layer runs, as measured
    setups = setups if setups is not None else {c.name: c.setup for c in CAMPAIGNS}
    out = []
    for line, net, camp, batch, shape, kn, meas in rows:
        tp = base.with_(**setups.get(camp, {}))
        wl = _workload(batch, shape)
        knobs = dict(zip(KNOB_NAMES, kn))
        r = simulate(wl, HWConfig.preset(_preset(camp)), knobs, timing=tp)
        ms = r.seconds * 1e3
        out.append({"line": line, "network": net, "campaign": camp, "workload": wl.name,
                    "knobs": knobs, "cycles": r.cycles, "predicted_ms": ms, "measured_ms": meas,
                    "error_pct": 100.0 * (ms - meas) / meas, "split": split_of(net),
                    "source": f"{TOPHUB} line {line}"})
    return out


def _stats(rs) -> dict:
    e = [abs(r["error_pct"]) for r in rs]
    return {"n": len(e), "mean": sum(e) / len(e), "max": max(e)} if e else {"n": 0, "mean": 0.0, "max": 0.0}


def groups(rows) -> dict:
    """(network, campaign) and split groups -> error statistics."""
    out = {}
    for key in sorted({(r["network"], r["campaign"]) for r in rows}):
        out[f"{key[0]} {key[1]}"] = _stats([r for r in rows if (r["network"], r["campaign"]) == key])
    for sp in ("fit", "evaluation"):
        out[sp] = _stats([r for r in rows if r["split"] == sp])
    return out


def rank_correlations(rows) -> dict:
    """Spearman's rank correlation of modelled vs measured time, per campaign (fit and
    evaluation rows of a campaign alike)."""
    from scipy.stats import spearmanr

    out = {}
    for camp in sorted({r["campaign"] for r in rows}):
        rs = [r for r in rows if r["campaign"] == camp]
        out[camp] = float(spearmanr([r["predicted_ms"] for r in rs],
                                    [r["measured_ms"] for r in rs]).statistic)
    return out


def schedule_orders(rows) -> list[dict]:
    """For every layer shape (bitstream, workload) with several measured schedules: are
    they ordered by the model as measured?  Each row keeps its own campaign's setup."""
    by = {}
    for r in rows:
        by.setdefault((_preset(r["campaign"]), r["workload"]), []).append(r)
    out = []
    for (preset, wl), rs in sorted(by.items()):
        if len({tuple(r["knobs"].values()) for r in rs}) < 2:
            continue
        meas = [r["line"] for r in sorted(rs, key=lambda r: r["measured_ms"])]
        model = [r["line"] for r in sorted(rs, key=lambda r: r["predicted_ms"])]
        out.append({"bitstream": preset, "workload": wl, "rows": rs, "same_order": meas == model,
                    "campaigns": sorted({r["campaign"] for r in rs})})
    return out


def dense_check(timing=None) -> dict:
    """The LSTM cell's dense record against the model (1x16, posted-write setup)."""
    from dcoc.targets.vta import DenseWorkload, HWConfig, TimingParams, simulate

    line, (n, k, m), knobs, meas = DENSE_ROW
    r = simulate(DenseWorkload(n, k, m), HWConfig.preset("pynq"), knobs,
                 timing=timing or TimingParams(l2_start="warm"))
    return {"line": line, "workload": f"dense {n}x{k}->{m}", "predicted_ms": r.ms,
            "measured_ms": meas, "error_pct": 100.0 * (r.ms - meas) / meas}


def grouped_check(timing=None) -> list[dict]:
    """The MobileNet-G grouped-conv records against the model (default setup, warm L2)."""
    from dcoc.targets.vta import Conv2DWorkload, HWConfig, TimingParams, simulate

    out = []
    for line, (h, c, s, g), kn, meas in GROUPED_ROWS:
        wl = Conv2DWorkload(1, h, h, c, c, 3, s, 1, groups=g)
        r = simulate(wl, HWConfig.preset("pynq"), dict(zip(KNOB_NAMES, kn)),
                     timing=timing or TimingParams(l2_start="warm"))
        out.append({"line": line, "workload": wl.name, "knobs": dict(zip(KNOB_NAMES, kn)),
                    "instructions": r.instructions, "predicted_ms": r.ms, "measured_ms": meas,
                    "error_pct": 100.0 * (r.ms - meas) / meas})
    return out


def targets_met(rows) -> dict:
    """Each target of :data:`TARGETS` -> (value, limit, met)."""
    g = groups(rows)
    val = {"evaluation mean": g["evaluation"]["mean"], "evaluation max": g["evaluation"]["max"],
           "ResNet-50 1x16 mean": g["ResNet-50 1x16 August"]["mean"],
           "ResNet-18 1x16 mean": g["ResNet-18 1x16 July"]["mean"],
           "ResNet-18 4x8 mean": g["ResNet-18 4x8 July"]["mean"],
           "ResNet-50 4x8 mean": g["ResNet-50 4x8 August"]["mean"],
           "rank correlation": min(rank_correlations(rows).values())}
    return {k: (v, TARGETS[k], v >= TARGETS[k] if k == "rank correlation" else v <= TARGETS[k])
            for k, v in val.items()}


def fit(grid=None, timing=None) -> tuple[dict, dict, list]:
    """Grid search minimising the RMS error over the fit rows: the shared constants of
    ``grid``, and for each campaign of :data:`SETUP_GRID` its setup constant (fitted on
    that campaign's fit rows).  Returns (shared, setups, the best five)."""
    from dcoc.targets.vta import TimingParams

    grid = grid or FIT_GRID
    base = timing or TimingParams(l2_start="warm")
    fit_rows = [r for r in ROWS if split_of(r[1]) == "fit"]
    names = list(grid)
    plain = [r for r in fit_rows if r[2] not in SETUP_GRID]
    by_camp = {camp: [r for r in fit_rows if r[2] == camp] for camp in SETUP_GRID}
    scored = []
    for vals in itertools.product(*grid.values()):
        tp = base.with_(**dict(zip(names, vals)))
        sq = [r["error_pct"] ** 2 for r in run(tp, plain, setups={})]
        setups = {}
        for camp, g in SETUP_GRID.items():
            (k, choices), = g.items()
            best = min(((sum(r["error_pct"] ** 2 for r in run(tp, by_camp[camp], {camp: {k: v}})), v)
                        for v in choices))
            sq.append(best[0])
            setups[camp] = {k: best[1]}
        scored.append(((sum(sq) / len(fit_rows)) ** 0.5, dict(zip(names, vals)), setups))
    scored.sort(key=lambda t: t[0])
    return scored[0][1], scored[0][2], scored[:5]


def format_rows(rows) -> str:
    out = [f"{'line':>4} {'network':<9} {'campaign':<11} {'split':<10} {'workload':<28} "
           f"{'schedule':<20} {'model ms':>9} {'meas ms':>9} {'error':>7}"]
    for r in rows:
        k = r["knobs"]
        sched = f"{k['tile_h']}x{k['tile_w']} ci{k['tile_ci']} co{k['tile_co']} " \
                f"{k['oc_nthread']}/{k['h_nthread']}"
        out.append(f"{r['line']:>4} {r['network']:<9} {r['campaign']:<11} {r['split']:<10} "
                   f"{r['workload']:<28} {sched:<20} {r['predicted_ms']:>9.3f} "
                   f"{r['measured_ms']:>9.3f} {r['error_pct']:>+6.1f}%")
    return "\n".join(out)


def format_summary(rows) -> str:
    out = ["mean / max |error| per network and campaign:"]
    for k, s in groups(rows).items():
        out.append(f"  {k:<24} {s['n']:>3} rows  mean {s['mean']:5.1f}%  max {s['max']:5.1f}%")
    out.append("rank correlation (Spearman) of modelled vs measured time, per campaign:")
    for k, v in rank_correlations(rows).items():
        out.append(f"  {k:<24} {v:+.3f}")
    out.append("layer shapes with several measured schedules (measured order, fastest first):")
    for o in schedule_orders(rows):
        rs = sorted(o["rows"], key=lambda r: r["measured_ms"])
        desc = "; ".join(f"line {r['line']} ({r['campaign']}) {r['measured_ms']:.2f} ms, "
                         f"model {r['predicted_ms']:.2f}" for r in rs)
        out.append(f"  {o['workload']:<28} {'same order' if o['same_order'] else 'ORDER DIFFERS'}: {desc}")
    d = dense_check()
    out.append(f"dense (not fitted): line {d['line']} {d['workload']}: model {d['predicted_ms']:.3f} ms, "
               f"measured {d['measured_ms']:.3f} ms, {d['error_pct']:+.1f}%")
    gr = grouped_check()
    s = _stats(gr)
    out.append(f"grouped conv (MobileNet-G, 1x16 November, not fitted): {s['n']} rows, mean "
               f"{s['mean']:.1f}%, max {s['max']:.1f}%, {sum(abs(r['error_pct']) <= 15 for r in gr)} "
               "within 15%: " + "; ".join(f"line {r['line']} {r['error_pct']:+.1f}%" for r in gr))
    out.append("targets:")
    for k, (v, lim, ok) in targets_met(rows).items():
        op = ">=" if k == "rank correlation" else "<="
        out.append(f"  {k:<22} {v:7.3f} {op} {lim:g}  {'met' if ok else 'MISSED'}")
    return "\n".join(out)


def format_sources(tp) -> str:
    from dcoc.targets.vta.calibration import CAMPAIGNS, VALIDITY

    out = [f"{'constant':<25} {'value':>10} {'+-':>16}  source"]
    for k, v in tp.as_dict().items():
        src, unc = SOURCES.get(k, ("(no source recorded)", None))
        u = "exact" if unc is None else f"{unc[0]:g}..{unc[1]:g}"
        out.append(f"{k:<25} {v!s:>10} {u:>16}  {src}")
    out.append("+-: for fitted constants a range the fit rows allow; for estimates a plausible range")
    out.append("campaign setups (constants that differ from the default):")
    for c in CAMPAIGNS:
        out.append(f"  {c.name:<12} {c.bitstream}  {c.dates:<14} "
                   + (", ".join(f"{k}={v:g}" for k, v in c.setup.items()) or "default (posted writes)"))
    out.append(f"validity range: {VALIDITY}")
    out.append(f"measured rows: {TOPHUB}")
    return "\n".join(out)


# ============================================================================ sensitivity
#: the design decision checked: the best of these hardware configs for ResNet-18 on the
#: pynq board (default schedules, whole-model latency from a cold L2)
SENS_CONFIGS = ["1x16x16_i8w8a32_15_15_18_17", "4x8x8_i8w8a32_15_16_16_18",
                "1x16x16_i8w8a32_15_16_18_16", "2x16x16_i8w8a32_15_15_18_17",
                "1x16x16_i8w8a32_15_16_17_17"]


def sensitivity(timing=None) -> list[dict]:
    """For each uncertain constant at its low and high value: the ResNet-18 pynq latency of
    each config in :data:`SENS_CONFIGS` and whether the best config changes."""
    from dcoc.targets.vta import HWConfig, TimingParams, default_knobs, simulate
    from dcoc.targets.vta.catalogue import RESNET18_CONV, resnet18_layer
    from dcoc.targets.vta.hardware import BOARDS
    from dcoc.targets.vta.memsys import cold_start

    base = cold_start(timing or TimingParams())
    board = BOARDS["pynq"]
    configs = []
    for name in SENS_CONFIGS:
        hw = HWConfig.parse(name)
        hw = replace(hw, freq_mhz=board.clock_mhz(hw))
        if not board.fits(hw):
            continue
        layers = []
        for lname, spec in RESNET18_CONV.items():
            wl = resnet18_layer(lname)
            if hw.batch > 1:
                wl = _workload(hw.batch, (spec[0], spec[1], spec[2], spec[3], spec[4], spec[3] // 2))
            layers.append((wl, default_knobs(wl, hw), spec[5]))
        configs.append((name, hw, layers))

    def latencies(tp):
        res = {}
        for name, hw, layers in configs:
            tot = 0.0
            for wl, kn, count in layers:
                tot += count * simulate(wl, hw, kn, timing=tp).seconds * 1e3 / wl.batch
            res[name] = tot
        return res

    nominal = latencies(base)
    best0 = min(nominal, key=nominal.get)
    order0 = sorted(nominal, key=nominal.get)
    out = [{"constant": "(nominal)", "value": "", "best": best0, "best_ms": nominal[best0],
            "flips": False, "reorders": False, "latencies": nominal}]
    for k, (src, unc) in SOURCES.items():
        if unc is None:
            continue
        for v in unc:
            lat = latencies(base.with_(**{k: type(getattr(base, k))(v)}))
            b = min(lat, key=lat.get)
            out.append({"constant": k, "value": v, "best": b, "best_ms": lat[b],
                        "flips": b != best0, "reorders": sorted(lat, key=lat.get) != order0,
                        "latencies": lat})
    return out


#: layers whose schedule choice the memory constants can move (DMA-bound or DDR-streamed)
SENS_LAYERS = ("C8", "C9", "C10", "C11")


def schedule_sensitivity(timing=None, top: int = 8) -> list[dict]:
    """Per layer of :data:`SENS_LAYERS` on pynq: the best ``top`` schedules of an exhaustive
    sweep at the nominal constants, re-ranked with each uncertain constant at its low and
    high value; reports whether the best schedule changes."""
    from dcoc.targets.vta import HWConfig, TimingParams, conv2d_space, simulate
    from dcoc.targets.vta.catalogue import resnet18_layer
    from dcoc.targets.vta.memsys import cold_start

    base = cold_start(timing or TimingParams())
    hw = HWConfig.preset("pynq")
    out = []
    for lname in SENS_LAYERS:
        wl = resnet18_layer(lname)
        sp = conv2d_space(wl, hw)
        scored = []
        for vals in itertools.product(*sp.values()):
            kn = dict(zip(sp, vals))
            r = simulate(wl, hw, kn, timing=base)
            if r.valid:
                scored.append((r.seconds, kn))
        scored.sort(key=lambda t: t[0])
        cands = [kn for _, kn in scored[:top]]
        flips = []
        for k, (src, unc) in SOURCES.items():
            if unc is None:
                continue
            for v in unc:
                tp = base.with_(**{k: type(getattr(base, k))(v)})
                t = [simulate(wl, hw, kn, timing=tp).seconds for kn in cands]
                i = min(range(len(t)), key=t.__getitem__)
                if i != 0:
                    flips.append(f"{k}={v:g}: {_sched(cands[i])} wins by "
                                 f"{100 * (1 - t[i] / t[0]):.1f}%")
        out.append({"layer": lname, "space": len(scored), "best": cands[0],
                    "best_ms": scored[0][0] * 1e3, "flips": flips})
    return out


def _sched(k) -> str:
    return (f"{k['tile_h']}x{k['tile_w']} ci{k['tile_ci']} co{k['tile_co']} "
            f"oc{k['oc_nthread']} h{k['h_nthread']}")


def format_schedule_sensitivity(rows) -> str:
    out = ["Best schedule per layer (pynq, cold L2; top 8 of the exhaustive sweep re-ranked "
           "at each constant's low/high):"]
    for r in rows:
        out.append(f"{r['layer']:<4} {r['best_ms']:7.3f} ms  {_sched(r['best']):<26} "
                   + ("changes: " + "; ".join(r["flips"]) if r["flips"] else "unchanged at every end"))
    return "\n".join(out)


def format_sensitivity(rows) -> str:
    names = list(rows[0]["latencies"])
    short = [n.split("_i8")[0] + "/" + "_".join(n.split("_")[2:])[:11] for n in names]
    out = ["ResNet-18 on pynq (10 conv layers x counts, per image, default schedules, cold L2):",
           f"{'constant':<22} {'value':>7}  " + " ".join(f"{s:>9}" for s in short)
           + "  best config                    flips ranking"]
    for r in rows:
        lat = r["latencies"]
        out.append(f"{r['constant']:<22} {r['value']!s:>7}  "
                   + " ".join(f"{lat[n]:>9.2f}" for n in names)
                   + f"  {r['best']:<30} {'YES' if r['flips'] else 'no':<5} "
                   + ("changes" if r["reorders"] else "same"))
    return "\n".join(out)


def main(argv=None) -> int:
    from dcoc.targets.vta import TimingParams

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", action="append", default=[], metavar="PARAM=VALUE",
                    help="override a TimingParams constant (repeatable)")
    ap.add_argument("--fit", action="store_true",
                    help="grid-fit the fitted constants on the fit rows (~3 min)")
    ap.add_argument("--sensitivity", action="store_true",
                    help="which design decisions each constant's uncertainty can flip (~1 min)")
    args = ap.parse_args(argv)
    tp = TimingParams(l2_start="warm")  # TopHub timed each layer in repeated runs
    for kv in args.set:
        k, _, v = kv.partition("=")
        if k not in tp.as_dict():
            raise SystemExit(f"error: unknown timing constant '{k}'")
        cur = getattr(tp, k)
        tp = tp.with_(**{k: v if isinstance(cur, str) else type(cur)(float(v))})
    setups = None
    if args.fit:
        t0 = time.perf_counter()
        best, setups, top = fit(timing=tp)
        print(f"fit on the fit rows ({time.perf_counter() - t0:.0f} s); best RMS first:")
        for rms, vals, st in top:
            print(f"  RMS {rms:.2f}%  " + ", ".join(f"{k}={v}" for k, v in vals.items())
                  + "; " + "; ".join(f"{c}: {d}" for c, d in st.items()))
        tp = tp.with_(**best)
        print()
    print(format_sources(tp))
    print()
    rows = run(tp, setups=setups)
    print(format_rows(rows))
    print()
    print(format_summary(rows))
    if args.sensitivity:
        print()
        t0 = time.perf_counter()
        print(format_sensitivity(sensitivity(tp)))
        print()
        print(format_schedule_sensitivity(schedule_sensitivity(tp)))
        print(f"({time.perf_counter() - t0:.0f} s)")
    return 0 if all(ok for _, _, ok in targets_met(rows).values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
