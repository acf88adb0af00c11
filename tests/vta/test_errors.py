"""Every error path: invalid knobs/workloads/data never crash simulate; broken instruction
streams raise SimulationError."""
import numpy as np
import pytest

from dcoc.errors import ConfigError, DcocError, KnobError
from dcoc.targets.vta import (
    Conv2DWorkload,
    DenseWorkload,
    Epilogue,
    HWConfig,
    SimulationError,
    WorkloadError,
    compile_schedule,
    isa,
    simulate,
)
from dcoc.targets.vta.program import DramLayout, Program
from dcoc.targets.vta.simulator import run_program

PYNQ = HWConfig.preset("pynq")
C2 = Conv2DWorkload(1, 56, 56, 64, 64, 3, 1, 1)
GOOD = dict(tile_h=8, tile_w=56, tile_ci=1, tile_co=2, oc_nthread=2, h_nthread=1)


def _invalid(r, needle):
    assert not r.valid
    assert needle in r.reason, r.reason
    assert "\n" not in r.reason
    assert r.cycles is None and r.seconds == float("inf") and r.gops == 0.0
    return r


@pytest.mark.parametrize("change, needle", [
    (dict(tile_q=1), "unknown knob 'tile_q'"),
    (dict(tile_h=5), "tile_h=5 is not in the space"),
    (dict(tile_h=0), "not in the space"),
    (dict(tile_h=-8), "not in the space"),
    (dict(tile_h=8.0), "not an integer"),
    (dict(tile_h="8"), "not an integer"),
    (dict(tile_h=None), "not an integer"),
    (dict(oc_nthread=True), "not an integer"),
    (dict(oc_nthread=4), "not in the space"),
    (dict(tile_b=2), "not in the space"),
])
def test_invalid_knob_values(change, needle):
    k = dict(GOOD)
    k.update(change)
    _invalid(simulate(C2, PYNQ, k), needle)


def test_missing_and_non_dict_knobs():
    k = dict(GOOD)
    del k["tile_co"]
    _invalid(simulate(C2, PYNQ, k), "missing knob(s) tile_co")
    _invalid(simulate(C2, PYNQ, [1, 2, 3]), "knobs must be a dict")
    _invalid(simulate(C2, PYNQ, None), "knobs must be a dict")
    # tile_b (defined, never applied by the conv template) is accepted when in range
    assert simulate(C2, PYNQ, dict(GOOD, tile_b=1)).valid
    # numpy integers are fine
    assert simulate(C2, PYNQ, {k: np.int64(v) for k, v in GOOD.items()}).valid


@pytest.mark.parametrize("knobs, needle", [
    (dict(tile_h=8, tile_w=56, tile_ci=1, tile_co=4, oc_nthread=2, h_nthread=1), "accumulator buffer overflow"),
    (dict(tile_h=28, tile_w=56, tile_ci=4, tile_co=1, oc_nthread=1, h_nthread=1), "input buffer overflow"),
    (dict(tile_h=4, tile_w=56, tile_ci=1, tile_co=4, oc_nthread=2, h_nthread=2), "accumulator buffer overflow"),
])
def test_buffer_overflow(knobs, needle):
    _invalid(simulate(C2, PYNQ, knobs), needle)


def test_weight_buffer_overflow():
    wl = Conv2DWorkload(1, 7, 7, 512, 512, 3, 1, 1)
    k = dict(tile_h=7, tile_w=7, tile_ci=8, tile_co=16, oc_nthread=1, h_nthread=1)
    _invalid(simulate(wl, PYNQ, k), "weight buffer overflow")


def test_uop_cache_overflow():
    hw = HWConfig(log_uop_buff=10)  # 256 micro-ops
    k = dict(tile_h=28, tile_w=1, tile_ci=2, tile_co=4, oc_nthread=1, h_nthread=1)
    _invalid(simulate(C2, hw, k), "micro-op cache overflow")


