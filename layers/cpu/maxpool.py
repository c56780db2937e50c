"""Max pooling, 1-D, 2-D and 3-D: the largest input under each (possibly dilated) window.

With `return_indices=True` a second output (int64) holds, for every output, where its maximum
came from: the flat position inside its input plane, `row * W + col` in 2-D and
`(depth * H + row) * W + col` in 3-D (PyTorch's convention, which `MaxUnpool*d` consumes).
pnnx writes that second output for `F.max_pool*d(..., return_indices=True)` even when the
model never reads it.

Padding counts as -inf, so a padded position never wins. A NaN always wins (PyTorch's rule: a
pool of a NaN is NaN).
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer
from kuiper.layers.common.pooling import (
    Window,
    check_pool_input,
    output_shape,
    pooled_sizes,
    read_windows,
    spatial_rank,
)
from kuiper.layers.cpu_helpers.pool_windows import window_taps


@register("nn.MaxPool2d", "F.max_pool2d", "nn.MaxPool1d", "F.max_pool1d", "nn.MaxPool3d",
          "F.max_pool3d", backend="cpu")
class MaxPool(Layer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.rank = spatial_rank(op.type)
        layer.windows = read_windows(op, layer.rank)
        layer.with_indices = len(op.outputs) == 2
        if op.bool_param("return_indices", False) != layer.with_indices:
            raise op.error(f"return_indices={op.param('return_indices', False)} but the "
                           f"operator has {len(op.outputs)} output(s); expected 2 outputs "
                           "(values, indices) exactly when return_indices=True")
        return layer

    def infer(self, inputs):
        self.expect_inputs(inputs, 1)
        shape = inputs[0].shape
        _, size = check_pool_input(self, shape, self.rank)
        out = output_shape(shape, self.rank, pooled_sizes(self, self.windows, size))
        specs = [TensorSpec(out, inputs[0].dtype)]
        if self.with_indices:
            specs.append(TensorSpec(out, np.dtype(np.int64)))
        return specs

    def forward(self, inputs):
        x = inputs[0]
        planes, size = check_pool_input(self, x.shape, self.rank)
        pooled = pooled_sizes(self, self.windows, size)
        out = output_shape(x.shape, self.rank, pooled)
        view = x.reshape(planes, *size)
        if not self.with_indices:
            return [separable_max(view, self.windows, pooled).reshape(out)]
        best, index = self._with_indices(view, size, pooled)
        return [best.reshape(out), index.reshape(out)]

    def _with_indices(self, view, size, pooled):
        """Values and argmax positions; ties go to the first tap in row-major order."""
        # If a whole window were -inf, PyTorch reports its first *in-bounds* tap: start there.
        first = [_first_inside(w.starts(o), w.dilation) for w, o in zip(self.windows, pooled)]
        index = np.broadcast_to(_flat_index(first, size), (view.shape[0], *pooled)).copy()
        best = np.full((view.shape[0], *pooled), -np.inf, dtype=view.dtype)
        for coords, values in window_taps(view, self.windows, pooled, -np.inf):
            better = (values > best) | np.isnan(values)
            best = np.where(better, values, best)
            index = np.where(better, _flat_index(coords, size), index)
        return best, index.astype(np.int64)

    def flops(self, inputs, outputs):
        taps = int(np.prod([w.kernel for w in self.windows]))
        return outputs[0].numel * taps  # one comparison per tap


def running_max(planes: np.ndarray, windows, pooled) -> np.ndarray:
    """The largest value under each window: one np.maximum per tap of the window."""
    best = None
    for _, values in window_taps(planes, windows, pooled, -np.inf):
        if best is None:
            best = values.copy()  # the first tap starts the running maximum
        else:
            np.maximum(best, values, out=best)  # propagates NaN, as PyTorch
    return best


def separable_max(planes: np.ndarray, windows, pooled) -> np.ndarray:
    """running_max, one axis at a time where the window has taps along several axes.

    The maximum over a box is the maximum along W of the maxima along H (and D): pooling each
    axis on its own with the others' windows left out visits kw + kh taps per output instead
    of kw * kh, with the same result (NaN included). YOLOv5's SPP pools 5x5, 9x9 and 13x13 with
    stride 1: 275 taps, 54 this way (the three over 256 planes of 10 x 10: 13.2 -> 2.8 ms on
    the 2-core VM, interleaved in one process). Each axis pads its own copy, so a 2x2 window
    gains nothing and keeps the direct way.
    """
    if sum(w.kernel > 1 for w in windows) < 2 or int(np.prod([w.kernel for w in windows])) <= 4:
        return running_max(planes, windows, pooled)
    best = planes
    for axis in (2, 1, 0):  # W, H, D
        if windows[axis].kernel == 1 and windows[axis].stride == 1 and not windows[axis].pad:
            continue
        alone = [w if a == axis else Window() for a, w in enumerate(windows)]
        sizes = [o if a == axis else n for a, (o, n) in enumerate(zip(pooled, best.shape[1:]))]
        best = running_max(best, alone, sizes)
    return best


def _flat_index(coords, size) -> np.ndarray:
    """(z * H + y) * W + x on the (OD, OH, OW) grid, from per-axis coordinate vectors."""
    z, y, x = coords
    _, h, w = size
    return (z[:, None, None] * h + y[None, :, None]) * w + x[None, None, :]


def _first_inside(starts: np.ndarray, dilation: int) -> np.ndarray:
    """First tap position >= 0 of each window starting at `starts` (taps step by `dilation`)."""
    skip = np.where(starts < 0, (-starts + dilation - 1) // dilation, 0)
    return starts + skip * dilation
