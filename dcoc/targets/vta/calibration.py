"""What dcoc's VTA latencies rest on: the measured campaigns, their setups, and the
provenance of every latency dcoc prints (calibrated on measured rows, or estimated).

The measurements are TVM's TopHub log ``vta_v0.10.log`` (tlc-pack/tophub at f05376e): the
mean time of every tuned ``conv2d_packed.vta`` layer, each with the schedule that produced
it, measured on a PYNQ-Z1 (Zynq-7020, 100 MHz) with two bitstreams.  The records group
into four campaigns by bitstream and date (the log's timestamps).  ``scripts/calibrate_vta.py``
holds every row, fits the constants and prints the errors; :data:`CAMPAIGNS` keeps the
numbers it printed (a test re-runs the script and compares).

One quantity of the measurement setup differs between campaigns (``setup``): in the
August 1x16 campaign every stored output vector waited for its write response
(``TimingParams.write_response_ns``); the other three campaigns -- both bitstreams,
July and August -- stored with posted bursts.  The evidence is in the log: the one
record the July and August 1x16 campaigns share (ResNet-18's 7x7 512->512 layer, same
schedule) took 1.00 ms longer in August, and over every August 1x16 row the time beyond
the July model grows with the bytes the layer stores (about 50 us per KiB), whatever its
kernel, stride, tile shape or input-channel split; the August 4x8 rows show no such
excess.  dcoc's default model is the posted-write setup (three of four campaigns).
"""
from __future__ import annotations

from dataclasses import dataclass, field

SOURCE = "tlc-pack/tophub tophub/vta_v0.10.log (f05376e)"

#: the bitstreams TopHub measured, as dcoc config names (pkg_config.py's bitstream name
#: plus BLOCK_OUT), and the dcoc preset of each
BITSTREAMS = {"1x16x16_i8w8a32_15_15_18_17": "pynq", "4x8x8_i8w8a32_15_16_16_18": "pynq_4x8"}

#: where the calibration holds: what the measured rows span
VALIDITY = ("PYNQ-Z1 (Zynq-7020, 64-bit ACP port through the 512 KB L2) at 100 MHz; the "
            "1x16x16 and 4x8x8 bitstreams; conv2d 1x1/3x3 (5x5 in the evaluation rows), "
            "stride 1-2, 7-112 px, 64-2048 channels, batch 1 (1x16) and 4 (4x8)")


@dataclass(frozen=True)
class Campaign:
    """One measurement campaign of the log: bitstream, dates, networks, the setup
    constants that differ from dcoc's default, and the fit's error on its fitting rows."""

    name: str
    bitstream: str
    dates: str
    networks: tuple
    fit_rows: int
    fit_mean_pct: float
    fit_max_pct: float
    setup: dict = field(default_factory=dict)
    eval_rows: int = 0


#: the four campaigns (numbers printed by ``python -m scripts.calibrate_vta``)
CAMPAIGNS = (
    Campaign("1x16 July", "1x16x16_i8w8a32_15_15_18_17", "2019-07-11", ("ResNet-18",),
             10, 2.2, 5.7),
    Campaign("1x16 August", "1x16x16_i8w8a32_15_15_18_17", "2019-08-09/10",
             ("ResNet-50", "AlexNet", "VGG-16"), 22, 4.4, 15.3,
             setup={"write_response_ns": 800.0}, eval_rows=11),
    Campaign("4x8 July", "4x8x8_i8w8a32_15_16_16_18", "2019-07-30", ("ResNet-18",),
             10, 3.2, 5.8),
    Campaign("4x8 August", "4x8x8_i8w8a32_15_16_16_18", "2019-08-16", ("ResNet-50",),
             22, 2.9, 17.6),
)


def campaign(name: str) -> Campaign:
    for c in CAMPAIGNS:
        if c.name == name:
            return c
    raise KeyError(name)


def campaign_timing(name: str, timing=None):
    """``timing`` (default: the warm-L2 model of TopHub's repeated single-layer runs) with
    campaign ``name``'s setup constants."""
    from dcoc.targets.vta.simulator import TimingParams

    tp = timing or TimingParams(l2_start="warm")
    return tp.with_(**campaign(name).setup)


def provenance(hw, board: str) -> dict:
    """How much measurement a latency of ``hw`` on ``board`` rests on.

    ``{"status": "calibrated" | "estimated", "basis": one line, "rows": measured rows,
    "mean_error_pct": their mean |error| (None when estimated)}``.  Calibrated: the board
    and the exact bitstream TopHub measured, at its clock; the default (posted-write)
    campaigns of that bitstream give the rows.  Estimated: every other core or board.
    """
    name = hw.bitstream
    if board != "pynq":
        return {"status": "estimated", "rows": 0, "mean_error_pct": None,
                "basis": f"no measured rows for {board} (every measured row is a PYNQ-Z1 at "
                         "100 MHz); the memory path and clock are modelled, not calibrated"}
    if name not in BITSTREAMS or abs(hw.freq_mhz - 100.0) > 1e-6 or hw.bus_bytes != 8:
        return {"status": "estimated", "rows": 0, "mean_error_pct": None,
                "basis": "core not measured: PYNQ calibration of the 1x16x16 and 4x8x8 "
                         "bitstreams, extrapolated to this core"}
    cs = [c for c in CAMPAIGNS if c.bitstream == name and not c.setup]
    n = sum(c.fit_rows for c in cs)
    mean = sum(c.fit_rows * c.fit_mean_pct for c in cs) / n
    other = [c for c in CAMPAIGNS if c.bitstream == name and c.setup]
    camps = ", ".join(c.name for c in cs)
    basis = (f"calibrated on {n} measured layers of this bitstream (PYNQ-Z1, TopHub {camps}), "
             f"mean |error| {mean:.1f}%")
    if other:
        basis += "; " + ", ".join(c.name for c in other) + " ran slower (non-posted writes)"
    return {"status": "calibrated", "rows": n, "mean_error_pct": round(mean, 1), "basis": basis}


def label(prov: dict) -> str:
    """A short marker for tables: ``calibrated (20 rows, 2.9%)`` or ``estimated``."""
    if prov["status"] == "calibrated":
        return f"calibrated ({prov['rows']} rows, {prov['mean_error_pct']:.1f}%)"
    return "estimated"
