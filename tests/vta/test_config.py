"""HWConfig, presets, derived depths, ISA layout and the board resource model."""
import pytest

from dcoc.errors import ConfigError
from dcoc.targets.vta import BOARDS, HWConfig, get_board
from dcoc.targets.vta.hardware import PRESETS


def test_pynq_preset_matches_reference():
    hw = HWConfig.preset("pynq")
    assert hw.name == "1x16x16_i8w8a32_15_15_18_17"
    assert (hw.inp_depth, hw.wgt_depth, hw.acc_depth, hw.out_depth, hw.uop_depth) == \
        (2048, 1024, 2048, 2048, 8192)
    assert (hw.inp_elem_bytes, hw.wgt_elem_bytes, hw.acc_elem_bytes, hw.out_elem_bytes) == \
        (16, 256, 64, 16)
    assert hw.freq_mhz == 100 and hw.bus_bytes == 8
    assert hw.peak_gops == pytest.approx(51.2)
    lay = hw.layout
    assert (lay.log_uop_depth, lay.log_inp_depth, lay.log_wgt_depth, lay.log_acc_depth) == \
        (13, 11, 10, 11)
    assert not lay.relaxed
    assert hw == HWConfig(batch=1, block_in=16, block_out=16, log_uop_buff=15, log_inp_buff=15,
                          log_wgt_buff=18, log_acc_buff=17, freq_mhz=100, bus_bytes=8)


def test_4x8_and_1x16x32_depths():
    hw = HWConfig.preset("pynq_4x8")
    assert hw.name == "4x8x8_i8w8a32_15_16_16_18"
    assert (hw.inp_depth, hw.wgt_depth, hw.acc_depth) == (2048, 1024, 2048)
    hw = HWConfig(block_out=32)
    assert (hw.wgt_elem_bytes, hw.wgt_depth, hw.acc_depth) == (512, 512, 1024)


def test_names_unique_and_parse_roundtrip():
    names = set()
    for p in PRESETS:
        hw = HWConfig.preset(p)
        names.add(hw.name)
        assert HWConfig.parse(hw.name) == hw
        assert HWConfig.parse(p) == hw
    assert len(names) == 3  # ultra96 == zcu104 config
    assert HWConfig.preset("ultra96").name.endswith("_333MHz_bus16")
    # VTA's short form and board defaults
    assert HWConfig.parse("1x16_i8w8a32_15_15_18_17") == HWConfig.preset("pynq")
    assert HWConfig.parse("1x16x16_i8w8a32_15_15_18_17", board="ultra96").bus_bytes == 16
    assert HWConfig.preset("pynq").replace(freq_mhz=200).name != HWConfig.preset("pynq").name


@pytest.mark.parametrize("kw, msg", [
    (dict(block_in=12), "power of two"),
    (dict(batch=0), "power of two"),
    (dict(block_out=512), "power of two"),
    (dict(batch=True), "power of two"),
    (dict(log_inp_buff=7), "log_inp_buff"),
    (dict(log_wgt_buff=30), "log_wgt_buff"),
    (dict(log_acc_buff=17.5), "log_acc_buff"),
    (dict(inp_width=4), "i8w8a32"),
    (dict(acc_width=16), "i8w8a32"),
    (dict(freq_mhz=0), "freq_mhz"),
    (dict(freq_mhz="fast"), "freq_mhz"),
    (dict(freq_mhz=float("nan")), "freq_mhz"),
    (dict(bus_bytes=12), "bus_bytes"),
    (dict(bus_bytes=256), "bus_bytes"),
    (dict(block_in=256, block_out=256, log_wgt_buff=15), "cannot hold"),
    (dict(log_inp_buff=22), "16-bit SRAM address"),
    (dict(log_acc_buff=18), "micro-op fields need 34 bits"),
])
def test_invalid_configs_raise_one_line(kw, msg):
    with pytest.raises(ConfigError) as ei:
        HWConfig(**kw)
    assert msg in str(ei.value)
    assert "\n" not in str(ei.value)


def test_unknown_preset_board_and_bad_name():
    with pytest.raises(ConfigError, match="unknown HW preset"):
        HWConfig.preset("pynq9")
    with pytest.raises(ConfigError, match="cannot parse"):
        HWConfig.parse("16x16")
    with pytest.raises(ConfigError, match="unknown board"):
        get_board("arty")
    with pytest.raises(ConfigError, match="unknown board"):
        HWConfig.parse("1x16x16_i8w8a32_15_15_18_17", board="arty")


def test_relaxed_isa_layout_for_large_accumulator():
    # acc depth 4096 -> 12-bit ACC fields: the ALU's word 1 needs 68 bits
    hw = HWConfig(log_acc_buff=18, log_wgt_buff=16, log_uop_buff=13)
    assert hw.acc_depth == 4096 and hw.wgt_depth == 256
    assert hw.layout.relaxed


def test_bram_rule_and_board_fit():
    pynq = BOARDS["pynq"]
    hw = HWConfig.preset("pynq")
    assert hw.bram36() == {"uop": 8, "inp": 8, "wgt": 64, "acc": 32, "out": 8, "total": 120}
    assert HWConfig.preset("pynq_4x8").resources()["bram36"] == 120
    assert pynq.fits(hw) and pynq.fits(HWConfig.preset("pynq_4x8"))
    big = HWConfig(block_in=32, block_out=32)
    assert not pynq.fits(big)
    assert any("BRAM36" in v for v in pynq.violations(big))
    # the 1x16x16 (15,16,18,16) Pareto point uses 108 BRAM
    assert HWConfig(log_inp_buff=16, log_acc_buff=16).resources()["bram36"] == 108
    for b in ("ultra96", "zcu104"):
        assert BOARDS[b].fits(BOARDS[b].default_hw())


def test_dsp_spill_to_luts():
    hw = HWConfig.preset("pynq")
    free = hw.resources()
    capped = BOARDS["pynq"].usage(hw)
    assert free["dsp"] == 256 and capped["dsp"] == 220
    assert capped["lut"] > free["lut"]
    # UltraScale+ DSP48E2 packs two int8 products per DSP (WP486): 2048 multipliers -> 1024 DSPs
    assert BOARDS["zcu104"].usage(HWConfig(batch=2, block_in=32, block_out=32))["dsp"] == 1024
    assert BOARDS["ultra96"].usage(HWConfig(batch=4, block_in=32, block_out=32))["dsp"] == 360
