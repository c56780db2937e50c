"""Permute-like operators: permute, transpose, t, mT, T, movedim.

All of them reorder the dims of one input: output dim k is input dim `perm[k]`. Each class
only computes `perm`; NumPy's `transpose` does the rest (a view: it swaps strides, moves no
data). The OpenCL twin turns the same `perm` into a strided copy.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.common.datamove import (
    DataMovementLayer,
    known_ints,
    normalize_dim,
    normalize_dims,
)


class PermuteLayer(DataMovementLayer):
    def permutation(self, rank: int, inputs) -> list[int]:
        raise NotImplementedError(f"{type(self).__name__}.permutation")

    def infer_specs(self, inputs):
        if not inputs:  # a damaged file (the fuzzer found an aten::movedim of no inputs):
            # the graph names the file, the line and the operator around this
            raise ValueError("no input, expected the tensor whose dims it reorders")
        x = inputs[0]
        self.perm = self.permutation(len(x.shape), inputs)
        return [TensorSpec(tuple(x.shape[p] for p in self.perm), x.dtype)]

    def forward(self, inputs):
        return [np.transpose(inputs[0], self.perm)]


@register("Tensor.permute", "torch.permute", backend="cpu")
class Permute(PermuteLayer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        # A 0-D tensor's permute(()) is written `dims=None`, like every empty tuple.
        layer.dims = [] if op.param("dims") is None else op.ints_param("dims")
        return layer

    def permutation(self, rank, inputs):
        self.expect_inputs(inputs, 1)
        if len(self.dims) != rank:
            raise self.shape_error(f"dims={tuple(self.dims)} has {len(self.dims)} entries for "
                                   f"a {rank}-D input {inputs[0].shape}")
        return normalize_dims(self, self.dims, rank)


@register("torch.transpose", "Tensor.transpose", backend="cpu")
class Transpose(PermuteLayer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.dim0, layer.dim1 = op.int_param("dim0"), op.int_param("dim1")
        return layer

    def permutation(self, rank, inputs):
        self.expect_inputs(inputs, 1)
        a = normalize_dim(self, self.dim0, rank, "dim0")
        b = normalize_dim(self, self.dim1, rank, "dim1")
        perm = list(range(rank))
        perm[a], perm[b] = perm[b], perm[a]
        return perm


@register("torch.t", "Tensor.t", backend="cpu")
class T(PermuteLayer):
    """torch.t: swap the two dims of a matrix; 0-D and 1-D inputs come back unchanged."""

    def permutation(self, rank, inputs):
        self.expect_inputs(inputs, 1)
        if rank > 2:
            raise self.shape_error(f"torch.t expects at most 2 dims, got {inputs[0].shape}")
        return list(range(rank))[::-1]


@register("aten::mT", backend="cpu")
class MatrixT(PermuteLayer):
    """x.mT: swap the last two dims (a batch of matrices)."""

    def permutation(self, rank, inputs):
        self.expect_inputs(inputs, 1)
        if rank < 2:
            raise self.shape_error(f"x.mT needs at least 2 dims, got {inputs[0].shape}")
        return list(range(rank - 2)) + [rank - 1, rank - 2]


@register("aten::numpy_T", backend="cpu")
class NumpyT(PermuteLayer):
    """x.T: reverse every dim."""

    def permutation(self, rank, inputs):
        self.expect_inputs(inputs, 1)
        return list(range(rank))[::-1]


@register("aten::movedim", backend="cpu")
class MoveDim(PermuteLayer):
    """torch.movedim(x, source, destination); pnnx feeds source and destination as constant
    inputs (`pnnx.Expression expr=0`), so they are known at build time."""

    def permutation(self, rank, inputs):
        self.expect_inputs(inputs, 3)
        src = normalize_dims(self, known_ints(self, inputs[1], "source"), rank, "source")
        dst = normalize_dims(self, known_ints(self, inputs[2], "destination"), rank,
                             "destination")
        if len(src) != len(dst):
            raise self.op.error(f"source {src} and destination {dst} differ in length")
        rest = iter(d for d in range(rank) if d not in src)
        placed = dict(zip(dst, src))
        return [placed[k] if k in placed else next(rest) for k in range(rank)]
