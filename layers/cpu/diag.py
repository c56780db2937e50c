"""torch.diag(x, diagonal=k): a vector becomes a square matrix with x on diagonal k (zeros
elsewhere); a matrix gives its diagonal k as a vector. k > 0 is above the main diagonal,
k < 0 below."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.common.datamove import DataMovementLayer


@register("torch.diag", "Tensor.diag", backend="cpu")
class Diag(DataMovementLayer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.k = op.int_param("diagonal", 0)
        return layer

    def infer_specs(self, inputs):
        self.expect_inputs(inputs, 1)
        x = inputs[0]
        k = self.k
        if len(x.shape) == 1:
            side = x.shape[0] + abs(k)
            return [TensorSpec((side, side), x.dtype)]
        if len(x.shape) == 2:
            rows, cols = x.shape
            length = max(0, min(rows + min(k, 0), cols - max(k, 0)))
            return [TensorSpec((length,), x.dtype)]
        raise self.shape_error(f"torch.diag takes a 1-D or 2-D input, got shape {x.shape}")

    def forward(self, inputs):
        return [np.ascontiguousarray(np.diag(inputs[0], self.k))]
