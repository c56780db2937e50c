"""The 18 torch.fft.* operators against torch on both backends: n / s, dim, norm, resizing,
odd, prime and power-of-two lengths, and the errors."""

import os

import numpy as np
import pytest
import torch

import kuiper
from kuiper import OperatorError, ShapeError
from kuiper.layers.common.fft_plan import FFT_TYPES
from kuiper.layers.opencl_helpers.stockham import radices
from kuiper.testing import assert_close, run_operator

NORMS = [None, "forward", "ortho"]
# tests/opencl/test_oclgrind.py runs these tests on a simulator thousands of times slower than a
# device: there the long transforms get one row instead of three.
ROWS = 1 if os.environ.get("KUIPER_OCLGRIND") == "1" else 3
REAL_INPUT = {"rfft", "ihfft"}  # the others also take complex inputs


def signal(rng, shape, complex_input):
    x = rng.standard_normal(shape)
    if complex_input:
        x = x + 1j * rng.standard_normal(shape)
    return np.asarray(x, np.complex64 if complex_input else np.float32)


def reference(name, x, params):
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in params.items()}
    return getattr(torch.fft, name)(torch.from_numpy(x), **kwargs).resolve_conj().numpy()


def check(backend, name, x, params):
    (y,) = run_operator(f"torch.fft.{name}", [x], params=params, backend=backend)
    want = reference(name, x, params)
    assert y.dtype == want.dtype
    assert_close(y, want)


# (shape, params) per form; n / s of None keep the input's lengths, others pad or cut
ONE_D = [((3, 13, 8), {"dim": -1, "n": None}), ((5, 7), {"dim": 0, "n": 12}),
         ((2, 3, 10), {"dim": 1, "n": 2}), ((97,), {"dim": 0, "n": None}),
         ((4, 1), {"dim": -1, "n": 9})]
TWO_D = [((3, 13, 8), {"dim": [-2, -1], "s": None}), ((2, 6, 5, 3), {"dim": [3, 1], "s": [4, 9]}),
         ((7, 11), {"dim": [0, 1], "s": [16, 15]})]
N_D = [((3, 5, 8), {"dim": None, "s": None}), ((2, 6, 9), {"dim": None, "s": [4, 10]}),
       ((3, 4, 5, 2), {"dim": [0, 2], "s": None}), ((12, 10), {"dim": [1], "s": [7]}),
       ((2, 3, 5), {"dim": [2, 0, 1], "s": [6, 3, 2]})]
FORMS = {"": ONE_D, "2": TWO_D, "n": N_D}


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("family, complex_input", [
    (family, complex_input) for family in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")
    for complex_input in (False, True) if not (complex_input and family in REAL_INPUT)])
@pytest.mark.parametrize("form", ["", "2", "n"])
def test_fft_matches_torch(backend, rng, form, family, complex_input, norm):
    for shape, params in FORMS[form]:
        x = signal(rng, shape, complex_input)
        check(backend, family + form, x, {**params, "norm": norm})


