"""Clock and DSP/LUT model of dcoc.targets.vta.hardware: achievable clock, DSP packing, sensitivity."""
import pytest

from dcoc.targets.vta import BOARDS, HWConfig
from dcoc.targets.vta.hardware import RESOURCE_SOURCES, estimate_scale


def _hw(board, b=1, bi=16, bo=16):
    bd = BOARDS[board]
    return HWConfig(batch=b, block_in=bi, block_out=bo, freq_mhz=bd.freq_mhz, bus_bytes=bd.bus_bytes)


@pytest.mark.parametrize("board", list(BOARDS))
def test_shipped_core_closes_at_the_pkg_config_clock(board):
    bd = BOARDS[board]
    assert bd.clock_mhz(bd.default_hw()) == bd.freq_mhz
    assert bd.realize(bd.default_hw()) == bd.default_hw()


def test_deeper_adder_tree_lowers_the_clock():
    bd = BOARDS["zcu104"]  # plenty of LUTs: only the tree depth acts
    assert bd.clock_mhz(_hw("zcu104", bi=32)) < bd.clock_mhz(_hw("zcu104", bi=16))
    # a shallower tree never exceeds the shipped clock, block_out does not deepen the tree
    assert bd.clock_mhz(HWConfig.preset("pynq_4x8").replace(freq_mhz=333, bus_bytes=16)) == bd.freq_mhz
    assert bd.clock_mhz(_hw("zcu104", bo=32)) == bd.freq_mhz


def test_congestion_lowers_the_clock_above_the_knee():
    bd = BOARDS["pynq"]
    hw = _hw("pynq", b=2)  # 512 multipliers: 292 in LUTs on 220 DSPs -> ~85 % LUT
    util = bd.usage(hw)["lut"] / bd.lut
    assert util > 0.7
    assert bd.clock_mhz(hw) < bd.freq_mhz
    assert bd.realize(hw).freq_mhz == bd.clock_mhz(hw)


def test_dsp_packing_only_on_ultrascale():
    hw = _hw("pynq", bo=32)
    assert BOARDS["pynq"].usage(hw)["dsp"] == 220  # DSP48E1: one product per DSP, capped
    u = BOARDS["zcu104"].usage(HWConfig(block_out=32, freq_mhz=333, bus_bytes=16))
    assert u["dsp"] == 256  # 512 products / 2 per DSP48E2
    # overflow beyond the DSPs costs LUTs
    assert BOARDS["pynq"].usage(_hw("pynq", b=2))["lut"] > BOARDS["pynq"].usage(_hw("pynq"))["lut"]


def test_estimate_scale_moves_lut_and_clock_and_restores():
    bd, hw = BOARDS["pynq"], _hw("pynq")
    lut0, f0 = bd.usage(hw)["lut"], bd.clock_mhz(hw)
    with estimate_scale(lut=1.2, clock=0.8):
        assert bd.usage(hw)["lut"] == int(lut0 * 1.2) or abs(bd.usage(hw)["lut"] - lut0 * 1.2) <= 1
        assert bd.clock_mhz(hw) == pytest.approx(0.8 * f0, abs=1)
    assert (bd.usage(hw)["lut"], bd.clock_mhz(hw)) == (lut0, f0)


def test_every_estimate_has_a_source_and_an_uncertainty():
    for key, (src, unc) in RESOURCE_SOURCES.items():
        assert src and 0 < unc < 1, key


def test_parse_without_clock_takes_the_achievable_clock():
    hw = HWConfig.parse("2x16x16_i8w8a32_15_15_18_17", board="pynq")
    assert hw.freq_mhz == BOARDS["pynq"].clock_mhz(hw) < 100
    assert HWConfig.parse("2x16x16_i8w8a32_15_15_18_17_100MHz_bus8").freq_mhz == 100


def test_clock_other_scales_only_new_cores():
    bd = BOARDS["ultra96"]
    with estimate_scale(clock_other=0.8):
        assert bd.clock_mhz(bd.default_hw()) == bd.freq_mhz
        assert bd.clock_mhz(_hw("ultra96", bo=32)) == pytest.approx(0.8 * bd.freq_mhz, abs=1)


def test_sensitivity_scenarios_move_feasibility_and_clock():
    from scripts.bench_sensitivity import SCENARIOS, candidates, scenario_configs

    cands = candidates()
    assert len(cands) > 30 and SCENARIOS[0][0] == "nominal"
    bd = BOARDS["pynq"]
    nom, d_nom, f_nom = scenario_configs(bd, 1.0, 1.0, cands)
    more_lut, _, _ = scenario_configs(bd, 1.2, 1.0, cands)
    assert set(more_lut) < set(nom)  # bigger LUT estimates rule configs out
    _, d_slow, f_slow = scenario_configs(bd, 1.0, 0.8, cands)
    assert f_nom[d_nom]["freq_mhz"] == 100 and f_slow[d_slow]["freq_mhz"] == 80
    _, d_other, f_other = scenario_configs(bd, 1.0, 1.0, cands, clock_other=0.8)
    assert f_other[d_other]["freq_mhz"] == 100  # the shipped core keeps its published clock
    assert all(v["freq_mhz"] <= 80 for k, v in f_other.items() if not k.startswith("1x16x16_"))
