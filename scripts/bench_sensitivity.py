"""Sensitivity of the co-design conclusions to the resource and clock estimates.

The LUT counts and the achievable clock of :mod:`dcoc.targets.vta.hardware` are estimates (no
published VTA utilisation or timing report exists; ``RESOURCE_SOURCES`` states each
one's source and uncertainty).  This benchmark asks how much the co-design answer depends
on them: for every board it runs a cheap, deterministic co-design -- a sweep over hardware
configs with the default schedule heuristic (:func:`dcoc.targets.vta.default_knobs`) on every
ResNet-18 layer, as ``scripts/hw_landscape.py`` does -- under the nominal estimates and
with the LUT and clock estimates moved by -20 % / +20 % (one at a time and at two
corners), and reports the winner, its latency, its gain over the board's default 1x16x16
config at the same clock assumption, and whether the nominal winner is still the winner.

Hardware configs swept per board: every GEMM core BATCH x BLOCK_IN x BLOCK_OUT in
{1,2,4} x {8,16,32} x {8,16,32}, each with three buffer sets -- the shipped byte sizes
(15,15,18,17), the sizes that keep the shipped *depths* for that core, and one step
smaller -- restricted to the search ranges of ``dcoc.targets.vta.spaces.HW_RANGES`` and to
what fits the board under the scenario's estimates.

    python -m scripts.bench_sensitivity                   # ~5-15 min on 2 cores
    python -m scripts.bench_sensitivity --boards pynq --jobs 2 --out sensitivity.md
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

#: (label, lut scale, clock scale, clock scale of every core but the shipped 1x16x16)
SCENARIOS = [
    ("nominal", 1.0, 1.0, 1.0),
    ("LUT -20%", 0.8, 1.0, 1.0),
    ("LUT +20%", 1.2, 1.0, 1.0),
    ("clock -20%", 1.0, 0.8, 1.0),
    ("clock +20%", 1.0, 1.2, 1.0),
    ("LUT +20%, clock -20%", 1.2, 0.8, 1.0),
    ("LUT -20%, clock +20%", 0.8, 1.2, 1.0),
    ("new cores' clock -20%", 1.0, 1.0, 0.8),
    ("new cores' clock -20%, LUT +20%", 1.2, 1.0, 0.8),
]
BOARD_NAMES = ("pynq", "ultra96", "zcu104")

_LAYERS = None


def _init(model):
    global _LAYERS
    from dcoc.targets import get
    from tvm_plugin.frontend import model_tasks

    _LAYERS = get("vta").layers(model_tasks(model, "vta"))[0]


_FIELDS = ("batch", "block_in", "block_out", "log_uop_buff", "log_inp_buff", "log_wgt_buff",
           "log_acc_buff", "freq_mhz", "bus_bytes")


def _fields(hw) -> dict:
    return {k: getattr(hw, k) for k in _FIELDS}


def _eval(args):
    """Model latency (s) of one HWConfig (by fields) with default schedules; None if a layer fails."""
    from dcoc.errors import DcocError
    from dcoc.targets.vta import HWConfig, default_knobs, simulate

    name, fields = args
    hw = HWConfig(**fields)
    total = 0.0
    for layer in _LAYERS:
        try:
            r = simulate(layer.workload, hw, default_knobs(layer.workload, hw), epilogue=layer.epilogue)
        except DcocError:
            return name, None
        if not r.valid:
            return name, None
        total += layer.count * r.seconds
    return name, total


def candidates() -> list[dict]:
    """The swept hardware knob values (see the module docstring)."""
    from dcoc.targets.vta.spaces import HW_RANGES

    out, seen = [], set()
    for b, bi, bo in itertools.product((1, 2, 4), (8, 16, 32), (8, 16, 32)):
        keep = dict(log_uop_buff=15, log_inp_buff=15 + int(math.log2(b * bi / 16)),
                    log_wgt_buff=18 + int(math.log2(bi * bo / 256)),
                    log_acc_buff=17 + int(math.log2(b * bo / 16)))
        small = {k: v - 1 for k, v in keep.items()}
        small["log_uop_buff"] = 15
        for buf in (dict(log_uop_buff=15, log_inp_buff=15, log_wgt_buff=18, log_acc_buff=17), keep, small):
            cfg = dict(batch=b, block_in=bi, block_out=bo, **buf)
            if all(cfg[k] in HW_RANGES[k] for k in HW_RANGES):
                key = tuple(sorted(cfg.items()))
                if key not in seen:
                    seen.add(key)
                    out.append(cfg)
    return out


def scenario_configs(board, lut: float, clock: float, cands, clock_other: float = 1.0) -> tuple:
    """(feasible HWConfig names under the scenario, the board default's name)."""
    from dcoc.errors import DcocError
    from dcoc.targets.vta import HWConfig
    from dcoc.targets.vta.hardware import estimate_scale

    names, fields = [], {}
    with estimate_scale(lut=lut, clock=clock, clock_other=clock_other):
        for c in cands:
            try:
                hw = board.realize(HWConfig(**c, freq_mhz=board.freq_mhz, bus_bytes=board.bus_bytes))
            except DcocError:
                continue
            if board.fits(hw):
                names.append(hw.name)
                fields[hw.name] = _fields(hw)
        d = board.realize(board.default_hw())
        fields[d.name] = _fields(d)
    return names, d.name, fields


def run(model="resnet18", boards=BOARD_NAMES, jobs=None, cache=True, log=print) -> dict:
    from dcoc.targets.vta import get_board
    from dcoc.targets.vta.catalogue import cache_root, timing_model_tag
    from dcoc.targets.vta.report import MODEL_EPILOGUE

    cands = candidates()
    plan = {}
    need = set()
    fields: dict = {}
    for b in boards:
        bd = get_board(b)
        for label, lut, clock, other in SCENARIOS:
            names, default, f = scenario_configs(bd, lut, clock, cands, other)
            plan[(b, label)] = (names, default)
            fields.update(f)
            need.update(names)
            need.add(default)
    root = cache_root("sensitivity")
    path = os.path.join(root, f"{model}_{timing_model_tag(MODEL_EPILOGUE)}.json")
    lat: dict = {}
    if cache and os.path.exists(path):
        with open(path) as f:
            lat = json.load(f)
    todo = sorted(n for n in need if n not in lat)
    log(f"{len(cands)} candidate configs, {len(need)} distinct (config, clock) points, "
        f"{len(todo)} to simulate")
    t0 = time.perf_counter()
    if todo:
        with ProcessPoolExecutor(jobs or os.cpu_count(), initializer=_init, initargs=(model,)) as ex:
            for i, (n, t) in enumerate(ex.map(_eval, [(n, fields[n]) for n in todo], chunksize=2)):
                lat[n] = t
                if (i + 1) % 20 == 0 or i + 1 == len(todo):
                    log(f"  simulated {i + 1}/{len(todo)} ({time.perf_counter() - t0:.0f} s)")
        os.makedirs(root, exist_ok=True)
        with open(path, "w") as f:
            json.dump(lat, f)
    out = {}
    for b in boards:
        nominal_winner = None
        for label, lut, clock, other in SCENARIOS:
            names, default = plan[(b, label)]
            ok = [(lat[n], n) for n in names if lat.get(n)]
            ok.sort()
            best_t, best = ok[0] if ok else (None, None)
            base_t = lat.get(default)
            core = (lambda n: n.split("_")[0]) if best else None
            row = {"board": b, "scenario": label, "lut_scale": lut, "clock_scale": clock,
                   "other_core_clock_scale": other,
                   "winner_mhz": fields[best]["freq_mhz"] if best else None,
                   "feasible": len(names), "winner": best, "winner_core": core(best) if best else None,
                   "latency_ms": best_t * 1e3 if best_t else None,
                   "default_hw": default, "default_ms": base_t * 1e3 if base_t else None,
                   "gain": (base_t / best_t) if best_t and base_t else None}
            if label == "nominal":
                nominal_winner = best
            def base_name(n):
                return "_".join(n.split("_")[:6]) if n else n
            row["same_winner"] = base_name(best) == base_name(nominal_winner)
            ranked = [base_name(n) for _, n in ok]
            nb = base_name(nominal_winner)
            row["nominal_winner_rank"] = ranked.index(nb) + 1 if nb in ranked else None
            row["nominal_winner_loss"] = None
            if nb in ranked:
                t_nom = ok[ranked.index(nb)][0]
                row["nominal_winner_loss"] = t_nom / best_t - 1.0
            out[(b, label)] = row
    return {"rows": list(out.values()), "candidates": len(cands), "model": model,
            "timing_model_tag": timing_model_tag(MODEL_EPILOGUE)}


def _same(r) -> str:
    if r["same_winner"]:
        return "yes"
    loss = r["nominal_winner_loss"]
    return "tie" if loss is not None and loss < 5e-4 else "no"


def to_markdown(res: dict) -> str:
    lines = [
        f"# Sensitivity of co-design winners to the LUT and clock estimates ({res['model']})",
        "",
        "Generated by `python -m scripts.bench_sensitivity` (timing model "
        f"`{res['timing_model_tag']}`): a hardware sweep ({res['candidates']} candidate "
        "configs per board, default schedules on every ResNet-18 layer) under the nominal "
        "resource/clock estimates and with the LUT and clock estimates moved by +-20 % "
        "(all cores alike, and the clock of every core but the shipped 1x16x16 alone). "
        "`gain` = default 1x16x16 config / winner, both at the scenario's clock. "
        "`nominal winner` = rank and latency loss of the nominal scenario's winner (same core "
        "and buffers) under the scenario; `tie`: a different buffer set with the same latency "
        "(within 0.05 %) won.",
        "",
        "| board | scenario | feasible | winner | clock MHz | latency ms | default ms | gain "
        "| same winner | nominal winner |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in res["rows"]:
        f = r["winner_mhz"] if r["winner"] else float("nan")
        nw = ("-" if r["nominal_winner_rank"] is None else
              f"#{r['nominal_winner_rank']}, +{100 * r['nominal_winner_loss']:.1f}%")
        lines.append(
            f"| {r['board']} | {r['scenario']} | {r['feasible']} | {r['winner_core'] or '-'} "
            f"(`{'_'.join((r['winner'] or '-').split('_')[2:6])}`) | {f:g} | "
            f"{r['latency_ms']:.2f} | {r['default_ms']:.2f} | {r['gain']:.2f}x | "
            f"{_same(r)} | {nw} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--boards", nargs="+", default=list(BOARD_NAMES), choices=list(BOARD_NAMES))
    ap.add_argument("--jobs", type=int, default=None, help="worker processes (default: all cores)")
    ap.add_argument("--out", default=None, help="also write the markdown table here")
    ap.add_argument("--json", default=None, help="also write the rows as JSON here")
    ap.add_argument("--no-cache", action="store_true")
    a = ap.parse_args(argv)
    res = run(a.model, a.boards, a.jobs, cache=not a.no_cache,
              log=lambda m: print(m, file=sys.stderr, flush=True))
    md = to_markdown(res)
    print(md)
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            f.write(md)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
