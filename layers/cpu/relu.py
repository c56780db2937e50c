"""ReLU: max(x, 0). The smallest layer, and the model for every elementwise one."""

from __future__ import annotations

import numpy as np

from kuiper.layers.base import ElementwiseLayer
from kuiper.registry import register


@register("nn.ReLU", "F.relu", backend="cpu")
class ReLU(ElementwiseLayer):
    def forward(self, inputs):
        return [np.maximum(inputs[0], 0, dtype=inputs[0].dtype)]

    def in_place_form(self):
        return relu_into


def relu_into(x: np.ndarray, out: np.ndarray) -> None:
    """out = max(x, 0); np.maximum keeps NaN, as torch.relu does."""
    np.maximum(x, 0, out=out)
