"""torch.tile(x, dims): Tensor.repeat, except that fewer dims than the input has are allowed
(they are padded with 1s at the front: tile(x of 3-D, (2,)) repeats the last dim twice)."""

from __future__ import annotations

from kuiper.core.registry import register
from kuiper.layers.cpu.expand import Repeat


@register("torch.tile", "Tensor.tile", backend="cpu")
class Tile(Repeat):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.dims = op.ints_param("dims")
        if any(r < 0 for r in layer.dims):
            raise op.error(f"dims {tuple(layer.dims)} must not be negative")
        return layer

    def infer_specs(self, inputs):
        self.expect_inputs(inputs, 1)
        rank = len(inputs[0].shape)
        self.reps = [1] * (rank - len(self.dims)) + list(self.dims)
        return super().infer_specs(inputs)
