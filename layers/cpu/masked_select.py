"""torch.masked_select(x, mask): the elements of x where mask is True, as a 1-D tensor.

x and mask broadcast together. How many elements come out depends on the mask's *values*, so
shape inference cannot know it: the output spec is dynamic, with every element selected as its
upper bound (kuiper/core/dynamic_shapes.py).
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer
from kuiper.layers.common.datamove import DataMovementLayer


@register("torch.masked_select", "Tensor.masked_select", backend="cpu")
class MaskedSelect(Layer):
    def infer(self, inputs):
        self.expect_inputs(inputs, 2)
        x, mask = inputs
        if mask.dtype != np.dtype(np.bool_):
            raise self.op.error(f"the mask should be a bool tensor, got {mask.dtype.name}")
        try:
            self.shape = tuple(np.broadcast_shapes(x.shape, mask.shape))
        except ValueError:
            raise self.shape_error(f"input {x.shape} and mask {mask.shape} do not broadcast "
                                   "together") from None
        if x.known and mask.known:  # both constants: the output is one too
            value = DataMovementLayer.host_forward(self, [x.value, mask.value])[0]
            return [TensorSpec(value.shape, x.dtype, value)]
        bound = int(np.prod(self.shape, dtype=np.int64))
        return [TensorSpec((bound,), x.dtype, dynamic=True)]

    def forward(self, inputs):
        x, mask = np.broadcast_arrays(np.asarray(inputs[0]), np.asarray(inputs[1]))
        return [np.ascontiguousarray(x[mask])]
