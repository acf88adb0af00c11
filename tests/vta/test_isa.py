"""128-bit instruction / 32-bit micro-op encoding: layout, round trips, range errors."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcoc.targets.vta import HWConfig, IsaError, isa
from dcoc.targets.vta.layer import compile_schedule
from dcoc.targets.vta.workloads import Conv2DWorkload

CONFIGS = [HWConfig.preset("pynq"), HWConfig.preset("pynq_4x8"), HWConfig(block_out=32),
           HWConfig(log_acc_buff=18, log_wgt_buff=16, log_uop_buff=13)]  # last: relaxed


def _u(bits):
    return st.integers(0, (1 << bits) - 1)


@st.composite
def instructions(draw, hw):
    lay = hw.layout
    dep = {n: draw(_u(1)) for n in ("pop_prev", "pop_next", "push_prev", "push_next")}
    kind = draw(st.sampled_from(["load", "store", "gemm", "alu", "finish"]))
    if kind in ("load", "store"):
        return isa.MemInsn(opcode=isa.OP_LOAD if kind == "load" else isa.OP_STORE,
                           memory_type=draw(st.integers(0, 5)), sram_base=draw(_u(16)),
                           dram_base=draw(_u(32)), y_size=draw(_u(16)), x_size=draw(_u(16)),
                           x_stride=draw(_u(16)), y_pad_0=draw(_u(4)), y_pad_1=draw(_u(4)),
                           x_pad_0=draw(_u(4)), x_pad_1=draw(_u(4)), **dep)
    common = dict(uop_bgn=draw(_u(lay.log_uop_depth)), uop_end=draw(_u(lay.log_uop_depth + 1)),
                  iter_out=draw(_u(14)), iter_in=draw(_u(14)),
                  dst_factor_out=draw(_u(lay.log_acc_depth)), dst_factor_in=draw(_u(lay.log_acc_depth)))
    if kind == "gemm":
        return isa.GemmInsn(reset_reg=draw(_u(1)), src_factor_out=draw(_u(lay.log_inp_depth)),
                            src_factor_in=draw(_u(lay.log_inp_depth)),
                            wgt_factor_out=draw(_u(lay.log_wgt_depth)),
                            wgt_factor_in=draw(_u(lay.log_wgt_depth)), **common, **dep)
    if kind == "alu":
        return isa.AluInsn(src_factor_out=draw(_u(lay.log_acc_depth)),
                           src_factor_in=draw(_u(lay.log_acc_depth)),
                           alu_opcode=draw(st.integers(0, 4)), use_imm=draw(_u(1)),
                           imm=draw(st.integers(-32768, 32767)), **common, **dep)
    return isa.FinishInsn(**dep)


@pytest.mark.parametrize("hw", CONFIGS, ids=lambda h: h.bitstream)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_encode_decode_roundtrip(hw, data):
    insn = data.draw(instructions(hw))
    word = isa.encode(insn, hw)
    assert 0 <= word < (1 << 128)
    assert isa.decode(word, hw) == insn


@pytest.mark.parametrize("hw", CONFIGS, ids=lambda h: h.bitstream)
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_uop_roundtrip(hw, data):
    lay = hw.layout
    u = isa.Uop(data.draw(_u(lay.uop_dst_bits)), data.draw(_u(lay.uop_src_bits)),
                data.draw(_u(lay.uop_wgt_bits)))
    w = isa.encode_uop(u, hw)
    assert 0 <= w < (1 << 32)
    assert isa.decode_uop(w, hw) == u


def test_default_layout_bit_positions():
    hw = HWConfig.preset("pynq")
    m = isa.MemInsn(opcode=isa.OP_LOAD, memory_type=isa.MEM_INP, sram_base=5, dram_base=7,
                    y_size=3, x_size=4, x_stride=9, y_pad_0=1, y_pad_1=2, x_pad_0=3, x_pad_1=4,
                    pop_next=1)
    w = isa.encode(m, hw)
    assert w & 7 == isa.OP_LOAD and (w >> 4) & 1 == 1          # opcode, pop_next
    assert (w >> 7) & 7 == isa.MEM_INP                          # memory_type @7
    assert (w >> 10) & 0xFFFF == 5 and (w >> 26) & 0xFFFFFFFF == 7
    assert (w >> 64) & 0xFFFF == 3 and (w >> 80) & 0xFFFF == 4 and (w >> 96) & 0xFFFF == 9
    assert [(w >> (112 + 4 * i)) & 15 for i in range(4)] == [1, 2, 3, 4]
    g = isa.encode(isa.GemmInsn(dst_factor_out=1, wgt_factor_in=1), hw)
    assert (g >> 64) & 0x7FF == 1 and (g >> (64 + 11 * 4 + 10)) & 0x3FF == 1
    a = isa.encode(isa.AluInsn(alu_opcode=isa.ALU_MAX, use_imm=1, imm=-1), hw)
    assert (a >> (64 + 44)) & 7 == isa.ALU_MAX and (a >> (64 + 47)) & 1 == 1
    assert (a >> (64 + 48)) & 0xFFFF == 0xFFFF


@pytest.mark.parametrize("insn, field", [
    (isa.MemInsn(sram_base=1 << 16), "sram_base"),
    (isa.MemInsn(dram_base=1 << 32), "dram_base"),
    (isa.MemInsn(x_size=1 << 16), "x_size"),
    (isa.MemInsn(y_pad_0=16), "y_pad_0"),
    (isa.MemInsn(x_stride=-1), "x_stride"),
    (isa.GemmInsn(iter_out=1 << 14), "iter_out"),
    (isa.GemmInsn(uop_bgn=1 << 13), "uop_bgn"),
    (isa.GemmInsn(wgt_factor_in=1 << 10), "wgt_factor_in"),
    (isa.AluInsn(imm=40000), "imm"),
    (isa.AluInsn(imm=-40000), "imm"),
    (isa.AluInsn(alu_opcode=8), "alu_opcode"),
    (isa.FinishInsn(pop_prev=2), "pop_prev"),
])
def test_out_of_range_fields_raise(insn, field):
    with pytest.raises(IsaError, match=field):
        isa.encode(insn, HWConfig.preset("pynq"))


def test_bad_opcode_and_uop_fields():
    hw = HWConfig.preset("pynq")
    with pytest.raises(IsaError):
        isa.decode(7, hw)  # opcode 7 does not exist
    with pytest.raises(IsaError):
        isa.decode(1 << 130, hw)
    with pytest.raises(IsaError, match="uop.dst"):
        isa.encode_uop(isa.Uop(2048, 0, 0), hw)
    with pytest.raises(IsaError, match="uop.wgt"):
        isa.encode_uop(isa.Uop(0, 0, 1024), hw)
    bad = isa.MemInsn()
    bad.opcode = 6
    with pytest.raises(IsaError):
        isa.encode(bad, hw)


def test_compiled_program_encodes():
    hw = HWConfig.preset("pynq")
    wl = Conv2DWorkload(1, 14, 14, 32, 32, 3, 1, 1)
    prog = compile_schedule(wl, hw, dict(tile_h=7, tile_w=14, tile_ci=1, tile_co=1,
                                         oc_nthread=2, h_nthread=1))
    words = prog.encode()
    assert len(words) == len(prog.insns)
    assert [isa.decode(w, hw) for w in words] == prog.insns
    assert "GEMM" in prog.listing(10)
    assert all(isa.stage_of(i) in (1, 2, 3) for i in prog.insns)
    assert isinstance(prog.insns[-1], isa.FinishInsn)