@pytest.mark.parametrize("n", [1024, 4096, 1009, 2 * 3 * 5 * 7 * 11, 257 * 2])
def test_long_transforms(backend, rng, n):
    """Powers of two (radix-4 passes), a large prime (a direct DFT) and mixed radices."""
    x = signal(rng, (ROWS, n), True)
    check(backend, "fft", x, {"dim": -1, "n": None, "norm": "ortho"})
    check(backend, "irfft", x[:, : n // 2 + 1].copy(), {"dim": -1, "n": n, "norm": None})


def test_radices_multiply_back():
    for n in [1, 2, 12, 97, 1024, 1009 * 4, 2 * 3 * 5 * 7 * 11 * 13]:
        assert int(np.prod(radices(n))) == n
    assert radices(1024) == [4] * 5


def test_every_pnnx_type_is_registered():
    assert len(FFT_TYPES) == 18
    for op_type in FFT_TYPES:
        assert kuiper.core.registry.layer_for(op_type, "opencl").backend == "opencl"


def test_float64_runs_on_the_host_on_opencl(backend, rng):
    """The kernels are float32; float64 is computed by the CPU layer, listed as a fallback."""
    x = rng.standard_normal((4, 9))
    (y,) = run_operator("torch.fft.rfft", [x], params={"dim": -1, "n": None, "norm": None},
                        backend=backend, allow_fallback=True)
    assert y.dtype == np.complex128
    assert_close(y, torch.fft.rfft(torch.from_numpy(x)).numpy(), rtol=1e-12)


def test_integer_input_promotes_to_complex64(backend, rng):
    x = rng.integers(-5, 5, (3, 8))
    (y,) = run_operator("torch.fft.fft", [x], params={"dim": -1, "n": None, "norm": None},
                        backend=backend, allow_fallback=True)
    assert_close(y, torch.fft.fft(torch.from_numpy(x)).numpy())


@pytest.mark.parametrize("op_type, x, params, error, message", [
    ("torch.fft.rfft", np.ones(4, np.complex64), {}, OperatorError, "takes a real input"),
    ("torch.fft.fft", np.ones(4, np.float32), {"norm": "half"}, OperatorError,
     "expected one of backward, forward, ortho"),
    ("torch.fft.fftn", np.ones((2, 4), np.float32), {"s": [2, 4], "dim": [0]}, OperatorError,
     "the same length"),
    ("torch.fft.fft", np.ones((2, 4), np.float32), {"dim": 2}, ShapeError, "out of range"),
    ("torch.fft.fft2", np.ones((2, 4), np.float32), {"dim": [1, -1]}, OperatorError,
     "the same dim twice"),
    ("torch.fft.fft", np.ones(4, np.float32), {"n": 0}, ShapeError, "expected at least 1"),
    ("torch.fft.irfft", np.ones(1, np.complex64), {}, ShapeError, "expected at least 1"),
    ("torch.fft.fft", np.ones(4, np.float16), {}, OperatorError, "complex32"),
    ("torch.fft.fft", np.ones((), np.float32), {}, ShapeError, "at least one dim"),
])
def test_bad_parameters_and_inputs(backend, op_type, x, params, error, message):
    with pytest.raises(error, match=message):
        run_operator(op_type, [x], params=params, backend=backend)


class FFTs(torch.nn.Module):
    """All 18 types, as pnnx's test_torch_fft_*.py use them."""

    def forward(self, x, c):
        f = torch.fft
        return (f.fft(x, dim=1, norm="ortho"), f.ifft(c, n=7), f.fft2(c, s=(5, 6)),
                f.ifft2(x, dim=(0, 2)), f.fftn(x), f.ifftn(c, s=(3, 4), dim=(1, 2), norm="forward"),
                f.rfft(x), f.irfft(c, n=10), f.rfft2(x), f.irfft2(c), f.rfftn(x, dim=(0, 1)),
                f.irfftn(c, s=(4, 6), dim=(1, 2)), f.hfft(c), f.ihfft(x),
                f.hfft2(c, norm="forward"), f.ihfft2(x), f.hfftn(c), f.ihfftn(x, dim=(1,)),
                # complex tensors from one operator to the next, on the device
                torch.real(f.ifft(f.fft2(c))), torch.view_as_real(f.ifftn(f.rfft(x), dim=(0,))))


@pytest.mark.slow
def test_fft_pnnx_export(backend, rng, export_model):
    x = torch.from_numpy(signal(rng, (3, 5, 8), False))
    c = torch.from_numpy(signal(rng, (3, 5, 8), True))
    module = FFTs().eval()
    graph = kuiper.load(export_model("ffts", module, (x, c)), backend=backend)
    assert not graph.fallbacks
    assert len({op.type for op in graph.operators} & set(FFT_TYPES)) == 18
    for got, want in zip(graph.forward(x.numpy(), c.numpy()), module(x, c)):
        assert_close(got, want.resolve_conj().numpy())
