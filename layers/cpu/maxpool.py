"""Max pooling, 1-D and 2-D: the largest input under each (possibly dilated) window.

With `return_indices=True` a second output holds, for every output, where its maximum came
from: the flat position `row * W + col` inside its input plane (PyTorch's convention, which
`MaxUnpool2d` consumes). pnnx writes that second output for `F.max_pool*d(...,
return_indices=True)` even when the model never reads it.

Padding counts as -inf, so a padded position never wins. A NaN always wins (PyTorch's rule: a
pool of a NaN is NaN).
"""

from __future__ import annotations

import numpy as np

from kuiper.layers.base import Layer
from kuiper.layers.common.pooling import (
    check_pool_input,
    output_shape,
    pooled_sizes,
    read_windows,
    spatial_rank,
)
from kuiper.layers.cpu_helpers.pool_windows import window_taps
from kuiper.registry import register
from kuiper.tensor_spec import TensorSpec


@register("nn.MaxPool2d", "F.max_pool2d", "nn.MaxPool1d", "F.max_pool1d", backend="cpu")
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
        _, h, w = check_pool_input(self, shape, self.rank)
        oh, ow = pooled_sizes(self, self.windows, h, w)
        out = output_shape(shape, self.rank, oh, ow)
        specs = [TensorSpec(out, inputs[0].dtype)]
        if self.with_indices:
            specs.append(TensorSpec(out, np.dtype(np.int64)))
        return specs

    def forward(self, inputs):
        x = inputs[0]
        planes, h, w = check_pool_input(self, x.shape, self.rank)
        oh, ow = pooled_sizes(self, self.windows, h, w)
        out = output_shape(x.shape, self.rank, oh, ow)
        view = x.reshape(planes, h, w)
        if not self.with_indices:
            best = None
            for _, _, values in window_taps(view, self.windows, oh, ow, -np.inf):
                if best is None:
                    best = values.copy()  # the first tap starts the running maximum
                else:
                    np.maximum(best, values, out=best)  # propagates NaN, as PyTorch
            return [best.reshape(out)]
        best, index = self._with_indices(view, h, w, oh, ow)
        return [best.reshape(out), index.reshape(out)]

    def _with_indices(self, view, h, w, oh, ow):
        """Values and argmax positions; ties go to the first tap in row-major order."""
        wy, wx = self.windows
        # If a whole window were -inf, PyTorch reports its first *in-bounds* tap: start there.
        first_row = _first_inside(wy.starts(oh), wy.dilation)
        first_col = _first_inside(wx.starts(ow), wx.dilation)
        start = first_row[:, None] * w + first_col[None, :]
        index = np.broadcast_to(start, (view.shape[0], oh, ow)).copy()
        best = np.full((view.shape[0], oh, ow), -np.inf, dtype=view.dtype)
        for rows, cols, values in window_taps(view, self.windows, oh, ow, -np.inf):
            better = (values > best) | np.isnan(values)
            best = np.where(better, values, best)
            index = np.where(better, rows[:, None] * w + cols[None, :], index)
        return best, index.astype(np.int64)

    def flops(self, inputs, outputs):
        wy, wx = self.windows
        return outputs[0].numel * wy.kernel * wx.kernel  # one comparison per tap


def _first_inside(starts: np.ndarray, dilation: int) -> np.ndarray:
    """First tap position >= 0 of each window starting at `starts` (taps step by `dilation`)."""
    skip = np.where(starts < 0, (-starts + dilation - 1) // dilation, 0)
    return starts + skip * dilation
