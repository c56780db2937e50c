"""Adaptive average and max pooling, 1-D, 2-D and 3-D: you choose the output size, not the window.

Output position `i` of an axis of input length `n` and output length `m` pools the input range

    start = floor(i * n / m),   end = ceil((i + 1) * n / m)

(PyTorch's rule). When `m` divides `n` these are plain non-overlapping windows of n/m; when it
does not, windows have different lengths and neighbours may overlap by one; when `m > n`
positions repeat. An output size entry of None (pnnx writes 0) keeps that input size.

Both reductions are separable (a mean or max over a box is the mean or max over rows of the
per-row result), so the NumPy version reduces W first, then H, then D: OD + OH + OW slices
instead of OD * OH * OW. The indices output (int64) of max pooling is the flat position of each
maximum in its plane, `(depth * H + row) * W + col`, as for MaxPool; pnnx writes it for every
`F.adaptive_max_pool*d` with return_indices=True, and `nn.AdaptiveMaxPool*d(...,
return_indices=True)` as one tuple output split by a `prim::TupleUnpack`, which the graph
folds into this operator (kuiper/graph/tuple_unpack.py), so the layer always sees two outputs.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer
from kuiper.layers.common.pooling import AXES, check_pool_input, output_shape, spatial_rank


def adaptive_bounds(n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of each of the `m` windows over an axis of length `n`."""
    i = np.arange(m, dtype=np.int64)
    return i * n // m, -((-(i + 1) * n) // m)  # -(-a // b) is ceil(a / b) for integers


@register("nn.AdaptiveAvgPool2d", "F.adaptive_avg_pool2d", "nn.AdaptiveMaxPool2d",
          "F.adaptive_max_pool2d", "nn.AdaptiveAvgPool1d", "F.adaptive_avg_pool1d",
          "nn.AdaptiveMaxPool1d", "F.adaptive_max_pool1d", "nn.AdaptiveAvgPool3d",
          "F.adaptive_avg_pool3d", "nn.AdaptiveMaxPool3d", "F.adaptive_max_pool3d", backend="cpu")
class AdaptivePool(Layer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.rank = spatial_rank(op.type)
        layer.is_max = "max" in op.type.lower()
        layer.sizes = _output_sizes(op, layer.rank)
        layer.with_indices = len(op.outputs) == 2
        if layer.with_indices and not layer.is_max:
            raise op.error("average pooling has one output, got 2")
        if layer.is_max and op.bool_param("return_indices", False) != layer.with_indices:
            raise op.error(f"return_indices={op.param('return_indices', False)} but the "
                           f"operator has {len(op.outputs)} output(s); expected 2 outputs "
                           "(values, indices) exactly when return_indices=True")
        return layer

    def out_size(self, size) -> tuple[int, int, int]:
        """Output (OD, OH, OW) for an input (D, H, W) plane view: a None entry keeps the input
        size; the leading axes a 1-D or 2-D pool does not have stay 1."""
        sizes = [1] * (AXES - self.rank) + list(self.sizes)
        return tuple(n if s is None else s for s, n in zip(sizes, size))  # type: ignore

    def infer(self, inputs):
        self.expect_inputs(inputs, 1)
        shape = inputs[0].shape
        _, size = check_pool_input(self, shape, self.rank)
        if min(size) == 0:
            raise self.shape_error(f"input spatial size must be non-zero, got shape {shape}")
        out = output_shape(shape, self.rank, self.out_size(size))
        specs = [TensorSpec(out, inputs[0].dtype)]
        if self.with_indices:
            specs.append(TensorSpec(out, np.dtype(np.int64)))
        return specs

    def forward(self, inputs):
        x = inputs[0]
        planes, size = check_pool_input(self, x.shape, self.rank)
        pooled = self.out_size(size)
        out = output_shape(x.shape, self.rank, pooled)
        values = x.reshape(planes, *size)
        if not self.is_max:
            for axis in (3, 2, 1):  # W, then H, then D
                values = _reduce_axis(values, axis, pooled[axis - 1], np.mean)
            return [values.astype(x.dtype, copy=False).reshape(out)]
        # Max along W remembering the column, then along H remembering the row, then along D.
        # `flat` follows each surviving maximum: its position in the part of the plane reduced
        # so far (the column, then row * W + column, then the full (z * H + y) * W + x).
        flat, step = None, 1
        for axis in (3, 2, 1):
            values, where = _argmax_axis(values, axis, pooled[axis - 1])
            picked = 0 if flat is None else np.take_along_axis(flat, where, axis=axis)
            flat = picked + where * step
            step *= size[axis - 1]
        results = [values.reshape(out)]
        if self.with_indices:
            results.append(flat.astype(np.int64).reshape(out))
        return results

    def flops(self, inputs, outputs):
        return inputs[0].numel  # each input is read into about one window


def _output_sizes(op, rank: int) -> list[int | None]:
    value = op.param("output_size")
    values = value if isinstance(value, list) else [value]
    if len(values) == 1:
        values = values * rank
    if len(values) != rank or not all(v is None or (isinstance(v, int) and
                                                    not isinstance(v, bool)) for v in values):
        raise op.error(f"output_size should be {rank} integer(s) or None, got {value!r}")
    if any(v is not None and v < 0 for v in values):
        raise op.error(f"output_size={value!r}: sizes must be >= 1 (None or 0 keeps the "
                       "input size)")
    return [v or None for v in values]  # pnnx writes None as 0


def _reduce_axis(x: np.ndarray, axis: int, m: int, reduce) -> np.ndarray:
    starts, ends = adaptive_bounds(x.shape[axis], m)
    parts = [reduce(np.take(x, np.arange(s, e), axis=axis), axis=axis, keepdims=True)
             for s, e in zip(starts, ends)]
    return np.concatenate(parts, axis=axis)


def _argmax_axis(x: np.ndarray, axis: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Max of each adaptive window along `axis`, and the input position it came from."""
    starts, ends = adaptive_bounds(x.shape[axis], m)
    values, where = [], []
    for s, e in zip(starts, ends):
        block = np.take(x, np.arange(s, e), axis=axis)
        at = np.argmax(block, axis=axis, keepdims=True)  # first maximum (or first NaN)
        values.append(np.take_along_axis(block, at, axis=axis))
        where.append(at + s)
    return np.concatenate(values, axis=axis), np.concatenate(where, axis=axis)
