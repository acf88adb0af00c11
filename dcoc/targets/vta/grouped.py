"""Grouped and depthwise convolution on VTA: packed groups and block-diagonal weights.

VTA's ``group_conv2d_packed`` packs data as (N/BATCH, CI/BLOCK_IN, H, W, BATCH, BLOCK_IN)
and weights as (CO/BLOCK_OUT, (CI/groups)/BLOCK_IN, KH, KW, BLOCK_OUT, BLOCK_IN): every
group's input and output channels fill whole blocks, and an output block reads only the
input blocks of its own group.  A group narrower than a block (a depthwise conv: one
channel per group) is run by merging ``merge`` consecutive groups into one *packed
group* whose weights are block-diagonal (each group's weights on its own channels, zeros
elsewhere): the smallest merge whose input and output channels fill whole blocks.  The
zeros add nothing, so the result is bit-exact to the grouped conv; the accelerator does
``merge`` times the useful MACs of such a layer, and its timing counts them.  When the
packed groups do not divide the groups, the last one is completed with zero channels
(zero data, zero weights; the extra outputs are dropped), as channels are padded to a
block for an ordinary conv.

``groups == 1`` is the ordinary conv2d: one packed group of all (block-padded) channels.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["GroupBlocks", "conv_groups", "block_diagonal"]


@dataclass(frozen=True)
class GroupBlocks:
    """How a conv's groups map onto VTA blocks.

    ``packed``: packed groups; ``merge``: groups per packed group; ``ci_blocks`` /
    ``co_blocks``: input / output channel blocks per packed group.
    """

    packed: int
    merge: int
    ci_blocks: int
    co_blocks: int

    @property
    def in_blocks(self) -> int:
        """Input channel blocks of the whole (padded) layer."""
        return self.packed * self.ci_blocks

    @property
    def out_blocks(self) -> int:
        """Output channel blocks of the whole (padded) layer."""
        return self.packed * self.co_blocks


def conv_groups(wl, block_in: int, block_out: int) -> GroupBlocks:
    """The :class:`GroupBlocks` of conv workload ``wl`` on a BLOCK_IN x BLOCK_OUT core."""
    g = getattr(wl, "groups", 1)
    if g == 1:
        return GroupBlocks(1, 1, -(-wl.in_channels // block_in), -(-wl.out_channels // block_out))
    cin, cout = wl.in_channels // g, wl.out_channels // g
    merge = math.lcm(block_in // math.gcd(block_in, cin), block_out // math.gcd(block_out, cout))
    return GroupBlocks(-(-g // merge), merge, merge * cin // block_in, merge * cout // block_out)


def block_diagonal(weight: np.ndarray, wl, gb: GroupBlocks, block_in: int,
                   block_out: int) -> np.ndarray:
    """OIHW weights (O = out channels, I = in channels per group) -> the packed groups'
    weights, (out_blocks * BLOCK_OUT, ci_blocks * BLOCK_IN, KH, KW), zero-padded: output
    channel ``o`` of group ``j`` (``j % merge`` within its packed group) holds its weights
    at input channels ``(j % merge) * cin ..`` of the packed group."""
    co, cin, kh, kw = weight.shape
    w = np.zeros((gb.out_blocks * block_out, gb.ci_blocks * block_in, kh, kw), weight.dtype)
    if gb.merge == 1 and getattr(wl, "groups", 1) == 1:
        w[:co, :cin] = weight
        return w
    cout = co // wl.groups
    for j in range(gb.merge):
        rows = (np.arange(co) // cout) % gb.merge == j
        w[:co][rows, j * cin:(j + 1) * cin] = weight[rows]
    return w
