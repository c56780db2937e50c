"""Tensor.unfold(dimension, size, step): the windows of `size` elements along one dim, `step`
apart, as a new last dim; the dim itself then counts the windows.

    x = [0, 1, 2, 3, 4]      x.unfold(0, 2, 2) -> [[0, 1], [2, 3]]      (4 is in no window)

Not F.unfold (a convolution's column matrix: fold.py). Every window is a view of the input, so
this is a strided copy: NumPy's sliding_window_view, every `step`-th window kept, copied once;
the OpenCL twin copies through the same view (layers/opencl_helpers/strided.py). timm's
HaloNet cuts its attention blocks this way. pnnx writes `aten::unfold` with dimension, size and
step as inputs it computed at export (`pnnx.Expression expr=2`), or `Tensor.unfold` with
parameters.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.common.datamove import DataMovementLayer, known_ints, normalize_dim

ARGUMENTS = ("dimension", "size", "step")


@register("Tensor.unfold", "aten::unfold", backend="cpu")
class TensorUnfold(DataMovementLayer):
    def arguments(self, inputs) -> list[int]:
        """(dimension, size, step): the parameters, or the known values of inputs 1-3."""
        op = self.op
        given = [name for name in ARGUMENTS if op.has(name)]
        if given == list(ARGUMENTS):
            self.expect_inputs(inputs, 1)
            return [op.int_param(name) for name in ARGUMENTS]
        if given or len(inputs) != 4:
            raise op.error(f"dimension, size and step come as three parameters or as inputs 1-3; "
                           f"got parameter(s) {given or 'none'} and {len(inputs)} input(s)")
        values = []
        for name, spec in zip(ARGUMENTS, inputs[1:]):
            value = known_ints(self, spec, name)
            if len(value) != 1:
                raise op.error(f"the {name} input should be one integer, got {value}")
            values.append(value[0])
        return values

    def infer_specs(self, inputs):
        dimension, size, step = self.arguments(inputs)
        x = inputs[0]
        rank = len(x.shape)
        self.dim = normalize_dim(self, dimension, rank, "dimension")
        length = int(x.shape[self.dim]) if rank else 1   # (PyTorch: a 0-D tensor is one value)
        if not 0 <= size <= length:
            raise self.shape_error(f"size={size} does not fit dim {self.dim} of length "
                                   f"{length} (a window takes 0 to {length} values)")
        if step < 1:
            raise self.op.error(f"step={step} must be >= 1")
        self.size, self.step = size, step
        return [TensorSpec(self.infer_shape(x.shape), x.dtype)]

    def forward(self, inputs):
        x = np.asarray(inputs[0])
        flat = x.reshape(1) if x.ndim == 0 else x
        windows = np.lib.stride_tricks.sliding_window_view(flat, self.size, axis=self.dim)
        kept = windows[(slice(None),) * self.dim + (slice(None, None, self.step),)]
        return [np.ascontiguousarray(kept).reshape(self.infer_shape(x.shape))]

    def infer_shape(self, shape) -> tuple[int, ...]:
        """The output shape (infer_specs's) for an input shape."""
        if not shape:
            return (self.size,)
        length = int(shape[self.dim])
        return (*shape[:self.dim], (length - self.size) // self.step + 1,
                *shape[self.dim + 1:], self.size)
