"""What tvm-vta's config flow derives from an exported ``vta_config.json`` equals dcoc's
hardware config.

:func:`pkg_config` transcribes apache/tvm-vta ``config/pkg_config.py`` (``PkgConfig.__init__``:
block sizes, OUT width/size, memory widths and depths, the bitstream name) and
``include/vta/hw_spec_const.h`` / ``hw_spec.h`` (log2 buffer depths, the micro-op fields,
the instruction words' bit fields) from the JSON file alone -- no dcoc code -- and the test
compares the result with the :class:`HWConfig` dcoc exported.
"""
from __future__ import annotations

import json

import pytest

from dcoc.targets import get
from dcoc.targets.vta import HWConfig
from dcoc.targets.vta.buildflow import buildable

MAX_BUS_WIDTH = 1024          # pkg_config.py
LOG_UOP_WIDTH = 5             # hw_spec_const.h: VTA_LOG_UOP_WIDTH
LOOP_ITER_WIDTH = 14          # VTA_LOOP_ITER_WIDTH
OPCODE_BITS, ALU_OPCODE_BITS, ALU_IMM_BITS = 3, 3, 16


def pkg_config(cfg: dict) -> dict:
    """tvm-vta's derivations from a vta_config.json dict (stock flow: ``LOG_BLOCK``)."""
    cfg = dict(cfg)
    cfg["LOG_BLOCK_IN"] = cfg["LOG_BLOCK"]          # pkg_config.py, PkgConfig.__init__
    cfg["LOG_BLOCK_OUT"] = cfg["LOG_BLOCK"]
    cfg["LOG_OUT_WIDTH"] = cfg["LOG_INP_WIDTH"]
    cfg["LOG_OUT_BUFF_SIZE"] = cfg["LOG_ACC_BUFF_SIZE"] + cfg["LOG_OUT_WIDTH"] - cfg["LOG_ACC_WIDTH"]
    d = {"batch": 1 << cfg["LOG_BATCH"], "block_in": 1 << cfg["LOG_BLOCK_IN"],
         "block_out": 1 << cfg["LOG_BLOCK_OUT"]}
    widths = {  # memory bus widths in bits (pkg_config.py *_mem_bus_width)
        "inp": 1 << (cfg["LOG_INP_WIDTH"] + cfg["LOG_BATCH"] + cfg["LOG_BLOCK_IN"]),
        "wgt": 1 << (cfg["LOG_WGT_WIDTH"] + cfg["LOG_BLOCK_IN"] + cfg["LOG_BLOCK_OUT"]),
        "out": 1 << (cfg["LOG_OUT_WIDTH"] + cfg["LOG_BATCH"] + cfg["LOG_BLOCK_OUT"]),
        "acc": 1 << (cfg["LOG_ACC_WIDTH"] + cfg["LOG_BATCH"] + cfg["LOG_BLOCK_OUT"])}
    sizes = {"inp": 1 << cfg["LOG_INP_BUFF_SIZE"], "wgt": 1 << cfg["LOG_WGT_BUFF_SIZE"],
             "out": 1 << cfg["LOG_OUT_BUFF_SIZE"], "acc": 1 << cfg["LOG_ACC_BUFF_SIZE"]}
    for k in widths:  # *_mem_depth = size * 8 // width; banks of at most 1024 bits
        d[f"{k}_depth"] = sizes[k] * 8 // widths[k]
        d[f"{k}_banks"] = (widths[k] + MAX_BUS_WIDTH - 1) // MAX_BUS_WIDTH
    d["uop_depth"] = (1 << cfg["LOG_UOP_BUFF_SIZE"]) // (1 << LOG_UOP_WIDTH >> 3)
    # hw_spec_const.h: VTA_LOG_*_BUFF_DEPTH
    log = {"uop": cfg["LOG_UOP_BUFF_SIZE"] - LOG_UOP_WIDTH + 3,
           "inp": cfg["LOG_INP_BUFF_SIZE"] - cfg["LOG_BATCH"] - cfg["LOG_BLOCK_IN"] - cfg["LOG_INP_WIDTH"] + 3,
           "wgt": cfg["LOG_WGT_BUFF_SIZE"] - cfg["LOG_BLOCK_OUT"] - cfg["LOG_BLOCK_IN"] - cfg["LOG_WGT_WIDTH"] + 3,
           "acc": cfg["LOG_ACC_BUFF_SIZE"] - cfg["LOG_BATCH"] - cfg["LOG_BLOCK_OUT"] - cfg["LOG_ACC_WIDTH"] + 3}
    d["log_depth"] = log
    # hw_spec.h: micro-op fields (GEMM: acc, inp, wgt indices) in one 32-bit word
    d["uop_bits"] = log["acc"] + log["inp"] + log["wgt"]
    # hw_spec.h VTAGemInsn: first word up to iter_in, second word the six factors
    d["gemm_words"] = (OPCODE_BITS + 4 + 1 + log["uop"] + log["uop"] + 1 + 2 * LOOP_ITER_WIDTH,
                       2 * log["acc"] + 2 * log["inp"] + 2 * log["wgt"])
    d["alu_words"] = (OPCODE_BITS + 4 + 1 + log["uop"] + log["uop"] + 1 + 2 * LOOP_ITER_WIDTH,
                      4 * log["acc"] + ALU_OPCODE_BITS + 1 + ALU_IMM_BITS)
    d["bitstream"] = "{}x{}_i{}w{}a{}_{}_{}_{}_{}".format(
        1 << cfg["LOG_BATCH"], 1 << cfg["LOG_BLOCK"], 1 << cfg["LOG_INP_WIDTH"],
        1 << cfg["LOG_WGT_WIDTH"], 1 << cfg["LOG_ACC_WIDTH"], cfg["LOG_UOP_BUFF_SIZE"],
        cfg["LOG_INP_BUFF_SIZE"], cfg["LOG_WGT_BUFF_SIZE"], cfg["LOG_ACC_BUFF_SIZE"])
    return d


