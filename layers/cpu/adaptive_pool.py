"""Adaptive average and max pooling, 1-D and 2-D: you choose the output size, not the window.

Output position `i` of an axis of input length `n` and output length `m` pools the input range

    start = floor(i * n / m),   end = ceil((i + 1) * n / m)

(PyTorch's rule). When `m` divides `n` these are plain non-overlapping windows of n/m; when it
does not, windows have different lengths and neighbours may overlap by one; when `m > n`
positions repeat. An output size entry of None (pnnx writes 0) keeps that input size.

Both reductions are separable (a mean or max over a rectangle is the mean or max over rows of
the per-row result), so the NumPy version reduces W first, then H: OH + OW slices instead of
OH * OW. The indices output of max pooling is the flat `row * W + col` of each maximum, as for
MaxPool2d; pnnx writes it for every `F.adaptive_max_pool*d`, used or not.
"""

from __future__ import annotations

import numpy as np

from kuiper.layers.base import Layer
from kuiper.layers.common.pooling import check_pool_input, output_shape, spatial_rank
from kuiper.registry import register
from kuiper.tensor_spec import TensorSpec


def adaptive_bounds(n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of each of the `m` windows over an axis of length `n`."""
    i = np.arange(m, dtype=np.int64)
    return i * n // m, -((-(i + 1) * n) // m)  # -(-a // b) is ceil(a / b) for integers


@register("nn.AdaptiveAvgPool2d", "F.adaptive_avg_pool2d", "nn.AdaptiveMaxPool2d",
          "F.adaptive_max_pool2d", "nn.AdaptiveAvgPool1d", "F.adaptive_avg_pool1d",
          "nn.AdaptiveMaxPool1d", "F.adaptive_max_pool1d", backend="cpu")
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

    def out_hw(self, h: int, w: int) -> tuple[int, int]:
        """Output (OH, OW): a None entry keeps the input size; 1-D pools have OH = 1."""
        sizes = [1, *self.sizes] if self.rank == 1 else list(self.sizes)
        return tuple(n if s is None else s for s, n in zip(sizes, (h, w)))  # type: ignore

    def infer(self, inputs):
        self.expect_inputs(inputs, 1)
        shape = inputs[0].shape
        _, h, w = check_pool_input(self, shape, self.rank)
        if h == 0 or w == 0:
            raise self.shape_error(f"input spatial size must be non-zero, got shape {shape}")
        out = output_shape(shape, self.rank, *self.out_hw(h, w))
        specs = [TensorSpec(out, inputs[0].dtype)]
        if self.with_indices:
            specs.append(TensorSpec(out, np.dtype(np.int64)))
        return specs

    def forward(self, inputs):
        x = inputs[0]
        planes, h, w = check_pool_input(self, x.shape, self.rank)
        oh, ow = self.out_hw(h, w)
        out = output_shape(x.shape, self.rank, oh, ow)
        view = x.reshape(planes, h, w)
        if not self.is_max:
            means = _reduce_axis(_reduce_axis(view, 2, ow, np.mean), 1, oh, np.mean)
            return [means.astype(x.dtype, copy=False).reshape(out)]
        # Max along W remembering the column, then along H remembering the row.
        row_max, col = _argmax_axis(view, 2, ow)                   # (P, H, OW)
        best, row = _argmax_axis(row_max, 1, oh)                   # (P, OH, OW)
        col_of_best = np.take_along_axis(col, row, axis=1)          # column of the winning row
        results = [best.reshape(out)]
        if self.with_indices:
            results.append((row * w + col_of_best).astype(np.int64).reshape(out))
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
