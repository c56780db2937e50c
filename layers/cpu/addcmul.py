"""torch.addcmul: out = input + value * tensor1 * tensor2, the three tensors broadcast.

ConvNeXtV2's global response norm and ResMLP's affine layers call it; pnnx writes it as
`aten::addcmul` with four inputs, the scalar `value` as a fourth operand (a folded
pnnx.Expression: known at build time), or, from other exporters, as `torch.addcmul` with
`value` a parameter. Both become one elementwise formula over broadcast operands.

Dtypes follow torch: the result type of the three tensors (float32 for a model's activations).
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer


@register("aten::addcmul", "torch.addcmul", backend="cpu")
class AddCMul(Layer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        n = len(op.inputs)
        if op.has("value"):
            if n != 3:
                raise op.error(f"expected 3 inputs (input, tensor1, tensor2) with a `value` "
                               f"parameter, got {n}")
            layer.value = op.float_param("value")
        elif n == 4:
            layer.value = None  # the fourth input (a scalar), read at run time
        elif n == 3:
            layer.value = 1.0   # torch's default
        else:
            raise op.error(f"expected 3 or 4 inputs (input, tensor1, tensor2[, value]), got {n}")
        return layer

    def infer(self, inputs):
        shapes = [s.shape for s in inputs[:3]]
        try:
            out = tuple(np.broadcast_shapes(*shapes))
        except ValueError:
            raise self.shape_error(f"input, tensor1 and tensor2 of shapes "
                                   f"{', '.join(map(str, shapes))} do not broadcast "
                                   "together") from None
        if len(inputs) == 4 and inputs[3].numel != 1:
            raise self.shape_error(f"value should be a scalar, got a tensor of shape "
                                   f"{inputs[3].shape}")
        self.dtype = np.result_type(*(s.dtype for s in inputs[:3]))
        return [TensorSpec.of(out, self.dtype)]

    def scalar(self, inputs) -> float:
        """`value`: the parameter, or the fourth input's one element."""
        if self.value is not None:
            return self.value
        return np.asarray(inputs[3]).reshape(-1)[0].item()

    def forward(self, inputs):
        x, t1, t2 = (np.asarray(a, dtype=self.dtype) for a in inputs[:3])
        value = np.asarray(self.scalar(inputs), dtype=self.dtype)
        # torch's order: input + value * tensor1 * tensor2, left to right
        return [np.asarray(x + value * t1 * t2, dtype=self.dtype)]

    def flops(self, inputs, outputs):
        return 3 * outputs[0].numel
