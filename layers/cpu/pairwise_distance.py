"""F.pairwise_distance: the p-norm of x1 - x2 along the last dim, row by row.

    y[...] = || x1[..., :] - x2[..., :] + eps ||_p

The inputs broadcast against each other like NumPy arrays, and the last dim of the broadcast
shape is reduced (kept with size 1 under keepdim). `eps` is *added to the difference* before the
norm, as PyTorch does, so two equal vectors are eps * n^(1/p) apart, not 0: that keeps the
gradient of the norm finite in training, and at inference it must be reproduced all the same.
p follows torch.norm: inf is the largest |difference|, -inf the smallest, 0 counts non-zeros.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer
from kuiper.layers.cpu.reduce import norm


@register("F.pairwise_distance", backend="cpu")
class PairwiseDistance(Layer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.p = op.float_param("p", 2.0)
        layer.eps = op.float_param("eps", 1e-6)
        layer.keepdim = op.bool_param("keepdim", False)
        return layer

    def broadcast_shape(self, a, b) -> tuple[int, ...]:
        try:
            shape = np.broadcast_shapes(tuple(a), tuple(b))
        except ValueError:
            raise self.shape_error(f"x1 of shape {tuple(a)} and x2 of shape {tuple(b)} do not "
                                   "broadcast against each other") from None
        if not shape:
            raise self.shape_error("pairwise_distance needs inputs of at least 1 dim "
                                   "(vectors along the last dim), got two scalars")
        return shape

    def infer(self, inputs):
        self.expect_inputs(inputs, 2)
        shape = self.broadcast_shape(inputs[0].shape, inputs[1].shape)
        out = shape[:-1] + ((1,) if self.keepdim else ())
        return [TensorSpec(out, inputs[0].dtype)]

    def forward(self, inputs):
        x1, x2 = inputs
        diff = x1 - x2 + x1.dtype.type(self.eps)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            y = norm(diff, self.p, -1, self.keepdim)
        return [np.asarray(y, dtype=x1.dtype)]

    def flops(self, inputs, outputs):
        shape = self.broadcast_shape(inputs[0].shape, inputs[1].shape)
        return 4 * int(np.prod(shape, dtype=np.int64))  # subtract, add eps, |.|^p, sum
