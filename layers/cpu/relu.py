"""ReLU: max(x, 0). The smallest layer, and the model for every elementwise one."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.base import ElementwiseLayer
from kuiper.layers.common.input_dtypes import FLOATS, INTEGERS, expect_dtype


@register("nn.ReLU", "F.relu", backend="cpu")
class ReLU(ElementwiseLayer):
    fusable_activation = True  # may become a convolution's epilogue (kuiper/passes/)

    def infer(self, inputs):
        specs = super().infer(inputs)
        expect_dtype(self, inputs[0], FLOATS + INTEGERS)  # bools: refused, as in PyTorch
        self.in_dtype = inputs[0].dtype  # a folded constant arrives as a Python number
        return specs

    def forward(self, inputs):
        x = np.asarray(inputs[0], getattr(self, "in_dtype", None))
        return [np.maximum(x, 0, dtype=x.dtype)]

    def in_place_form(self):
        return relu_into


def relu_into(x: np.ndarray, out: np.ndarray) -> None:
    """out = max(x, 0); np.maximum keeps NaN, as torch.relu does."""
    np.maximum(x, 0, out=out)
