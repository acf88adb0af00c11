"""The hardware-target interface and its two implementations (vta, systolic)."""
from __future__ import annotations

import numpy as np
import pytest

import dcoc.targets as targets
from dcoc.errors import ConfigError, DcocError, TargetError
from dcoc.targets.systolic import GemmWorkload, SystolicConfig, fit_reason, simulate

LAYERS = {
    "vta": lambda t: [t.layer("C5"), t.layer("dense:1,512,1000")],
    "systolic": lambda t: [t.layer("C5"), t.layer("gemm:1,512,1000")],
}


def test_registry():
    assert targets.available() == ["vta", "systolic"]
    assert targets.get("VTA") is targets.get("vta")
    with pytest.raises(TargetError, match="unknown accelerator target 'tpu'"):
        targets.get("tpu")
    assert targets.is_accelerator("systolic") and not targets.is_accelerator("llvm")


@pytest.mark.parametrize("name", ["vta", "systolic"])
def test_every_board_has_a_feasible_space_and_a_fitting_default(name):
    t = targets.get(name)
    assert t.default_board in t.boards and len(t.boards) >= 2
    for b in t.boards:
        feas = t.feasible_hw(b)
        assert len(feas) > 10
        assert all(not t.violations(hw, b) for hw in feas[:20])
        d = t.default_hw(b)
        assert not t.violations(d, b)
        t.check_fits(d, b)
    with pytest.raises(DcocError):
        t.board("no-such-board")


@pytest.mark.parametrize("name", ["vta", "systolic"])
def test_default_schedule_transfer_and_ideal_bound(name):
    t = targets.get(name)
    bd = t.board(t.default_board)
    hws = t.feasible_hw(bd)
    rng = np.random.default_rng(0)
    picks = [t.default_hw(bd)] + [hws[i] for i in rng.choice(len(hws), 3, replace=False)]
    m = t.measurer(n_workers=0)
    for layer in LAYERS[name](t):
        for hw in picks:
            task = t.task(layer, hw)
            k = t.default_schedule(layer, hw, task.space)
            if k is None:
                continue
            assert task.space.is_valid(k) and task.defaults() == [k]
            r = m.measure(task, [k])[0]
            assert r.valid
            assert t.ideal_seconds(layer, hw) <= r.cost * (1 + 1e-9)   # a real lower bound
            assert t.ideal_seconds(layer, hw) <= t.bound_seconds(layer, hw) * (1 + 1e-9)
            assert t.bound_seconds(layer, hw) <= r.cost * (1 + 1e-9)   # ... and so is the padded one
            moved = t.transfer(layer, hw, k, picks[0], t.sw_space(layer, picks[0]))
            assert moved is not None
            assert set(moved) == {kn.name for kn in t.sw_space(layer, picks[0]).knobs}


def test_parse_hw_names_round_trip():
    t = targets.get("systolic")
    hw = SystolicConfig(32, 16, 16, 15, 17, 238.0, 16)
    assert t.parse_hw(hw.name) == hw
    assert t.parse_hw("ws32x16_i16w15o17", "kv260") == hw       # 512 PEs: the derated clock
    wdb = t.parse_hw("ws32x16_i16w15o17_wdb", "kv260")
    assert wdb.weight_double_buffer == 1 and t.parse_hw(wdb.name) == wdb and "_wdb_" in wdb.name
    with pytest.raises(ConfigError, match="closes at"):
        t.check_fits(SystolicConfig(32, 16, 16, 15, 17, 250.0, 16), "kv260")
    with pytest.raises(ConfigError):
        t.parse_hw("1x16x16_i8w8a32_15_15_18_17")
    with pytest.raises(ConfigError, match="power of two"):
        SystolicConfig(rows=12)
    with pytest.raises(ConfigError, match="does not fit board arty-a7"):
        t.check_fits(SystolicConfig(64, 64, 17, 17, 17, 150.0, 8), "arty-a7")


# ------------------------------------------------------------------ the systolic model
WL = GemmWorkload("c", 784, 1152, 128)


def _sched(**kw):
    k = {"tile_m": 64, "tile_k": 4, "tile_n": 2, "order": 1, "double_buffer": 1}
    k.update(kw)
    return k


def test_systolic_double_buffering_overlaps_transfers():
    hw = SystolicConfig(16, 16, 16, 16, 16)
    with_db, _ = simulate(WL, hw, _sched(double_buffer=1))
    without, _ = simulate(WL, hw, _sched(double_buffer=0))
    assert with_db < without


