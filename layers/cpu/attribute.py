"""pnnx.Attribute: a constant tensor stored in the .bin (parameters, buffers, folded values)."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer


@register("pnnx.Attribute", backend="cpu")
class Attribute(Layer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        # pnnx stores 0-dim constants with shape (1); the output operand's '#' shape says ().
        data = op.weight("data", kinds=None)  # any dtype: folded index tensors are ints
        declared = op.outputs[0].shape if op.outputs else None
        if declared is not None and None not in declared and np.prod(declared) == data.size:
            data = data.reshape(declared)
        layer.data = data
        return layer

    def infer(self, inputs):
        # The value is known at build time: backends fold it instead of running this operator.
        return [TensorSpec(self.data.shape, self.data.dtype, self.data)]

    def forward(self, inputs):
        return [self.data]
