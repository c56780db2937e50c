"""LP pooling, 1-D and 2-D: the p-norm of each window, (sum of x^p) ^ (1/p).

PyTorch builds it from average pooling, and so inherits its divisor rules:

    out = (avg_pool(x^p) * kernel_h * kernel_w) ^ (1/p)

With no padding the average pool divides a full window by kernel_h * kernel_w and the product
cancels: the plain p-norm. But a ceil_mode window hanging over the right edge covers fewer taps,
the average divides by those, and the factor does not cancel: such a window is the sum of its
taps scaled by kernel_size / taps. We reproduce that, not the "true" p-norm.

x^p is PyTorch's `pow`: a negative input with a fractional p is NaN, as in PyTorch. norm_type
inf is the window's largest |x| (and -inf its smallest), which PyTorch computes by max pooling.
The window arithmetic (sizes, ceil_mode) is the pooling layers' (layers/common/pooling.py).
"""

from __future__ import annotations

import math

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.base import Layer
from kuiper.layers.common.pooling import (
    Window,
    check_pool_input,
    output_shape,
    pooled_sizes,
    pooled_spec,
    read_windows,
    spatial_rank,
)
from kuiper.layers.cpu_helpers.pool_windows import window_taps


def taps_inside(window: Window, n: int, out: int) -> np.ndarray:
    """How many taps of each window along one axis lie on the input (LP pooling has no padding,
    so only a ceil_mode window at the far edge has fewer than `kernel`)."""
    start = window.starts(out)
    return np.minimum(start + window.kernel, n) - start


@register("nn.LPPool2d", "F.lp_pool2d", "nn.LPPool1d", "F.lp_pool1d", backend="cpu")
class LPPool(Layer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.rank = spatial_rank(op.type)
        for key in ("padding", "dilation"):
            if op.has(key):
                raise op.error(f"{key}={op.param(key)}: LP pooling has no {key} in PyTorch")
        layer.windows = read_windows(op, layer.rank, dilation=False)
        layer.p = op.float_param("norm_type")
        if layer.p == 0 or math.isnan(layer.p):
            raise op.error(f"norm_type={layer.p}: a p-norm needs p != 0 (use inf for max |x|)")
        return layer

    def infer(self, inputs):
        self.expect_inputs(inputs, 1)
        return [pooled_spec(self, inputs[0])]

    def forward(self, inputs):
        x = inputs[0]
        planes, size = check_pool_input(self, x.shape, self.rank)
        out = pooled_sizes(self, self.windows, size)
        planes_x = x.reshape(planes, *size)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            if math.isinf(self.p):
                y = self._extreme_abs(planes_x, out)
            else:
                y = self._p_norm(planes_x, size, out)
        return [y.astype(x.dtype, copy=False).reshape(output_shape(x.shape, self.rank, out))]

    def _p_norm(self, planes_x, size, out):
        powered = np.power(planes_x, np.float32(self.p))
        total = np.zeros((planes_x.shape[0], *out), dtype=np.float32)
        for _, values in window_taps(powered, self.windows, out, 0.0):
            total += values  # padding (ceil_mode's overhang) holds 0 and adds nothing
        taps = np.ones(out, dtype=np.float32)
        for axis, (window, n, o) in enumerate(zip(self.windows, size, out)):
            along = [1] * len(out)
            along[axis] = o
            taps = taps * taps_inside(window, n, o).reshape(along)
        kernel_taps = math.prod(w.kernel for w in self.windows)
        return np.power(total / taps * np.float32(kernel_taps), np.float32(1.0 / self.p))

    def _extreme_abs(self, planes_x, out):
        """max |x| (p = inf) or min |x| (p = -inf) of each window."""
        biggest = self.p > 0
        magnitude = np.abs(planes_x) if biggest else -np.abs(planes_x)
        best = np.full((planes_x.shape[0], *out), -np.inf, dtype=np.float32)
        for _, values in window_taps(magnitude, self.windows, out, -np.inf):
            np.maximum(best, values, out=best)
        return best if biggest else -best

    def flops(self, inputs, outputs):
        taps = math.prod(w.kernel for w in self.windows)
        return outputs[0].numel * (2 * taps + 2)  # pow and add per tap, then the root
