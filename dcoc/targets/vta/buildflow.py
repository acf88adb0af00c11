"""What stock tvm-vta's config flow can build, and what a core outside it needs.

tvm-vta's ``config/pkg_config.py`` reads ``vta_config.json`` and sets
``LOG_BLOCK_IN = LOG_BLOCK_OUT = LOG_BLOCK``: one block size, so only square GEMM cores.
Its ``include/vta/hw_spec.h`` lays every instruction out as two 64-bit words of bit
fields, so a config whose fields overflow a word (dcoc's "relaxed" encoding for large
scratchpads, as VTA++ does) cannot be built either.  Everything else of the hardware
(``hw_spec_const.h``, the HLS and Chisel sources) already uses ``VTA_LOG_BLOCK_IN`` and
``VTA_LOG_BLOCK_OUT`` separately, so a non-square core needs only :data:`NONSQUARE_PATCH`.
"""
from __future__ import annotations

PKG_CONFIG = "apache/tvm-vta config/pkg_config.py"

#: the change tvm-vta's pkg_config.py needs to build a non-square core from dcoc's
#: vta_config.json (which then carries LOG_BLOCK_IN / LOG_BLOCK_OUT instead of LOG_BLOCK)
NONSQUARE_PATCH = """\
--- a/config/pkg_config.py
+++ b/config/pkg_config.py
@@ class PkgConfig(object):
-        "LOG_BLOCK",
+        "LOG_BLOCK_IN",
+        "LOG_BLOCK_OUT",
@@ def __init__(self, cfg):
-        cfg["LOG_BLOCK_IN"] = cfg["LOG_BLOCK"]
-        cfg["LOG_BLOCK_OUT"] = cfg["LOG_BLOCK"]
+        if "LOG_BLOCK" in cfg:
+            cfg.setdefault("LOG_BLOCK_IN", cfg["LOG_BLOCK"])
+            cfg.setdefault("LOG_BLOCK_OUT", cfg["LOG_BLOCK"])
@@ self.bitstream = ...
-        self.bitstream = "{}x{}_i{}w{}a{}_{}_{}_{}_{}".format(
-            (1 << cfg["LOG_BATCH"]),
-            (1 << cfg["LOG_BLOCK"]),
+        self.bitstream = "{}x{}x{}_i{}w{}a{}_{}_{}_{}_{}".format(
+            (1 << cfg["LOG_BATCH"]),
+            (1 << cfg["LOG_BLOCK_IN"]),
+            (1 << cfg["LOG_BLOCK_OUT"]),
"""


def problems(hw) -> list[str]:
    """Why stock tvm-vta cannot build ``hw`` (empty when it can)."""
    out = []
    if hw.block_in != hw.block_out:
        out.append(f"non-square core ({hw.block_in}x{hw.block_out}): {PKG_CONFIG} sets "
                   "LOG_BLOCK_IN = LOG_BLOCK_OUT = LOG_BLOCK")
    if hw.layout.relaxed:
        out.append("instruction fields overflow the two 64-bit words of tvm-vta's hw_spec.h "
                   "(relaxed encoding)")
    return out


def buildable(hw) -> bool:
    return not problems(hw)


def describe(hw) -> str:
    """One line for summaries: whether stock tvm-vta builds ``hw``, and if not, why."""
    p = problems(hw)
    if not p:
        return "stock tvm-vta builds it (square core, standard instruction layout)"
    fix = ("the export states the pkg_config.py change it needs"
           if hw.block_in != hw.block_out and not hw.layout.relaxed else
           "needs a tvm-vta with a wider instruction layout (VTA++)")
    return "NOT buildable by stock tvm-vta: " + "; ".join(p) + f" ({fix})"


def build_notes(hw, board: str) -> list[str]:
    """The export README's lines on building ``hw``: how, whether stock tvm-vta can (and
    the patch when a non-square core needs one), and what its latencies rest on."""
    from dcoc.targets.vta.calibration import VALIDITY, provenance

    notes = ["To build the accelerator, copy `vta_config.json` over tvm-vta's "
             "`config/vta_config.json` (TARGET is the board; VTA's `pkg_config.py` sets the "
             "clock and bus per TARGET).", ""]
    found = problems(hw)
    if found:
        notes += ["**Stock tvm-vta cannot build this core**: " + "; ".join(found) + ".", ""]
        if hw.block_in != hw.block_out:
            notes += ["The file therefore carries `LOG_BLOCK_IN`/`LOG_BLOCK_OUT` instead of "
                      "`LOG_BLOCK`. tvm-vta's hardware sources already use the two block sizes "
                      "separately; `config/pkg_config.py` needs this change:", "",
                      "```diff", NONSQUARE_PATCH.rstrip(), "```", ""]
    else:
        notes += ["Stock tvm-vta builds this core (square, standard instruction layout).", ""]
    prov = provenance(hw, board)
    notes += [f"Latencies are **{prov['status']}**: {prov['basis']}. The calibration holds "
              f"for: {VALIDITY}.", ""]
    return notes


def hw_notes(hw, board: str) -> dict:
    """What summaries, result.json and the Pareto table say about ``hw`` on ``board``."""
    from dcoc.targets.vta.calibration import VALIDITY, label, provenance

    prov = provenance(hw, board)
    return {"buildable": buildable(hw), "build": describe(hw), "latency_basis": prov["status"],
            "basis": prov["basis"], "validity": VALIDITY, "basis_label": label(prov)}
