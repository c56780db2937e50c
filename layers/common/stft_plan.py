"""torch.stft and torch.istft, worked out once for both backends (and computed with NumPy).

STFT, the short-time Fourier transform, cuts a signal (L,) or (B, L) into frames and takes
the FFT of each:

    center   pad n_fft // 2 samples on both sides first (pad_mode: reflect, constant,
             replicate, circular), so that frame f is centred on sample f * hop
    frame f  samples f * hop ... f * hop + n_fft - 1, times the window
    window   win_length samples (ones when none is given), zero-padded on both sides to n_fft
    output   (B, n_freq, n_frames) complex: n_freq = n_fft // 2 + 1 (onesided, the default for
             real signals) or n_fft; scaled by 1 / sqrt(n_fft) when `normalized`; with
             return_complex=False, the same numbers as (..., 2) real pairs

ISTFT inverts it: an inverse FFT of every frame (complex -> real when the output is real),
times the window, overlap-added, and divided by the overlap-added squared window (the
"envelope"), which must not vanish anywhere in the output (the NOLA condition).
"""

from __future__ import annotations

import numpy as np

from kuiper.layers.common.complex_types import (
    REAL_OF,
    complex_of,
    is_complex,
    real_of,
    require_complex,
)

PAD_MODES = {"reflect": "reflect", "constant": "constant", "replicate": "edge",
             "circular": "wrap"}  # torch name -> numpy.pad mode
PAD_MODE_CODES = {name: code for code, name in enumerate(PAD_MODES)}  # for the kernels


