"""Reshape-like operators: reshape/view, flatten, squeeze, unsqueeze, unflatten.

They all keep the elements in the same (row-major) order and only change the shape, so on the
CPU they are `np.reshape` (a view, no copy) and on OpenCL a view of the input buffer (no kernel).
Each class only answers one question: what is the output shape for this input shape?

The one subtle case is a shape *baked into the export*. pnnx traces the model with example
inputs, so `x.view(x.size(0), -1)` is written as `Tensor.reshape shape=(1,-1)` when it was
exported at batch 1. Running that model at batch 3 must give `(3,-1)`, not `(1,-1)`; see
`Reshape.resolve_shape` for the rule we use.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.common.datamove import (
    DataMovementLayer,
    ints_from_param_or_input,
    normalize_dim,
    normalize_dims,
)


class ViewLayer(DataMovementLayer):
    """One input (plus optional constant inputs), one output with the same elements."""

    def out_shape(self, inputs) -> tuple[int, ...]:
        raise NotImplementedError(f"{type(self).__name__}.out_shape")

    def infer_specs(self, inputs):
        if not inputs:
            raise self.op.error("expected an input tensor")
        shape = tuple(int(d) for d in self.out_shape(inputs))
        if int(np.prod(shape, dtype=np.int64)) != inputs[0].numel:
            raise self.shape_error(f"output shape {shape} does not hold the "
                                   f"{inputs[0].numel} elements of input {inputs[0].shape}")
        self.shape = shape
        return [TensorSpec(shape, inputs[0].dtype)]

    def forward(self, inputs):
        return [np.reshape(inputs[0], self.shape)]


@register("Tensor.reshape", "Tensor.view", "torch.reshape", backend="cpu")
class Reshape(ViewLayer):
    def out_shape(self, inputs):
        self.expect_inputs(inputs, 1, 2)
        shape = ints_from_param_or_input(self, "shape", inputs, what="shape")
        from_param = self.op.has("shape")
        return self.resolve_shape(inputs[0].shape, shape, from_param)

    def resolve_shape(self, in_shape: tuple[int, ...], shape: list[int],
                      from_param: bool) -> tuple[int, ...]:
        """Apply the batch rule, then fill in the one `-1`.

        Batch rule: a `shape` *parameter* was computed by pnnx for the export's input. When the
        input this operator saw at export time (its declared `#` shape) had the same leading
        size as the target shape, and the input we get now has another leading size, that
        leading size is the batch: use the current one. (A shape that arrives as an input was
        computed from the current shapes already, so it is taken as it is.)
        """
        numel = int(np.prod(in_shape, dtype=np.int64))
        target = list(shape)
        declared = self.op.inputs[0].shape if self.op.inputs else None
        if (from_param and target and in_shape and declared and len(declared) == len(in_shape)
                and declared[0] is not None and target[0] == declared[0]
                and in_shape[0] != declared[0]):
            target[0] = in_shape[0]
        if sum(1 for d in target if d == -1) > 1:
            raise self.op.error(f"shape {tuple(shape)} has more than one -1")
        if any(d < -1 for d in target):
            raise self.op.error(f"shape {tuple(shape)} has a negative size other than -1")
        if -1 in target:
            rest = int(np.prod([d for d in target if d != -1], dtype=np.int64))
            if rest == 0 or numel % rest:
                raise self._baked_error(in_shape, shape, declared)
            target[target.index(-1)] = numel // rest
        if int(np.prod(target, dtype=np.int64)) != numel:
            raise self._baked_error(in_shape, shape, declared)
        return tuple(target)

    def _baked_error(self, in_shape, shape, declared):
        exported = "x".join("?" if d is None else str(d) for d in declared or ())
        return self.shape_error(
            f"cannot reshape input {in_shape} ({int(np.prod(in_shape, dtype=np.int64))} "
            f"elements) to the shape {tuple(shape)} written in the model; that shape was baked "
            f"into the export for an input of {exported or 'unknown shape'}: re-export the "
            "model at the new input size (or with the batch as the only changed dim)")


@register("torch.flatten", "Tensor.flatten", "nn.Flatten", backend="cpu")
class Flatten(ViewLayer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        # nn.Flatten keeps the batch (start_dim=1); torch.flatten flattens everything (0).
        layer.start_dim = op.int_param("start_dim", 1 if op.type == "nn.Flatten" else 0)
        layer.end_dim = op.int_param("end_dim", -1)
        return layer

    def out_shape(self, inputs):
        self.expect_inputs(inputs, 1)
        shape = inputs[0].shape
        if not shape:
            return (1,)  # flattening a 0-D tensor gives a 1-D tensor of one element
        start = normalize_dim(self, self.start_dim, len(shape), "start_dim")
        end = normalize_dim(self, self.end_dim, len(shape), "end_dim")
        if start > end:
            raise self.op.error(f"start_dim={self.start_dim} comes after end_dim="
                                f"{self.end_dim} for a {len(shape)}-D input")
        return flatten_shape(shape, start, end)


def flatten_shape(shape: tuple[int, ...], start_dim: int = 0, end_dim: int = -1
                  ) -> tuple[int, ...]:
    """torch.flatten's output shape: dims start_dim..end_dim (inclusive) merged into one.

    No element moves: in a row-major (C-contiguous) tensor, element (n, c, h, w) sits at
    ((n*C + c)*H + h)*W + w whether we call its shape (N, C, H, W) or (N, C*H*W). That is why
    flatten is a free reshape on the CPU and a view of the same buffer on OpenCL.
    """
    shape = tuple(int(d) for d in shape)
    rank = max(len(shape), 1)  # a 0-D tensor flattens like a 1-D tensor of one element
    start, end = start_dim % rank, end_dim % rank
    if not (-rank <= start_dim < rank and -rank <= end_dim < rank) or start > end:
        raise ValueError(f"cannot flatten dims {start_dim}..{end_dim} of shape {shape}")
    if not shape:
        return (1,)
    merged = int(np.prod(shape[start:end + 1], dtype=np.int64))
    return shape[:start] + (merged,) + shape[end + 1:]


@register("torch.squeeze", "Tensor.squeeze", backend="cpu")
class Squeeze(ViewLayer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        dim = op.param("dim", None)  # missing or None: every size-1 dim
        layer.dims = None if dim is None else op.ints_param("dim")
        return layer

    def out_shape(self, inputs):
        self.expect_inputs(inputs, 1)
        shape = inputs[0].shape
        if self.dims is None:
            return tuple(d for d in shape if d != 1)
        dims = {normalize_dim(self, d, len(shape)) for d in self.dims}
        # As in PyTorch, naming a dim whose size is not 1 is allowed and leaves it alone.
        return tuple(d for i, d in enumerate(shape) if not (i in dims and d == 1))


@register("torch.unsqueeze", "Tensor.unsqueeze", backend="cpu")
class Unsqueeze(ViewLayer):
    """`dim` is an int, as torch.unsqueeze takes it, or, from pnnx's ONNX route (ONNX
    Unsqueeze), a list of dims such as `dim=(0,1)` or `dim=(-1,1)`, or `dim=()` (read as None:
    no new dim, the output is the input). A list follows ONNX: each dim is a position in the
    *output*, whose rank is the input's plus the number of dims, negative ones counted from its
    end, so the result is the same as unsqueezing the sorted, normalized dims one at a time."""

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        dim = op.param("dim")
        layer.dims = [] if dim is None else op.ints_param("dim")
        return layer

    def out_shape(self, inputs):
        self.expect_inputs(inputs, 1)
        shape = inputs[0].shape
        # A new dim may go anywhere in the *output*, which has one more dim per new dim.
        rank = len(shape) + len(self.dims)
        dims = normalize_dims(self, self.dims, rank, "dim")
        out = list(shape)
        for d in sorted(dims):
            out.insert(d, 1)
        return tuple(out)


@register("Tensor.unflatten", "torch.unflatten", "nn.Unflatten", backend="cpu")
class Unflatten(ViewLayer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.dim = op.int_param("dim")
        key = "unflattened_size" if op.has("unflattened_size") else "sizes"
        layer.sizes = op.ints_param(key)
        return layer

    def out_shape(self, inputs):
        self.expect_inputs(inputs, 1)
        shape = inputs[0].shape
        dim = normalize_dim(self, self.dim, len(shape))
        sizes = list(self.sizes)
        if sizes.count(-1) > 1:
            raise self.op.error(f"sizes {tuple(self.sizes)} has more than one -1")
        if -1 in sizes:
            rest = int(np.prod([s for s in sizes if s != -1], dtype=np.int64))
            if rest == 0 or shape[dim] % rest:
                raise self.shape_error(f"cannot split dim {dim} of size {shape[dim]} into "
                                       f"{tuple(self.sizes)}")
            sizes[sizes.index(-1)] = shape[dim] // rest
        if int(np.prod(sizes, dtype=np.int64)) != shape[dim]:
            raise self.shape_error(f"sizes {tuple(self.sizes)} do not multiply to the size "
                                   f"{shape[dim]} of dim {dim} of input {shape}")
        return shape[:dim] + tuple(sizes) + shape[dim + 1:]
