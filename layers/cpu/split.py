"""Splitting one tensor into several: torch.split, torch.chunk, torch.tensor_split, torch.unbind.

Each output is a slice of the input along one dim, so each class only computes a list of
`slice` objects (or, for unbind, integer indices that drop the dim); the NumPy forward indexes
with them and the OpenCL twin turns them into strided views.

These operators have several outputs and pnnx lists all of them even when the model uses only
one (`torch.chunk(x, 3, 1)[0]` still has 3 outputs). The number of pieces depends on the input
size; if a new input size gives fewer pieces than the model has outputs, that is an error.
"""

from __future__ import annotations

import itertools

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.common.datamove import DataMovementLayer, normalize_dim


class SplitLayer(DataMovementLayer):
    def pieces(self, size: int) -> list[slice | int]:
        """How the dim of `size` elements is cut: one slice (or index) per output."""
        raise NotImplementedError(f"{type(self).__name__}.pieces")

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.dim = op.int_param("dim", 0)
        layer.read_params(op)
        return layer

    def read_params(self, op) -> None:
        pass

    def infer_specs(self, inputs):
        self.expect_inputs(inputs, 1)
        x = inputs[0]
        self.axis = normalize_dim(self, self.dim, len(x.shape))
        size = x.shape[self.axis]
        self.items = self.pieces(size)
        if len(self.items) < len(self.op.outputs):
            raise self.shape_error(f"dim {self.axis} of input {x.shape} splits into "
                                   f"{len(self.items)} piece(s) but the model uses "
                                   f"{len(self.op.outputs)} outputs")
        outs = []
        for item in self.items:
            if isinstance(item, slice):
                length = len(range(*item.indices(size)))
                shape = x.shape[:self.axis] + (length,) + x.shape[self.axis + 1:]
            else:
                shape = x.shape[:self.axis] + x.shape[self.axis + 1:]
            outs.append(TensorSpec(shape, x.dtype))
        return outs

    def index(self, item: slice | int) -> tuple:
        """The NumPy index selecting one piece: `:` for every dim before the split dim."""
        return (slice(None),) * self.axis + (item,)

    def forward(self, inputs):
        return [inputs[0][self.index(item)] for item in self.items]


def _cuts(bounds: list[int]) -> list[slice]:
    return [slice(a, b) for a, b in itertools.pairwise(bounds)]


@register("torch.split", "Tensor.split", backend="cpu")
class Split(SplitLayer):
    """`split_size_or_sections`: an int (pieces of that size, the last one smaller) or a list
    of sizes that must add up to the dim's size."""

    def read_params(self, op):
        value = op.param("split_size_or_sections")
        self.sizes = op.ints_param("split_size_or_sections")
        self.fixed = not isinstance(value, list)
        if any(s < 0 for s in self.sizes) or (self.fixed and self.sizes[0] == 0):
            raise op.error(f"split_size_or_sections={value} must be positive sizes")

    def pieces(self, size):
        if self.fixed:
            step = self.sizes[0]
            return [slice(a, min(a + step, size)) for a in range(0, max(size, 1), step)]
        if sum(self.sizes) != size:
            raise self.shape_error(f"split sizes {self.sizes} add up to {sum(self.sizes)}, but "
                                   f"dim {self.axis} has size {size}")
        bounds = [0]
        for s in self.sizes:
            bounds.append(bounds[-1] + s)
        return _cuts(bounds)


@register("torch.chunk", "Tensor.chunk", backend="cpu")
class Chunk(SplitLayer):
    """`chunks` pieces of ceil(size / chunks); there may be fewer than `chunks` of them."""

    def read_params(self, op):
        self.chunks = op.int_param("chunks")
        if self.chunks <= 0:
            raise op.error(f"chunks={self.chunks} must be positive")

    def pieces(self, size):
        step = max(-(-size // self.chunks), 1)
        return [slice(a, min(a + step, size)) for a in range(0, max(size, 1), step)]


@register("torch.tensor_split", "Tensor.tensor_split", backend="cpu")
class TensorSplit(SplitLayer):
    """`sections=n`: n pieces, the first size % n of them one longer; `indices=(a,b,...)`:
    cut before each index, exactly like slicing x[:a], x[a:b], x[b:]."""

    def read_params(self, op):
        if op.has("sections"):
            self.sections, self.indices = op.int_param("sections"), None
            if self.sections <= 0:
                raise op.error(f"sections={self.sections} must be positive")
        elif op.has("indices"):
            self.sections, self.indices = None, op.ints_param("indices")
        else:
            raise op.error("expected parameter 'sections' or 'indices'")

    def pieces(self, size):
        if self.indices is not None:
            return _cuts([None] + self.indices + [None])  # type: ignore[list-item]
        base, extra = divmod(size, self.sections)
        bounds = [0]
        for k in range(self.sections):
            bounds.append(bounds[-1] + base + (1 if k < extra else 0))
        return _cuts(bounds)


@register("torch.unbind", "Tensor.unbind", backend="cpu")
class Unbind(SplitLayer):
    """One output per index along `dim`, with that dim removed. pnnx also writes `x[0]` on a
    batch-1 input as a one-output unbind; the other outputs simply have no consumer."""

    def pieces(self, size):
        return list(range(size))
