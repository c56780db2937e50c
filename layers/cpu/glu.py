"""GLU, the gated linear unit: split x in two halves a, b along `dim`; y = a * sigmoid(b).

The size along `dim` must be even; the output has half of it.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer
from kuiper.layers.common.datamove import normalize_dim
from kuiper.layers.cpu.activation import sigmoid


@register("nn.GLU", "F.glu", backend="cpu")
class GLU(Layer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.dim = op.int_param("dim", -1)
        return layer

    def infer(self, inputs):
        self.expect_inputs(inputs, 1)
        x = inputs[0]
        if not x.shape:
            raise self.shape_error("GLU needs at least a 1-D input, got a scalar")
        self.axis = normalize_dim(self, self.dim, len(x.shape))
        size = x.shape[self.axis]
        if size % 2:
            raise self.shape_error(f"GLU halves dim {self.dim}, so its size must be even; "
                                   f"input shape {x.shape} has {size} there")
        shape = list(x.shape)
        shape[self.axis] = size // 2
        return [TensorSpec(tuple(shape), x.dtype)]

    def forward(self, inputs):
        a, b = np.split(inputs[0], 2, axis=self.axis)
        with np.errstate(over="ignore"):
            return [(a * sigmoid(b)).astype(a.dtype, copy=False)]

    def flops(self, inputs, outputs):
        return 4 * outputs[0].numel