class STFTParams:
    """The parameters of a torch.stft / torch.istft line, and the shapes they give."""

    def __init__(self, layer, op, inverse: bool, normalized: bool | None = None):
        """`normalized` given overrides the parameter (torchaudio's spectrogram writes
        normalized=window / frame_length, which its layer maps to torch.stft's bool)."""
        self.layer, self.inverse = layer, inverse
        self.n_fft = op.int_param("n_fft")
        hop = op.param("hop_length", None)
        self.hop = self.n_fft // 4 if hop is None else op.int_param("hop_length")
        win = op.param("win_length", None)
        self.win_length = self.n_fft if win is None else op.int_param("win_length")
        self.center = op.bool_param("center", True)
        self.pad_mode = "reflect" if inverse else op.str_param("pad_mode", "reflect",
                                                                tuple(PAD_MODES))
        self.normalized = op.bool_param("normalized", False) if normalized is None \
            else normalized
        onesided = op.param("onesided", None)
        self.onesided_param = None if onesided is None else op.bool_param("onesided")
        rc = op.param("return_complex", None)
        self.return_complex = (not inverse) if rc is None else op.bool_param("return_complex")
        length = op.param("length", None) if inverse else None
        self.length = None if length is None else op.int_param("length")
        if self.n_fft < 1 or self.hop < 1 or not 0 < self.win_length <= self.n_fft:
            raise op.error(f"n_fft={self.n_fft}, hop_length={self.hop}, win_length="
                           f"{self.win_length}: expected n_fft >= 1, hop_length >= 1 and "
                           "0 < win_length <= n_fft")

    # --- the window -------------------------------------------------------------------------
    def check_window(self, inputs) -> None:
        if len(inputs) == 2:
            w = inputs[1]
            if w.shape != (self.win_length,) or is_complex(w.dtype):
                raise self.layer.shape_error(f"the window has shape {w.shape} {w.dtype.name}: "
                                             f"expected ({self.win_length},) real "
                                             "(win_length samples)")

    def padded_window(self, window: np.ndarray | None, dtype) -> np.ndarray:
        """The window (ones when None) centred in n_fft samples, as torch pads it."""
        w = np.ones(self.win_length) if window is None else np.asarray(window, np.float64)
        left = (self.n_fft - self.win_length) // 2
        out = np.zeros(self.n_fft)
        out[left:left + self.win_length] = w
        return out.astype(dtype)

    # --- torch.stft -------------------------------------------------------------------------
    def stft_shape(self, x) -> tuple[tuple[int, ...], np.dtype]:
        layer = self.layer
        if len(x.shape) not in (1, 2):
            raise layer.shape_error(f"stft takes a (L,) or (B, L) signal, got shape {x.shape}")
        length = x.shape[-1]
        self.pad = self.n_fft // 2 if self.center else 0
        if self.center and self.pad_mode == "reflect" and self.pad >= max(length, 1):
            raise layer.shape_error(f"reflect padding of {self.pad} needs a signal longer than "
                                    f"that; got {length} samples (use pad_mode=constant)")
        padded = length + 2 * self.pad
        if self.n_fft > padded:
            raise layer.shape_error(f"n_fft={self.n_fft} is longer than the (padded) signal of "
                                    f"{padded} samples")
        self.onesided = (not is_complex(x.dtype)) if self.onesided_param is None \
            else self.onesided_param
        if self.onesided and is_complex(x.dtype):
            raise layer.op.error("onesided=True needs a real signal; this one is complex")
        self.n_frames = 1 + (padded - self.n_fft) // self.hop
        self.n_freq = self.n_fft // 2 + 1 if self.onesided else self.n_fft
        self.scale = self.n_fft ** -0.5 if self.normalized else 1.0
        dtype = complex_of(layer, x.dtype)
        shape = x.shape[:-1] + (self.n_freq, self.n_frames)
        if not self.return_complex:
            return shape + (2,), REAL_OF[dtype]
        return shape, dtype

    def stft(self, x: np.ndarray, window: np.ndarray | None) -> np.ndarray:
        batch = x.reshape(-1, x.shape[-1])
        if self.pad:
            batch = np.pad(batch, ((0, 0), (self.pad, self.pad)), mode=PAD_MODES[self.pad_mode])
        frames = np.lib.stride_tricks.sliding_window_view(batch, self.n_fft, axis=-1)
        frames = frames[:, ::self.hop][:, :self.n_frames] * self.padded_window(window,
                                                                               np.float64)
        spectrum = np.fft.rfft(frames) if self.onesided else np.fft.fft(frames)
        out = (spectrum * self.scale).transpose(0, 2, 1)
        out = np.ascontiguousarray(out.reshape(x.shape[:-1] + out.shape[1:]),
                                   complex_of(self.layer, x.dtype))
        return out if self.return_complex else out.view(REAL_OF[out.dtype]).reshape(
            out.shape + (2,))

    # --- torch.istft ------------------------------------------------------------------------
    def istft_shape(self, spec) -> tuple[tuple[int, ...], np.dtype]:
        layer = self.layer
        require_complex(layer, spec.dtype, "spectrum")
        if len(spec.shape) not in (2, 3):
            raise layer.shape_error(f"istft takes a (n_freq, n_frames) or (B, n_freq, "
                                    f"n_frames) spectrum, got shape {spec.shape}")
        self.n_freq, self.n_frames = spec.shape[-2:]
        self.onesided = (self.n_freq != self.n_fft) if self.onesided_param is None \
            else self.onesided_param
        want = self.n_fft // 2 + 1 if self.onesided else self.n_fft
        if self.n_freq != want:
            raise layer.shape_error(f"the spectrum has {self.n_freq} frequencies: expected "
                                    f"{want} for n_fft={self.n_fft}, onesided={self.onesided}")
        if self.onesided and self.return_complex:
            raise layer.op.error("return_complex=True needs onesided=False (a complex signal "
                                 "has no redundant half spectrum)")
        self.expected_len = self.n_fft + self.hop * (self.n_frames - 1)
        self.start = self.n_fft // 2 if self.center else 0
        if self.length is not None:
            end = self.start + self.length
        else:
            end = self.expected_len - self.n_fft // 2 if self.center else self.expected_len
        self.out_len = end - self.start
        if self.out_len < 0:
            raise layer.shape_error(f"{self.n_frames} frames of hop {self.hop} give no "
                                    "samples once the centre padding is removed")
        self.scale = self.n_fft ** -0.5 if self.normalized else 1.0 / self.n_fft
        dtype = spec.dtype if self.return_complex else real_of(layer, spec.dtype)
        return spec.shape[:-2] + (self.out_len,), dtype

    def inverse_envelope(self, window: np.ndarray | None) -> np.ndarray:
        """1 / the overlap-added squared window at each sample of the overlap-added frames
        (0 past their end, where the output is zero padding); a vanishing envelope is an error,
        as in torch (the window cannot be undone there)."""
        w2 = self.padded_window(window, np.float64) ** 2
        envelope = np.zeros(self.expected_len)
        for f in range(self.n_frames):
            envelope[f * self.hop:f * self.hop + self.n_fft] += w2
        used = envelope[self.start:self.start + self.out_len]
        if used.size and np.abs(used).min() < 1e-11:
            raise self.layer.op.error("the window's overlap-add vanishes somewhere (window "
                                      "overlap add min < 1e-11, the NOLA condition): this "
                                      "window and hop_length cannot be inverted")
        return np.divide(1.0, envelope, out=np.zeros_like(envelope), where=envelope != 0)

    def istft(self, spec: np.ndarray, window: np.ndarray | None) -> np.ndarray:
        frames = spec.reshape((-1,) + spec.shape[-2:]).transpose(0, 2, 1)  # (B, frames, freq)
        if self.return_complex:
            y = np.fft.ifft(frames, self.n_fft, norm="forward")
        else:
            y = np.fft.irfft(frames[..., :self.n_fft // 2 + 1], self.n_fft, norm="forward")
        y = y * (self.scale * self.padded_window(window, np.float64))
        out = np.zeros((y.shape[0], self.expected_len), y.dtype)
        for f in range(self.n_frames):
            out[:, f * self.hop:f * self.hop + self.n_fft] += y[:, f]
        out = out * self.inverse_envelope(window)
        out = out[:, self.start:self.start + self.out_len]
        out = np.pad(out, ((0, 0), (0, self.out_len - out.shape[1])))  # `length` past the end
        dtype = spec.dtype if self.return_complex else REAL_OF[spec.dtype]
        return np.ascontiguousarray(out.reshape(spec.shape[:-2] + (self.out_len,)), dtype)
