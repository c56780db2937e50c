"""Bitwise and logical operators against torch, on both backends."""

import numpy as np
import pytest
import torch

import kuiper
from kuiper import OperatorError
from kuiper.testing import run_operator

BINARY = ["torch.bitwise_and", "torch.bitwise_or", "torch.bitwise_xor",
          "torch.bitwise_left_shift", "torch.bitwise_right_shift"]
LOGICAL = ["torch.logical_and", "torch.logical_or", "torch.logical_xor"]


def torch_op(op_type):
    return getattr(torch, op_type.split(".")[1])


def ints(rng, shape, dtype, low=-50, high=50):
    return rng.integers(low, high, size=shape).astype(dtype)


@pytest.mark.parametrize("op_type", BINARY)
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.int8])
@pytest.mark.parametrize("shapes", [((3, 17), (3, 17)), ((2, 5, 7), (5, 1)), ((13,), ())])
def test_bitwise_binary_matches_torch(backend, rng, op_type, dtype, shapes):
    low = 0 if dtype == np.uint8 else -50
    a = ints(rng, shapes[0], dtype, low)
    if op_type.endswith("shift"):  # counts in and out of [0, bits): PyTorch defines both
        b = rng.integers(-2, np.dtype(dtype).itemsize * 8 + 3, size=shapes[1]).astype(dtype)
        if dtype == np.uint8:
            b = np.asarray(np.abs(b.astype(np.int64)), dtype=dtype)
    else:
        b = ints(rng, shapes[1], dtype, low)
    (y,) = run_operator(op_type, [a, b], backend=backend)
    want = torch_op(op_type)(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    assert y.dtype == want.dtype
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("op_type", ["torch.bitwise_and", "torch.bitwise_or",
                                     "torch.bitwise_xor"])
def test_bitwise_on_bools_and_mixed_ints(backend, rng, op_type):
    a, b = rng.random((4, 9)) > 0.5, rng.random((4, 9)) > 0.5
    (y,) = run_operator(op_type, [a, b], backend=backend)
    np.testing.assert_array_equal(y, torch_op(op_type)(torch.from_numpy(a),
                                                       torch.from_numpy(b)).numpy())
    c, d = ints(rng, (4, 9), np.int32), ints(rng, (9,), np.int64)
    (y,) = run_operator(op_type, [c, d], backend=backend)
    want = torch_op(op_type)(torch.from_numpy(c), torch.from_numpy(d)).numpy()
    assert y.dtype == want.dtype == np.int64
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_])
def test_bitwise_not_matches_torch(backend, rng, dtype):
    a = ints(rng, (5, 11), dtype) if dtype != np.bool_ else rng.random((5, 11)) > 0.5
    (y,) = run_operator("torch.bitwise_not", [a], backend=backend)
    np.testing.assert_array_equal(y, torch.bitwise_not(torch.from_numpy(a)).numpy())


@pytest.mark.parametrize("op_type", LOGICAL)
@pytest.mark.parametrize("dtypes", [(np.bool_, np.bool_), (np.float32, np.int32),
                                    (np.int64, np.bool_)])
def test_logical_matches_torch(backend, rng, op_type, dtypes):
    a = (rng.integers(-1, 2, size=(3, 1, 7)) * 0.5).astype(dtypes[0])
    b = rng.integers(0, 2, size=(4, 7)).astype(dtypes[1])
    (y,) = run_operator(op_type, [a, b], backend=backend)
    want = torch_op(op_type)(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    assert y.dtype == np.bool_
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_logical_not_matches_torch(backend, rng, dtype):
    a = (rng.integers(-1, 2, size=(6, 13)) * 0.5).astype(dtype)
    (y,) = run_operator("torch.logical_not", [a], backend=backend)
    np.testing.assert_array_equal(y, torch.logical_not(torch.from_numpy(a)).numpy())


def test_scalar_other_parameter(backend, rng):
    a = ints(rng, (3, 10), np.int32)
    (y,) = run_operator("torch.bitwise_and", [a], params={"other": 6}, backend=backend)
    np.testing.assert_array_equal(y, torch.bitwise_and(torch.from_numpy(a), 6).numpy())
    (y,) = run_operator("torch.logical_or", [a], params={"other": 0}, backend=backend)
    np.testing.assert_array_equal(y, torch.logical_or(torch.from_numpy(a),
                                                      torch.tensor(0)).numpy())


def test_bitwise_refuses_floats(backend):
    x = np.ones((2, 3), np.float32)
    with pytest.raises(OperatorError, match="torch.bitwise_and takes integer tensors"):
        run_operator("torch.bitwise_and", [x, x], backend=backend)
    with pytest.raises(OperatorError, match="shift takes integer tensors, got bool"):
        b = np.ones((2, 3), bool)
        run_operator("torch.bitwise_left_shift", [b, b], backend=backend)


class Bits(torch.nn.Module):
    def forward(self, x, y):
        return (torch.bitwise_and(x, y), torch.bitwise_or(x, y), torch.bitwise_xor(x, y),
                torch.bitwise_not(x), torch.bitwise_left_shift(x, y),
                torch.bitwise_right_shift(x, y), torch.logical_and(x > 3, y > 3),
                torch.logical_or(x > 3, y), torch.logical_xor(x, y), torch.logical_not(x))


class Hardshrinks(torch.nn.Module):
    """Hardshrink, and pnnx's tests/onnx/test_torch_logical_* in one."""

    def forward(self, x):
        a, b = x > 0.1, x < 0.5
        return (torch.nn.functional.hardshrink(x, 0.22), torch.nn.Hardshrink()(x),
                torch.logical_and(a, b), torch.logical_xor(a, b), torch.logical_not(a))


@pytest.mark.slow
def test_bitwise_pnnx_export(backend, rng, export_model):
    x = torch.from_numpy(ints(rng, (3, 16), np.int32, 0, 40))
    y = torch.from_numpy(ints(rng, (3, 16), np.int32, 0, 6))
    module = Bits().eval()
    graph = kuiper.load(export_model("bits", module, (x, y)), backend=backend)
    assert not graph.fallbacks
    for got, want in zip(graph.forward(x.numpy(), y.numpy()), module(x, y)):
        np.testing.assert_array_equal(got, want.numpy())


@pytest.mark.slow
def test_hardshrink_through_onnx_is_logical_or(backend, rng, tmp_path):
    """pnnx's ONNX route writes Hardshrink as gt, lt, logical_or and where; logical_and, xor
    and not arrive as themselves."""
    pytest.importorskip("onnx", reason="the ONNX route needs the onnx package")
    from tests.models.onnx_export import export_with_onnx
    x = torch.from_numpy((rng.random((3, 16)) * 2 - 1).astype(np.float32))
    module = Hardshrinks().eval()
    param = export_with_onnx(tmp_path, module, (x,))
    text = param.read_text()
    assert all(f"torch.logical_{op}" in text for op in ("or", "and", "xor", "not"))
    graph = kuiper.load(param, backend=backend)
    assert not graph.fallbacks
    for got, want in zip(graph.forward(x.numpy()), module(x)):
        np.testing.assert_array_equal(got, want.numpy())
