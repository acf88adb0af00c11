"""Calibration table: dcoc's VTA timing model vs the measured TopHub rows C2-C6.

The rows are the ResNet-18 layers of vta-reference's "Calibration data" (pynq 1x16
bitstream, 100 MHz, fused shift/clip epilogue, TopHub ``vta_v0.10.log`` schedules).

    python -m scripts.calibrate_vta
    python -m scripts.calibrate_vta --set dram_latency_ns=250 --set burst_overhead=2
"""
from __future__ import annotations

import argparse

#: (layer, (H, CI, CO, K, S, pad), knobs, measured ms)
CALIBRATION = [
    ("C2", (56, 64, 64, 3, 1, 1), dict(tile_h=8, tile_w=56, tile_ci=1, tile_co=2, oc_nthread=2, h_nthread=1), 5.699),
    ("C3", (56, 64, 128, 3, 2, 1), dict(tile_h=7, tile_w=28, tile_ci=1, tile_co=4, oc_nthread=2, h_nthread=1), 2.966),
    ("C4", (56, 64, 128, 1, 2, 0), dict(tile_h=7, tile_w=28, tile_ci=1, tile_co=4, oc_nthread=1, h_nthread=2), 1.349),
    ("C5", (28, 128, 128, 3, 1, 1), dict(tile_h=14, tile_w=28, tile_ci=1, tile_co=2, oc_nthread=1, h_nthread=2), 5.183),
    ("C6", (28, 128, 256, 3, 2, 1), dict(tile_h=14, tile_w=14, tile_ci=1, tile_co=4, oc_nthread=2, h_nthread=1), 2.669),
]


def run(timing=None) -> list[dict]:
    """One row per layer: predicted vs measured ms and the error."""
    from dcoc.vta import Conv2DWorkload, HWConfig, simulate

    hw = HWConfig.preset("pynq")
    rows = []
    for name, (h, ci, co, k, s, p), knobs, meas in CALIBRATION:
        wl = Conv2DWorkload(1, h, h, ci, co, k, s, p)
        r = simulate(wl, hw, knobs, timing=timing)
        ms = r.seconds * 1e3
        rows.append({"layer": name, "workload": wl.name, "knobs": knobs, "cycles": r.cycles,
                     "predicted_ms": ms, "measured_ms": meas,
                     "error_pct": 100.0 * (ms - meas) / meas, "gops": r.gops,
                     "utilization": r.utilization})
    return rows


def format_rows(rows) -> str:
    out = [f"{'layer':<5} {'workload':<26} {'cycles':>9} {'pred ms':>8} {'meas ms':>8} "
           f"{'error':>7} {'GOPS':>6}"]
    for r in rows:
        out.append(f"{r['layer']:<5} {r['workload']:<26} {r['cycles']:>9,} "
                   f"{r['predicted_ms']:>8.3f} {r['measured_ms']:>8.3f} {r['error_pct']:>+6.1f}% "
                   f"{r['gops']:>6.1f}")
    worst = max(abs(r["error_pct"]) for r in rows)
    out.append(f"max |error| {worst:.1f}% (requirement: within 20%)")
    return "\n".join(out)


def main(argv=None) -> int:
    from dcoc.vta import TimingParams

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", action="append", default=[], metavar="PARAM=VALUE",
                    help="override a TimingParams constant (repeatable)")
    args = ap.parse_args(argv)
    tp = TimingParams()
    for kv in args.set:
        k, _, v = kv.partition("=")
        tp = tp.with_(**{k: type(getattr(tp, k))(float(v)) if isinstance(getattr(tp, k), int)
                         else float(v)})
    print("timing constants:", ", ".join(f"{k}={v}" for k, v in tp.as_dict().items()))
    rows = run(tp)
    print(format_rows(rows))
    return 0 if all(abs(r["error_pct"]) <= 20 for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
