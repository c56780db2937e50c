"""Writing into a copy of a tensor: Tensor.slice_copy, torch.slice_scatter, torch.scatter_add,
Tensor.index_put. (PyTorch's in-place `x[2:4] = y`, `x.index_put_(...)` arrive as these
out-of-place forms: pnnx rewrites the mutation as a new tensor.)

    slice_copy / slice_scatter   y = x.clone(); y[slices] = src        (src broadcasts)
    scatter_add(x, dim, i, src)  y = x.clone(); y[..., i[e], ...] += src[e] for every
                                 element e of i (i replaces the coordinate along dim)
    index_put(x, [i0, i1], v)    y = x.clone(); y[i0, i1] = v, or += v with accumulate=True
                                 (repeated indices then add up; without accumulate the
                                 last one wins, as on PyTorch's CPU)

The slices of slice_copy are Tensor.slice's two forms (layers/cpu/slice.py). index_put's list
of index tensors is a pnnx.Expression like `[@0,@1]`; with constant indices (pnnx folds
`torch.tensor([1, 0])` to a pnnx.Attribute) it is known when the model is built.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.common.datamove import INT_MAX, DataMovementLayer, normalize_dim
from kuiper.layers.cpu.slice import Slice


def optional_int(op, key: str, default: int) -> int:
    """An int parameter that may be missing or None (= the default)."""
    return default if op.param(key, None) is None else op.int_param(key)


def check_broadcast(layer, src: tuple[int, ...], target: tuple[int, ...], what: str) -> None:
    try:
        if tuple(np.broadcast_shapes(src, target)) == tuple(target):
            return
    except ValueError:
        pass
    raise layer.shape_error(f"{what} of shape {src} does not broadcast to {target}")


@register("Tensor.slice_copy", "torch.slice_scatter", backend="cpu")
class SliceScatter(Slice):
    """Slice's parameters (dim/start/end/step or dims/starts/ends/steps/selects) pick the
    region of x that src replaces. torch.slice_scatter's start and end default to None, and
    pnnx writes them so (`end=None`, pnnx's test_torch_slice_scatter): an open end, as in
    `x[6:]`, and start=None is 0, step=None is 1."""

    @classmethod
    def from_operator(cls, op):
        if op.has("dims"):  # multi-dim form: Slice's reading
            return super().from_operator(op)
        layer = cls(op)
        layer.dims = [op.int_param("dim")]
        layer.starts = [optional_int(op, "start", 0)]
        layer.ends = [optional_int(op, "end", INT_MAX)]
        layer.steps = [optional_int(op, "step", 1)]
        layer.selects = [INT_MAX]
        return layer

    def infer_specs(self, inputs):
        self.expect_inputs(inputs, 2)
        x, src = inputs
        region = super().infer_specs([x])[0]  # sets self.index
        self.region = region.shape
        check_broadcast(self, src.shape, region.shape, "src")
        return [TensorSpec(x.shape, x.dtype)]

    def forward(self, inputs):
        y = np.array(inputs[0], copy=True)
        y[self.index] = inputs[1]
        return [y]


@register("torch.scatter_add", "Tensor.scatter_add", backend="cpu")
class ScatterAdd(DataMovementLayer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.dim = op.int_param("dim")
        return layer

    def infer_specs(self, inputs):
        self.expect_inputs(inputs, 3)
        x, index, src = inputs
        if index.dtype.kind not in "iu":
            raise self.op.error(f"the index should be an integer tensor, got {index.dtype.name}")
        rank = len(x.shape)
        self.axis = normalize_dim(self, self.dim, max(rank, 1))
        if len(index.shape) != rank or len(src.shape) != rank:
            raise self.shape_error(f"input {x.shape}, index {index.shape} and src {src.shape} "
                                   "should have the same number of dims")
        for d in range(rank):
            if index.shape[d] > src.shape[d] or (d != self.axis and index.shape[d] > x.shape[d]):
                raise self.shape_error(f"index {index.shape} is larger than src {src.shape} or "
                                       f"input {x.shape} in dim {d}")
        return [TensorSpec(x.shape, x.dtype)]

    def forward(self, inputs):
        x, index, src = (np.asarray(a) for a in inputs)
        size = x.shape[self.axis] if x.ndim else 1
        if index.size and (index.min() < 0 or index.max() >= size):
            raise self.shape_error(f"index values should be in [0, {size}) for dim {self.dim}")
        y = np.array(x, copy=True)
        coords = list(np.indices(index.shape, sparse=True))
        coords[self.axis] = index
        part = src[tuple(slice(0, s) for s in index.shape)]  # src may be larger than index
        np.add.at(y, tuple(coords), part)  # add.at: repeated targets add up
        return [y]

    def flops(self, inputs, outputs):
        return inputs[1].numel


@register("Tensor.index_put", "torch.index_put", backend="cpu")
class IndexPut(DataMovementLayer):
    """The values are input 2, or, when PyTorch's were a constant 0-D tensor
    (`x[i] = torch.tensor(45).float()`), a `values=45.0` parameter and two inputs."""

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.accumulate = op.bool_param("accumulate", False)
        layer.scalar = None
        if op.param("values", None) is not None:
            value = op.param("values")
            if isinstance(value, (bool, np.bool_)):
                layer.scalar = bool(value)
            elif isinstance(value, (int, np.integer)):
                layer.scalar = int(value)
            else:
                layer.scalar = op.float_param("values")
        return layer

    def scalar_values(self, dtype) -> np.ndarray:
        """The `values=` parameter as a 0-D array of the tensor's dtype."""
        return np.asarray(self.scalar).astype(dtype)

    def index_list(self, spec: TensorSpec) -> list[np.ndarray] | None:
        """The indices when known at build time (a folded list), else None (one run-time
        index tensor)."""
        if isinstance(spec.value, (list, tuple)):  # None in the list is `:` (x[:, i] = v)
            return [slice(None) if v is None else np.asarray(v) for v in spec.value]
        if spec.known:
            return [np.asarray(spec.value)]
        if spec.dtype.kind in "iub":
            return None
        raise self.op.error("indices should be a list of index tensors built by a "
                            "pnnx.Expression like [@0,@1], or one integer tensor")

    def infer_specs(self, inputs):
        if self.scalar is not None:
            self.expect_inputs(inputs, 2)
            x, indices = inputs
            values = TensorSpec((), x.dtype)
        else:
            self.expect_inputs(inputs, 3)
            x, indices, values = inputs
        self.known = self.index_list(indices)
        if self.known is not None:
            try:
                target = np.empty(x.shape, np.bool_)[tuple(self.known)].shape
            except (IndexError, ValueError) as e:
                raise self.shape_error(f"indices do not fit input {x.shape}: {e}") from None
            check_broadcast(self, values.shape, target, "values")
        return [TensorSpec(x.shape, x.dtype)]

    def forward(self, inputs):
        x, indices = inputs[:2]
        values = self.scalar_values(x.dtype) if self.scalar is not None else inputs[2]
        index = tuple(self.known) if self.known is not None else (np.asarray(indices),)
        y = np.array(x, copy=True)
        try:
            if self.accumulate:
                np.add.at(y, index, np.asarray(values, dtype=y.dtype))
            else:
                y[index] = values
        except (IndexError, ValueError) as e:
            raise self.shape_error(f"index_put: {e}") from None
        return [y]
