"""Tensor.to / type_as casts and the copies (contiguous, clone) vs torch, every dtype pair a
model produces (float, long, int, bool, double, and the small integer types)."""

import numpy as np
import pytest
import torch

import kuiper
from kuiper.testing import run_operator

TORCH = {"torch.float": torch.float32, "torch.long": torch.int64, "torch.int": torch.int32,
         "torch.bool": torch.bool, "torch.double": torch.float64, "torch.int8": torch.int8,
         "torch.uint8": torch.uint8, "torch.int16": torch.int16, "torch.int64": torch.int64,
         "torch.float32": torch.float32}


def _source(rng, dtype):
    """Values every cast keeps well defined: in range of int8/uint8, with exact zeros and
    negative fractions (float -> int truncates toward zero)."""
    x = rng.uniform(-100, 100, (3, 13, 5)) * (rng.random((3, 13, 5)) < 0.8)
    if dtype == np.bool_:
        return x > 0
    return x.astype(dtype)


def _check(y, want: torch.Tensor):
    want = want.numpy()
    assert y.dtype == want.dtype, (y.dtype, want.dtype)
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("dtype", ["torch.long", "torch.int", "torch.bool", "torch.double",
                                   "torch.int8", "torch.int16", "torch.float32", "torch.int64"])
def test_float_to(backend, rng, dtype):
    x = _source(rng, np.float32)
    (y,) = run_operator("Tensor.to", [x], params={"dtype": dtype, "copy": False},
                        backend=backend)
    _check(y, torch.from_numpy(x).to(TORCH[dtype]))


@pytest.mark.parametrize("src", [np.int64, np.int32, np.bool_, np.float64, np.uint8])
@pytest.mark.parametrize("dtype", ["torch.float", "torch.long", "torch.bool"])
def test_cast_to(backend, rng, src, dtype):
    x = _source(rng, src)
    if src == np.uint8:
        x = np.abs(_source(rng, np.float32)).astype(np.uint8)
    (y,) = run_operator("Tensor.to", [x], params={"dtype": dtype, "copy": True},
                        backend=backend)
    _check(y, torch.from_numpy(x).to(TORCH[dtype]))


@pytest.mark.parametrize("op_type", ["Tensor.contiguous", "torch.clone"])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_copies(backend, rng, op_type, dtype):
    x = _source(rng, dtype)
    (y,) = run_operator(op_type, [x], backend=backend)
    _check(y, torch.from_numpy(x).clone())


def test_to_same_dtype(backend, rng):
    x = _source(rng, np.float32)
    (y,) = run_operator("Tensor.to", [x], params={"dtype": "torch.float", "copy": False},
                        backend=backend)
    _check(y, torch.from_numpy(x))


@pytest.mark.parametrize("op_type", ["Tensor.type_as", "Tensor.to"])
@pytest.mark.parametrize("other_dtype", [np.int64, np.float32, np.bool_])
def test_type_as(backend, rng, op_type, other_dtype):
    x = _source(rng, np.float32)
    other = _source(rng, other_dtype)
    (y,) = run_operator(op_type, [x, other], backend=backend)
    _check(y, torch.from_numpy(x).type_as(torch.from_numpy(other)))


def test_to_bad_dtype(backend):
    with pytest.raises(kuiper.OperatorError, match="dtype=torch.complex64 is not supported"):
        run_operator("Tensor.to", [np.zeros(3, np.float32)],
                     params={"dtype": "torch.complex64"}, backend=backend)


def test_to_half(backend, rng):
    """pnnx drops .half() from exports; a hand-written one works on the CPU and is refused
    with a clear message on OpenCL (no portable half arithmetic there)."""
    x = _source(rng, np.float32)
    if backend == "opencl":
        with pytest.raises(kuiper.OperatorError, match="cast from float32 to float16"):
            run_operator("Tensor.to", [x], params={"dtype": "torch.half"}, backend=backend)
    else:
        (y,) = run_operator("Tensor.to", [x], params={"dtype": "torch.half"}, backend=backend)
        _check(y, torch.from_numpy(x).half())


class _Casts(torch.nn.Module):
    def forward(self, x):
        return x.to(torch.long), x.int(), (x > 0).to(torch.float), x.to(torch.bool), \
            torch.clone(x), x.type_as(x.long()), x.double()


def test_real_export(backend, rng, export_model):
    path = export_model("to_casts", _Casts(), torch.zeros(2, 3, 4))
    graph = kuiper.load(path, backend=backend)
    x = (rng.standard_normal((2, 3, 4)) * 10).astype(np.float32)
    with torch.no_grad():
        want = _Casts()(torch.from_numpy(x))
    got = graph.forward(x)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        _check(g, w)
