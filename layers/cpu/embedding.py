"""Embedding: a table lookup, `y[..., :] = weight[index[...], :]`.

The input holds integer indices of any shape; the output appends the embedding dim. An index
outside [0, num_embeddings) is an error here, as in PyTorch (negative indices are *not* counted
from the end). On OpenCL such an index cannot raise; that kernel writes zeros instead of
reading outside the table.

`max_norm` (rescale rows longer than max_norm) is applied once to the whole table at load
time: PyTorch renormalises the looked-up rows in place, which gives the same outputs. pnnx
currently drops max_norm from the file, so it rarely arrives. `padding_idx` only matters for
training gradients.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer
from kuiper.layers.common.norm import tensor_inputs


@register("nn.Embedding", "F.embedding", backend="cpu")
class Embedding(Layer):
    table: np.ndarray | None = None  # nn.Embedding's weight; F.embedding reads input 1

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        if op.type == "F.embedding":
            if len(tensor_inputs(op, ("input", "weight"))) != 2:
                raise op.error("needs 2 inputs (indices, weight)")
            return layer
        layer.expect_inputs(op.inputs, 1)
        count = op.int_param("num_embeddings") if op.has("num_embeddings") else None
        dim = op.int_param("embedding_dim") if op.has("embedding_dim") else None
        table = op.weight("weight")
        expected = (count or table.shape[0], dim or table.shape[1]) if table.ndim == 2 else ()
        if table.shape != expected:
            raise op.error(f"weight '@weight' has shape {table.shape}, expected "
                           f"(num_embeddings={count}, embedding_dim={dim})")
        if op.param("max_norm", None) is not None:
            table = _renorm(table, op.float_param("max_norm"), op.float_param("norm_type", 2.0))
        layer.table = table
        return layer

    def infer(self, inputs):
        self.expect_inputs(inputs, 1 if self.table is not None else 2)
        index = inputs[0]
        if not np.issubdtype(index.dtype, np.integer):
            raise self.shape_error(f"indices should be integers (int64), got {index.dtype}")
        table = self.table if self.table is not None else inputs[1]
        if len(table.shape) != 2:
            raise self.shape_error(f"weight should be 2-D (num_embeddings, embedding_dim), got "
                                   f"shape {tuple(table.shape)}")
        return [TensorSpec(tuple(index.shape) + (table.shape[1],), np.dtype(table.dtype))]

    def forward(self, inputs):
        index = inputs[0]
        table = self.table if self.table is not None else inputs[1]
        bad = (index < 0) | (index >= table.shape[0])
        if bad.any():
            raise self.op.error(f"index {int(index[bad].flat[0])} is out of range: the table has "
                                f"{table.shape[0]} rows, valid indices are 0..{table.shape[0] - 1}")
        return [np.asarray(table)[index]]


def _renorm(table: np.ndarray, max_norm: float, norm_type: float) -> np.ndarray:
    norms = np.linalg.norm(table.astype(np.float64), ord=norm_type, axis=1, keepdims=True)
    scale = np.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)  # PyTorch's 1e-7
    return (table * scale).astype(table.dtype)
