"""The 18 torch.fft.* operators: fft, ifft, rfft, irfft, hfft, ihfft, each in 1-D, 2-D and n-D.

What each computes (resizing, the three transform kinds, the norm's factor) is worked out by
layers/common/fft_plan.py, shared with the OpenCL twin; this layer computes it with numpy.fft.

Complex tensors are NumPy complex64 / complex128 arrays (float32 inputs give complex64, as in
PyTorch); on OpenCL the same bytes are read as float2 (layers/common/complex_types.py).
"""

from __future__ import annotations

import math

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer
from kuiper.layers.common.fft_plan import FFT_TYPES, FFTParams, numpy_fft


@register(*FFT_TYPES, backend="cpu")
class FFT(Layer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.params = FFTParams(layer, op)
        return layer

    def infer(self, inputs):
        self.expect_inputs(inputs, 1)
        self.plan = self.params.plan(inputs[0].shape, inputs[0].dtype)
        return [TensorSpec(self.plan.out_shape, self.plan.out_dtype)]

    def forward(self, inputs):
        return [numpy_fft(inputs[0], self.plan)]

    def flops(self, inputs, outputs):
        # ~5 N log2 N real operations per complex FFT of N points (the usual FFT count)
        n = max(outputs[0].numel, 1)
        return int(5 * n * math.log2(max(math.prod(self.plan.sizes), 2)))
