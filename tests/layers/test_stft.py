"""torch.stft / torch.istft against torch on both backends: windows (given, padded, none),
centre padding modes, hops, normalisation, onesided, return_complex, length, and the errors."""

import warnings

import numpy as np
import pytest
import torch

import kuiper
from kuiper import OperatorError, ShapeError
from kuiper.tools.testing import assert_close, run_operator

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