def test_field_overflows():
    # padding > 15 does not fit the 4-bit pad field
    wl = Conv2DWorkload(1, 8, 8, 16, 16, (1, 33), 1, (0, 16, 0, 16))
    k = dict(tile_h=8, tile_w=8, tile_ci=1, tile_co=1, oc_nthread=1, h_nthread=1)
    _invalid(simulate(wl, PYNQ, k), "4-bit pad field")
    # a 16384-element ALU loop overflows the 14-bit iteration field
    hw = HWConfig(log_acc_buff=20, log_wgt_buff=12, log_inp_buff=18, log_uop_buff=9)
    wl = Conv2DWorkload(1, 128, 128, 16, 16, 1, 1, 0)
    k = dict(tile_h=128, tile_w=128, tile_ci=1, tile_co=1, oc_nthread=1, h_nthread=1)
    _invalid(simulate(wl, hw, k), "14-bit iteration field")
    # a store whose channel-block stride (300*300 elements) overflows the 16-bit stride field
    wl = Conv2DWorkload(1, 300, 300, 16, 32, 1, 1, 0)
    k = dict(tile_h=1, tile_w=300, tile_ci=1, tile_co=2, oc_nthread=1, h_nthread=1)
    _invalid(simulate(wl, PYNQ, k), "16-bit stride field")


def test_unsupported_dilation_is_invalid_not_an_exception():
    wl = Conv2DWorkload(1, 10, 10, 16, 16, 3, 1, 2, dilation=2)
    _invalid(simulate(wl, PYNQ, dict(tile_h=10, tile_w=10, tile_ci=1, tile_co=1,
                                     oc_nthread=1, h_nthread=1)), "dilation")


def test_invalid_dense_knobs():
    wl = DenseWorkload(1, 512, 1000)
    _invalid(simulate(wl, PYNQ, dict(tile_b=1, tile_ci=32, tile_co=63, oc_nthread=2)),
             "weight buffer overflow")
    _invalid(simulate(wl, PYNQ, dict(tile_b=1, tile_ci=32, tile_co=63)), "missing knob")


def test_bad_workloads_and_epilogues_raise_workload_error():
    with pytest.raises(WorkloadError):
        Conv2DWorkload(0, 8, 8, 16, 16)
    with pytest.raises(WorkloadError):
        Conv2DWorkload(1, 8, 8, 16, 16, kernel=(3, 3, 3))
    with pytest.raises(WorkloadError):
        Conv2DWorkload(1, 8, 8, 16, 16, padding=(1, 2, 3))
    with pytest.raises(WorkloadError):
        Conv2DWorkload(1, 8, 8, 16, 16, padding=-1)
    with pytest.raises(WorkloadError):
        Conv2DWorkload(1, 2, 2, 16, 16, kernel=5)  # empty output
    with pytest.raises(WorkloadError):
        DenseWorkload(1, 0, 4)
    with pytest.raises(WorkloadError):
        Epilogue(shift=20)
    with pytest.raises(WorkloadError):
        Epilogue(clip=(5, 1))
    with pytest.raises(WorkloadError):
        Epilogue(clip=(0, 70000))
    with pytest.raises(WorkloadError):
        Epilogue(round=True, shift=None)
    with pytest.raises(WorkloadError):
        simulate("conv", PYNQ, GOOD)
    with pytest.raises(WorkloadError):
        simulate(C2, PYNQ, GOOD, epilogue="relu")
    with pytest.raises(ValueError):
        simulate(C2, PYNQ, GOOD, mode="turbo")


def test_bad_hw_argument_raises_config_error():
    with pytest.raises(ConfigError):
        simulate(C2, "not-a-config", GOOD)
    with pytest.raises(ConfigError):
        simulate(C2, 42, GOOD)
    assert simulate(C2, "pynq", GOOD).valid  # names are accepted


def test_bad_functional_data():
    wl = Conv2DWorkload(1, 4, 4, 16, 16, 3, 1, 1)
    k = dict(tile_h=4, tile_w=4, tile_ci=1, tile_co=1, oc_nthread=1, h_nthread=1)
    x = np.zeros(wl.data_shape, np.int8)
    w = np.zeros(wl.weight_shape, np.int8)
    with pytest.raises(WorkloadError, match="shape"):
        simulate(wl, PYNQ, k, data=x[:, :8], weight=w)
    with pytest.raises(WorkloadError, match="needs both"):
        simulate(wl, PYNQ, k, data=x)
    with pytest.raises(WorkloadError, match="fit int8"):
        simulate(wl, PYNQ, k, data=x.astype(np.int32) + 300, weight=w)
    with pytest.raises(WorkloadError, match="integer"):
        simulate(wl, PYNQ, k, data=x.astype(np.float32), weight=w)
    with pytest.raises(WorkloadError, match="bias"):
        simulate(wl, PYNQ, k, data=x, weight=w, bias=np.zeros(3, np.int32))
    with pytest.raises(WorkloadError, match="epilogue=None"):
        simulate(wl, PYNQ, k, data=x, weight=w, bias=np.zeros(16, np.int32), epilogue=None)
    # invalid knobs with data: still a valid=False result, not an exception
    _invalid(simulate(wl, PYNQ, dict(k, tile_h=3), data=x, weight=w), "not in the space")


