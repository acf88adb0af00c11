import math
import os
import time

from dcoc.search import FunctionMeasurer, MeasureErrorNo
from dcoc.search.synthetic import synthetic_cost, synthetic_task
from dcoc.tuners import create


def flaky(task, cfg):
    """Crashes the worker, hangs, raises, or measures, depending on the config."""
    if cfg["a"] == 1 and cfg["d"] == 1:
        os._exit(3)  # worker process dies
    if cfg["a"] == 2 and cfg["d"] == 1:
        time.sleep(30)  # hangs past the timeout
    if cfg["a"] == 4 and cfg["d"] == 1:
        raise RuntimeError("boom")
    return synthetic_cost(task, cfg)


def test_pool_turns_crash_timeout_and_exception_into_errors():
    task = synthetic_task()
    base = {"b": 4, "c": 2}
    cfgs = [dict(base, a=1, d=1), dict(base, a=2, d=1), dict(base, a=4, d=1), dict(base, a=8, d=2),
            dict(a=64, b=64, c=16, d=1)]
    with FunctionMeasurer(flaky, n_workers=2, timeout=2.0) as m:
        res = m.measure(task, cfgs)
        again = m.measure(task, [dict(base, a=8, d=2)])  # the pool survived
    assert res[0].error_no == MeasureErrorNo.RUNTIME_DEVICE
    assert res[1].error_no == MeasureErrorNo.RUN_TIMEOUT and "timed out" in res[1].error_msg
    assert res[2].error_no == MeasureErrorNo.RUNTIME_DEVICE and "boom" in res[2].error_msg
    assert res[3].valid and res[3].cost > 0
    assert res[4].error_no == MeasureErrorNo.INSTANTIATION_ERROR and "overflow" in res[4].error_msg
    assert not res[4].valid and math.isinf(res[4].cost)
    assert again[0].valid


def test_erroring_measurer_does_not_stop_tuning():
    task = synthetic_task()

    def half_broken(task, cfg):
        if cfg["b"] in (1, 4, 16, 64):
            raise RuntimeError("device lost")
        return synthetic_cost(task, cfg)

    t = create("random", task, seed=0)
    t.tune(80, FunctionMeasurer(half_broken))
    assert t.trials == 80
    assert t.best_config is not None and t.best_config["b"] not in (1, 4, 16, 64)
    assert t.error_ct >= 0
