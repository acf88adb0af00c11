"""HWConfig <-> VTA's own ``config/vta_config.json`` (vta-reference §1)."""
from __future__ import annotations

import pytest

from dcoc.errors import ConfigError
from dcoc.targets.vta.hardware import HWConfig

#: tvm-vta's config/vta_config.json with TARGET pynq (vta-reference §1.1: every preset
#: sample holds exactly these numbers; only TARGET and HW_VER differ)
VTA_DEFAULT_PYNQ = {"TARGET": "pynq", "HW_VER": "0.0.2", "LOG_INP_WIDTH": 3, "LOG_WGT_WIDTH": 3,
                    "LOG_ACC_WIDTH": 5, "LOG_BATCH": 0, "LOG_BLOCK": 4, "LOG_UOP_BUFF_SIZE": 15,
                    "LOG_INP_BUFF_SIZE": 15, "LOG_WGT_BUFF_SIZE": 18, "LOG_ACC_BUFF_SIZE": 17}


def test_the_pynq_preset_writes_vtas_default_config():
    assert HWConfig.preset("pynq").to_vta_config("pynq") == VTA_DEFAULT_PYNQ
    assert HWConfig.preset("ultra96").to_vta_config("ultra96") == {**VTA_DEFAULT_PYNQ, "TARGET": "ultra96"}


def test_a_non_square_core_writes_the_older_block_keys():
    hw = HWConfig.parse("1x8x32_i8w8a32_14_15_17_17")
    cfg = hw.to_vta_config("pynq")
    assert "LOG_BLOCK" not in cfg
    assert (cfg["LOG_BATCH"], cfg["LOG_BLOCK_IN"], cfg["LOG_BLOCK_OUT"]) == (0, 3, 5)
    assert [cfg[f"LOG_{b}_BUFF_SIZE"] for b in ("UOP", "INP", "WGT", "ACC")] == [14, 15, 17, 17]
    b4 = HWConfig.preset("pynq_4x8").to_vta_config()
    assert (b4["LOG_BATCH"], b4["LOG_BLOCK"]) == (2, 3)


@pytest.mark.parametrize("name", ["pynq", "pynq_4x8", "1x8x32_i8w8a32_14_15_17_17",
                                  "2x32x16_i8w8a32_15_16_18_18"])
def test_vtas_depth_formulas_on_the_written_file_give_our_depths(name):
    """pkg_config.py / hw_spec_const.h derive the SRAM depths from the file's logs."""
    hw = HWConfig.parse(name)
    c = hw.to_vta_config()
    bi = c.get("LOG_BLOCK_IN", c.get("LOG_BLOCK"))
    bo = c.get("LOG_BLOCK_OUT", c.get("LOG_BLOCK"))
    assert hw.inp_depth == 2 ** (c["LOG_INP_BUFF_SIZE"] - c["LOG_BATCH"] - bi - c["LOG_INP_WIDTH"] + 3)
    assert hw.wgt_depth == 2 ** (c["LOG_WGT_BUFF_SIZE"] - bo - bi - c["LOG_WGT_WIDTH"] + 3)
    assert hw.acc_depth == 2 ** (c["LOG_ACC_BUFF_SIZE"] - c["LOG_BATCH"] - bo - c["LOG_ACC_WIDTH"] + 3)
    assert hw.uop_depth == 2 ** (c["LOG_UOP_BUFF_SIZE"] - 5 + 3)
    back = HWConfig.from_vta_config(c, freq_mhz=hw.freq_mhz, bus_bytes=hw.bus_bytes)
    assert back == hw and back.name == hw.name


def test_an_incomplete_file_is_a_one_line_error():
    cfg = dict(VTA_DEFAULT_PYNQ)
    del cfg["LOG_BLOCK"]
    with pytest.raises(ConfigError, match="LOG_BLOCK"):
        HWConfig.from_vta_config(cfg)
