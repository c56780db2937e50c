"""PReLU: ReLU with a learnt slope for negative inputs, `y = x if x > 0 else a * x`.

`a` holds either one slope shared by every element or one per channel (dim 1; PyTorch's rule:
a 1-D input has one channel). Note that pnnx writes `nn.PReLU()` with a single parameter as
`nn.LeakyReLU negative_slope=...`; `nn.PReLU` files therefore usually have C parameters.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer
from kuiper.layers.common.input_dtypes import expect_floats
from kuiper.layers.common.norm import channel_layout, tensor_inputs


@register("nn.PReLU", "F.prelu", backend="cpu")
class PReLU(Layer):
    weight: np.ndarray | None = None  # nn.PReLU's slopes; F.prelu reads them from input 1

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        if op.type == "F.prelu":
            if len(tensor_inputs(op, ("input", "weight"))) != 2:
                raise op.error("needs 2 inputs (input, weight)")
            return layer
        layer.expect_inputs(op.inputs, 1)
        count = op.int_param("num_parameters", 1)
        if count < 1:
            raise op.error(f"num_parameters={count} must be >= 1")
        layer.weight = op.weight("weight", (count,))
        return layer

    def infer(self, inputs):
        self.expect_inputs(inputs, 1 if self.weight is not None else 2)
        expect_floats(self, inputs)  # the input, and an F.prelu's slopes
        shape = inputs[0].shape
        slopes = self.weight if self.weight is not None else inputs[1]
        count = int(np.prod(slopes.shape, dtype=np.int64))
        if not shape:
            raise self.shape_error("a 0-D input is not allowed (PyTorch refuses it too)")
        channels, _ = channel_layout(shape)
        if count not in (1, channels):
            raise self.shape_error(f"{count} slope parameters for input shape {shape}: expected"
                                   f" 1 or the channel count {channels} (dim 1)")
        return [TensorSpec(shape, inputs[0].dtype)]

    def forward(self, inputs):
        x = inputs[0]
        slopes = np.ravel(self.weight if self.weight is not None else inputs[1])
        if slopes.size > 1:
            slopes = slopes.reshape((-1,) + (1,) * (x.ndim - 2))  # broadcast over dim 1
        return [np.where(x > 0, x, x * slopes).astype(x.dtype, copy=False)]

    def flops(self, inputs, outputs):
        return outputs[0].numel
