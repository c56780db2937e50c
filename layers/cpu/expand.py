"""Repeating data: Tensor.expand / expand_as (broadcast), Tensor.repeat (tile),
torch.repeat_interleave (repeat each element).

    x = [a, b]      x.expand(2, 2)           -> [[a, b], [a, b]]   (size-1 or new dims only)
                    x.repeat(2)              -> [a, b, a, b]
                    x.repeat_interleave(2)   -> [a, a, b, b]

On the CPU expand is `np.broadcast_to` (a view with stride 0); the OpenCL twin expresses all
three as strided views with stride-0 dims, see layers/opencl/expand.py.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.common.datamove import (
    DataMovementLayer,
    ints_from_param_or_input,
    known_ints,
    normalize_dim,
)


@register("Tensor.expand", "Tensor.expand_as", backend="cpu")
class Expand(DataMovementLayer):
    """`sizes` (a parameter or a known second input) may keep a dim with -1 and add leading
    dims; expand_as takes the shape of its second input."""

    def target_sizes(self, inputs) -> list[int]:
        if self.op.type == "Tensor.expand_as":
            self.expect_inputs(inputs, 2)
            return list(inputs[1].shape)
        self.expect_inputs(inputs, 1, 2)
        return ints_from_param_or_input(self, "sizes", inputs, what="sizes")

    def infer_specs(self, inputs):
        sizes = self.target_sizes(inputs)   # (first: it checks how many inputs there are)
        x = inputs[0]
        lead = len(sizes) - len(x.shape)
        if lead < 0:
            raise self.shape_error(f"sizes {tuple(sizes)} have fewer dims than input {x.shape}")
        shape = []
        for d, size in enumerate(sizes):
            have = x.shape[d - lead] if d >= lead else None
            if size == -1:
                if have is None:
                    raise self.op.error(f"sizes {tuple(sizes)}: -1 is not allowed for the new "
                                        f"leading dim {d}")
                size = have
            if size < 0 or (have is not None and have != 1 and have != size):
                raise self.shape_error(f"cannot expand input {x.shape} to {tuple(sizes)}: "
                                       f"dim {d} has size {have}, which is neither 1 nor {size}")
            shape.append(size)
        self.shape = tuple(shape)
        return [TensorSpec(self.shape, x.dtype)]

    def forward(self, inputs):
        return [np.broadcast_to(inputs[0], self.shape)]


@register("Tensor.repeat", backend="cpu")
class Repeat(DataMovementLayer):
    """x.repeat(r0, r1, ...): tile the whole tensor r_d times along dim d (np.tile); more
    repeats than dims add leading dims."""

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.reps = op.ints_param("sizes") if op.has("sizes") else op.ints_param("repeats")
        if any(r < 0 for r in layer.reps):
            raise op.error(f"repeats {tuple(layer.reps)} must not be negative")
        return layer

    def infer_specs(self, inputs):
        self.expect_inputs(inputs, 1)
        x = inputs[0]
        if len(self.reps) < len(x.shape):
            raise self.shape_error(f"repeat needs at least one size per input dim: got "
                                   f"{tuple(self.reps)} for input {x.shape}")
        shape = (1,) * (len(self.reps) - len(x.shape)) + x.shape
        return [TensorSpec(tuple(r * s for r, s in zip(self.reps, shape)), x.dtype)]

    def forward(self, inputs):
        x = inputs[0]
        return [np.tile(x.reshape((1,) * (len(self.reps) - x.ndim) + x.shape), self.reps)]


@register("torch.repeat_interleave", "Tensor.repeat_interleave", backend="cpu")
class RepeatInterleave(DataMovementLayer):
    """Each element (or slice along `dim`) repeated `repeats` times in place. Without `dim`
    the input is flattened first. `repeats` may also be a list, one count per element."""

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        # repeats: a parameter (an int or a list), or a second input whose value is known when
        # the model is built (pnnx folds torch.tensor([2, 1, 3]) into a pnnx.Attribute).
        layer.from_input = not op.has("repeats")
        if not layer.from_input:
            layer.repeats = op.ints_param("repeats")
            layer.scalar = not isinstance(op.param("repeats"), list)
            layer.check_repeats(op.param("repeats"))
        dim = op.param("dim", None)
        layer.dim = None if dim is None else op.int_param("dim")
        return layer

    def check_repeats(self, shown) -> None:
        if any(r < 0 for r in self.repeats):
            raise self.op.error(f"repeats {shown} must not be negative")

    def repeats_from_input(self, spec) -> None:
        """Counts from a known input: a 0-dim tensor repeats every element alike."""
        self.repeats = known_ints(self, spec, "repeats")
        self.scalar = spec.shape == ()
        self.check_repeats(self.repeats)

    def infer_specs(self, inputs):
        self.expect_inputs(inputs, 2 if self.from_input else 1)
        if self.from_input:
            self.repeats_from_input(inputs[1])
        x = inputs[0]
        shape = x.shape if self.dim is not None else (x.numel,)
        self.axis = 0 if self.dim is None else normalize_dim(self, self.dim, len(shape))
        size = shape[self.axis] if shape else 1
        if self.scalar:
            self.counts = self.repeats * size
        elif len(self.repeats) in (1, size):
            self.counts = self.repeats * size if len(self.repeats) == 1 else self.repeats
        else:
            raise self.shape_error(f"{len(self.repeats)} repeats for dim {self.axis} of size "
                                   f"{size}")
        out = list(shape) or [1]
        out[self.axis] = int(sum(self.counts))
        return [TensorSpec(tuple(out), x.dtype)]

    def forward(self, inputs):
        x = inputs[0] if self.dim is not None else np.reshape(inputs[0], -1)
        return [np.repeat(x, self.counts, axis=self.axis)]
