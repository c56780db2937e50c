"""Linear (nn.Linear, F.linear) against torch on both backends: inputs of rank 1 to 4, with and
without bias, sizes on both sides of the GEMM tile (64) and weights as attributes or inputs."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kuiper
from kuiper.layers.opencl_gemm.parameter_sets import GEMV_MAX_ROWS
from kuiper.testing import assert_close, run_operator, write_operator_model
from tests.conftest import opencl_available


@pytest.mark.parametrize("shape", [(3, 13), (2, 5, 13), (2, 3, 4, 13), (13,), (1, 13)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_any_leading_dims(backend, rng, shape, bias):
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((7, 13)).astype(np.float32)
    b = rng.standard_normal(7).astype(np.float32)
    weights = {"weight": w, "bias": b} if bias else {"weight": w}
    (y,) = run_operator("nn.Linear", [x],
                        params={"in_features": 13, "out_features": 7, "bias": bias},
                        weights=weights, backend=backend)
    expected = F.linear(torch.from_numpy(x), torch.from_numpy(w),
                        torch.from_numpy(b) if bias else None)
    assert_close(y, expected.numpy())


@pytest.mark.parametrize("gemm", ["gemm_tiled", "gemm_blocked"])
@pytest.mark.parametrize("rows,n_in,n_out", [
    (70, 33, 130),     # remainders on M, N and K
    (2, 96, 200),      # a classifier head
    (64, 16, 64),      # exact tiles
    (5, 1, 1),         # sizes 1
])
def test_linear_gemm_edges(backend, rng, monkeypatch, gemm, rows, n_in, n_out):
    """Both GEMM kernels of gemm.h (the device picks one; here we force each in turn)."""
    monkeypatch.setattr("kuiper.layers.opencl_gemm.parameter_sets.FORCE_GEMM", gemm)
    x = rng.standard_normal((rows, n_in)).astype(np.float32)
    w = rng.standard_normal((n_out, n_in)).astype(np.float32)
    b = rng.standard_normal(n_out).astype(np.float32)
    (y,) = run_operator("nn.Linear", [x],
                        params={"in_features": n_in, "out_features": n_out, "bias": True},
                        weights={"weight": w, "bias": b}, backend=backend)
    assert_close(y, F.linear(*map(torch.from_numpy, (x, w, b))).numpy())


@pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
@pytest.mark.parametrize("rows", [1, GEMV_MAX_ROWS, GEMV_MAX_ROWS + 1, 3136])
@pytest.mark.parametrize("functional", [False, True])
def test_linear_weight_layout(tmp_path, rng, rows, functional):
    """The weight is stored (in, out) at bind time for more than GEMV_MAX_ROWS rows (the
    GEMM families load rows of B as vectors), and read as PyTorch's (out, in) otherwise: for a
    few rows (gemv) and for F.linear, whose weight is only known at run time. `kuiper tune`
    keys the problem by the layout the layer chose (gemm_problem)."""
    x = rng.standard_normal((rows, 96)).astype(np.float32)
    w = rng.standard_normal((40, 96)).astype(np.float32)
    b = rng.standard_normal(40).astype(np.float32)
    if functional:
        graph = kuiper.load(write_operator_model(tmp_path, "F.linear", [x, w, b]),
                            backend="opencl")
        y = graph(x, w, b)
    else:
        graph = kuiper.load(write_operator_model(
            tmp_path, "nn.Linear", [x], params={"in_features": 96, "out_features": 40,
                                                "bias": True},
            weights={"weight": w, "bias": b}), backend="opencl")
        y = graph(x)
    op = next(op for op in graph.order if op.type in ("nn.Linear", "F.linear"))
    specs = [[graph.specs[o.name] for o in ops] for ops in (op.inputs, op.outputs)]
    stored_transposed = not functional and rows > GEMV_MAX_ROWS
    assert op.layer.gemm_problem(*specs)[5] == (not stored_transposed)
    assert_close(y, F.linear(*map(torch.from_numpy, (x, w, b))).numpy())


@pytest.mark.parametrize("shape", [(4, 9), (2, 3, 9)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_f_linear_weight_as_input(backend, rng, shape, with_bias):
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((11, 9)).astype(np.float32)
    b = rng.standard_normal(11).astype(np.float32)
    inputs = [x, w, b] if with_bias else [x, w]
    (y,) = run_operator("F.linear", inputs, backend=backend)
    assert_close(y, F.linear(*map(torch.from_numpy, inputs)).numpy())


def test_f_linear_weight_as_attribute(backend, rng):
    x = rng.standard_normal((3, 2, 6)).astype(np.float32)
    w = rng.standard_normal((4, 6)).astype(np.float32)
    (y,) = run_operator("F.linear", [x], weights={"weight": w}, backend=backend)
    assert_close(y, F.linear(torch.from_numpy(x), torch.from_numpy(w)).numpy())


@pytest.mark.parametrize("params,message", [
    ({"in_features": 12, "out_features": 7, "bias": True}, r"expected \(7, 12\)"),
    ({"in_features": 13, "out_features": 7}, "weight '@bias' is missing"),  # bias defaults True
    ({"in_features": 13}, "'out_features' is missing"),
])
def test_linear_bad_parameters(rng, params, message):
    x = rng.standard_normal((2, 13)).astype(np.float32)
    w = rng.standard_normal((7, 13)).astype(np.float32)
    with pytest.raises(kuiper.OperatorError, match=message):
        run_operator("nn.Linear", [x], params=params, weights={"weight": w})


def test_linear_bad_shapes(rng):
    x = rng.standard_normal((2, 5)).astype(np.float32)
    w = rng.standard_normal((3, 6)).astype(np.float32)
    with pytest.raises(kuiper.ShapeError, match="in_features=6"):
        run_operator("F.linear", [x, w])
    with pytest.raises(kuiper.ShapeError, match=r"bias should have shape \(3,\)"):
        run_operator("F.linear", [np.ones((2, 6), np.float32), w, np.ones(4, np.float32)])