def test_systolic_more_bandwidth_is_never_slower_and_more_pes_help_compute_bound():
    for k in (_sched(), _sched(order=0, tile_m=16), _sched(tile_n=1, tile_k=1, double_buffer=0)):
        slow, _ = simulate(WL, SystolicConfig(16, 16, 16, 16, 16, 150.0, 4), k)
        fast, _ = simulate(WL, SystolicConfig(16, 16, 16, 16, 16, 150.0, 64), k)
        assert fast <= slow
    small, _ = simulate(WL, SystolicConfig(8, 8, 16, 16, 16, 150.0, 64), _sched(tile_k=8, tile_n=4))
    big, _ = simulate(WL, SystolicConfig(16, 16, 16, 16, 16, 150.0, 64), _sched(tile_k=4, tile_n=2))
    assert big < small


def test_systolic_fit_and_spills():
    hw = SystolicConfig(16, 16, 14, 14, 14)
    assert "input tile" in fit_reason(WL, hw, _sched(tile_m=1024, tile_k=8))
    assert "accumulator tile" in fit_reason(WL, hw, _sched(tile_m=256, tile_n=8, tile_k=1))
    secs, info = simulate(WL, hw, _sched(tile_m=1024, tile_k=8))
    assert secs is None and "SRAM" in info["reason"]
    # weight reuse keeps partial sums of all rows on chip only if they fit: else they spill
    big_acc = SystolicConfig(16, 16, 16, 16, 20)
    a, ia = simulate(WL, hw, _sched(order=0, tile_m=32, tile_k=1, tile_n=1))
    b, ib = simulate(WL, big_acc, _sched(order=0, tile_m=32, tile_k=1, tile_n=1))
    assert ia["dram_bytes"] > ib["dram_bytes"] and a > b


def test_systolic_resources_grow_with_the_array():
    small = SystolicConfig(8, 8).resources(dsp_budget=240)
    big = SystolicConfig(32, 32).resources(dsp_budget=240)
    assert big["dsp"] == 240 and small["dsp"] == 64
    assert big["lut"] > small["lut"] and big["bram36"] >= small["bram36"]


#: what a target must implement (docs/extending.md); everything else has a default
CORE = {"make_hw", "violations", "resources", "workload", "workload_key", "sw_space",
        "ideal_seconds", "measurer"}


def _abstract(cls) -> set:
    import inspect

    return {n for n, f in inspect.getmembers(cls, inspect.isfunction)
            if "raise NotImplementedError" in inspect.getsource(f)}


def test_the_interface_asks_for_eight_methods_and_both_targets_give_them():
    from dcoc.targets.base import Target

    assert _abstract(Target) == CORE | {"hw_space"}   # hw_space: unless hw_ranges is set
    for name in ("vta", "systolic"):
        t = type(targets.get(name))
        assert all(getattr(t, m) is not getattr(Target, m) for m in CORE), name
        assert t.hw_ranges or t.hw_space is not Target.hw_space


def test_defaults_give_systolic_its_spaces_layers_and_tasks():
    """Systolic relies on the base class for hw_space, layers and task."""
    t = targets.get("systolic")
    hs = t.hw_space("kv260")
    assert hs.name == "systolic[kv260]" and hs.board.name == "kv260" and hs.names == list(t.hw_knobs)
    layer = t.layer("gemm:64,256,64")
    hw = t.default_hw("kv260")
    task = t.task(layer, hw)
    assert task.target == "systolic" and task.workload_key == t.workload_key(layer)
    assert task.flop == float(layer.workload.flops) and task.payload == {"workload": layer.workload, "hw": hw}
    assert task.defaults() == [t.default_schedule(layer, hw, task.space)]
    assert t.parse_hw(hw.name, "kv260") == hw


def test_measurer_registry():
    from dcoc.search import create_measurer, measurer_names
    from dcoc.search.measure import FunctionMeasurer, TableMeasurer
    from dcoc.targets.vta import VTASimMeasurer

    assert {"simulator", "table", "rpc", "function", "memo"} <= set(measurer_names())
    assert isinstance(create_measurer("simulator", target="vta", n_workers=0), VTASimMeasurer)
    sysm = create_measurer("simulator", target="systolic")
    assert isinstance(sysm, FunctionMeasurer) and not isinstance(sysm, VTASimMeasurer)
    t = targets.get("systolic")
    layer = t.layer("gemm:64,256,64")
    hw = t.default_hw("arty-a7")
    task = t.task(layer, hw)
    k = t.default_schedule(layer, hw)
    secs = sysm.measure(task, [k])[0].cost
    table = create_measurer("table", table={task.space.key(k): secs})
    assert isinstance(table, TableMeasurer) and table.measure(task, [k])[0].cost == secs
    with pytest.raises(DcocError, match="unknown measurer"):
        create_measurer("oscilloscope")


