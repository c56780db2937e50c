"""Basic indexing: Tensor.slice (single-dim and multi-dim forms), Tensor.select, torch.narrow.

All three become one NumPy *basic index*: a tuple with a `slice` or an `int` per input dim.
Slices keep their dim (start:end:step, negative and open ends as in Python), ints drop it.
NumPy returns a view, the OpenCL twin a strided copy of the same view.

pnnx's two forms of Tensor.slice (see parser/PNNX_FORMAT.md, section 4):

    x[:, 1:3]               Tensor.slice dim=1 start=1 end=3 step=1
    x[:, 1:3, ::2]          Tensor.slice dims=(1,2) starts=(1,0) ends=(3,INT_MAX) steps=(1,2)
                                         selects=(INT_MAX,INT_MAX)
    x[:, :, 1:-1, 2]        ... dims=(2,3) selects=(INT_MAX,2) ...

INT_MAX (2147483647) is an open end, or "not a select". In the multi-dim form every entry
indexes the *input's* dims, even after a select earlier in the list has dropped one.
"""

from __future__ import annotations

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.common.datamove import INT_MAX, DataMovementLayer, normalize_dim


class IndexLayer(DataMovementLayer):
    """Subclasses build `self.items`: dim -> slice or int, from the input's shape."""

    def build_items(self, shape: tuple[int, ...]) -> dict[int, slice | int]:
        raise NotImplementedError(f"{type(self).__name__}.build_items")

    def infer_specs(self, inputs):
        self.expect_inputs(inputs, 1)
        x = inputs[0]
        items = self.build_items(x.shape)
        self.index = tuple(items.get(d, slice(None)) for d in range(len(x.shape)))
        shape = []
        for size, item in zip(x.shape, self.index):
            if isinstance(item, slice):
                shape.append(len(range(*item.indices(size))))
        return [TensorSpec(tuple(shape), x.dtype)]

    def forward(self, inputs):
        return [inputs[0][self.index]]

    # --- helpers shared by the forms ------------------------------------------------------------
    def make_slice(self, start: int, end: int, step: int, what: str) -> slice:
        if step <= 0:
            raise self.op.error(f"{what}: step={step} must be positive (PyTorch slices never "
                                "step backwards; use torch.flip)")
        return slice(start, None if end >= INT_MAX else end, step)

    def make_index(self, index: int, size: int, dim: int) -> int:
        if not -size <= index < size:
            raise self.shape_error(f"index {index} is out of range for dim {dim} of size {size}")
        return index % size


@register("Tensor.slice", backend="cpu")
class Slice(IndexLayer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        if op.has("dims"):  # multi-dim form
            layer.dims = op.ints_param("dims")
            n = len(layer.dims)
            layer.starts = op.ints_param("starts", n, [0] * n)
            layer.ends = op.ints_param("ends", n, [INT_MAX] * n)
            layer.steps = op.ints_param("steps", n, [1] * n)
            layer.selects = op.ints_param("selects", n, [INT_MAX] * n)
        else:
            layer.dims = [op.int_param("dim")]
            layer.starts = [op.int_param("start", 0)]
            layer.ends = [op.int_param("end", INT_MAX)]
            layer.steps = [op.int_param("step", 1)]
            layer.selects = [INT_MAX]
        return layer

    def build_items(self, shape):
        items: dict[int, slice | int] = {}
        for k, dim in enumerate(self.dims):
            d = normalize_dim(self, dim, len(shape), "dims")
            if d in items:
                raise self.op.error(f"dims={tuple(self.dims)} names dim {d} twice")
            if self.selects[k] != INT_MAX:
                items[d] = self.make_index(self.selects[k], shape[d], d)
            else:
                items[d] = self.make_slice(self.starts[k], self.ends[k], self.steps[k],
                                           f"dim {d}")
        return items


@register("Tensor.select", "torch.select", backend="cpu")
class Select(IndexLayer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.dim, layer.select = op.int_param("dim"), op.int_param("index")
        return layer

    def build_items(self, shape):
        d = normalize_dim(self, self.dim, len(shape))
        return {d: self.make_index(self.select, shape[d], d)}


@register("torch.narrow", "Tensor.narrow", backend="cpu")
class Narrow(IndexLayer):
    """x.narrow(dim, start, length) == x[..., start:start+length]; start may be negative."""

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.dim, layer.start = op.int_param("dim"), op.int_param("start")
        layer.length = op.int_param("length")
        return layer

    def build_items(self, shape):
        d = normalize_dim(self, self.dim, len(shape))
        start = self.start + shape[d] if self.start < 0 else self.start
        if start < 0 or self.length < 0 or start + self.length > shape[d]:
            raise self.shape_error(f"narrow(start={self.start}, length={self.length}) does not "
                                   f"fit in dim {d} of size {shape[d]}")
        return {d: slice(start, start + self.length)}
