"""torch.stft / torch.istft on OpenCL: frames -> FFT -> spectrum, and back; torchaudio's
spectrogram / inverse_spectrogram are the same with a scale and a power in the last kernel.

    stft    stft_frames (pad, cut, window) -> fft_pass along n_fft -> stft_store (transpose,
            keep n_freq bins, scale)
    istft   istft_frames (transpose, Hermitian half -> full) -> inverse fft_pass ->
            istft_overlap_add (window, overlap-add, divide by the envelope)

The kernels are in clkernels/stft.cl, the FFT passes are fft.cl's
(layers/opencl_helpers/stockham.py). The window is a build-time constant (pnnx stores it as a
pnnx.Attribute): it is padded to n_fft and uploaded once, and the ISTFT's envelope is computed from
it on the host. A window only known at run time, or float64 data, runs the CPU layer (listed in
graph.fallbacks).
"""

from __future__ import annotations

import math

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.common.stft_plan import PAD_MODE_CODES
from kuiper.layers.cpu import stft as cpu_stft
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_helpers.buffers import keep_alive
from kuiper.layers.opencl_helpers.stockham import WorkBuffers, transform_dim

FLOAT32, COMPLEX64 = np.dtype(np.float32), np.dtype(np.complex64)


class DeviceShortTimeFourier(OpenCLLayer):
    input_dtypes: tuple[np.dtype, ...] = ()

    def bind(self, inputs, outputs, in_specs, out_specs):
        self.launches = []
        why = None
        if in_specs[0].dtype not in self.input_dtypes:
            why = f"stft.cl reads {', '.join(d.name for d in self.input_dtypes)} signals"
        elif len(in_specs) == 2 and not in_specs[1].known:
            why = "the window is only known at run time"
        if why:
            return self.fall_back_to_host(inputs, outputs, in_specs, out_specs, why)
        window = in_specs[1].value if len(in_specs) == 2 else None
        if out_specs[0].numel:
            self.launches = self.prepare(inputs[0], outputs[0], in_specs[0], out_specs[0], window)

    def constant(self, values):
        array = self.upload(np.ascontiguousarray(values, np.float32))
        keep_alive(self, [array])
        return array

    def launch(self, name, n, *args) -> Launch:
        kernel = self.kernel(name, stem="stft")
        kernel.set_args(*args, np.int32(n))
        return Launch(kernel, (round_up(n, 64),))


class DeviceForward(DeviceShortTimeFourier):
    """The STFT's launches, shared by torch.stft and torchaudio's spectrogram (`store` is the
    last kernel, where they differ)."""

    def prepare(self, x, y, x_spec, y_spec, window):
        p = self.params
        signals, length = math.prod(x_spec.shape[:-1]), x_spec.shape[-1]
        frames = signals * p.n_frames * p.n_fft
        work = WorkBuffers(self, frames)
        name = "stft_frames_complex" if x_spec.dtype == COMPLEX64 else "stft_frames"
        launches = [self.launch(name, frames, x.data, self.constant(p.padded_window(
            window, np.float32)).data, work.src.data, np.int32(length), np.int32(p.n_fft),
            np.int32(p.hop), np.int32(p.n_frames), np.int32(p.pad),
            np.int32(PAD_MODE_CODES[p.pad_mode]))]
        launches += transform_dim(self, work, (signals * p.n_frames, p.n_fft), 1, inverse=False)
        n = signals * p.n_freq * p.n_frames
        launches.append(self.store(n, work, y, window))
        return launches

    def store(self, n, work, y, window) -> Launch:
        p = self.params
        return self.launch("stft_store", n, work.src.data, y.data, np.int32(p.n_fft),
                           np.int32(p.n_freq), np.int32(p.n_frames), np.float32(p.scale))


@register(backend="opencl")
class STFT(DeviceForward, cpu_stft.STFT):
    input_dtypes = (FLOAT32, COMPLEX64)


class DeviceInverse(DeviceShortTimeFourier):
    """The ISTFT's launches, shared by torch.istft and torchaudio's inverse_spectrogram (which
    scales the output by `output_scale`)."""

    input_dtypes = (COMPLEX64,)
    # istft_overlap_add writes a complex output as interleaved float pairs (the executor's
    # argument check, kuiper/opencl/device/element_types.py, would otherwise expect float2)
    element_types = {"complex64": ("float",)}

    def prepare(self, spec, y, spec_spec, y_spec, window):
        p = self.params
        signals = math.prod(spec_spec.shape[:-2])
        frames = signals * p.n_frames * p.n_fft
        work = WorkBuffers(self, frames)
        launches = [self.launch("istft_frames", frames, spec.data, work.src.data,
                                np.int32(p.n_fft), np.int32(p.n_freq), np.int32(p.n_frames),
                                np.int32(not p.return_complex))]
        launches += transform_dim(self, work, (signals * p.n_frames, p.n_fft), 1, inverse=True)
        launches.append(self.launch(
            "istft_overlap_add", signals * p.out_len, work.src.data,
            self.constant(p.padded_window(window, np.float32)).data,
            self.constant(p.inverse_envelope(window)).data, y.data, np.int32(p.n_fft),
            np.int32(p.hop), np.int32(p.n_frames), np.int32(p.start), np.int32(p.out_len),
            np.float32(p.scale * self.output_scale(window)), np.int32(p.return_complex)))
        return launches

    def output_scale(self, window) -> float:
        return 1.0


@register(backend="opencl")
class ISTFT(DeviceInverse, cpu_stft.ISTFT):
    pass


@register(backend="opencl")
class Spectrogram(DeviceForward, cpu_stft.Spectrogram):
    """torch.stft's kernels; the last one, `spectrogram_store`, also applies the window norm
    and the power (power=None: `stft_store` with the window norm in its scale). A `pad` > 0
    runs the CPU layer."""

    input_dtypes = (FLOAT32,)

    def bind(self, inputs, outputs, in_specs, out_specs):
        if self.pad:
            self.launches = []
            return self.fall_back_to_host(inputs, outputs, in_specs, out_specs,
                                          f"pad={self.pad} (only pad=0 runs on the device)")
        return super().bind(inputs, outputs, in_specs, out_specs)

    def store(self, n, work, y, window) -> Launch:
        p = self.params
        scale = np.float32(p.scale * self.extra_scale(window))
        if self.power is None:
            return self.launch("stft_store", n, work.src.data, y.data, np.int32(p.n_fft),
                               np.int32(p.n_freq), np.int32(p.n_frames), scale)
        return self.launch("spectrogram_store", n, work.src.data, y.data, np.int32(p.n_fft),
                           np.int32(p.n_freq), np.int32(p.n_frames), scale,
                           np.float32(self.power))


@register(backend="opencl")
class InverseSpectrogram(DeviceInverse, cpu_stft.InverseSpectrogram):
    """torch.istft's kernels with the window norm in the output scale; `length` with a `pad`
    (which crops the result) runs the CPU layer."""

    def bind(self, inputs, outputs, in_specs, out_specs):
        if self.crop:
            self.launches = []
            return self.fall_back_to_host(inputs, outputs, in_specs, out_specs,
                                          f"length with pad={self.pad} (only pad=0 runs on "
                                          "the device)")
        return super().bind(inputs, outputs, in_specs, out_specs)

    def output_scale(self, window) -> float:
        return self.extra_scale(window)
