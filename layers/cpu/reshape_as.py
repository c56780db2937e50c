"""Tensor.reshape_as(other): x reshaped to other's shape (only other's *shape* is read)."""

from __future__ import annotations

from kuiper.core.registry import register
from kuiper.layers.cpu.reshape import ViewLayer


@register("Tensor.reshape_as", "Tensor.view_as", backend="cpu")
class ReshapeAs(ViewLayer):
    def out_shape(self, inputs):
        self.expect_inputs(inputs, 2)
        return inputs[1].shape