def test_compile_schedule_raises_knob_error():
    with pytest.raises(KnobError, match="accumulator"):
        compile_schedule(C2, PYNQ, dict(GOOD, tile_co=4))
    assert issubclass(KnobError, DcocError)


# ----------------------------------------------------------------------------- broken streams
def _program(insns, hw=PYNQ, uops=((0, 0, 0),), regions=None):
    words = np.array([isa.encode_uop(isa.Uop(*u), hw) for u in uops], np.uint32)
    dram = DramLayout(regions or {"inp": (64, hw.inp_elem_bytes), "out": (64, hw.out_elem_bytes)},
                      len(words))
    return Program(hw, list(insns), words, dram)


def _run(prog):
    return run_program(prog)


def _sync(*insns):
    """Make FINISH wait for the given load/store instructions (as VTA's Synchronize does)."""
    insns = list(insns)
    pops = {}
    for i in insns:
        if isa.stage_of(i) == isa.LOAD_STAGE:
            last_l = i
        elif isa.stage_of(i) == isa.STORE_STAGE:
            last_s = i
    if "last_l" in locals():
        last_l.push_next = 1
        pops["pop_prev"] = 1
    if "last_s" in locals():
        last_s.push_prev = 1
        pops["pop_next"] = 1
    nop = isa.MemInsn(opcode=isa.OP_LOAD, memory_type=isa.MEM_UOP, **pops)
    return insns + [nop, isa.FinishInsn()]


def _finish(**kw):
    return isa.FinishInsn(**kw)


def test_minimal_valid_stream():
    prog = _program([_finish()])
    cycles, counters, _ = _run(prog)
    assert cycles > 0 and counters["gemm_counter"] == 0


def test_missing_finish():
    with pytest.raises(SimulationError, match="without FINISH"):
        _run(_program([isa.MemInsn(opcode=isa.OP_LOAD)]))


def test_token_deadlock():
    # compute pops a load->compute token that nobody pushes
    g = isa.GemmInsn(pop_prev=1)
    with pytest.raises(SimulationError, match="deadlock.*l2g"):
        _run(_program([g, _finish()]))
    # a store waits on g2s forever
    s = isa.MemInsn(opcode=isa.OP_STORE, memory_type=isa.MEM_OUT, pop_prev=1)
    with pytest.raises(SimulationError, match="deadlock"):
        _run(_program(_sync(s)))
    # without the final synchronization FINISH would complete while the store is stuck
    with pytest.raises(SimulationError, match="FINISH completed with instructions still queued"):
        _run(_program([s, _finish()]))


def test_bad_dependency_flags():
    with pytest.raises(SimulationError, match="pop_prev/push_prev"):
        _run(_program([isa.MemInsn(opcode=isa.OP_LOAD, memory_type=isa.MEM_INP, pop_prev=1), _finish()]))
    with pytest.raises(SimulationError, match="pop_next/push_next"):
        _run(_program([isa.MemInsn(opcode=isa.OP_STORE, memory_type=isa.MEM_OUT, push_next=1), _finish()]))


def test_sram_overflow():
    prog = _program([isa.MemInsn(opcode=isa.OP_LOAD, memory_type=isa.MEM_INP, sram_base=2040,
                                 dram_base=_program([]).dram.elem("inp", 0), y_size=1,
                                 x_size=16, x_stride=16)])
    prog.insns = _sync(*prog.insns)
    with pytest.raises(SimulationError, match="SRAM overflow"):
        _run(prog)
    st = isa.MemInsn(opcode=isa.OP_STORE, memory_type=isa.MEM_OUT, sram_base=2047, y_size=1,
                     x_size=4, x_stride=4, dram_base=_program([]).dram.elem("out", 0))
    with pytest.raises(SimulationError, match="SRAM overflow"):
        _run(_program(_sync(st)))


