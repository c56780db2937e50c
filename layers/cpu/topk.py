"""torch.topk, torch.sort, torch.argsort (and aten::sort): order the elements along one dim.

All three are "the first k positions of a stable ordering": topk takes k of them, sort and
argsort take all. Ties keep their original order (the smaller index first) and NaN counts as
larger than every number, as in torch. torch.topk(sorted=False) may return the k winners in
any order; returning them sorted is one valid answer. It is not PyTorch's CPU order (that is
whatever std::nth_element leaves, unless k is small next to the dim), so `kuiper compare`
compares such outputs as sets: see the tolerance rules in kuiper/cli/compare.py.

pnnx keeps only the outputs that are used; with one output, its declared dtype (i64 or not)
says whether it is the values or the indices. `aten::sort` is what pnnx writes when it could not
name the call (Mixtral's router in Hugging Face transformers 5, a stable sort of expert ids):
the arguments come as inputs it computed at export, (self, dim, descending) or the stable
overload's (self, stable, dim, descending).
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer
from kuiper.layers.common.datamove import known_ints
from kuiper.layers.common.reduce_axes import kept_outputs, single_axis


def stable_order(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """Indices that sort `x` along `axis`, ties in index order, NaN as the largest value."""
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    # Descending but stable: sort the reversed array ascending (stable), reverse the result,
    # and map positions back; equal elements then keep their original order.
    n = x.shape[axis]
    flipped = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return (n - 1) - np.flip(flipped, axis)


@register("torch.topk", "torch.sort", "torch.argsort", backend="cpu")
class TopK(Layer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.dim = op.int_param("dim", -1)
        if op.type == "torch.topk":
            layer.k = op.int_param("k")
            if layer.k < 0:
                raise op.error(f"parameter 'k' should be >= 0, got {layer.k}")
            layer.descending = op.bool_param("largest", True)
            op.bool_param("sorted", True)  # validated; sorted output is always a valid answer
        else:
            layer.k = None  # everything
            layer.descending = op.bool_param("descending", False)
            op.bool_param("stable", False)  # our order is always stable
        layer.outputs = ["indices"] if op.type == "torch.argsort" else kept_outputs(op)
        return layer

    def infer(self, inputs):
        self.expect_inputs(inputs, 1)
        x = inputs[0]
        self.axis = single_axis(self, self.dim, len(x.shape))
        n = x.shape[self.axis] if x.shape else 1
        self.count = n if self.k is None else self.k
        if self.count > n:
            raise self.shape_error(f"k={self.k} is larger than dim {self.dim} of the input "
                                   f"{x.shape} ({n} elements)")
        shape = list(x.shape)
        if shape:
            shape[self.axis] = self.count
        dtypes = {"values": x.dtype, "indices": np.dtype(np.int64)}
        return [TensorSpec.of(shape, dtypes[o]) for o in self.outputs]

    def forward(self, inputs):
        x = inputs[0]
        if x.ndim == 0:
            by_name = {"values": x.copy(), "indices": np.zeros((), np.int64)}
            return [by_name[o] for o in self.outputs]
        order = stable_order(x, self.axis, self.descending)
        index = np.take(order, np.arange(self.count), axis=self.axis).astype(np.int64)
        by_name = {"values": np.take_along_axis(x, index, self.axis), "indices": index}
        return [by_name[o] for o in self.outputs]


@register("aten::sort", backend="cpu")
class AtenSort(TopK):
    """torch.sort with its arguments as known inputs: (self, dim, descending), or the stable
    overload's (self, stable, dim, descending). Every sort here is stable."""

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.k = None
        layer.outputs = kept_outputs(op)
        return layer

    def infer(self, inputs):
        if len(inputs) not in (3, 4):
            raise self.op.error(f"expected 3 inputs (self, dim, descending) or 4 (self, stable, "
                                f"dim, descending), got {len(inputs)}")
        dim, descending = (known_ints(self, spec, name)
                           for spec, name in zip(inputs[-2:], ("dim", "descending")))
        if len(dim) != 1 or len(descending) != 1 or descending[0] not in (0, 1):
            raise self.op.error(f"dim should be one integer and descending one bool, got "
                                f"{dim} and {descending}")
        self.dim, self.descending = dim[0], bool(descending[0])
        return super().infer(inputs[:1])

    def forward(self, inputs):
        return super().forward(inputs[:1])
