"""Average pooling, 1-D, 2-D and 3-D: the mean of each window, with PyTorch's divisor rules.

The sum is easy; the divisor is where implementations differ. For one axis, with the window
starting at `s = o*stride - pad`:

    end  = min(s + kernel, n + pad)     # a ceil_mode window is cut at the *padded* edge
    full = end - s                      # taps counting padding (count_include_pad=True)
    real = min(end, n) - max(s, 0)      # taps on real input     (count_include_pad=False)

and the divisor is the product over the axes, unless `divisor_override` replaces it (2-D and
3-D only). So with count_include_pad=True a window hanging past the right padding (ceil_mode)
still divides by fewer than kernel_h*kernel_w taps. PyTorch has no dilation for average pooling.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.base import Layer
from kuiper.layers.common.input_dtypes import FLOATS, INTEGERS, expect_dtype
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


@register("nn.AvgPool2d", "F.avg_pool2d", "nn.AvgPool1d", "F.avg_pool1d", "nn.AvgPool3d",
          "F.avg_pool3d", backend="cpu")
class AvgPool(Layer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.rank = spatial_rank(op.type)
        layer.windows = read_windows(op, layer.rank, dilation=False)
        layer.count_include_pad = op.bool_param("count_include_pad", True)
        override = op.param("divisor_override", None)
        layer.divisor_override = 0  # 0 = no override (0 itself is refused below)
        if override is not None:
            if layer.rank == 1:
                raise op.error("divisor_override is not a parameter of 1-D average pooling")
            layer.divisor_override = op.int_param("divisor_override")
            if layer.divisor_override == 0:
                raise op.error("divisor_override=0: the divisor must not be zero")
        return layer

    def infer(self, inputs):
        self.expect_inputs(inputs, 1)
        # averages are sums in float32 (forward): a complex input would lose its imaginary
        # part, and PyTorch has no complex average pooling either
        expect_dtype(self, inputs[0], FLOATS + INTEGERS)
        return [pooled_spec(self, inputs[0])]

    def forward(self, inputs):
        x = inputs[0]
        planes, size = check_pool_input(self, x.shape, self.rank)
        out = pooled_sizes(self, self.windows, size)
        total = np.zeros((planes, *out), dtype=np.float32)
        for _, values in window_taps(x.reshape(planes, *size), self.windows, out, 0.0):
            total += values
        total /= self.divisors(size, out)
        return [total.astype(x.dtype, copy=False).reshape(output_shape(x.shape, self.rank, out))]

    def divisors(self, size, out) -> np.ndarray:
        """The (OD, OH, OW) divisor of every output, by the rules in the module docstring."""
        if self.divisor_override:
            return np.full(out, self.divisor_override, dtype=np.float32)
        counts = [_taps(w, n, o, self.count_include_pad)
                  for w, n, o in zip(self.windows, size, out)]
        # the outer product of the per-axis counts
        return np.einsum("i,j,k->ijk", *counts).astype(np.float32)

    def flops(self, inputs, outputs):
        taps = int(np.prod([w.kernel for w in self.windows]))
        return outputs[0].numel * (taps + 1)  # adds, then one division


def _taps(window: Window, n: int, out: int, include_pad: bool) -> np.ndarray:
    """How many taps each window along one axis divides by."""
    start = window.starts(out)
    end = np.minimum(start + window.kernel, n + window.pad)
    if include_pad:
        return end - start
    return np.minimum(end, n) - np.maximum(start, 0)
