"""Run every benchmark side by side and write docs/RESULTS.md + docs/img/*.png.

    python -m scripts.bench --suite quick     # make bench: tens of minutes on 2 cores
    python -m scripts.bench --suite full      # hours: every evaluation layer, 2000-trial co-design
    python -m scripts.bench --sections codesign   # rerun one section; the others stay as they are

A run on a clean committed tree keeps each finished section under
``runs/bench_sections/SUITE-COMMIT/``: rerunning the same command at the same commit after an
interruption reuses them, so RESULTS.md still comes from one committed tree.

RESULTS.md is exactly what this writes: a header and five sections, each stating its
command, budget, seeds and what decides (paired tests against the default tuner
``surrogate``; the paper's method ``dcoc`` also against its ablations):
1. VTA simulator: calibration against measured PYNQ times; simulation speed.
2. Software-only tuning of VTA conv layers of the evaluation set: trials to 99% of the
   exhaustive optimum, quality after 100/300 trials, tuner overhead, dcoc vs RL; curves.
3. Co-design (hardware + schedules): the DCOC family vs the baselines at the same budget;
   the hardware configs explored (Pareto view).
4. MetaSchedule (llvm): the surrogate strategy vs EvolutionarySearch vs ReplayTrace.
5. CPU vs ONNX Runtime: tuned models (dcoc's default tuner, EvolutionarySearch) at equal
   wall-clock budgets, as latency ratios to ONNX Runtime on the same threads.
Every number is measured in this run; nothing is typed in.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SUITES = {
    "quick": {
        # evaluation set only (docs/method.md, "Tuning set and evaluation set"), every
        # tuner and ablation, 5 seeds
        "sw": dict(layers="quick-evaluation", seeds=[0, 1, 2, 3, 4], budget=100,
                   tuners=["random", "ga", "xgb", "rl", "chameleon", "sweep", "surrogate", "dcoc",
                           "dcoc-frozen", "surrogate:select=confidence", "dcoc:select=topk",
                           "dcoc:explore_frac=0"]),
        # two boards x 5 seeds = 10 pairs per paired test (5 pairs cannot reach p < 0.05)
        "codesign": dict(models=["resnet18"], boards=["pynq", "ultra96"],
                         tuners=["surrogate", "dcoc", "dcoc-frozen", "surrogate:select=confidence",
                                 "sweep", "xgb"],
                         seeds=[0, 1, 2, 3, 4], trials=100),
        "metaschedule": dict(budgets=[64], seeds=[0], population=128),
        # wall-clock budgets: 6 models (4 zoo + 2 evaluation) x 3 runs x 5 min
        "cpu": dict(models=None, minutes=[5.0], seed=0),
    },
    "full": {
        "sw": dict(layers="evaluation", seeds=[0, 1, 2, 3, 4], budget=1000, tuners=None),
        "codesign": dict(models=["resnet18", "mobilenetv2"], boards=["pynq", "ultra96"], tuners=None,
                         seeds=[0, 1, 2], trials=2000),
        "metaschedule": dict(budgets=[64, 256], seeds=[0, 1, 2], population=None),
        "cpu": dict(models=None, minutes=[5.0, 15.0], seed=0),
    },
}


#: what the suites' DCOC-family specs run, in words (other tuners: ``dcoc.tuners.DESCRIPTIONS``)
WORDS = {
    "surrogate": "the default: an XGBoost ensemble scores the space (annealing on large spaces) and "
                 "its top-k by predicted mean are measured",
    "dcoc": "the paper's method: the agents (MAPPO) propose, XGBoost confidence sampling selects, "
            "the agents learn",
    "dcoc-frozen": "dcoc with agents that never learn",
    "surrogate:select=confidence": "surrogate with confidence sampling instead of top-k",
    "dcoc:select=topk": "dcoc with top-k by predicted mean instead of confidence sampling",
    "dcoc:explore_frac=0": "dcoc without its exploration quota (no share of a batch chosen by the "
                           "upper confidence bound)",
    "surrogate:hw_explore_every=1000000000": "surrogate without the co-design hardware "
                                             "exploration quota",
}


def explain(tuners) -> str:
    """One legend line: every tuner spec and what it runs."""
    from dcoc.tuners import DESCRIPTIONS, parse

    def words(t):
        name, _, settings = t.partition(":")
        return WORDS.get(t) or DESCRIPTIONS.get(parse(t)[0], name) + (f", with {settings}" if settings else "")

    return "; ".join(f"`{t}`: {words(t)}" for t in tuners)


def _git(*args) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception:  # noqa: BLE001
        return "?"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {cpu}, Python {platform.python_version()}"


def _md_table(headers, rows) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


# ------------------------------------------------------------------------- sections
def section_simulator(img: str) -> tuple[str, dict]:
    from scripts import bench_vta_sim, calibrate_vta

    t0 = time.perf_counter()
    cal = calibrate_vta.run()
    speed = bench_vta_sim.run(samples=30, check=True, check_samples=4)
    wall = time.perf_counter() - t0
    md = ["## 1. VTA simulator", "",
          "Command: `python -m scripts.calibrate_vta` and `python -m scripts.bench_vta_sim --samples 30 --check "
          "--check-samples 4` (pynq preset, one core).", "",
          "**Calibration** against every usable measured TopHub layer time (`conv2d_packed.vta` "
          "records of `vta_v0.10.log`: ResNet-18/50, AlexNet, VGG-16 on the PYNQ 1x16 bitstream "
          "at batch 1 and the 4x8 bitstream at batch 4, 100 MHz; four campaigns; every constant "
          "is chosen on the `fit` rows (ResNet-18/50), the `evaluation` rows (AlexNet, VGG-16) "
          "check them):", "",
          _md_table(["line", "network", "campaign", "split", "workload", "cycles", "predicted ms",
                     "measured ms", "error"],
                    [[r["line"], r["network"], r["campaign"], r["split"], r["workload"],
                      f"{r['cycles']:,}", f"{r['predicted_ms']:.3f}", f"{r['measured_ms']:.3f}",
                      f"{r['error_pct']:+.1f}%"] for r in cal]), "",
          "; ".join(f"{k}: mean |error| {g['mean']:.1f}%, max {g['max']:.1f}% ({g['n']} rows)"
                    for k, g in calibrate_vta.groups(cal).items()) + ".", "",
          "Rank correlation (Spearman) of modelled vs measured time per campaign: "
          + ", ".join(f"{k} {v:.3f}" for k, v in calibrate_vta.rank_correlations(cal).items()) + ".",
          "", "**Speed** (random valid schedules per layer; `check` = largest cycle difference of the fast "
              "path vs the instruction-level reference simulation):", "",
          _md_table(["layer", "workload", "space", "sims/s", "ms/sim", "instructions", "check"],
                    [[r["layer"], r["workload"], r["space"], f"{r['sims_per_s']:.0f}", f"{r['ms_per_sim']:.2f}",
                      f"{r['mean_insns']:.0f}",
                      f"{100 * r.get('check_max_rel_diff', 0):.3f}% ({r.get('check_cases', 0)})"]
                     for r in speed if "seconds" not in r])]
    for r in speed:
        if "seconds" in r:
            md += ["", f"Exhaustive evaluation of {r['workload']} ({r['space']} points, {r['valid']} valid): "
                       f"**{r['seconds']:.1f} s** on one core (target < 30 s)."]
    tvr = _tune_vs_run(md)
    wall = time.perf_counter() - t0
    md.append(f"\n_Section wall time {wall:.0f} s._\n")
    return "\n".join(md), {"calibration": cal, "speed": speed, "tune_vs_run": tvr}


def _tune_vs_run(md: list) -> list:
    """Tune vs run rows (scripts/bench_tune_vs_run.py) appended to ``md``."""
    from scripts import bench_tune_vs_run

    rows = bench_tune_vs_run.run(trials=100, seed=0, input_size=64)
    md += ["", "**Tune vs run** (`python -m scripts.bench_tune_vs_run --input-size 64`: seed 0, "
               "100 trials, zoo models at 64x64; the latency `dcoc tune` reports vs the one "
               "`dcoc run` measures for the same result; must agree within 1% with no layer "
               "re-tiled):", "",
           _md_table(["model", "board", "tuned hardware", "tune ms", "run ms", "run vs tune",
                      "adapted", "bit-exact"],
                     [[r["model"], r["board"], r["hardware"], f"{r['tune_ms']:.3f}",
                       f"{r['run_ms']:.3f}", f"{round(r['diff_pct'], 2) + 0.0:+.2f}%", r["adapted"],
                       "yes" if r["bit_exact"] else "NO"] for r in rows])]
    return rows


def _plot_sw(res: dict, img: str) -> list[str]:
    from dcoc.results.plots import _plt
    from scripts import bench_sw

    plt = _plt()
    runs = res["runs"]
    layers = res.get("layers") or sorted({r["layer"] for r in runs})
    tuners = [t for t in res.get("tuners", []) if t in ("random", "ga", "xgb", "rl", "chameleon", "surrogate",
                                                         "dcoc", "dcoc-frozen")]
    bold = (bench_sw.REFERENCE, bench_sw.PAPER)
    paths = []
    for axis in ("trials", "wall"):
        n = len(layers)
        cols = min(n, 3)
        rows = math.ceil(n / cols)
        fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.9 * rows + 0.6), dpi=100, squeeze=False)
        for ax, layer in zip(axes.flat, layers):
            for t in tuners:
                rs = [r for r in runs if r["layer"] == layer and r["tuner"] == t]
                if not rs:
                    continue
                opt = rs[0]["opt"]
                L = min(len(r["curve"]) for r in rs)
                q = [[opt / c if math.isfinite(c) else 0 for c in r["curve"][:L]] for r in rs]
                mean = [statistics.mean(col) for col in zip(*q)]
                lo = [min(col) for col in zip(*q)]
                hi = [max(col) for col in zip(*q)]
                if axis == "trials":
                    x = list(range(1, L + 1))
                else:
                    sim = res.get("sim_seconds", {}).get(layer, 0.0)
                    walls = [r.get("tuner_wall") or [0] * L for r in rs]
                    x = [statistics.mean(col) + (i + 1) * sim for i, col in enumerate(zip(*[w[:L] for w in walls]))]
                ax.plot(x, mean, label=t, lw=1.4 if t in bold else 1.0)
                ax.fill_between(x, lo, hi, alpha=0.12)
            ax.set_title(f"{layer} (pynq)", fontsize=12)
            ax.set_ylim(0.5, 1.01)
            ax.set_xscale("log")
            ax.set_xlabel("trials" if axis == "trials" else "wall seconds (tuner + simulation)", fontsize=11)
            ax.set_ylabel("best / optimum throughput", fontsize=11)
            ax.tick_params(labelsize=10)
            ax.grid(alpha=0.3)
        for ax in list(axes.flat)[len(layers):]:
            ax.axis("off")
        from dcoc.results.plots import figure_legend

        fig.tight_layout()
        figure_legend(fig, axes)  # one legend for all panels, below them
        p = os.path.join(img, f"sw_curves_{axis}.png")
        fig.savefig(p)
        plt.close(fig)
        paths.append(p)
    return paths


def section_sw(cfg: dict, img: str) -> tuple[str, dict]:
    from scripts import bench_sw

    t0 = time.perf_counter()
    layers_cfg = cfg["layers"]
    if layers_cfg == "quick-evaluation":
        layers_cfg = bench_sw.QUICK_EVALUATION
    elif isinstance(layers_cfg, str):
        layers_cfg = bench_sw.SETS[layers_cfg]
    res = bench_sw.run(layers_cfg, cfg.get("tuners"), cfg["seeds"], cfg["budget"], quiet=True)
    wall = time.perf_counter() - t0
    paths = _plot_sw(res, img)
    s = res["summary"]
    layers = res["layers"]
    tuners = res["tuners"]
    seeds = cfg["seeds"]
    lay_arg = " ".join(layers_cfg)
    ref, paper = bench_sw.REFERENCE, bench_sw.PAPER
    md = ["## 2. Software-only tuning (VTA conv layers of the evaluation set, pynq preset)", "",
          f"Command: `python -m scripts.bench_sw --layers {lay_arg} --tuners {' '.join(tuners)} "
          f"--seeds {' '.join(map(str, seeds))} --budget {cfg['budget']}`; {len(seeds)} seeds; budget "
          f"{cfg['budget']} trials per run.  Measurements are answered from the layer's exhaustively "
          "simulated table.  The layers are from the **evaluation set** (VGG-16 and MobileNetV2 conv "
          "layers; `bench_sw.EVALUATION_SET`): no hyperparameter of any tuner was chosen on them; every "
          "hyperparameter (the DCOC family's, xgb's plan size 8) was chosen on the **tuning set**, "
          "ResNet-18 C2..C11 ([method.md](method.md#tuning-set-and-evaluation-set)).  "
          "Every model-based tuner (xgb, rl, chameleon, surrogate, dcoc and their variants) starts "
          "from the same 8 random configs per (layer, seed) (`dcoc/tuners/warmup.py`); rl and "
          "chameleon walk 128 x 500 per plan as CHAMELEON does.", "",
          "Tuners: " + explain(tuners) + ".", "",
          f"**All runs, paired against `{ref}`, the default** (median [IQR] over every (layer, seed) "
          "run; two-sided Wilcoxon signed-rank test over the same (layer, seed) pairs; a difference "
          f"is called better/worse only at p < 0.05; `+/-` = pairs where the tuner was better/worse "
          f"than `{ref}`; trials to 99%: a run that never got there counts as {cfg['budget'] + 1}):", "",
          bench_sw.render_compare(res["compare"], cfg["budget"], ref, md=True), ""]
    if res.get("compare_paper"):
        md += [f"**The paper's method `{paper}` against its ablations** (paired the same way; "
               f"`+/-` = pairs where the ablation was better/worse than `{paper}`):", "",
               bench_sw.render_compare(res["compare_paper"], cfg["budget"], paper, md=True), ""]
    md += ["**Trials to reach 99% of the exhaustive optimum** per layer (median over seeds; `-` = not "
           "reached; in brackets: seeds that reached it):", ""]
    rows = []
    for l in layers:
        first = s[(l, tuners[0])]
        row = [l, first["valid"], f"{5 * first['space'] // 100}"]
        for t in tuners:
            v = s[(l, t)]
            row.append(("-" if v["t99_median"] == math.inf else f"{v['t99_median']:.0f}") + f" ({v['t99_reached']})")
        rows.append(row)
    md.append(_md_table(["layer", "valid configs", "5% of space"] + tuners, rows))
    for qk, label in (("q100", "100"), ("q300", "300")):
        if int(label) > cfg["budget"]:   # the runs end before: it would repeat the last table
            continue
        md += ["", f"**Best found after {label} trials** (fraction of the optimum's throughput, median):", "",
               _md_table(["layer"] + tuners, [[l] + [f"{s[(l, t)][qk]:.3f}" for t in tuners] for l in layers])]
    md += ["", "**Tuner overhead** (ms per trial, median over layers; no simulation):", "",
           _md_table(["tuner", "ms/trial"],
                     [[t, f"{statistics.median(s[(l, t)]['ms_per_trial'] for l in layers):.1f}"] for t in tuners])]
    if res["thirty_x"]:
        md += ["", f"**`{paper}` vs single-agent RL**: trials to reach the quality RL has at the end of its "
                   "budget:", "",
               _md_table(["layer", "seed", "rl trials", f"{paper} trials", f"rl / {paper}"],
                         [[r["layer"], r["seed"], r["rl_trials"], r["dcoc_trials"] or "-",
                           f"{r['ratio']:.1f}x" if r["ratio"] else "-"] for r in res["thirty_x"]])]
        ratios = [r["ratio"] for r in res["thirty_x"] if r["ratio"]]
        if ratios:
            md.append(f"\nMedian ratio {statistics.median(ratios):.1f}x (target: at least 30x).")
    # per-layer medians, stated plainly (the paired tests above are what counts)
    notes = []
    for l in layers:
        d = s[(l, ref)]["t99_median"] if (l, ref) in s else math.inf
        better = [t for t in tuners if t != ref and s[(l, t)]["t99_median"] <= d]
        if better:
            notes.append(f"{l}: {', '.join(better)} reached 99% in as few or fewer trials than {ref}")
        if d > 0.05 * s[(l, tuners[0])]["space"]:
            notes.append(f"{l}: {ref} needed more than 5% of the space")
    md += ["", f"**Where `{ref}` does not win:** " + ("; ".join(notes) if notes else "nowhere in this run."), ""]
    md += [f"![tuning curves vs trials](img/{os.path.basename(paths[0])})", "",
           f"![tuning curves vs wall time](img/{os.path.basename(paths[1])})", "",
           f"_Section wall time {wall:.0f} s._", ""]
    return "\n".join(md), res


def _plot_pareto(res: dict, img: str) -> list[str]:
    from dcoc.results.plots import _plt

    plt = _plt()
    paths = []
    keys = sorted({(r["model"], r["board"]) for r in res["runs"]})
    for model, board in keys:
        fig, axes = plt.subplots(1, 3, figsize=(14, 3.8), dpi=100)
        res_keys = ("bram36", "dsp", "lut")
        everything = {}
        for tuner in sorted({r["tuner"] for r in res["runs"]}):
            pts = {}
            for r in res["runs"]:
                if (r["model"], r["board"], r["tuner"]) == (model, board, tuner):
                    for e in r["explored"]:
                        pts[e["hw"]] = e
            if not pts:
                continue
            everything.update(pts)
            for ax, res_key in zip(axes, res_keys):
                xs = [e["resources"][res_key] for e in pts.values()]
                ys = [1000.0 / e["latency_ms"] for e in pts.values()]
                ax.scatter(xs, ys, s=18, alpha=0.7, label=f"{tuner} ({len(pts)} configs)")
        ref = res["refs"][f"{model}|{board}"]
        for ax, res_key in zip(axes, res_keys):
            # Pareto front over every tuner's configs: more throughput for no more resource
            front, best = [], -1.0
            for e in sorted(everything.values(), key=lambda e: (e["resources"][res_key], e["latency_ms"])):
                thr = 1000.0 / e["latency_ms"]
                if thr > best:
                    best = thr
                    front.append((e["resources"][res_key], thr))
            if front:
                ax.step([x for x, _ in front], [y for _, y in front], where="post", color="0.4", lw=1,
                        label="Pareto front")
            ax.axhline(1000.0 / ref["tuned_ms"], color="k", ls="--", lw=0.8, label="default hw, optimal schedules")
            ax.set_xlabel(f"{res_key.upper()} used")
            ax.set_ylabel("inferences / s (VTA layers)")
            ax.grid(alpha=0.3)
        axes[0].set_title(f"{model} on {board}: hardware explored", fontsize=12)
        from dcoc.results.plots import figure_legend

        fig.tight_layout()
        figure_legend(fig, axes)
        p = os.path.join(img, f"codesign_pareto_{model}_{board}.png")
        fig.savefig(p)
        plt.close(fig)
        paths.append(p)
        # curves
        from dcoc.results.plots import plot_curves

        curves = {}
        for r in res["runs"]:
            if (r["model"], r["board"]) == (model, board):
                curves.setdefault(r["tuner"], []).append([(t + 1, v) for t, v in r["history"]])
        paths.append(plot_curves(curves, os.path.join(img, f"codesign_curve_{model}_{board}.png"),
                                 f"{model} on {board}: best end-to-end latency", ylabel="latency (ms)"))
    return paths


def section_codesign(cfg: dict, img: str) -> tuple[str, dict]:
    from scripts import bench_codesign

    t0 = time.perf_counter()
    res = bench_codesign.run(cfg["models"], cfg["boards"], cfg["tuners"], cfg["seeds"], cfg["trials"], quiet=True)
    wall = time.perf_counter() - t0
    paths = _plot_pareto(res, img)
    rows = bench_codesign.summarize(res)
    tuners = res["tuners"]
    ref = bench_codesign.REFERENCE
    md = ["## 3. Co-design: accelerator + schedules", "",
          f"Command: `python -m scripts.bench_codesign --models {' '.join(cfg['models'])} --boards "
          f"{' '.join(cfg['boards'])} --tuners {' '.join(tuners)} --seeds {' '.join(map(str, cfg['seeds']))} "
          f"--trials {cfg['trials']}`.  Every tuner gets the same budget ({cfg['trials']} simulations) and "
          "starts from the board's default hardware with default schedules.  Reference = the default "
          "hardware with the exhaustively optimal schedule of every layer.  The DCOC family "
          "(surrogate, dcoc, dcoc-frozen and their specs) runs the DCOC co-design driver "
          "(docs/method.md, \"Co-design\"); the other tuners propose (hardware, schedules) jointly with the "
          "same transferred-schedule openings; `sweep` learns nothing.  The co-design settings "
          "were developed on ResNet-18, so this section is a "
          "tuning-set result, not an independent evaluation (other models and boards at small "
          "budgets: `python -m scripts.bench_codesign --budgets 100 200 500 1000 --models resnet18 "
          "mobilenetv2 --boards pynq ultra96 zcu104`).", "",
          "Tuners: " + explain(tuners) + ".", "",
          f"**All runs, paired against `{ref}`, the default** (speed-up over the tuned preset, median "
          "[IQR] over every (board, seed); two-sided Wilcoxon signed-rank test over the same pairs; "
          "better/worse only at p < 0.05):", "",
          bench_codesign.render_compare(res["compare"], md=True), "",
          _md_table(["model", "board", "tuner", "latency ms (median)", "vs tuned preset", "vs default schedules",
                     "hardware (most frequent)", "BRAM36", "DSP", "LUT", "wall s"],
                    [[r["model"], r["board"], r["tuner"], f"{r['latency_ms']:.3f}", f"{r['vs_tuned_preset']:.3f}x",
                      f"{r['vs_default']:.3f}x", r["hw"], r["resources"]["bram36"], r["resources"]["dsp"],
                      r["resources"]["lut"], f"{r['wall_s']:.0f}"] for r in rows]),
          ""]
    for k, v in res["refs"].items():
        md.append(f"- reference {k}: {v['hw']}, optimal schedules {v['tuned_ms']:.3f} ms, default schedules "
                  f"{v['default_ms']:.3f} ms")
    # per (model, board) medians, stated plainly (the paired test above is what counts)
    notes = []
    by = {}
    for r in rows:
        by.setdefault((r["model"], r["board"]), {})[r["tuner"]] = r["latency_ms"]
    for (m, b), d in by.items():
        if ref in d:
            beat = [t for t, v in d.items() if t != ref and v <= d[ref]]
            if beat:
                notes.append(f"{m}/{b}: {', '.join(beat)} as good or better than {ref}")
    md += ["", f"**Where `{ref}` does not win:** " + ("; ".join(notes) if notes else "nowhere in this run."), ""]
    for p in paths:
        md += [f"![{os.path.basename(p)}](img/{os.path.basename(p)})", ""]
    md.append(f"_Section wall time {wall:.0f} s._\n")
    return "\n".join(md), res


def section_metaschedule(cfg: dict, img: str) -> tuple[str, dict]:
    from scripts import bench_metaschedule

    t0 = time.perf_counter()
    rows = bench_metaschedule.run(budgets=cfg["budgets"], seeds=cfg["seeds"], population=cfg["population"],
                                  log=lambda line: print(line, file=sys.stderr, flush=True))
    wall = time.perf_counter() - t0
    pop = f" --population {cfg['population']}" if cfg["population"] else ""
    ours = bench_metaschedule.DEFAULT
    md = ["## 4. MetaSchedule (llvm)", "",
          f"Command: `python -m scripts.bench_metaschedule --budgets {' '.join(map(str, cfg['budgets']))} "
          f"--seeds {' '.join(map(str, cfg['seeds']))}{pop} --strategies "
          f"{' '.join(bench_metaschedule.STRATEGIES)}`; budgets {cfg['budgets']} trials per task "
          f"(the model: per model), seeds {cfg['seeds']}; the same builder, runner and candidates "
          "per batch for every strategy (kernels 16; the model: `tune_model`'s, at most 16).  "
          f"`{ours}` = dcoc's default tuner as a "
          "MetaSchedule search strategy (`TunerStrategy`).  `best ms` = the best schedule re-timed "
          "after tuning, interleaved with the other strategies' best (see the script's docstring); "
          f"ratios are per seed, vs EvolutionarySearch (< 1: faster kernels / less tuning time).",
          "", bench_metaschedule.summarize(rows), ""]
    ev = {}
    for r in rows:
        if r.get("strategy") in (ours, "evolutionary"):
            ev.setdefault((r["workload"], r["budget"], r["seed"]), {})[r["strategy"]] = r["best_ms"]
    worse = sorted({f"{w} @ {b}" for (w, b, _), v in ev.items() if len(v) == 2 and v[ours] > 1.02 * v["evolutionary"]})
    better = sorted({f"{w} @ {b}" for (w, b, _), v in ev.items() if len(v) == 2 and v[ours] < 0.98 * v["evolutionary"]})
    md.append(f"**`{ours}` faster than EvolutionarySearch (> 2%, any seed):** {', '.join(better) or 'none'}.  ")
    md.append(f"**`{ours}` slower (> 2%, any seed):** {', '.join(worse) or 'none'}.")
    md.append(f"\n_Section wall time {wall:.0f} s._\n")
    return "\n".join(md), {"rows": rows}


def section_cpu(cfg: dict, img: str) -> tuple[str, dict]:
    from scripts import bench_cpu

    t0 = time.perf_counter()
    models = cfg.get("models") or list(bench_cpu.TUNING_MODELS + bench_cpu.EVALUATION_MODELS)
    command = (f"python -m scripts.bench_cpu --models {' '.join(models)} --budget-minutes "
               f"{' '.join(f'{m:g}' for m in cfg['minutes'])} --seed {cfg['seed']}")
    if cfg.get("rows"):  # rows of an earlier (resumable) run
        rows = bench_cpu.read_rows([cfg["rows"]])
        command += " --out ROWS"
    else:
        os.makedirs(os.path.join(ROOT, "runs"), exist_ok=True)
        rows = bench_cpu.run(models, cfg["minutes"], seed=cfg["seed"],
                             out=os.path.join(ROOT, "runs", "bench_cpu_rows.jsonl"),
                             log=lambda line: print(line, file=sys.stderr, flush=True))
    wall = time.perf_counter() - t0
    md = ["## 5. CPU: tuned models vs ONNX Runtime", "",
          f"Command: `{command}`.  Each run tunes "
          "one model in a fresh work dir until its wall-clock budget runs out, with no trial "
          "limit: dcoc's default tuner as a MetaSchedule strategy with its pre-trained start "
          "(`surrogate`) and without it (`surrogate/no-prior`), and MetaSchedule's "
          f"EvolutionarySearch at its authors' population {bench_cpu.AUTHORS_POPULATION}; the "
          "same compile pipeline (weight prepacking, host `-mcpu`, the TVM runtime on all "
          "physical cores).  Every compiled model and ONNX Runtime (CPU EP, same thread count) "
          f"are then timed in {bench_cpu.ROUNDS} alternating rounds, each runtime in a process "
          "of its own.  The evaluation models (squeezenet, shufflenet: the onnx wheel's "
          "`light_*` at 224x224) chose nothing, the pre-trained start's data included.  "
          "Numbers depend on the machine and its load.", "", bench_cpu.summarize(rows),
          f"_Section wall time {wall:.0f} s._\n" if not cfg.get("rows") else
          f"_Tuning wall time {sum(r.get('wall_s') or 0 for r in rows):.0f} s; timing re-run "
          "from the runs' work dirs._\n"]
    return "\n".join(md), {"rows": rows}


def _jsonable(x):
    """``x`` with tuple dict keys joined by ``|`` (raw results keep their structure)."""
    if isinstance(x, dict):
        return {("|".join(map(str, k)) if isinstance(k, tuple) else k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x


#: the sections in file order, by the ``## N. `` prefix of their headings
SECTIONS = {"simulator": "## 1. ", "sw": "## 2. ", "codesign": "## 3. ", "metaschedule": "## 4. ",
            "cpu": "## 5. "}


def split_sections(text: str) -> tuple[str, dict]:
    """(header, {section name: its text}) of an existing RESULTS.md, so ``--sections`` can
    regenerate some sections and keep the others as they are.  A ``## `` section that is
    not one of :data:`SECTIONS` is dropped: the file holds only what this script writes."""
    head, out, cur = [], {}, None
    for line in text.splitlines():
        if line.startswith("## "):
            cur = next((n for n, pre in SECTIONS.items() if line.startswith(pre)), "")
            if cur:
                out[cur] = []
        if cur is None:
            head.append(line)
        elif cur:
            out[cur].append(line)
    return "\n".join(head).strip(), {n: "\n".join(v).rstrip() + "\n" for n, v in out.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", choices=list(SUITES), default="quick")
    ap.add_argument("--sections", nargs="*", default=list(SECTIONS), choices=list(SECTIONS),
                    help="sections to run (default: all); the others are kept from --out as they are")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "RESULTS.md"))
    ap.add_argument("--cpu-rows", default=None, metavar="ROWS",
                    help="section cpu from these bench_cpu rows instead of running it (rows of "
                         "the suite's settings, e.g. `bench_cpu --out ROWS` run in sittings)")
    a = ap.parse_args(argv)
    cfg = {**SUITES[a.suite]}
    if a.cpu_rows:
        cfg["cpu"] = {**cfg["cpu"], "rows": a.cpu_rows}
    img = os.path.join(os.path.dirname(a.out), "img")
    os.makedirs(img, exist_ok=True)
    t0 = time.perf_counter()
    # uncommitted changes to anything but this run's own outputs (checked before they are rewritten)
    dirty = [line for line in _git("status", "--porcelain", "--untracked-files=no").splitlines()
             if not line[3:].startswith(("docs/RESULTS.md", "docs/img/"))]
    commit = _git("rev-parse", "--short", "HEAD")
    # finished sections of this suite at this commit (a clean tree only): an interrupted
    # run resumes instead of starting over
    ckpt = None if dirty or not commit else os.path.join(ROOT, "runs", "bench_sections", f"{a.suite}-{commit}")
    parts, raw, reused = [], {}, []
    for name in a.sections:
        saved = os.path.join(ckpt, name + ".json") if ckpt else None
        if saved and os.path.exists(saved):
            with open(saved) as f:
                done = json.load(f)
            parts.append(done["md"])
            raw[name] = done["data"]
            reused.append(name)
            print(f"== {name}: reused from {saved}", file=sys.stderr, flush=True)
            continue
        print(f"== {name} ...", file=sys.stderr, flush=True)
        t1 = time.perf_counter()
        if name == "simulator":
            md, data = section_simulator(img)
        elif name == "sw":
            md, data = section_sw(cfg["sw"], img)
        elif name == "codesign":
            md, data = section_codesign(cfg["codesign"], img)
        elif name == "cpu":
            md, data = section_cpu(cfg["cpu"], img)
        else:  # metaschedule (argparse admits only SECTIONS)
            md, data = section_metaschedule(cfg["metaschedule"], img)
        parts.append(md)
        raw[name] = data
        if saved:
            os.makedirs(ckpt, exist_ok=True)
            with open(saved + ".tmp", "w") as f:
                json.dump({"md": md, "data": _jsonable(data)}, f, default=str)
            os.replace(saved + ".tmp", saved)
        print(f"   {name} done in {time.perf_counter() - t1:.0f} s", file=sys.stderr, flush=True)
    head = ["# dcoc benchmark results", "",
            f"Generated by `python -m scripts.bench --suite {a.suite}` (`make bench` runs the quick suite) on "
            f"{datetime.date.today().isoformat()}, commit `{commit}`"
            f"{' (uncommitted changes)' if dirty else ''}; "
            f"machine: {machine()}.  Total wall time {time.perf_counter() - t0:.0f} s"
            + (f" (sections {', '.join(reused)} from an interrupted run of the same commit)" if reused else "")
            + ".  "
            "How to read each number: [method.md](method.md#how-to-read-the-numbers-in-resultsmd).", ""]
    old_head, old_parts = "", {}
    if os.path.exists(a.out):
        with open(a.out) as f:
            old_head, old_parts = split_sections(f.read())
    new_parts = dict(zip(a.sections, parts))
    if set(SECTIONS) - set(a.sections) and old_parts:  # a partial run keeps the other sections
        done = ", ".join(a.sections)
        head = [old_head, "",
                f"Regenerated on {datetime.date.today().isoformat()} by `python -m scripts.bench --suite "
                f"{a.suite} --sections {' '.join(a.sections)}` (commit `{commit}`"
                f"{', uncommitted changes' if dirty else ''}; {time.perf_counter() - t0:.0f} s): {done}; "
                "the other sections are kept from the run above.", ""]
        parts = [new_parts.get(n) or old_parts[n] for n in SECTIONS if n in new_parts or n in old_parts]
    with open(a.out, "w") as f:
        f.write("\n".join(head + parts) + "\n")
    os.makedirs(os.path.join(ROOT, "runs"), exist_ok=True)
    with open(os.path.join(ROOT, "runs", f"bench_raw_{a.suite}.json"), "w") as f:
        json.dump(_jsonable(raw), f, default=str)
    print(f"wrote {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