def test_vta_padded_bound_counts_the_tiles_a_core_shape_wastes():
    """``bound_seconds`` rounds batch and channels up to the core's tiles: the co-design cost
    model's efficiency is relative to it, so an unmeasured core shape is not credited with
    MACs it cannot use (a batch-1 model on a BATCH=2 core, 3 input channels on BLOCK_IN=16)."""
    from dcoc.targets.vta import Conv2DWorkload, DenseWorkload, HWConfig

    t = targets.get("vta")
    conv = t.layer(Conv2DWorkload(1, 56, 56, 3, 64, kernel=3, padding=1))
    hw = HWConfig(batch=1, block_in=16, block_out=16)
    assert t.bound_seconds(conv, hw) == pytest.approx(t.ideal_seconds(conv, hw) * 16 / 3)
    hw2 = HWConfig(batch=2, block_in=16, block_out=16)
    assert t.ideal_seconds(conv, hw2) == pytest.approx(t.ideal_seconds(conv, hw) / 2)
    assert t.bound_seconds(conv, hw2) == pytest.approx(t.bound_seconds(conv, hw))   # nothing gained
    dense = t.layer(DenseWorkload(1, 512, 1000))
    assert t.bound_seconds(dense, hw) == pytest.approx(32 * 63 / (hw.freq_mhz * 1e6))
    sys_t = targets.get("systolic")   # the systolic array: K and N padded to folds, rows per fold
    shw = sys_t.default_hw(sys_t.board(sys_t.default_board))
    fc = sys_t.layer("gemm:1,500,1000")
    cyc = 32 * 63 * 16                # 500 -> 32 folds of 16 rows, 1000 -> 63 of 16 columns, 16 cycles each
    assert sys_t.bound_seconds(fc, shw) == pytest.approx(cyc / (shw.freq_mhz * 1e6))
    no_wdb = SystolicConfig(16, 16, 15, 15, 15, shw.freq_mhz, shw.bus_bytes, 0)
    assert sys_t.bound_seconds(fc, no_wdb) == pytest.approx(32 * 63 * (1 + 32 + 14) / (shw.freq_mhz * 1e6))


def test_vta_buffer_sizes_only_decide_what_fits():
    """VTA's ``fit_knobs`` claim (used by co-design's ``timing_classes``): a schedule valid on
    two configs that differ only in buffer sizes simulates to the same time on both, and
    one that fits the smaller config fits the larger one."""
    import numpy as np

    from dcoc.targets.vta import Conv2DWorkload, DenseWorkload, HWConfig, simulate

    t = targets.get("vta")
    small = HWConfig(block_in=16, block_out=32, log_uop_buff=14, log_inp_buff=14, log_wgt_buff=17,
                     log_acc_buff=16, freq_mhz=333.0, bus_bytes=16)
    large = small.replace(log_uop_buff=16, log_inp_buff=15, log_wgt_buff=19, log_acc_buff=17)
    other = small.replace(block_out=16)            # another core: another class
    assert t.timing_key(small) == t.timing_key(large) != t.timing_key(other)
    assert t.fit_values(small) == (14, 14, 17, 16)
    rng = np.random.default_rng(0)
    both = 0
    for wl in (Conv2DWorkload(1, 56, 56, 24, 144, kernel=1), Conv2DWorkload(1, 14, 14, 256, 256, kernel=3, padding=1),
               DenseWorkload(1, 1280, 1000)):
        layer = t.layer(wl)
        sp_s, sp_l = t.sw_space(layer, small), t.sw_space(layer, large)
        pts = list(sp_l)
        for i in rng.choice(len(pts), size=min(40, len(pts)), replace=False):
            k = pts[int(i)]
            if sp_s.is_valid(k):
                assert sp_l.is_valid(k)
                a, b = simulate(wl, small, k), simulate(wl, large, k)
                assert a.valid and b.valid and a.cycles == b.cycles
                both += 1
    assert both >= 20
