"""The throughput / area Pareto front of an accelerator co-design run.

DCOC returns one design point; a user with a smaller FPGA budget wants the trade-off
instead.  This module builds it from what a run leaves behind -- the append-only records
(every measured schedule, tagged with its hardware config), the run's layers
(``layers.json``) and the target's resource model (:meth:`dcoc.targets.Target.resources`)
-- so it does not depend on how a co-design driver keeps its state:

* :func:`estimate_points`: one point per hardware config that fits the board, **measured**
  (the search tuned every layer on it) or **estimated** (its layers timed with schedules
  transferred from the searched designs, or default ones); :func:`complete_points`: the
  configs the search completed only;
* a point's resources are the target's estimate on the board: ``bram36``, ``dsp``, ``lut``;
* the **front** is the set of points that no other point dominates (no more BRAM36, DSP
  and LUT, and more throughput -- or fewer resources somewhere at a throughput within
  0.5 %: :data:`THROUGHPUT_TOL`), sorted by throughput.

Every point is ``{hardware, latency_ms, throughput, resources: {bram36, dsp, lut},
schedules, source}`` with ``hardware`` the HWConfig fields plus ``name``, ``schedules``
``{layer name: knobs}`` (a design a user can pick and deploy without re-tuning; its
latency is the simulation of these schedules) and ``source`` ``measured`` or
``estimated``.  :func:`dcoc.results.plots.plot_front` draws the front against the board's
budget.
"""
from __future__ import annotations

import json
import math
import os

__all__ = ["complete_points", "estimate_points", "evaluate_run", "pareto_front", "dominates", "front_from_run",
           "spanning", "RESOURCE_KEYS", "MEASURED", "ESTIMATED", "THROUGHPUT_TOL", "POINTS_FILE"]

RESOURCE_KEYS = ("bram36", "dsp", "lut")
#: ``point["source"]``: the search measured (tuned) every layer's schedule on this config
MEASURED = "measured"
#: ``point["source"]``: not searched; every layer timed with a schedule transferred from a
#: searched design (or the target's default schedule) -- an upper bound of a tuned latency
ESTIMATED = "estimated"


def _layer_list(layers) -> list[tuple[str, int]]:
    out = []
    for la in layers:
        if isinstance(la, dict):
            out.append((str(la["layer"]), int(la.get("count", 1))))
        elif isinstance(la, (tuple, list)):
            out.append((str(la[0]), int(la[1])))
        else:  # dcoc.codesign.Layer-like
            out.append((str(la.name), int(la.count)))
    return out


def complete_points(rows, layers, board, target=None) -> list[dict]:
    """One point per hardware config on which every layer has a valid record.

    ``rows``: record dicts (``Records.load(path).rows``); ``layers``: ``(name, count)``
    pairs, ``{"layer", "count"}`` dicts (``result.json``'s ``layers``) or codesign layers;
    ``board``: a board of ``target`` (an accelerator target or its name; default: the
    default target) or its name.
    """
    from dcoc.results.result import _hw_dict
    from dcoc.targets import get

    tg = get(target)
    bd = tg.board(board)
    lay = _layer_list(layers)
    names = {n for n, _ in lay}
    best: dict = {}
    for r, cost in _measured(rows, names):
        key = (r["hw"], r["task_name"])
        if key not in best or cost < best[key][0]:
            best[key] = (cost, dict(r.get("knobs") or {}))
    points = []
    for hw_name in sorted({k[0] for k in best}):
        if not all((hw_name, n) in best for n in names):
            continue
        lat = sum(c * best[(hw_name, n)][0] for n, c in lay)
        hw = tg.parse_hw(hw_name, bd.name)
        u = tg.resources(hw, bd)
        points.append({
            "hardware": _hw_dict(hw),
            "latency_ms": lat * 1e3,
            "throughput": 1.0 / lat,
            "resources": {k: int(u[k]) for k in RESOURCE_KEYS},
            "schedules": {n: best[(hw_name, n)][1] for n, _ in lay},
            "source": MEASURED, **hw_marks(tg, hw, bd),
        })
    return points


