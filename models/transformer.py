"""A BERT-style transformer encoder (matmul/dense heavy) for the zoo.

``transformer``: token ids ``input_ids`` (int64, 1 x 128) -> token embedding (vocab 8192)
+ learned position embedding -> LayerNorm -> 4 post-LN encoder layers (d_model 256,
4 heads of 64, FFN 1024 with exact GELU) -> hidden states (1 x 128 x 256).

Per layer: Q, K and V projections, per-head ``Q @ K^T`` scaled by 1/8 with a softmax,
``P @ V``, the output projection, residual + LayerNorm, FFN (two linears around a GELU),
residual + LayerNorm.  The graph is what ``torch.onnx.export`` emits for such a model at
opset 17 (``MatMul`` + ``Add`` linears, ``Reshape``/``Transpose`` head split,
``LayerNormalization``, GELU via ``Erf``).
"""
from __future__ import annotations

import math

from onnx import TensorProto

from ._netbuilder import NetBuilder


def transformer(nb: NetBuilder, batch: int = 1, seq: int = 128, d_model: int = 256,
                heads: int = 4, layers: int = 4, ffn: int = 1024, vocab: int = 8192) -> None:
    """Add the encoder described in the module docstring to ``nb``."""
    dh = d_model // heads
    ids = nb.input("input_ids", (batch, seq), dtype=TensorProto.INT64)
    table = nb.weight("embeddings.word_embeddings.weight", (vocab, d_model), "uniform",
                      lo=-0.1, hi=0.1)
    pos = nb.weight("embeddings.position_embeddings.weight", (1, seq, d_model), "uniform",
                    lo=-0.1, hi=0.1)
    x = nb.gather(table, ids, name="embeddings.word_embeddings")
    x = nb.add(x, pos, name="embeddings.add")
    x = nb.layernorm(x, name="embeddings.LayerNorm")
    for i in range(layers):
        p = f"encoder.layer.{i}"

        def heads_first(t: str, name: str, kt: bool = False) -> str:
            t = nb.reshape(t, (batch, seq, heads, dh), name=f"{name}.reshape")
            perm = (0, 2, 3, 1) if kt else (0, 2, 1, 3)
            return nb.transpose(t, perm, name=f"{name}.transpose")

        q = heads_first(nb.linear(x, d_model, name=f"{p}.attention.query"), f"{p}.attention.q")
        k = heads_first(nb.linear(x, d_model, name=f"{p}.attention.key"), f"{p}.attention.k",
                        kt=True)
        v = heads_first(nb.linear(x, d_model, name=f"{p}.attention.value"), f"{p}.attention.v")
        scores = nb.matmul(q, k, name=f"{p}.attention.scores")
        scores = nb.scale(scores, 1.0 / math.sqrt(dh), name=f"{p}.attention.scale")
        probs = nb.softmax(scores, name=f"{p}.attention.softmax")
        ctx = nb.matmul(probs, v, name=f"{p}.attention.context")
        ctx = nb.transpose(ctx, (0, 2, 1, 3), name=f"{p}.attention.context.transpose")
        ctx = nb.reshape(ctx, (batch, seq, d_model), name=f"{p}.attention.context.reshape")
        attn = nb.linear(ctx, d_model, name=f"{p}.attention.output.dense")
        x = nb.layernorm(nb.add(x, attn, name=f"{p}.attention.output.add"),
                         name=f"{p}.attention.output.LayerNorm")
        h = nb.gelu(nb.linear(x, ffn, name=f"{p}.intermediate.dense"),
                    name=f"{p}.intermediate.gelu")
        h = nb.linear(h, d_model, name=f"{p}.output.dense")
        x = nb.layernorm(nb.add(x, h, name=f"{p}.output.add"), name=f"{p}.output.LayerNorm")
    nb.output(x, name="last_hidden_state")