def test_dram_out_of_bounds():
    ld = isa.MemInsn(opcode=isa.OP_LOAD, memory_type=isa.MEM_INP, sram_base=0,
                     dram_base=10**7, y_size=1, x_size=16, x_stride=16)
    with pytest.raises(SimulationError, match="DRAM access out of bounds"):
        _run(_program(_sync(ld)))


def test_gemm_index_out_of_range_and_unloaded_uops():
    base = _program([]).dram.elem("uop", 0)
    ld = isa.MemInsn(opcode=isa.OP_LOAD, memory_type=isa.MEM_UOP, sram_base=0, dram_base=base,
                     y_size=1, x_size=1, x_stride=1)
    g = isa.GemmInsn(uop_bgn=0, uop_end=1, iter_out=3000, dst_factor_out=1)
    with pytest.raises(SimulationError, match="GEMM ACC index"):
        _run(_program([ld, g, _finish()]))
    with pytest.raises(SimulationError, match="used before being loaded"):
        _run(_program([isa.GemmInsn(uop_bgn=0, uop_end=1), _finish()]))
    with pytest.raises(SimulationError, match="outside the uop buffer"):
        _run(_program([isa.GemmInsn(uop_bgn=0, uop_end=9000), _finish()]))


def test_store_rules_and_memory_types():
    st = isa.MemInsn(opcode=isa.OP_STORE, memory_type=isa.MEM_OUT, y_size=1, x_size=1,
                     x_stride=1, x_pad_0=1, dram_base=_program([]).dram.elem("out", 0))
    with pytest.raises(SimulationError, match="padding"):
        _run(_program(_sync(st)))
    ld = isa.MemInsn(opcode=isa.OP_LOAD, memory_type=isa.MEM_OUT, y_size=1, x_size=1, x_stride=1)
    with pytest.raises(SimulationError, match="not supported"):
        _run(_program(_sync(ld)))


def test_missing_dependency_is_a_race():
    """Dropping one pop flag from a correct stream lets a load overwrite an input tile
    while a GEMM still reads it: the simulator reports the race."""
    wl = Conv2DWorkload(1, 14, 14, 64, 32, 3, 1, 1)
    prog = compile_schedule(wl, PYNQ, dict(tile_h=7, tile_w=14, tile_ci=1, tile_co=2,
                                           oc_nthread=1, h_nthread=1))
    run_program(prog)  # the compiled stream is race-free
    loads = [i for i in prog.insns if i.opcode == isa.OP_LOAD and i.memory_type == isa.MEM_INP
             and i.pop_next]
    loads[1].pop_next = 0
    with pytest.raises(SimulationError):
        run_program(prog)


# ----------------------------------------------------------------------------- fuzz
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_knob_values = st.one_of(st.integers(-3, 70), st.floats(allow_nan=True), st.text(max_size=3),
                         st.none(), st.booleans(), st.lists(st.integers(), max_size=2))
_knob_names = st.sampled_from(["tile_h", "tile_w", "tile_ci", "tile_co", "oc_nthread",
                               "h_nthread", "tile_b", "bogus", 7])


@settings(max_examples=150, deadline=None)
@given(knobs=st.dictionaries(_knob_names, _knob_values, max_size=8),
       hw=st.sampled_from([PYNQ, HWConfig.preset("pynq_4x8"), HWConfig(log_uop_buff=10)]),
       wl=st.sampled_from([Conv2DWorkload(1, 14, 14, 32, 48, 3, 1, 1), DenseWorkload(3, 40, 50)]))
def test_random_knob_dicts_never_raise(knobs, hw, wl):
    r = simulate(wl, hw, knobs)
    assert r.valid in (True, False)
    if r.valid:
        assert r.cycles > 0 and np.isfinite(r.seconds)
    else:
        assert r.reason and r.seconds == float("inf")


def test_dram_region_beyond_32bit_addresses():
    from dcoc.targets.vta.compiler import PlanError

    dram = DramLayout({"inp": (1 << 33, 16)}, 4)
    with pytest.raises(PlanError, match="32-bit"):
        dram.check_fields()