def hw_marks(tg, hw, bd) -> dict:
    """A design's marks for the front (target notes): ``buildable`` by the target's own
    flow and ``latency_basis`` (calibrated / estimated, :meth:`Target.hw_notes`)."""
    notes = tg.hw_notes(hw, bd)
    out = {}
    if "buildable" in notes:
        out["buildable"] = bool(notes["buildable"])
    if notes.get("basis_label"):
        out["latency_basis"] = notes["basis_label"]
    return out


#: throughputs within this fraction count as equal when comparing designs: a design that
#: buys less than 0.5 % more throughput with more BRAM/DSP/LUT is not worth listing
THROUGHPUT_TOL = 0.005


def dominates(a: dict, b: dict, tol: float = THROUGHPUT_TOL) -> bool:
    """True when ``a`` is at least as good as ``b`` and better somewhere: no more of any
    resource and, with the same resources, more throughput; with fewer resources somewhere,
    a throughput no more than ``tol`` (relative) below ``b``'s."""
    ra = [a["resources"][k] for k in RESOURCE_KEYS]
    rb = [b["resources"][k] for k in RESOURCE_KEYS]
    if any(x > y for x, y in zip(ra, rb)):
        return False
    if ra == rb:
        return a["throughput"] > b["throughput"]
    return a["throughput"] >= b["throughput"] * (1 - tol)


def pareto_front(points: list[dict], tol: float = THROUGHPUT_TOL) -> list[dict]:
    """The non-dominated points (throughput up, BRAM36/DSP/LUT down; :func:`dominates`), by
    throughput."""
    front = [p for p in points if not any(dominates(q, p, tol) for q in points if q is not p)]
    # identical (throughput, resources) duplicates: keep the first by name
    seen, out = set(), []
    for p in sorted(front, key=lambda p: (-p["throughput"], p["hardware"]["name"])):
        key = (p["throughput"], tuple(p["resources"][k] for k in RESOURCE_KEYS))
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


#: the work-dir file :func:`evaluate_run` writes: every evaluated point (no schedules) + stats
POINTS_FILE = "pareto_points.json"


def evaluate_run(work_dir: str, estimate: bool = True, measurer=None) -> dict:
    """The Pareto front of a ``dcoc tune`` work dir of an accelerator target:
    ``{"board", "target", "front", "points", "stats"}``.

    With ``estimate`` (and the run's ``layers.json``), the front is over the board's whole
    feasible hardware space (:func:`estimate_points`: ``measured`` and ``estimated``
    points); else over the configs the search completed (:func:`complete_points`).  Writes
    ``WORK_DIR/pareto_points.json`` (every point without its schedules, and the stats) for
    the plot.
    """
    from dcoc.codesign.prior import LAYERS_FILE, read_layers
    from dcoc.errors import DcocError
    from dcoc.search.records import Records
    from dcoc.targets import get, is_accelerator

    res_path = os.path.join(work_dir, "result.json")
    rec_path = os.path.join(work_dir, "records.jsonl")
    if not (os.path.exists(res_path) and os.path.exists(rec_path)):
        raise DcocError(f"{work_dir} has no result.json + records.jsonl of an accelerator tuning run")
    from dcoc.readfile import read_json

    res = read_json(res_path, "result file")
    if not is_accelerator(res.get("target")) or not res.get("board"):
        raise DcocError(f"{work_dir} is not an accelerator co-design run (target {res.get('target')!r})")
    rows = Records.load(rec_path).rows
    tg = get(res["target"]).with_options(**((res.get("extra") or {}).get("target_options") or {}))
    order = [str(r["layer"]) for r in res.get("layers") or []]
    by_key = read_layers(os.path.join(work_dir, LAYERS_FILE), tg) if estimate else {}
    layers = sorted((la for la in by_key.values() if la.name in order), key=lambda la: order.index(la.name))
    if estimate and len(layers) == len(order) and layers:
        pts, stats = estimate_points(rows, layers, res["board"], tg, measurer=measurer)
    else:
        pts = complete_points(rows, res.get("layers") or [], res["board"], tg)
        stats = {"configs": None, "measured": len(pts), "estimated": 0, "unschedulable": None}
    front = pareto_front(pts)
    out = {"board": res["board"], "target": tg.name, "front": front, "points": pts, "stats": stats}
    from dcoc.paths import write_text_atomic

    slim = [{k: v for k, v in p.items() if k != "schedules"} for p in pts]
    write_text_atomic(os.path.join(work_dir, POINTS_FILE),
                      json.dumps({"board": res["board"], "target": tg.name, "stats": stats, "points": slim}) + "\n",
                      "Pareto points file")
    return out


