"""The hardware landscape of a model on a board: every feasible VTA config, evaluated with
the default schedule heuristic (:func:`dcoc.targets.vta.default_knobs`) for every layer.

This is a reference for the co-design benchmarks (how good is the best hardware under
default schedules, and where the preset sits), not a tuner: it costs one simulation per
(layer, hardware) and does not count as trials of anyone.

    python -m scripts.hw_landscape resnet18 --board pynq --json landscape.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor

_LAYERS = None


def _init(model):
    global _LAYERS
    from dcoc.targets import get
    from tvm_plugin.frontend import model_tasks

    _LAYERS = get("vta").layers(model_tasks(model, "vta"))[0]


def _eval(args):
    hw_fields, board = args
    from dcoc.errors import DcocError
    from dcoc.targets.vta import BOARDS, default_knobs, simulate
    from dcoc.targets.vta.spaces import make_hw

    hw = make_hw(hw_fields, BOARDS[board])
    total = 0.0
    for layer in _LAYERS:
        try:
            r = simulate(layer.workload, hw, default_knobs(layer.workload, hw), epilogue=layer.epilogue)
        except DcocError:
            return hw.name, None, BOARDS[board].usage(hw)
        if not r.valid:
            return hw.name, None, BOARDS[board].usage(hw)
        total += layer.count * r.seconds
    return hw.name, total, BOARDS[board].usage(hw)


def run(model="resnet18", board="pynq", jobs=None, cache=True) -> list[dict]:
    from dcoc.targets.vta.catalogue import cache_root, timing_model_tag
    from dcoc.targets.vta.report import MODEL_EPILOGUE
    from dcoc.targets.vta.spaces import hw_space

    root = cache_root("landscape")
    path = os.path.join(root, f"{model}_{board}_{timing_model_tag(MODEL_EPILOGUE)}.json")
    if cache and os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    sp = hw_space(board)
    cfgs = [c for c in sp if sp.is_valid(c)]
    with ProcessPoolExecutor(jobs or os.cpu_count(), initializer=_init, initargs=(model,)) as ex:
        res = list(ex.map(_eval, [(c, board) for c in cfgs], chunksize=4))
    rows = [{"hw": n, "latency_ms": (t * 1e3 if t else None), **{k: v for k, v in c.items()}, "resources": r}
            for (n, t, r), c in zip(res, cfgs)]
    rows.sort(key=lambda r: r["latency_ms"] if r["latency_ms"] else 1e18)
    os.makedirs(root, exist_ok=True)
    with open(path, "w") as f:
        json.dump(rows, f)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?", default="resnet18")
    ap.add_argument("--board", default="pynq")
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args(argv)
    rows = run(a.model, a.board)
    for r in rows[: a.top]:
        print(f"{r['hw']:45s} {r['latency_ms']:9.3f} ms  {r['resources']}")
    print(f"{len(rows)} feasible configs", file=sys.stderr)


if __name__ == "__main__":
    main()
