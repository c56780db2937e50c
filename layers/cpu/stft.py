"""torch.stft and torch.istft: short-time Fourier transforms of (L,) or (B, L) signals.

What they compute (centre padding, frames, window, scaling, overlap-add) is explained and
implemented with NumPy in layers/common/stft_plan.py, shared with the OpenCL twin. The window
comes from a second input (a pnnx.Attribute holding torch.hann_window(...) and the like); with
none, it is all ones. Spectra are complex64 (layers/common/complex_types.py).
"""

from __future__ import annotations

import math

from kuiper.layers.base import Layer
from kuiper.layers.common.stft_plan import STFTParams
from kuiper.registry import register
from kuiper.tensor_spec import TensorSpec


class ShortTimeFourier(Layer):
    inverse = False

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        if op.param("window", None) is not None:
            raise op.error(f"parameter window={op.param('window')!r}: expected the window as "
                           "an input (a pnnx.Attribute) or window=None")
        layer.params = STFTParams(layer, op, cls.inverse)
        return layer

    def infer(self, inputs):
        self.expect_inputs(inputs, 1, 2)
        self.params.check_window(inputs)
        p = self.params
        shape, dtype = p.istft_shape(inputs[0]) if self.inverse else p.stft_shape(inputs[0])
        if self.inverse and len(inputs) == 2 and inputs[1].known:
            p.inverse_envelope(inputs[1].value)  # a window that cannot be undone: fail now
        elif self.inverse and len(inputs) == 1:
            p.inverse_envelope(None)
        return [TensorSpec(shape, dtype)]

    def forward(self, inputs):
        window = inputs[1] if len(inputs) == 2 else None
        p = self.params
        return [p.istft(inputs[0], window) if self.inverse else p.stft(inputs[0], window)]

    def flops(self, inputs, outputs):
        p = self.params
        frames = math.prod(inputs[0].shape[:-1 if not self.inverse else -2]) * p.n_frames
        return int(frames * 5 * p.n_fft * math.log2(max(p.n_fft, 2)))


@register("torch.stft", backend="cpu")
class STFT(ShortTimeFourier):
    inverse = False


@register("torch.istft", backend="cpu")
class ISTFT(ShortTimeFourier):
    inverse = True