def front_from_run(work_dir: str, estimate: bool = False) -> tuple[list[dict], list[dict], str]:
    """``(front, points, board name)`` of a ``dcoc tune`` work dir of an accelerator target
    (:func:`evaluate_run`; by default over the configs the search completed)."""
    ev = evaluate_run(work_dir, estimate=estimate)
    return ev["front"], ev["points"], ev["board"]


def spanning(front: list[dict], n: int = 12) -> list[dict]:
    """About ``n`` designs of ``front`` that span its resource range (all of them when there
    are at most ``n``): the fastest, the smallest in each resource, every measured one, then
    evenly spaced in size order; sorted by DSP, BRAM36, LUT."""
    if len(front) <= n:
        return sorted(front, key=_by_size)
    pick: list = [max(front, key=lambda p: p["throughput"])]
    pick += [min(front, key=lambda p, k=k: (p["resources"][k], -p["throughput"])) for k in RESOURCE_KEYS]
    pick += [p for p in front if p.get("source") == MEASURED]
    ordered = sorted(front, key=_by_size)
    i = 0
    while len({id(p) for p in pick}) < n and i < n:
        pick.append(ordered[round(i * (len(ordered) - 1) / max(n - 1, 1))])
        i += 1
    out, seen = [], set()
    for p in sorted(pick, key=_by_size):
        if id(p) not in seen:
            seen.add(id(p))
            out.append(p)
    return out


def _by_size(p) -> tuple:
    return (p["resources"]["dsp"], p["resources"]["bram36"], p["resources"]["lut"], -p["throughput"])


def _measured(rows, names):
    """(record, cost) of every valid record of a layer in ``names`` with a finite cost > 0."""
    for r in rows:
        if not r.get("valid") or r.get("hw") is None or r.get("task_name") not in names:
            continue
        cost = r.get("cost")
        if cost is None or not math.isfinite(float(cost)) or float(cost) <= 0:
            continue
        yield r, float(cost)


def _records_best(rows, names) -> dict:
    """``{(hw name, layer name): [(cost, knobs), ...]}`` of valid records, fastest first
    (one entry per distinct schedule)."""
    from dcoc.search.space import Space

    seen: dict = {}
    for r, cost in _measured(rows, names):
        knobs = dict(r.get("knobs") or {})
        key = (r["hw"], r["task_name"])
        d = seen.setdefault(key, {})
        kk = Space.key(knobs)
        if kk not in d or cost < d[kk][0]:
            d[kk] = (cost, knobs)
    return {k: sorted(v.values(), key=lambda x: x[0]) for k, v in seen.items()}


def _core_distance(tg, a, b) -> float:
    return sum(abs(math.log2(max(float(getattr(a, k)), 1e-9)) - math.log2(max(float(getattr(b, k)), 1e-9)))
               for k in tg.core_knobs)


def estimate_points(rows, layers, board, target=None, measurer=None, donors: int = 3,
                    per_class: int = 16) -> tuple[list[dict], dict]:
    """One point per feasible hardware config of ``board`` (``measured`` or ``estimated``),
    and statistics.

    Every layer of every config takes the fastest of these schedules:

    * the fastest schedule the search measured on the config's *timing class* that fits it
      (the configs that differ only in :attr:`~dcoc.targets.Target.fit_knobs`, the buffer
      sizes: a schedule that fits two of them runs the same instruction stream on both, in
      the same time) -- its time is the search's measurement;
    * the best schedules of the ``donors`` fastest searched designs and of the searched
      design nearest in core shape, transferred to the config
      (:meth:`dcoc.targets.Target.transfer`);
    * the target's default schedule for the timing class (computed on its config with the
      largest buffers) where it fits, else, if nothing else is valid, the config's own.

    The others are timed (``measurer``: default the target's, in-process); a timing is
    shared by the configs of a timing class.  A point is **measured** when the search
    measured every layer on the config (or on one of its timing class, with a schedule that
    fits), i.e. the search tuned it; else **estimated**: its layers were only timed with
    transferred or default schedules, which nobody tuned there (a search on that config
    can only make it faster).  Either way the latency is the simulated time of the
    point's ``schedules``.

    ``layers``: the run's :class:`dcoc.targets.Layer` s.  Returns ``(points, {"configs",
    "measured", "estimated", "unschedulable", "simulations", "seconds"})``.
    """
    import time

    from dcoc.targets import get

    t0 = time.perf_counter()
    tg = get(target)
    bd = tg.board(board)
    best = _records_best(rows, {la.name for la in layers})
    hws = tg.feasible_hw(bd)
    pool = _SchedulePool(tg, bd.name)
    by_class, by_layer, top = pool.searched(best, layers, donors)
    biggest = _biggest_per_class(tg, hws, pool.tkey)
    for hw in hws:
        pool.gather(hw, layers, best, by_class, by_layer, top, biggest, per_class)
    n_sim = pool.time_all(layers, {h.name: h for h in hws}, measurer)
    points, unsched = pool.points(hws, layers, bd)
    n_meas = sum(p["source"] == MEASURED for p in points)
    stats = {"configs": len(hws), "measured": n_meas, "estimated": len(points) - n_meas,
             "unschedulable": unsched, "simulations": n_sim, "seconds": round(time.perf_counter() - t0, 2)}
    return points, stats


