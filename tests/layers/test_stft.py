"""torch.stft / torch.istft against torch on both backends: windows (given, padded, none),
centre padding modes, hops, normalisation, onesided, return_complex, length, and the errors."""

import warnings

import numpy as np
import pytest
import torch

import kuiper
from kuiper import OperatorError, ShapeError
from kuiper.testing import assert_close, run_operator

WINDOWS = {"hann": torch.hann_window, "hamming": torch.hamming_window, None: None}


def torch_window(kind, win_length):
    return None if kind is None else WINDOWS[kind](win_length)


def run(op_type, x, window, params, backend, **kwargs):
    """The window, when there is one, is a pnnx.Attribute input, as pnnx writes it."""
    if window is None:
        return run_operator(op_type, [x], params={**params, "window": None}, backend=backend,
                            **kwargs)[0]
    return run_operator(op_type, [x, window.numpy()], params=params, constants=[1],
                        backend=backend, **kwargs)[0]


def torch_stft(x, window, params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rectangular window / return_complex=False notes
        return torch.stft(torch.from_numpy(x), window=window, **params).numpy()


def torch_istft(spec, window, params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rectangular window / zero padding notes
        return torch.istft(torch.from_numpy(spec), window=window, **params).numpy()


STFT_CASES = [  # (signal shape, window kind, params)
    ((2, 300), "hann", dict(n_fft=64, hop_length=16, win_length=48, center=True,
                            pad_mode="reflect", normalized=True, onesided=True)),
    ((300,), None, dict(n_fft=32, hop_length=None, win_length=None, center=False,
                        pad_mode="reflect", normalized=False, onesided=False)),
    ((3, 257), "hamming", dict(n_fft=100, hop_length=7, win_length=100, center=True,
                               pad_mode="constant", normalized=False, onesided=True)),
    ((1, 131), "hann", dict(n_fft=33, hop_length=5, win_length=31, center=True,
                            pad_mode="replicate", normalized=True, onesided=False)),
    ((2, 90), None, dict(n_fft=16, hop_length=3, win_length=12, center=True,
                         pad_mode="circular", normalized=False, onesided=True)),
    ((1000,), "hamming", dict(n_fft=512, hop_length=128, win_length=256, center=True,
                              pad_mode="constant", normalized=False, onesided=True)),
]


@pytest.mark.parametrize("shape, window, params", STFT_CASES)
@pytest.mark.parametrize("return_complex", [True, False])
def test_stft_matches_torch(backend, rng, shape, window, params, return_complex):
    x = rng.standard_normal(shape).astype(np.float32)
    params = {**params, "return_complex": return_complex}
    w = torch_window(window, params["win_length"] or params["n_fft"])
    y = run("torch.stft", x, w, params, backend)
    assert_close(y, torch_stft(x, w, params))


def test_stft_of_a_complex_signal(backend, rng):
    x = (rng.standard_normal((2, 77)) + 1j * rng.standard_normal((2, 77))).astype(np.complex64)
    params = dict(n_fft=20, hop_length=6, win_length=20, center=True, pad_mode="reflect",
                  normalized=False, onesided=None, return_complex=True)
    w = torch.hann_window(20)
    assert_close(run("torch.stft", x, w, params, backend), torch_stft(x, w, params))


ISTFT_CASES = [  # (spectrum from torch.stft of this signal shape, window kind, params)
    ((2, 300), "hann", dict(n_fft=64, hop_length=16, win_length=48, center=True,
                            normalized=True, onesided=True)),
    ((300,), None, dict(n_fft=32, hop_length=None, win_length=None, center=False,
                        normalized=False, onesided=False)),
    ((3, 257), "hamming", dict(n_fft=100, hop_length=7, win_length=100, center=True,
                               normalized=False, onesided=None)),
    ((1, 131), "hann", dict(n_fft=33, hop_length=5, win_length=31, center=True,
                            normalized=True, onesided=False)),
]


@pytest.mark.parametrize("shape, window, params", ISTFT_CASES)
@pytest.mark.parametrize("length", [None, 100])
def test_istft_matches_torch(backend, rng, shape, window, params, length):
    x = rng.standard_normal(shape).astype(np.float32)
    w = torch_window(window, params["win_length"] or params["n_fft"])
    stft_params = {**params, "onesided": params["onesided"] is not False,
                   "return_complex": True}
    spec = torch_stft(x, w, stft_params)
    spec += (0.01 * rng.standard_normal(spec.shape)).astype(np.float32)  # not an exact STFT
    params = {**params, "length": length, "return_complex": False}
    y = run("torch.istft", spec, w, params, backend)
    assert y.dtype == np.float32
    assert_close(y, torch_istft(spec, w, params))


def test_istft_length_past_the_frames_pads_zeros(backend, rng):
    """torch pads with zeros past the last frame (a window without zeros at its ends)."""
    spec = (rng.standard_normal((9, 6)) + 1j * rng.standard_normal((9, 6))).astype(np.complex64)
    params = dict(n_fft=16, hop_length=4, win_length=16, center=False, normalized=False,
                  onesided=True, length=50, return_complex=False)
    w = torch.hamming_window(16)
    y = run("torch.istft", spec, w, params, backend)
    assert_close(y, torch_istft(spec, w, params))
    assert not y[36:].any()


def test_istft_to_a_complex_signal(backend, rng):
    spec = (rng.standard_normal((2, 40, 9)) + 1j * rng.standard_normal((2, 40, 9)))
    spec = spec.astype(np.complex64)
    params = dict(n_fft=40, hop_length=10, win_length=40, center=False, normalized=False,
                  onesided=False, length=None, return_complex=True)
    w = torch.hann_window(40) + 0.1  # never zero: the envelope can be divided by everywhere
    y = run("torch.istft", spec, w, params, backend)
    assert y.dtype == np.complex64
    assert_close(y, torch_istft(spec, w, params))


def test_round_trip_gives_the_signal_back(backend, rng):
    x = rng.standard_normal((2, 500)).astype(np.float32)
    w = torch.hann_window(128)
    spec = run("torch.stft", x, w, dict(n_fft=128, hop_length=32, win_length=128,
                                         center=True, pad_mode="reflect", normalized=True,
                                         onesided=True, return_complex=True), backend)
    y = run("torch.istft", spec, w, dict(n_fft=128, hop_length=32, win_length=128,
                                          center=True, normalized=True, onesided=True,
                                          length=500, return_complex=False), backend)
    assert_close(y, x)


def test_a_run_time_window_runs_on_the_host_on_opencl(backend, rng):
    """A window computed by the model (not a constant) cannot be uploaded at build time."""
    x = rng.standard_normal((2, 64)).astype(np.float32)
    w = np.hanning(16).astype(np.float32)
    params = dict(n_fft=16, hop_length=4, win_length=16, center=True, pad_mode="reflect",
                  normalized=False, onesided=True, return_complex=True)
    (y,) = run_operator("torch.stft", [x, w], params=params, backend=backend,
                        allow_fallback=True)
    assert_close(y, torch_stft(x, torch.from_numpy(w), params))


@pytest.mark.parametrize("op_type, x, window, params, error, message", [
    ("torch.stft", np.ones((2, 50), np.float32), np.ones(10, np.float32),
     dict(n_fft=16, win_length=12), ShapeError, r"expected \(12,\) real"),
    ("torch.stft", np.ones(10, np.float32), None, dict(n_fft=32, center=False), ShapeError,
     "longer than the"),
    ("torch.stft", np.ones(10, np.float32), None, dict(n_fft=32), ShapeError,
     "reflect padding of 16"),
    ("torch.stft", np.ones((2, 3, 50), np.float32), None, dict(n_fft=16), ShapeError,
     r"\(L,\) or \(B, L\)"),
    ("torch.stft", np.ones(50, np.complex64), None, dict(n_fft=16, onesided=True),
     OperatorError, "onesided=True needs a real signal"),
    ("torch.stft", np.ones(50, np.float32), None, dict(n_fft=16, pad_mode="mirror"),
     OperatorError, "expected one of reflect, constant"),
    ("torch.stft", np.ones(50, np.float32), None, dict(n_fft=16, win_length=20),
     OperatorError, "0 < win_length <= n_fft"),
    ("torch.istft", np.ones((10, 4), np.complex64), None, dict(n_fft=16), ShapeError,
     "expected 9 for n_fft=16"),
    ("torch.istft", np.ones((9, 4), np.float32), None, dict(n_fft=16), OperatorError,
     "expected a complex tensor"),
    ("torch.istft", np.ones((9, 4), np.complex64), np.hanning(16).astype(np.float32),
     dict(n_fft=16, hop_length=4, center=False), OperatorError, "NOLA"),
    ("torch.istft", np.ones((9, 4), np.complex64), None,
     dict(n_fft=16, onesided=True, return_complex=True), OperatorError, "onesided=False"),
])
def test_bad_parameters_and_inputs(backend, op_type, x, window, params, error, message):
    with pytest.raises(error, match=message):
        run(op_type, x, None if window is None else torch.from_numpy(window), params, backend)


class Spectrograms(torch.nn.Module):
    """pnnx's test_torch_stft / test_torch_istft, in one model."""

    def forward(self, x, y, z):
        a = torch.stft(x, n_fft=64, hop_length=16, window=torch.hann_window(48), win_length=48,
                       center=True, pad_mode="reflect", normalized=True, onesided=True,
                       return_complex=True)
        b = torch.stft(y, n_fft=32, center=False, onesided=False, return_complex=True)
        c = torch.istft(a, n_fft=64, hop_length=16, window=torch.hann_window(48),
                        win_length=48, center=True, normalized=True, onesided=True,
                        return_complex=False)
        d = torch.istft(z, n_fft=512, window=torch.hamming_window(256), win_length=256,
                        hop_length=128, center=True, onesided=True, return_complex=False)
        return a, b, c, d


@pytest.mark.slow
def test_stft_pnnx_export(backend, rng, export_model):
    x = torch.from_numpy(rng.standard_normal((2, 300)).astype(np.float32))
    y = torch.from_numpy(rng.standard_normal(200).astype(np.float32))
    z = torch.from_numpy((rng.standard_normal((257, 8)) + 1j * rng.standard_normal((257, 8)))
                         .astype(np.complex64))
    module = Spectrograms().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = kuiper.load(export_model("spectrograms", module, (x, y, z)), backend=backend)
        wanted = module(x, y, z)
    assert not graph.fallbacks
    for got, want in zip(graph.forward(x.numpy(), y.numpy(), z.numpy()), wanted):
        assert_close(got, want.numpy())


# torchaudio.functional.spectrogram / inverse_spectrogram, as pnnx writes them (the
# test_torchaudio_* files of pnnx's suite), against the same formulas written with torch.stft
# (torchaudio's own code: pad, stft, window norm, power; window norm, istft, crop).
def ta_spectrogram(x, window, pad, n_fft, hop_length, win_length, power, normalized, center,
                   pad_mode, onesided):
    x = torch.from_numpy(x)
    if pad > 0:
        x = torch.nn.functional.pad(x, (pad, pad), "constant")
    spec = torch.stft(x, n_fft, hop_length, win_length, window, center, pad_mode,
                      normalized == "frame_length", onesided, return_complex=True)
    if normalized in (True, "window"):
        spec = spec / window.pow(2.0).sum().sqrt()
    if power is None:
        return spec.numpy()
    return (spec.abs() if power == 1 else spec.abs().pow(power)).numpy()


def ta_inverse_spectrogram(spec, window, length, pad, n_fft, hop_length, win_length, normalized,
                           center, onesided):
    spec = torch.from_numpy(spec)
    if normalized in (True, "window"):
        spec = spec * window.pow(2.0).sum().sqrt()
    y = torch.istft(spec, n_fft, hop_length, win_length, window, center,
                    normalized == "frame_length", onesided,
                    None if length is None else length + 2 * pad, return_complex=False)
    if length is not None and pad > 0:
        y = y[..., pad:-pad]
    return y.numpy()


SPECTROGRAMS = [
    # (waveform shape, params) -- the first four are pnnx's test_torchaudio_F_spectrogram
    ((3, 2560), dict(pad=0, n_fft=64, hop_length=16, win_length=44, power=1,
                     normalized="window", center=True, pad_mode="reflect", onesided=True)),
    ((3, 2560), dict(pad=0, n_fft=128, hop_length=3, win_length=128, power=None,
                     normalized=False, center=False, pad_mode="reflect", onesided=True)),
    ((1000,), dict(pad=0, n_fft=512, hop_length=128, win_length=256, power=2,
                   normalized="frame_length", center=True, pad_mode="constant", onesided=True)),
    ((1064,), dict(pad=0, n_fft=512, hop_length=128, win_length=512, power=2, normalized=False,
                   center=True, pad_mode="reflect", onesided=False)),
    ((2, 300), dict(pad=0, n_fft=64, hop_length=20, win_length=64, power=0.5, normalized=True,
                    center=True, pad_mode="replicate", onesided=True)),
    ((2, 300), dict(pad=7, n_fft=64, hop_length=20, win_length=50, power=None,
                    normalized="window", center=True, pad_mode="reflect", onesided=True)),
]


@pytest.mark.parametrize("shape, params", SPECTROGRAMS)
def test_torchaudio_spectrogram(backend, rng, shape, params):
    x = rng.standard_normal(shape).astype(np.float32)
    window = torch.hann_window(params["win_length"])
    y = run("torchaudio.functional.spectrogram", x, window, params, backend,
            allow_fallback=params["pad"] > 0)
    want = ta_spectrogram(x, window, **params)
    assert y.dtype == want.dtype and y.shape == want.shape
    assert_close(y, want)


INVERSE_SPECTROGRAMS = [
    # (spectrum shape, params) -- the first four are pnnx's test_torchaudio_F_inverse_spectrogram
    ((3, 33, 161), dict(length=None, pad=0, n_fft=64, hop_length=16, win_length=44,
                        normalized="window", center=True, onesided=True)),
    ((1, 65, 77), dict(length=None, pad=0, n_fft=128, hop_length=3, win_length=128,
                       normalized=False, center=True, onesided=True)),
    ((257, 8), dict(length=None, pad=0, n_fft=512, hop_length=128, win_length=256,
                    normalized="frame_length", center=True, onesided=True)),
    ((512, 4), dict(length=None, pad=0, n_fft=512, hop_length=128, win_length=512,
                    normalized=False, center=True, onesided=False)),
    ((2, 33, 20), dict(length=300, pad=5, n_fft=64, hop_length=16, win_length=64,
                       normalized=True, center=True, onesided=True)),
]


@pytest.mark.parametrize("shape, params", INVERSE_SPECTROGRAMS)
def test_torchaudio_inverse_spectrogram(backend, rng, shape, params):
    spec = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
    window = torch.hann_window(params["win_length"])
    if params["onesided"]:  # a spectrum of a real signal: bin 0 (and n_fft / 2) real
        spec[..., 0, :] = spec[..., 0, :].real
    y = run("torchaudio.functional.inverse_spectrogram", spec, window, params, backend,
            allow_fallback=params["length"] is not None and params["pad"] > 0)
    want = ta_inverse_spectrogram(spec, window, **params)
    assert y.dtype == want.dtype and y.shape == want.shape
    assert_close(y, want)


def test_torchaudio_pad_runs_on_the_host_on_opencl(backend, rng):
    # pad > 0 (and, for the inverse, length with pad > 0) is computed by the CPU layer
    x = rng.standard_normal((2, 300)).astype(np.float32)
    shape, params = SPECTROGRAMS[-1]
    window = torch.hann_window(params["win_length"])
    if backend == "opencl":
        with pytest.raises(AssertionError, match="fell back"):
            run("torchaudio.functional.spectrogram", x, window, params, backend)
    y = run("torchaudio.functional.spectrogram", x, window, params, backend,
            allow_fallback=True)
    assert_close(y, ta_spectrogram(x, window, **params))


@pytest.mark.parametrize("params, message", [
    ({"normalized": "frame"}, "normalized='frame'"),
    ({"power": -1}, "power=-1"),
    ({"pad": -2}, "pad=-2"),
])
def test_torchaudio_spectrogram_bad_parameters(backend, rng, params, message):
    base = dict(pad=0, n_fft=64, hop_length=16, win_length=64, power=2, normalized=False,
                center=True, pad_mode="reflect", onesided=True)
    with pytest.raises(OperatorError, match=message):
        run("torchaudio.functional.spectrogram", rng.standard_normal(300).astype(np.float32),
            torch.hann_window(64), {**base, **params}, backend)


class Torchaudios(torch.nn.Module):
    def forward(self, x, z):
        import torchaudio

        a = torchaudio.functional.spectrogram(x, pad=0, window=torch.hann_window(44), n_fft=64,
                                              hop_length=16, win_length=44, power=1,
                                              normalized="window")
        b = torchaudio.functional.spectrogram(x, pad=0, window=torch.hann_window(128),
                                              n_fft=128, hop_length=3, win_length=128,
                                              power=None, normalized=False, center=False)
        c = torchaudio.functional.inverse_spectrogram(
            z, length=None, pad=0, window=torch.hann_window(256), n_fft=512, hop_length=128,
            win_length=256, normalized="frame_length")
        return a, b, c


@pytest.mark.slow
def test_torchaudio_pnnx_export(backend, rng, export_model):
    """Needs torchaudio (not a Kuiper dependency: skipped without it)."""
    pytest.importorskip("torchaudio")
    x = torch.from_numpy(rng.standard_normal((3, 2560)).astype(np.float32))
    z = torch.from_numpy((rng.standard_normal((257, 8)) + 1j * rng.standard_normal((257, 8)))
                         .astype(np.complex64))
    module = Torchaudios().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = export_model("torchaudio_spectrograms", module, (x, z))
        graph = kuiper.load(path, backend=backend)
        wanted = module(x, z)
    assert "torchaudio.functional.spectrogram" in path.read_text()
    assert not graph.fallbacks
    for got, want in zip(graph.forward(x.numpy(), z.numpy()), wanted):
        assert_close(got, want.numpy())
