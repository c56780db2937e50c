"""torch.cross(a, b, dim): the 3-D vector product along a dim of size 3 (a and b broadcast).

    y_0 = a_1 b_2 - a_2 b_1,  y_1 = a_2 b_0 - a_0 b_2,  y_2 = a_0 b_1 - a_1 b_0

Without `dim`, torch.cross takes the first dim of size 3 (a deprecated default, which pnnx
keeps).
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer
from kuiper.layers.common.datamove import normalize_dim


@register("torch.cross", "torch.linalg.cross", "Tensor.cross", backend="cpu")
class Cross(Layer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        default = -1 if op.type == "torch.linalg.cross" else None
        dim = op.param("dim", default)
        layer.dim = None if dim is None else op.int_param("dim", default)
        return layer

    def infer(self, inputs):
        self.expect_inputs(inputs, 2)
        a, b = inputs
        try:
            self.shape = tuple(np.broadcast_shapes(a.shape, b.shape))
        except ValueError:
            raise self.shape_error(f"inputs {a.shape} and {b.shape} do not broadcast "
                                   "together") from None
        if self.dim is None:
            threes = [d for d, s in enumerate(self.shape) if s == 3]
            if not threes:
                raise self.shape_error(f"no dim of size 3 in {self.shape} for the cross product")
            self.axis = threes[0]
        else:
            self.axis = normalize_dim(self, self.dim, len(self.shape))
        if a.shape[self.axis - len(self.shape)] != 3 or b.shape[self.axis - len(self.shape)] != 3:
            raise self.shape_error(f"dim {self.axis} should have size 3 in both inputs, got "
                                   f"{a.shape} and {b.shape}")
        return [TensorSpec(self.shape, np.result_type(a.dtype, b.dtype))]

    def forward(self, inputs):
        a, b = np.broadcast_arrays(*inputs)
        return [np.cross(a, b, axis=self.axis).astype(np.result_type(*inputs), copy=False)]

    def flops(self, inputs, outputs):
        return 3 * outputs[0].numel