def _biggest_per_class(tg, hws, tkey) -> dict:
    """Per timing class, the config with the largest buffers: the class's default schedule
    is computed once there and used on every config of the class it fits."""
    biggest: dict = {}
    for hw in hws:
        tid = tkey(hw)
        size = (sum(tg.fit_values(hw)), tg.fit_values(hw))
        if tid not in biggest or size > (sum(tg.fit_values(biggest[tid])), tg.fit_values(biggest[tid])):
            biggest[tid] = hw
    return biggest


class _SchedulePool:
    """The candidate schedules of :func:`estimate_points`, per (config, layer), and their
    times: measured by the search, or timed here once per timing class."""

    def __init__(self, tg, board_name: str):
        self.tg, self.board_name = tg, board_name
        self.parsed: dict = {}
        self.class_default: dict = {}  # (layer idx, timing class) -> knobs | None
        self.known: dict = {}      # (layer idx, timing class, knobs key) -> seconds (inf: invalid)
        self.recorded: set = set()  # the keys whose time the search measured
        self.jobs: dict = {}       # key -> (task, knobs) to time
        self.cand: dict = {}       # (hw name, layer idx) -> [(key, knobs)]

    def hw_of(self, name):
        if name not in self.parsed:
            try:
                self.parsed[name] = self.tg.parse_hw(name, self.board_name)
            except Exception:  # noqa: BLE001 - a record of another board/version: no donor
                self.parsed[name] = None
        return self.parsed[name]

    def tkey(self, hw):
        return self.tg.timing_key(hw) or hw.name

    def searched(self, best, layers, donors):
        """What the search measured, per (layer, timing class), fastest first; per layer the
        searched (hw, best schedule) pairs; the ``donors`` fastest searched designs."""
        by_class: dict = {}
        by_layer: dict = {}  # layer -> [(hw, its best schedule)] (nearest-donor candidates)
        for (hname, lname), lst in best.items():
            h = self.hw_of(hname)
            if h is None:
                continue
            by_class.setdefault((lname, self.tkey(h)), []).extend(lst)
            by_layer.setdefault(lname, []).append((h, lst[0][1]))
        for v in by_class.values():
            v.sort(key=lambda x: x[0])
        complete = []  # the searched designs, fastest first (transfer donors)
        for hname in {h for h, _ in best}:
            if all((hname, la.name) in best for la in layers) and self.hw_of(hname) is not None:
                lat = sum(la.count * best[(hname, la.name)][0][0] for la in layers)
                complete.append((lat, hname))
        return by_class, by_layer, [self.hw_of(n) for _, n in sorted(complete)[:donors]]

    def add(self, task, hw, li, k, cs) -> None:
        from dcoc.search.space import Space

        key = (li, self.tkey(hw), Space.key(k))
        if key not in self.known:
            self.jobs.setdefault(key, (task, k))
        cs.append((key, k))

    def gather(self, hw, layers, best, by_class, by_layer, top, biggest, per_class) -> None:
        """Every layer's candidate schedules on ``hw``: the search's fastest on its timing
        class, the donors' transferred, the class's default."""
        from dcoc.search.space import Space

        tg, tid = self.tg, self.tkey(hw)
        for li, la in enumerate(layers):
            task = tg.task(la, hw)  # not kept: thousands of configs x layers
            space = task.space
            cs: list = []
            # the fastest schedule the search measured on this timing class that fits
            hit = next(((c, k) for c, k in by_class.get((la.name, tid), [])[:per_class] if space.is_valid(k)), None)
            if hit is not None:
                key = (li, tid, Space.key(hit[1]))
                self.known[key] = hit[0]
                self.recorded.add(key)
                cs.append((key, hit[1]))
            # the searched designs' schedules, transferred
            srcs = [(h, best[(h.name, la.name)][0][1]) for h in top]
            near = by_layer.get(la.name) or []
            if near:
                srcs.append(min(near, key=lambda x: (_core_distance(tg, x[0], hw), x[0].name)))
            seen = set()
            for src_hw, k in srcs:
                sk = (self.tkey(src_hw), Space.key(k))
                if sk in seen:  # the same schedule on the same timing class: the same transfer
                    continue
                seen.add(sk)
                k = tg.transfer(la, src_hw, k, hw, space)
                if k is not None:
                    self.add(task, hw, li, k, cs)
            # the target's default schedule of the timing class, where it fits
            if (li, tid) not in self.class_default:
                big = biggest[tid]
                self.class_default[(li, tid)] = tg.default_schedule(
                    la, big, space if big is hw else tg.task(la, big).space)
            k = self.class_default[(li, tid)]
            if k is not None and space.is_valid(k):
                self.add(task, hw, li, k, cs)
            self.cand[(hw.name, li)] = cs

    def _run(self, m) -> None:
        keys = list(self.jobs)
        if keys:
            for key, r in zip(keys, m.measure_jobs([self.jobs[k] for k in keys])):
                self.known[key] = float(r.cost) if r.valid and math.isfinite(r.cost) else math.inf
        self.jobs.clear()

    def time_all(self, layers, by_name, measurer) -> int:
        """Time the gathered schedules; then, where a (config, layer) has nothing valid, its
        own default schedule.  Returns the number of simulations."""
        tg = self.tg
        own = measurer is None
        m = tg.measurer(n_workers=0) if own else measurer
        n_sim = 0
        try:
            n_sim += len(self.jobs)
            self._run(m)
            for (hname, li), cs in self.cand.items():  # nothing valid yet: the config's default
                if any(math.isfinite(self.known[key]) for key, _ in cs):
                    continue
                hw = by_name[hname]
                task = tg.task(layers[li], hw)
                k = tg.default_schedule(layers[li], hw, task.space)
                if k is not None:
                    self.add(task, hw, li, k, cs)
            n_sim += len(self.jobs)
            self._run(m)
        finally:
            if own:
                m.close()
        return n_sim

    def points(self, hws, layers, bd) -> tuple[list[dict], int]:
        """One point per config with a valid schedule for every layer (the fastest; a tie:
        the measured one), and the number of unschedulable configs."""
        from dcoc.results.result import _hw_dict

        points, unsched = [], 0
        for hw in hws:
            per, source = [], MEASURED
            for li in range(len(layers)):
                cs = [(self.known[key], key not in self.recorded, key, k)
                      for key, k in self.cand[(hw.name, li)] if math.isfinite(self.known[key])]
                if not cs:
                    per = None
                    break
                if not any(key in self.recorded for _, _, key, _ in cs):
                    source = ESTIMATED  # the search never measured this layer here
                c, _, key, k = min(cs, key=lambda x: (x[0], x[1]))  # a tie: the measured one
                per.append((c, k))
            if per is None:
                unsched += 1
                continue
            lat = sum(la.count * c for la, (c, _) in zip(layers, per))
            u = self.tg.resources(hw, bd)
            points.append({"hardware": _hw_dict(hw), "latency_ms": lat * 1e3, "throughput": 1.0 / lat,
                           "resources": {k: int(u[k]) for k in RESOURCE_KEYS},
                           "schedules": {la.name: dict(k) for la, (_, k) in zip(layers, per)},
                           "source": source, **hw_marks(self.tg, hw, bd)})
        return points, unsched
