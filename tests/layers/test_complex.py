"""torch.complex / real / imag / view_as_real / view_as_complex against torch, on both backends,
and complex tensors flowing between operators (a complex literal in a pnnx.Expression too)."""

import tempfile

import numpy as np
import pytest
import torch

import kuiper
from kuiper import OperatorError, ShapeError
from kuiper.testing import assert_close, run_operator, write_operator_model


def complex_array(rng, shape, dtype=np.complex64):
    return np.asarray(rng.standard_normal(shape) + 1j * rng.standard_normal(shape), dtype)


@pytest.mark.parametrize("real_shape, imag_shape", [((3, 13, 5), (3, 13, 5)), ((7, 1), (4,)),
                                                    ((), (2, 3)), ((1, 5, 1, 3), (2, 1, 7, 1))])
def test_complex_matches_torch(backend, rng, real_shape, imag_shape):
    re = rng.standard_normal(real_shape).astype(np.float32)
    im = rng.standard_normal(imag_shape).astype(np.float32)
    (z,) = run_operator("torch.complex", [re, im], backend=backend)
    assert z.dtype == np.complex64
    assert_close(z, torch.complex(torch.from_numpy(re), torch.from_numpy(im)).numpy())


@pytest.mark.parametrize("op_type, fn", [("torch.real", torch.real), ("torch.imag", torch.imag)])
@pytest.mark.parametrize("shape", [(3, 13, 5), (17,), ()])
def test_real_and_imag_match_torch(backend, rng, op_type, fn, shape):
    z = complex_array(rng, shape)
    (y,) = run_operator(op_type, [z], backend=backend)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, fn(torch.from_numpy(z)).numpy())


def test_real_of_a_real_tensor_is_itself(backend, rng):
    x = rng.standard_normal((4, 9)).astype(np.float32)
    (y,) = run_operator("torch.real", [x], backend=backend)
    np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize("shape", [(1, 3, 16), (2, 5, 9, 11), (7,)])
def test_view_as_real_and_back(backend, rng, shape):
    z = complex_array(rng, shape)
    (r,) = run_operator("torch.view_as_real", [z], backend=backend)
    np.testing.assert_array_equal(r, torch.view_as_real(torch.from_numpy(z)).numpy())
    (back,) = run_operator("torch.view_as_complex", [r], backend=backend)
    np.testing.assert_array_equal(back, z)


def test_complex128_runs_on_the_host_on_opencl(backend, rng):
    """float64 parts: the OpenCL kernels are float32 only, so the CPU layer runs, listed."""
    re, im = rng.standard_normal((3, 5)), rng.standard_normal((3, 5))
    (z,) = run_operator("torch.complex", [re, im], backend=backend, allow_fallback=True)
    assert z.dtype == np.complex128
    np.testing.assert_array_equal(z, re + 1j * im)
    (y,) = run_operator("torch.imag", [z], backend=backend, allow_fallback=True)
    np.testing.assert_array_equal(y, im)


@pytest.mark.parametrize("op_type, inputs, error, message", [
    ("torch.complex", [np.ones(3, np.float32), np.ones(3)], OperatorError, "the same dtype"),
    ("torch.complex", [np.ones(3, np.int64), np.ones(3, np.int64)], OperatorError,
     "expected float32 or float64"),
    ("torch.complex", [np.ones(3, np.float32), np.ones(4, np.float32)], ShapeError,
     "do not broadcast"),
    ("torch.imag", [np.ones(3, np.float32)], OperatorError, "expected a complex tensor"),
    ("torch.view_as_real", [np.ones(3, np.float32)], OperatorError, "expected a complex"),
    ("torch.view_as_complex", [np.ones((3, 3), np.float32)], ShapeError, "last dim of size 2"),
])
def test_bad_inputs(backend, op_type, inputs, error, message):
    with pytest.raises(error, match=message):
        run_operator(op_type, inputs, backend=backend)


@pytest.mark.parametrize("expr, reference", [
    ("sub(@0,0.000000e+00+4.000000e+00j)", lambda z: z - 4j),
    ("mul(@0,sub(1.200000e+00-9.000000e-01j,@0))", lambda z: z * (1.2 - 0.9j - z)),
])
def test_complex_expression_runs_on_the_host_on_opencl(backend, rng, expr, reference):
    """The expression kernel generator has no complex arithmetic: on OpenCL the NumPy evaluator
    computes it, and the operator is listed in graph.fallbacks with the reason."""
    z = complex_array(rng, (3, 15))
    with tempfile.TemporaryDirectory() as folder:
        graph = kuiper.load(write_operator_model(folder, "pnnx.Expression", [z],
                                                 params={"expr": expr}), backend=backend)
        (y,) = graph.forward(z)
    assert y.dtype == np.complex64
    assert_close(y, reference(torch.from_numpy(z)).numpy())
    if backend == "opencl":
        assert [op.name for op in graph.fallbacks] == ["op0"]
        assert "complex" in graph.fallbacks[0].layer.fallback_reason


class ComplexOps(torch.nn.Module):
    """pnnx's test_torch_complex / test_ir_complex, in one model."""

    def forward(self, x, y, c):
        z = torch.complex(x, y)
        w = torch.view_as_complex(torch.stack((x, y), -1))
        return (z * 2, torch.real(c), torch.imag(c), torch.view_as_real(c), w - 4j,
                c * (1.2 - 0.9j - z))


@pytest.mark.slow
def test_complex_pnnx_export(backend, rng, export_model):
    x, y = (torch.from_numpy(rng.standard_normal((3, 5, 8)).astype(np.float32)) for _ in "xy")
    c = torch.from_numpy(complex_array(rng, (3, 5, 8)))
    module = ComplexOps().eval()
    graph = kuiper.load(export_model("complex_ops", module, (x, y, c)), backend=backend)
    # Only the expressions with complex values may run on the host (the expression kernel
    # generator has no complex arithmetic); every other operator has a kernel.
    assert {op.type for op in graph.fallbacks} <= {"pnnx.Expression"}
    if backend == "opencl":
        assert graph.fallbacks, "the complex expressions are listed as fallbacks"
    for got, want in zip(graph.forward(x.numpy(), y.numpy(), c.numpy()), module(x, y, c)):
        assert_close(got, want.numpy())
