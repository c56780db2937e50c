"""Local response normalisation (AlexNet's LRN): divide each value by the energy of its
neighbouring channels.

For an input (N, C, *rest) and a window of `size` channels around channel c (from c - size//2
to c + (size-1)//2, channels outside 0..C-1 counting as zeros):

    y[n, c, ...] = x[n, c, ...] / (k + alpha / size * sum over the window of x^2) ^ beta

PyTorch computes the window mean with an average pool over zero-padded channels, so the
divisor is always `size`, even at the first and last channels: so do we.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer


@register("nn.LocalResponseNorm", "F.local_response_norm", backend="cpu")
class LocalResponseNorm(Layer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.size = op.int_param("size")
        if layer.size < 1:
            raise op.error(f"size={layer.size}: the channel window needs at least 1 channel")
        layer.alpha = op.float_param("alpha", 1e-4)
        layer.beta = op.float_param("beta", 0.75)
        layer.k = op.float_param("k", 1.0)
        return layer

    def infer(self, inputs):
        self.expect_inputs(inputs, 1)
        shape = inputs[0].shape
        if len(shape) < 3:
            raise self.shape_error(f"local_response_norm needs an input of 3 or more dims "
                                   f"(N, C, ...), got shape {tuple(shape)}")
        return [TensorSpec(shape, inputs[0].dtype)]

    def window(self) -> tuple[int, int]:
        """How many channels the window reaches before and after its centre."""
        return self.size // 2, (self.size - 1) // 2

    def forward(self, inputs):
        x = inputs[0]
        channels = x.shape[1]
        before, after = self.window()
        squares = np.square(x, dtype=np.float32)
        widths = [(0, 0), (before, after)] + [(0, 0)] * (x.ndim - 2)
        padded = np.pad(squares, widths)
        energy = np.zeros_like(squares)
        for offset in range(self.size):  # a handful of whole-tensor adds, one per window tap
            energy += padded[:, offset:offset + channels]
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            div = np.power(energy * np.float32(self.alpha / self.size) + np.float32(self.k),
                           np.float32(self.beta))
            return [(x / div).astype(x.dtype, copy=False)]

    def flops(self, inputs, outputs):
        return outputs[0].numel * (self.size + 4)
