"""torch.flip (reverse along dims) and torch.roll (rotate along dims, wrapping around).

    x = [a, b, c, d]    torch.flip(x, [0])     -> [d, c, b, a]
                        torch.roll(x, 1, 0)    -> [d, a, b, c]

Without dims, torch.roll rotates the flattened tensor and restores the shape.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.common.datamove import DataMovementLayer, normalize_dim, normalize_dims


@register("torch.flip", "Tensor.flip", backend="cpu")
class Flip(DataMovementLayer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        # `dims=()` (a no-op flip) is written `dims=None`, like every empty tuple.
        layer.dims = [] if op.param("dims") is None else op.ints_param("dims")
        return layer

    def infer_specs(self, inputs):
        self.expect_inputs(inputs, 1)
        x = inputs[0]
        self.axes = normalize_dims(self, self.dims, len(x.shape))
        return [TensorSpec(x.shape, x.dtype)]

    def forward(self, inputs):
        x = inputs[0]
        return [np.flip(x, self.axes) if x.ndim else x]


@register("torch.roll", "Tensor.roll", backend="cpu")
class Roll(DataMovementLayer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.shifts = op.ints_param("shifts")
        dims = op.param("dims", None)
        layer.dims = None if dims is None else op.ints_param("dims")
        if layer.dims is None and len(layer.shifts) != 1:
            raise op.error(f"shifts={tuple(layer.shifts)} needs one dim per shift (dims is "
                           "missing, which rolls the flattened tensor by one shift)")
        if layer.dims is not None and len(layer.dims) != len(layer.shifts):
            raise op.error(f"shifts={tuple(layer.shifts)} and dims={tuple(layer.dims)} "
                           "differ in length")
        return layer

    def infer_specs(self, inputs):
        self.expect_inputs(inputs, 1)
        x = inputs[0]
        # The same dim may be named twice (torch adds the shifts), so no uniqueness check.
        self.axes = None if self.dims is None else [
            normalize_dim(self, d, len(x.shape)) for d in self.dims]
        return [TensorSpec(x.shape, x.dtype)]

    def rolled_shape(self, shape: tuple[int, ...]) -> tuple[tuple[int, ...], list[int]]:
        """The shape the roll works on and the total shift per dim, each in [0, size)."""
        if self.axes is None:
            shape = (int(np.prod(shape, dtype=np.int64)),)
            axes = [0]
        else:
            axes = self.axes
        shifts = [0] * len(shape)
        for axis, shift in zip(axes, self.shifts):
            shifts[axis] += shift
        return shape, [s % n if n else 0 for s, n in zip(shifts, shape)]

    def forward(self, inputs):
        x = inputs[0]
        if self.axes is None:
            return [np.roll(x, self.shifts[0])]
        return [np.roll(x, self.shifts, axis=tuple(self.axes))]
