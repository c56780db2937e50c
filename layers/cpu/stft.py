"""torch.stft and torch.istft: short-time Fourier transforms of (L,) or (B, L) signals, and
torchaudio.functional.spectrogram / inverse_spectrogram, which are the same transforms with a
padding, a normalisation and a power around them.

What they compute (centre padding, frames, window, scaling, overlap-add) is explained and
implemented with NumPy in layers/common/stft_plan.py, shared with the OpenCL twin. The window
comes from a second input (a pnnx.Attribute holding torch.hann_window(...) and the like); with
none, it is all ones. Spectra are complex64 (layers/common/complex_types.py).
"""

from __future__ import annotations

import math

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer
from kuiper.layers.common.stft_plan import STFTParams


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


def spectrogram_norms(op) -> tuple[bool, bool]:
    """torchaudio's `normalized` -> (frame_length norm, window norm): True or "window" divides
    by the window's L2 norm, "frame_length" is torch.stft's normalized=True (1 / sqrt(n_fft))."""
    value = op.param("normalized", False)
    if value is True or value == "window":
        return False, True
    if value == "frame_length":
        return True, False
    if value is False:
        return False, False
    raise op.error(f"normalized={value!r}: expected False, True, window or frame_length")


def window_norm(window: np.ndarray | None, win_length: int) -> float:
    """sqrt(sum(window ** 2)), the window's L2 norm (a window of ones when None)."""
    if window is None:
        return math.sqrt(win_length)
    return float(np.sqrt(np.sum(np.square(np.asarray(window, np.float64)))))


class TorchaudioSpectrogram(ShortTimeFourier):
    """Shared by spectrogram and inverse_spectrogram: the torchaudio parameters on top of
    torch.stft's (`pad`, `normalized` as a string, `power`)."""

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        frame_norm, layer.window_norm = spectrogram_norms(op)
        layer.params = STFTParams(layer, op, cls.inverse, normalized=frame_norm)
        layer.pad = op.int_param("pad", 0)
        if layer.pad < 0:
            raise op.error(f"pad={layer.pad}: expected pad >= 0")
        return layer

    def extra_scale(self, window) -> float:
        """The window normalisation, a constant factor on the output: 1 / norm for the
        spectrogram, norm for the inverse (it undoes the forward one)."""
        if not self.window_norm:
            return 1.0
        norm = window_norm(window, self.params.win_length)
        return norm if self.inverse else 1.0 / norm


@register("torchaudio.functional.spectrogram", backend="cpu")
class Spectrogram(TorchaudioSpectrogram):
    """torchaudio.functional.spectrogram: zero-pad `pad` samples on both sides, torch.stft
    (return_complex), divide by the window's norm when normalized=window, then |.| ** power
    (power=None keeps the complex spectrum)."""

    inverse = False

    @classmethod
    def from_operator(cls, op):
        layer = super().from_operator(op)
        power = op.param("power", 2.0)
        if power is not None and (isinstance(power, bool) or not isinstance(
                power, (int, float)) or power <= 0):
            raise op.error(f"power={power!r}: expected None or a positive number")
        layer.power = None if power is None else float(power)
        return layer

    def infer(self, inputs):
        self.expect_inputs(inputs, 1, 2)
        self.params.check_window(inputs)
        x = inputs[0]
        padded = TensorSpec(x.shape[:-1] + (x.shape[-1] + 2 * self.pad,), x.dtype) \
            if x.shape else x
        shape, dtype = self.params.stft_shape(padded)
        if self.power is not None:
            dtype = np.dtype(np.float32) if dtype == np.complex64 else np.dtype(np.float64)
        return [TensorSpec(shape, dtype)]

    def forward(self, inputs):
        x, window = inputs[0], (inputs[1] if len(inputs) == 2 else None)
        if self.pad:
            x = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(self.pad, self.pad)])
        spec = self.params.stft(x, window)
        scale = self.extra_scale(window)
        if self.power is None:
            return [(spec * scale).astype(spec.dtype)] if scale != 1.0 else [spec]
        magnitude = np.abs(spec) * scale
        return [(magnitude if self.power == 1.0 else magnitude ** self.power)]


@register("torchaudio.functional.inverse_spectrogram", backend="cpu")
class InverseSpectrogram(TorchaudioSpectrogram):
    """torchaudio.functional.inverse_spectrogram: times the window's norm when
    normalized=window, torch.istft (real output) with length + 2 * pad samples, then the pad
    cut off both ends (only when `length` is given, as torchaudio does)."""

    inverse = True

    @classmethod
    def from_operator(cls, op):
        layer = super().from_operator(op)
        length = layer.params.length
        layer.crop = layer.pad if length is not None else 0
        if length is not None:
            layer.params.length = length + 2 * layer.pad
        return layer

    def infer(self, inputs):
        (spec,) = super().infer(inputs)
        if self.crop:
            spec = TensorSpec(spec.shape[:-1] + (spec.shape[-1] - 2 * self.crop,), spec.dtype)
        return [spec]

    def forward(self, inputs):
        window = inputs[1] if len(inputs) == 2 else None
        y = self.params.istft(inputs[0], window)
        scale = self.extra_scale(window)
        if scale != 1.0:
            y = (y * scale).astype(y.dtype)
        return [y[..., self.crop:y.shape[-1] - self.crop] if self.crop else y]
