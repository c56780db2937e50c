"""F.normalize: x / max(||x||_p, eps) along one dim (p = 2 gives unit-length vectors)."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer
from kuiper.layers.common.reduce_axes import single_axis
from kuiper.layers.cpu.reduce import norm


@register("F.normalize", backend="cpu")
class Normalize(Layer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.p = op.float_param("p", 2.0)
        layer.dim = op.int_param("dim", 1)
        layer.eps = op.float_param("eps", 1e-12)
        if layer.eps < 0:
            raise op.error(f"parameter 'eps' should be >= 0, got {layer.eps}")
        return layer

    def infer(self, inputs):
        self.expect_inputs(inputs, 1)
        x = inputs[0]
        if not np.issubdtype(x.dtype, np.floating):
            raise self.op.error(f"F.normalize needs a floating-point input, got {x.dtype.name}")
        self.axis = single_axis(self, self.dim, len(x.shape))
        if not x.shape:
            raise self.shape_error("F.normalize needs at least a 1-D input, got a 0-dim tensor")
        return [TensorSpec(x.shape, x.dtype)]

    def forward(self, inputs):
        x = inputs[0]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            n = norm(x, self.p, (self.axis,), True)
            return [(x / np.maximum(n, x.dtype.type(self.eps))).astype(x.dtype, copy=False)]

    def flops(self, inputs, outputs):
        return 3 * outputs[0].numel
