"""Co-design benchmark: the DCOC family vs the baselines on the same joint space and budget.

For each (model, board, tuner, seed) one co-design run with ``trials`` simulations
(:func:`dcoc.codesign.make_driver`; the tuner is a name or ``NAME:key=value`` spec):
``surrogate`` (the default: the XGBoost ensemble's own search, top-k), ``dcoc`` (the
paper's method: the agents propose, confidence sampling selects), ``dcoc-frozen`` (agents
that never learn), ``surrogate:select=confidence`` (confidence sampling instead of top-k)
and ``surrogate:hw_explore_every=1000000000`` (no hardware exploration quota) run on
:class:`dcoc.codesign.DCOCCoDesign`; ``random``, ``ga``, ``xgb``, ``rl`` and ``chameleon``
propose (hardware, schedules) jointly (:class:`dcoc.codesign.JointCoDesign`); ``sweep``
learns nothing.  Reported per (model, board, tuner), median over seeds:

* ``latency``: end-to-end accelerator latency of the best (hardware, schedules) found;
* ``vs tuned preset``: speed-up over the board's default hardware (the pynq preset on
  pynq; the same 1x16x16 core at the board's clock/bus elsewhere) with the
  *exhaustively optimal* schedule for every layer -- the best software alone can do;
* ``vs default``: speed-up over the default hardware with the default schedules;
* the hardware chosen (most frequent over seeds) and its resources;
* wall seconds per run (simulation included; a memo answers repeated configs).

What decides: per tuner, the median [IQR] over every (model, board, seed) run of the
speed-up over the tuned preset, and a paired two-sided Wilcoxon signed-rank test
(:mod:`dcoc.stats`) against the default ``surrogate`` over the same (model, board, seed)
triples; "better"/"worse" only at p < 0.05.  With 5 seeds a single (model, board) pair
gives 5 pairs, too few for p < 0.05 (the smallest two-sided p is 0.0625): the quick suite
pools two boards.  The explored hardware configs (measured model latency vs BRAM/DSP/LUT)
are kept for the Pareto plot of ``scripts.bench``.

Small budgets: ``--budgets 100 200 500 1000`` runs every tuner once with the largest
budget and reads each run's best design at every budget off its tuning curve.  The
reference is then the **best-known design** (:func:`best_known`): per-layer exhaustive
schedules on the top ``--best-known-top`` (20) hardware configs of the landscape
(:mod:`scripts.hw_landscape`: every feasible config under default schedules) and on every
config any run found best, computed offline and cached.  Reported per budget: the fraction
of the best-known throughput each tuner reaches (best-known latency / its latency; 0 when
no complete design yet), median [IQR] over (model, board, seed) with a paired Wilcoxon
test against ``surrogate``, per (model, board) the median over seeds, and whether
``surrogate`` reaches 99% of the best-known at 500 simulations on every (model, board).
``--merge A.json B.json ...`` runs nothing: it pools the ``--json`` files of earlier
``--budgets`` runs (e.g. one per board) into one report (:func:`merge`); with
``--exhaustive-found`` every config any of those runs ended on is searched exhaustively
too (cached).

``--mix`` runs the model-mix case instead (:mod:`scripts.bench_mix`: one accelerator for
ResNet-18 + MobileNetV2 + a small ResNet vs the best single-model design; its options follow).

    python -m scripts.bench_codesign --models resnet18 --boards pynq --trials 500 --seeds 0
    python -m scripts.bench_codesign --mix --boards pynq ultra96 --seeds 0 1 2
    python -m scripts.bench_codesign --budgets 100 200 500 1000 --models resnet18 mobilenetv2 \\
        --boards pynq ultra96 zcu104 --tuners surrogate dcoc sweep xgb ga rl random
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

TUNERS = ["surrogate", "dcoc", "dcoc-frozen", "surrogate:select=confidence",
          "surrogate:hw_explore_every=1000000000", "sweep", "random", "ga", "xgb", "rl", "chameleon"]
#: the reference of every paired test: the default tuner
REFERENCE = "surrogate"

_LAYER_CACHE: dict = {}


def _layers(model):
    if model not in _LAYER_CACHE:
        from dcoc.targets import get
        from tvm_plugin.frontend import model_tasks

        _LAYER_CACHE[model] = get("vta").layers(model_tasks(model, "vta"))[0]
    return _LAYER_CACHE[model]


def reference(model: str, board: str) -> dict:
    """Default hardware with exhaustively optimal and with default schedules."""
    from dcoc.api.accelerator import _baseline_latency
    from dcoc.targets.vta import BOARDS, HWConfig
    from dcoc.targets.vta.catalogue import exhaustive

    bd = BOARDS[board]
    hw = HWConfig.preset("pynq") if board == "pynq" else bd.default_hw()
    opt = 0.0
    layers = _layers(model)
    for layer in layers:
        table = exhaustive(layer.workload, hw, epilogue=layer.epilogue)
        opt += layer.count * min(v for v in table.values() if v is not None)
    return {"hw": hw.name, "tuned_ms": opt * 1e3, "default_ms": _baseline_latency(layers, hw) * 1e3}


def _hw_fields(hw) -> dict:
    from dcoc.results.result import _hw_dict

    return {k: v for k, v in _hw_dict(hw).items() if k != "name"}


# ------------------------------------------------------------------ best-known design
def _hw_optimum(args):
    """Latency (ms) of ``model`` on one hardware config with every layer's exhaustively
    optimal schedule (None if a layer has no valid schedule there)."""
    model, fields = args
    from dcoc.targets.vta import HWConfig
    from dcoc.targets.vta.catalogue import exhaustive

    hw = HWConfig(**fields)
    total = 0.0
    for layer in _layers(model):
        vals = [v for v in exhaustive(layer.workload, hw, epilogue=layer.epilogue).values() if v is not None]
        if not vals:
            return hw.name, None
        total += layer.count * min(vals)
    return hw.name, total * 1e3


def _best_known_path(model: str, board: str) -> str:
    from dcoc.targets.vta.catalogue import cache_root, timing_model_tag
    from dcoc.targets.vta.report import MODEL_EPILOGUE

    return os.path.join(cache_root("best_known"), f"{model}_{board}_{timing_model_tag(MODEL_EPILOGUE)}.json")


def _best_known_cache(model: str, board: str) -> dict:
    """``{hw name: ms}`` of every config already searched exhaustively (any script)."""
    path = _best_known_path(model, board)
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def best_known(model: str, board: str, extra=(), top: int = 20, jobs: int | None = None,
               quiet: bool = True) -> dict:
    """The best-known design of ``model`` on ``board``: the lowest latency over the top
    ``top`` configs of the default-schedule landscape plus ``extra`` (HWConfigs or their
    field dicts, e.g. what tuners found), each with exhaustively optimal per-layer schedules.

    Cached per (model, board, timing model) under ``$DCOC_CACHE/best_known`` (shared with
    :mod:`scripts.bench_transfer`); each config is added to the cache as soon as it is
    searched, so an interrupted search resumes.  Returns ``{"latency_ms", "hw",
    "evaluated": {hw: ms}, "landscape_top"}``.
    """
    from dcoc.targets.vta import BOARDS
    from dcoc.targets.vta.spaces import make_hw
    from scripts import hw_landscape

    path = _best_known_path(model, board)
    cached = _best_known_cache(model, board)
    land = [r for r in hw_landscape.run(model, board, jobs=jobs) if r["latency_ms"]] if top > 0 else []
    cands = {}
    for r in land[:top]:
        hw = make_hw({k: r[k] for k in r if k not in ("hw", "latency_ms", "resources")}, BOARDS[board])
        cands[hw.name] = _hw_fields(hw)
    for f in extra:
        f = f if isinstance(f, dict) else _hw_fields(f)
        cands.setdefault(_hw_name(f), dict(f))
    todo = [(model, f) for n, f in cands.items() if n not in cached]

    def searched():
        if jobs == 1 or len(todo) <= 1:
            yield from map(_hw_optimum, todo)
            return
        with ProcessPoolExecutor(min(jobs or os.cpu_count(), len(todo))) as ex:
            yield from ex.map(_hw_optimum, todo)

    t0 = time.perf_counter()
    for i, (n, ms) in enumerate(searched()):
        cached[n] = ms
        if not quiet:
            print(f"  best-known {model}/{board}: [{i + 1}/{len(todo)}] {n}: "
                  f"{ms if ms is None else round(ms, 4)} ms ({time.perf_counter() - t0:.0f} s)",
                  file=sys.stderr, flush=True)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "w") as f:
            json.dump(cached, f)
        os.replace(path + ".tmp", path)
    ev = {n: cached[n] for n in cands if cached.get(n)}
    best = min(ev, key=ev.get)
    return {"latency_ms": ev[best], "hw": best, "evaluated": ev, "landscape_top": top}


def _hw_name(fields: dict) -> str:
    from dcoc.targets.vta import HWConfig

    return HWConfig(**fields).name


def at_budget(history, budget: int) -> float:
    """Best latency (ms) a run had after ``budget`` simulations (inf before its first
    complete design)."""
    vals = [lat for t, lat in history if t <= budget]
    return min(vals) if vals else math.inf


def budget_compare(res: dict, budgets, reference: str = REFERENCE) -> dict:
    """Per budget and tuner: the fraction of the best-known throughput (median [IQR] over
    every (model, board, seed)) and a paired Wilcoxon test against ``reference``; per
    (model, board, budget, tuner) the median over seeds."""
    from dcoc.stats import median_iqr, paired_test

    bk = res["best_known"]
    frac: dict = {}
    for r in res["runs"]:
        ref = bk[f"{r['model']}|{r['board']}"]["latency_ms"]
        for b in budgets:
            lat = at_budget(r["history"], b)
            frac.setdefault(b, {}).setdefault(r["tuner"], {})[(r["model"], r["board"], r["seed"])] = \
                ref / lat if math.isfinite(lat) else 0.0
    pooled, per_pair = [], []
    for b in budgets:
        base = frac[b].get(reference, {})
        for tuner, v in frac[b].items():
            keys = sorted(v)
            row = {"budget": b, "tuner": tuner, "runs": len(keys), "fraction": median_iqr([v[k] for k in keys])}
            pairs = [k for k in keys if k in base]
            if tuner != reference and pairs:
                pt = paired_test([base[k] for k in pairs], [v[k] for k in pairs], lower_is_better=False)
                row["test"] = {"n": pt.n, "better": pt.better, "worse": pt.worse,
                               "median_diff": pt.median_diff, "p": pt.p, "sign": pt.sign()}
            pooled.append(row)
            by_pair: dict = {}
            for (m, bd, _), x in v.items():
                by_pair.setdefault((m, bd), []).append(x)
            for (m, bd), xs in sorted(by_pair.items()):
                per_pair.append({"budget": b, "tuner": tuner, "model": m, "board": bd,
                                 "median_fraction": statistics.median(xs), "seeds": len(xs)})
    return {"pooled": pooled, "per_pair": per_pair}


def render_budgets(res: dict, md: bool = False) -> str:
    from dcoc.cli.options import render_table
    from dcoc.stats import fmt_p

    bc = res["budget_compare"]
    budgets = res["budgets"]
    tuners = list(dict.fromkeys(r["tuner"] for r in bc["pooled"]))
    cell = {(r["budget"], r["tuner"]): r for r in bc["pooled"]}

    def fmt(r):
        m, lo, hi = r["fraction"]
        out = f"{m:.4f} [{lo:.3f}-{hi:.3f}]"
        t = r.get("test")
        if t:
            mark = {1: "+", -1: "-", 0: ""}[t["sign"]]
            out += f" p={fmt_p(t['p'])}{mark}"
        return out

    headers = ["tuner"] + [f"{b} sims" for b in budgets]
    body = [[t] + [fmt(cell[(b, t)]) if (b, t) in cell else "" for b in budgets] for t in tuners]
    title = ("Fraction of the best-known throughput, median [IQR] over (model, board, seed); "
             f"p: paired Wilcoxon vs {REFERENCE} ('+' better / '-' worse than it at p < 0.05)")
    if md:
        out = [title, "", "| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        out += ["| " + " | ".join(str(c) for c in row) + " |" for row in body]
    else:
        out = [title, render_table(headers, body)]
    # per (model, board): median over seeds
    pairs = sorted({(r["model"], r["board"]) for r in bc["per_pair"]})
    pp = {(r["budget"], r["tuner"], r["model"], r["board"]): r["median_fraction"] for r in bc["per_pair"]}
    for b in budgets:
        headers = ["model", "board"] + tuners
        rows = [[m, bd] + [f"{pp[(b, t, m, bd)]:.4f}" if (b, t, m, bd) in pp else "" for t in tuners]
                for m, bd in pairs]
        out.append("")
        out.append(f"{b} simulations: median fraction of the best-known throughput over seeds")
        if md:
            out += ["", "| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
            out += ["| " + " | ".join(row) + " |" for row in rows]
        else:
            out.append(render_table(headers, rows))
    out.append("")
    out.append("best-known designs (the best of: every run's final design, and per-layer exhaustive "
               "schedules on the landscape's top configs and every config a run found): " + "; ".join(
        f"{k}: {v['latency_ms']:.3f} ms on {v['hw']} ({v['source']}; {len(v['evaluated'])} configs "
        "evaluated exhaustively)" for k, v in res["best_known"].items()))
    out.append("")
    out.append(budget_verdict(res))
    return "\n".join(out)


def budget_verdict(res: dict) -> str:
    """Per budget: the reference's median fraction of the best-known throughput, the tuners
    at least as good, those it is significantly ahead of; and whether it reaches 99% of the
    best-known at 500 simulations on every (model, board)."""
    bc = res["budget_compare"]
    cell = {(r["budget"], r["tuner"]): r for r in bc["pooled"]}
    budgets = res["budgets"]
    lines = [f"{REFERENCE} at each budget:"]
    others = [t for t in dict.fromkeys(r["tuner"] for r in bc["pooled"]) if t != REFERENCE]
    for b in budgets:
        ref = cell.get((b, REFERENCE))
        if not ref:
            continue
        behind = [t for t in others if (b, t) in cell and cell[(b, t)]["fraction"][0] >= ref["fraction"][0]]
        sig = [t for t in others if (b, t) in cell and cell[(b, t)].get("test", {}).get("sign") == -1]
        lines.append(f"  {b} sims: {REFERENCE} median {ref['fraction'][0]:.4f}; not ahead of: "
                     f"{', '.join(behind) or 'none'}; significantly ahead of: {', '.join(sig) or 'none'}")
    if not any(r["tuner"] == REFERENCE for r in bc["pooled"]):
        lines.append(f"  not judged: no {REFERENCE} runs")
    elif 500 in budgets:
        pp = [r for r in bc["per_pair"] if r["budget"] == 500 and r["tuner"] == REFERENCE]
        miss = [f"{r['model']}/{r['board']} {r['median_fraction']:.4f}" for r in pp if r["median_fraction"] < 0.99]
        lines.append(f"  target >= 99% of best-known at 500 sims on every model/board: "
                     f"{'met' if not miss else 'NOT met: ' + ', '.join(miss)}")
    return "\n".join(lines)


def codesign_run(model: str, board: str, tuner: str, seed: int, trials: int):
    """(run state, driver) of one co-design run of a tuner spec (``surrogate:stall_rounds=0``,
    ...) on the simulator, not yet run."""
    from dcoc import codesign as cd
    from dcoc.search.measure import MemoMeasurer
    from dcoc.targets.vta import BOARDS, VTASimMeasurer

    s = cd.Session(_layers(model), MemoMeasurer(VTASimMeasurer(n_workers=0)), trials, tuner, seed)
    return s, cd.make_driver(s, BOARDS[board], tuner, seed)


def _config_tag(spec: str) -> str:
    """``_cfg<hash>`` of a DCOC-family spec's config ("" for other tuners): kept runs are
    keyed by it, so a changed default is never reused."""
    from dcoc.codesign import config_tag
    from dcoc.tuners import DCOC_FAMILY, get_tuner, parse

    name, kw = parse(spec)
    return f"_cfg{config_tag(get_tuner(name).config(**kw))}" if name in DCOC_FAMILY else ""


def _run(args):
    model, board, tuner, seed, trials = args
    import torch

    torch.set_num_threads(1)
    from dcoc.targets.vta import BOARDS

    bd = BOARDS[board]
    t0 = time.perf_counter()
    s, driver = codesign_run(model, board, tuner, seed, trials)
    driver.run()
    wall = time.perf_counter() - t0
    hw = s.hw[s.best_hw]
    explored = []
    for name in s.complete_hws():
        h = s.hw[name]
        explored.append({"hw": name, "latency_ms": s.latency(name) * 1e3,
                         "resources": h.resources(dsp_budget=bd.dsp)})
    return {"model": model, "board": board, "tuner": tuner, "seed": seed, "trials": s.trials,
            "latency_ms": s.best_latency * 1e3, "hw": hw.name, "hw_fields": _hw_fields(hw),
            "resources": hw.resources(dsp_budget=bd.dsp), "wall": wall,
            "history": [(t, lat * 1e3) for t, lat in s.history if lat != float("inf")],
            "explored": explored}


def run(models=("resnet18",), boards=("pynq",), tuners=None, seeds=(0,), trials=500, jobs=None,
        quiet=False, budgets=None, best_known_top: int = 20, runs_dir=None) -> dict:
    from scripts.bench_sw import check_specs

    tuners = check_specs(tuners or TUNERS)
    refs = {}
    for mdl in models:
        for b in boards:
            refs[(mdl, b)] = reference(mdl, b)
    work = [(mdl, b, t, s, trials) for mdl in models for b in boards for t in tuners for s in seeds]
    runs = []
    t0 = time.perf_counter()

    tags = {t: _config_tag(t) for t in tuners}

    def key(w):  # DCOC-family runs also by their config (a changed default is not reused)
        name = "_".join(str(x).replace(":", "-").replace("=", "-").replace("/", "-") for x in w)
        return name + tags[w[2]] + ".json"

    done = {}
    if runs_dir:  # finished runs are kept one file each and reused (an interrupted run resumes)
        os.makedirs(runs_dir, exist_ok=True)
        for w in work:
            path = os.path.join(runs_dir, key(w))
            if os.path.exists(path):
                with open(path) as f:
                    done[w] = json.load(f)
    todo = [w for w in work if w not in done]

    def finished():
        for w in work:
            if w in done:
                yield w, done[w]
        with ProcessPoolExecutor(jobs or os.cpu_count()) as ex:
            futs = {ex.submit(_run, w): w for w in todo}
            for fut in as_completed(futs):
                r = fut.result()
                if runs_dir:
                    with open(os.path.join(runs_dir, key(futs[fut])), "w") as f:
                        json.dump(r, f)
                yield futs[fut], r

    order = {w: i for i, w in enumerate(work)}
    for i, (w, r) in enumerate(finished()):
        runs.append(r)
        if not quiet:
            ref = refs[(r["model"], r["board"])]
            print(f"[{i + 1}/{len(work)}] {r['model']} {r['board']} {r['tuner']} s{r['seed']}: "
                  f"{r['latency_ms']:.3f} ms ({ref['tuned_ms'] / r['latency_ms']:.3f}x tuned preset) "
                  f"on {r['hw']} in {r['wall']:.0f} s", file=sys.stderr)
    runs.sort(key=lambda r: order[(r["model"], r["board"], r["tuner"], r["seed"], trials)])
    res = {"runs": runs, "refs": {f"{k[0]}|{k[1]}": v for k, v in refs.items()}, "trials": trials,
           "seeds": list(seeds), "tuners": tuners, "wall": time.perf_counter() - t0}
    res["compare"] = compare(res)
    if budgets:
        res["budgets"] = sorted(budgets)
        t1 = time.perf_counter()
        res["best_known"] = {}
        for mdl in models:
            for b in boards:
                mine = [r for r in runs if r["model"] == mdl and r["board"] == b]
                if best_known_top > 0:
                    bk = best_known(mdl, b, extra=[r["hw_fields"] for r in mine], top=best_known_top, jobs=jobs)
                    bk["source"] = "exhaustive schedules"
                else:  # no new exhaustive search, but every config already searched counts
                    ev = {n: ms for n, ms in _best_known_cache(mdl, b).items() if ms}
                    best = min(ev, key=ev.get) if ev else None
                    bk = {"latency_ms": ev[best] if ev else math.inf, "hw": best, "evaluated": ev,
                          "landscape_top": 0, "source": "exhaustive schedules (cached)"}
                found = min(mine, key=lambda r: r["latency_ms"])
                if found["latency_ms"] < bk["latency_ms"]:
                    bk.update(latency_ms=found["latency_ms"], hw=found["hw"],
                              source=f"found by {found['tuner']} seed {found['seed']}")
                res["best_known"][f"{mdl}|{b}"] = bk
        res["best_known_wall"] = time.perf_counter() - t1
        res["budget_compare"] = budget_compare(res, res["budgets"])
    return res


def compare(res: dict, reference: str = REFERENCE) -> list[dict]:
    """Per tuner over every (model, board, seed): median [IQR] of tuned-preset / latency
    (higher = faster designs) and a paired Wilcoxon test against ``reference``."""
    from dcoc.stats import median_iqr, paired_test

    by: dict = {}
    for r in res["runs"]:
        ref = res["refs"][f"{r['model']}|{r['board']}"]
        by.setdefault(r["tuner"], {})[(r["model"], r["board"], r["seed"])] = ref["tuned_ms"] / r["latency_ms"]
    base = by.get(reference, {})
    out = []
    for tuner, v in by.items():
        keys = sorted(v)
        row = {"tuner": tuner, "runs": len(keys), "speedup": median_iqr([v[k] for k in keys])}
        pairs = [k for k in keys if k in base]
        if tuner != reference and pairs:
            pt = paired_test([base[k] for k in pairs], [v[k] for k in pairs], lower_is_better=False)
            row["test"] = {"n": pt.n, "better": pt.better, "worse": pt.worse, "median_diff": pt.median_diff,
                           "p": pt.p, "sign": pt.sign()}
        out.append(row)
    return out


def render_compare(rows: list[dict], reference: str = REFERENCE, md: bool = False) -> str:
    from dcoc.stats import fmt_p

    def verdict(t):
        if not t:
            return "(reference)"
        return {1: "better than " + reference, -1: "worse than " + reference, 0: "n.s."}[t["sign"]] + \
            f" (p={fmt_p(t['p'])}; {t['better']}+/{t['worse']}-)"

    headers = ["tuner", "runs", "speed-up vs tuned preset, median [IQR]", f"paired test vs {reference}"]
    body = [[r["tuner"], r["runs"], "{:.4f} [{:.4f}-{:.4f}]".format(*r["speedup"]), verdict(r.get("test"))]
            for r in rows]
    if md:
        out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        out += ["| " + " | ".join(str(c) for c in b) + " |" for b in body]
        return "\n".join(out)
    from dcoc.cli.options import render_table

    return render_table(headers, body, right={1})


def summarize(res: dict) -> list[dict]:
    rows = []
    by = collections.defaultdict(list)
    for r in res["runs"]:
        by[(r["model"], r["board"], r["tuner"])].append(r)
    for (model, board, tuner), rs in by.items():
        ref = res["refs"][f"{model}|{board}"]
        lat = statistics.median(r["latency_ms"] for r in rs)
        hw = collections.Counter(r["hw"] for r in rs).most_common(1)[0][0]
        rows.append({"model": model, "board": board, "tuner": tuner, "seeds": len(rs),
                     "latency_ms": lat, "best_ms": min(r["latency_ms"] for r in rs),
                     "vs_tuned_preset": ref["tuned_ms"] / lat, "vs_default": ref["default_ms"] / lat,
                     "hw": hw, "resources": next(r["resources"] for r in rs if r["hw"] == hw),
                     "wall_s": statistics.median(r["wall"] for r in rs),
                     "ref_tuned_ms": ref["tuned_ms"], "ref_default_ms": ref["default_ms"]})
    return rows


def render(res: dict) -> str:
    from dcoc.cli.options import render_table

    rows = summarize(res)
    out = ["Every (model, board, seed) run: median [IQR] and paired Wilcoxon vs " + REFERENCE,
           render_compare(res.get("compare") or compare(res)), ""]
    out += [render_table(
        ["model", "board", "tuner", "latency ms", "vs tuned preset", "vs default", "hardware", "BRAM", "DSP",
         "wall s"],
        [[r["model"], r["board"], r["tuner"], f"{r['latency_ms']:.3f}", f"{r['vs_tuned_preset']:.3f}x",
          f"{r['vs_default']:.3f}x", r["hw"], r["resources"]["bram36"], r["resources"]["dsp"],
          f"{r['wall_s']:.0f}"] for r in rows],
        right={3, 4, 5, 7, 8, 9})]
    out.append("")
    out.append("reference (default hardware): " + "; ".join(
        f"{k}: tuned {v['tuned_ms']:.3f} ms, default schedules {v['default_ms']:.3f} ms on {v['hw']}"
        for k, v in res["refs"].items()))
    return "\n".join(out)


def merge(paths, exhaustive_found=False, jobs: int | None = None) -> dict:
    """One budget report from several ``--json`` files of ``--budgets`` runs (e.g. one per
    board): runs of the same (model, board, tuner, seed) are taken once, each (model, board)
    keeps the better of its best-known designs, and the paired tests are recomputed over
    every (model, board, seed) the files share.

    ``exhaustive_found`` (True, or a list of ``"model/board"`` pairs): every hardware config
    any of these runs ended on is also evaluated with per-layer exhaustive schedules
    (:func:`best_known` with ``top=0``, cached), so the best-known is at least the best
    *schedules* on every found config -- not only the schedules a run happened to measure
    there."""
    runs, best, budgets, refs = {}, {}, set(), {}
    for path in paths:
        with open(path) as f:
            r = json.load(f)
        if "budgets" not in r:
            raise SystemExit(f"{path}: not a --budgets result (no best-known designs)")
        budgets.update(r["budgets"])
        refs.update(r["refs"])
        for run_ in r["runs"]:
            runs.setdefault((run_["model"], run_["board"], run_["tuner"], run_["seed"]), run_)
        for k, v in r["best_known"].items():
            if k not in best or v["latency_ms"] < best[k]["latency_ms"]:
                best[k] = v
    pairs = sorted({(k[0], k[1]) for k in runs}) if exhaustive_found else []
    if exhaustive_found:
        if exhaustive_found is not True:
            want = {tuple(p.split("/")) for p in exhaustive_found}
            pairs = [p for p in pairs if p in want]
            missing = sorted("/".join(p) for p in want - set(pairs))
            if missing:
                raise SystemExit(f"--exhaustive-found: no runs of {', '.join(missing)}")
        for mdl, b in pairs:
            mine = [r for k, r in runs.items() if (k[0], k[1]) == (mdl, b)]
            bk = best_known(mdl, b, extra=[r["hw_fields"] for r in mine], top=0, jobs=jobs, quiet=False)
            key = f"{mdl}|{b}"
            if key not in best or bk["latency_ms"] < best[key]["latency_ms"]:
                bk["source"] = "exhaustive schedules on every config a run found"
                best[key] = bk
    res = {"runs": list(runs.values()), "refs": refs, "budgets": sorted(budgets), "best_known": best,
           "tuners": list(dict.fromkeys(k[2] for k in runs)), "merged": list(paths),
           "exhaustive_found": ["/".join(p) for p in pairs]}
    res["budget_compare"] = budget_compare(res, res["budgets"])
    return res


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--mix" in argv:  # the model-mix case, with its own options
        from scripts import bench_mix

        return bench_mix.main([a for a in argv if a != "--mix"])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="*", default=["resnet18", "mobilenetv2"])
    ap.add_argument("--boards", nargs="*", default=["pynq", "ultra96"])
    ap.add_argument("--tuners", nargs="*", default=TUNERS,
                    help=f"names or NAME:key=value specs (default: {' '.join(TUNERS)})")
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2, 3, 4])
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--budgets", nargs="*", type=int, default=None,
                    help="report every run at these simulation budgets against the best-known "
                         "design (the runs use the largest; --trials is ignored)")
    ap.add_argument("--runs-dir", default=None,
                    help="keep each finished run as a JSON file here and reuse it (resume)")
    ap.add_argument("--best-known-top", type=int, default=20,
                    help="landscape configs evaluated exhaustively for the best-known design (0: "
                         "the best-known is the best design any run found; exhaustive tables cost "
                         "minutes per layer and config)")
    ap.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                    help="run nothing: pool the --json files of earlier --budgets runs into one "
                         "report (per-budget paired tests over all their (model, board, seed))")
    ap.add_argument("--exhaustive-found", nargs="*", default=None, metavar="MODEL/BOARD",
                    help="with --merge: also evaluate every config any run ended on with per-layer "
                         "exhaustive schedules (cached; seconds to minutes per config) and use the "
                         "best as the best-known where lower; only these pairs if given (e.g. "
                         "mobilenetv2/ultra96), else every pair")
    a = ap.parse_args(argv)
    if a.exhaustive_found is not None and not a.merge:
        raise SystemExit("--exhaustive-found works with --merge (a --budgets run: --best-known-top)")
    if a.merge:
        ef = False if a.exhaustive_found is None else (a.exhaustive_found or True)
        res = merge(a.merge, exhaustive_found=ef, jobs=a.jobs)
        print(render_budgets(res))
    else:
        trials = max(a.budgets) if a.budgets else a.trials
        res = run(a.models, a.boards, a.tuners, a.seeds, trials, a.jobs,
                  budgets=a.budgets, best_known_top=a.best_known_top, runs_dir=a.runs_dir)
        print(render(res))
        if a.budgets:
            print()
            print(render_budgets(res))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f)


if __name__ == "__main__":
    main()
