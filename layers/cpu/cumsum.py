"""torch.cumsum / torch.cumprod: running sum / product along one dim.

Integer and bool inputs accumulate into int64, as in torch (a cumulative count of a mask is a
common use). pnnx drops the `dtype=` argument, so the result dtype follows the input.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer
from kuiper.layers.common.reduce_axes import single_axis


@register("torch.cumsum", "torch.cumprod", backend="cpu")
class Cumulative(Layer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.dim = op.int_param("dim")
        layer.product = op.type == "torch.cumprod"
        return layer

    def infer(self, inputs):
        self.expect_inputs(inputs, 1)
        x = inputs[0]
        self.axis = single_axis(self, self.dim, len(x.shape))
        dtype = x.dtype if np.issubdtype(x.dtype, np.floating) else np.dtype(np.int64)
        return [TensorSpec(x.shape, dtype)]

    def forward(self, inputs):
        x = inputs[0]
        dtype = x.dtype if np.issubdtype(x.dtype, np.floating) else np.dtype(np.int64)
        if x.ndim == 0:
            return [x.astype(dtype)]
        scan = np.cumprod if self.product else np.cumsum
        return [scan(x, axis=self.axis, dtype=dtype)]

    def flops(self, inputs, outputs):
        return outputs[0].numel