def _exported(tmp_path, hw, board) -> dict:
    """The vta_config.json dcoc's export writes for ``hw`` (through the target's hook)."""
    tg = get("vta")
    path = tmp_path / f"{hw.name}.json"
    path.write_text(json.dumps(tg.export_config(hw, board)))
    return json.loads(path.read_text())


def _configs():
    tg = get("vta")
    out = [("pynq", HWConfig.preset("pynq")), ("pynq", HWConfig.preset("pynq_4x8"))]
    for board in ("pynq", "ultra96", "zcu104"):
        hws = tg.feasible_hw(board)
        out += [(board, h) for h in hws[:: max(1, len(hws) // 12)]]
    return out


@pytest.mark.parametrize("board,hw", _configs(), ids=lambda x: getattr(x, "name", x))
def test_pkg_config_derives_dcocs_hardware(tmp_path, board, hw):
    cfg = _exported(tmp_path, hw, board)
    assert set(cfg) == {"TARGET", "HW_VER", "LOG_INP_WIDTH", "LOG_WGT_WIDTH", "LOG_ACC_WIDTH",
                        "LOG_BATCH", "LOG_BLOCK", "LOG_UOP_BUFF_SIZE", "LOG_INP_BUFF_SIZE",
                        "LOG_WGT_BUFF_SIZE", "LOG_ACC_BUFF_SIZE"}
    assert cfg["TARGET"] == board
    d = pkg_config(cfg)
    assert (d["batch"], d["block_in"], d["block_out"]) == (hw.batch, hw.block_in, hw.block_out)
    for k in ("inp", "wgt", "acc", "out", "uop"):
        assert d[f"{k}_depth"] == getattr(hw, f"{k}_depth"), k
    lay = hw.layout
    assert d["log_depth"] == {"uop": lay.log_uop_depth, "inp": lay.log_inp_depth,
                              "wgt": lay.log_wgt_depth, "acc": lay.log_acc_depth}
    assert d["uop_bits"] <= 32
    assert max(d["gemm_words"] + d["alu_words"]) <= 64 and not lay.relaxed
    # pkg_config names a square core BATCHxBLOCK; dcoc's name adds BLOCK_OUT
    assert d["bitstream"] == hw.bitstream.replace(f"x{hw.block_out}_", "_", 1)


def test_default_space_is_buildable_and_extended_is_opt_in():
    tg = get("vta")
    for board in ("pynq", "ultra96", "zcu104"):
        hws = tg.feasible_hw(board)
        assert hws and all(buildable(h) for h in hws)
        ext = tg.with_options(extended_cores=True).feasible_hw(board)
        assert {h.name for h in hws} < {h.name for h in ext}
        assert any(h.block_in != h.block_out for h in ext)


def test_nonsquare_export_states_the_patch():
    tg = get("vta")
    hw = HWConfig.parse("1x8x32_i8w8a32_15_15_18_17")
    cfg = tg.export_config(hw, "pynq")
    assert "LOG_BLOCK" not in cfg and (cfg["LOG_BLOCK_IN"], cfg["LOG_BLOCK_OUT"]) == (3, 5)
    notes = "\n".join(tg.build_notes(hw, "pynq"))
    assert "cannot build this core" in notes and 'cfg.setdefault("LOG_BLOCK_IN"' in notes
    assert tg.hw_notes(hw, "pynq")["buildable"] is False
    assert "Stock tvm-vta builds this core" in "".join(tg.build_notes(HWConfig.preset("pynq"), "pynq"))
