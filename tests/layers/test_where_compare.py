"""torch.where, torch.gt/lt/ge/le/eq/ne and Tensor.masked_fill against torch on both backends."""

import numpy as np
import pytest
import torch

import kuiper
from kuiper import OperatorError
from kuiper.testing import assert_close, run_operator

T = torch.from_numpy
COMPARISONS = ["gt", "lt", "ge", "le", "eq", "ne"]


def check(actual, expected):
    expected = expected.numpy()
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
    assert_close(actual, expected)


@pytest.mark.parametrize("c_shape, x_shape, y_shape", [
    ((2, 3, 4, 5), (2, 3, 4, 5), (2, 3, 4, 5)),   # no broadcasting (the flat kernel path)
    ((4, 5), (2, 3, 4, 5), (3, 1, 5)),             # all three broadcast
    ((2, 1, 1, 1), (1, 3, 1, 5), (4, 1)),
    ((), (7,), (1,)),
])
def test_where_three_tensors(backend, rng, c_shape, x_shape, y_shape):
    c = rng.standard_normal(c_shape) > 0
    x = rng.standard_normal(x_shape).astype(np.float32)
    y = rng.standard_normal(y_shape).astype(np.float32)
    (out,) = run_operator("torch.where", [c, x, y], backend=backend)
    check(out, torch.where(T(np.asarray(c)), T(x), T(y)))


@pytest.mark.parametrize("params", [{"other": 0.0}, {"input": 1.5}, {"other": "-inf"}])
def test_where_with_one_scalar(backend, rng, params):
    # pnnx moves a Python scalar into a parameter: `input=` (the x slot) or `other=` (y).
    c = rng.standard_normal((3, 13)) > 0
    x = rng.standard_normal((2, 3, 13)).astype(np.float32)
    (out,) = run_operator("torch.where", [c, x], params=params, backend=backend)
    value = float(next(iter(params.values())))
    expected = torch.where(T(c), value, T(x)) if "input" in params else \
        torch.where(T(c), T(x), value)
    check(out, expected)


def test_where_with_two_scalars(backend, rng):
    c = rng.standard_normal((2, 3, 5)) > 0
    (out,) = run_operator("torch.where", [c], params={"input": 1.0, "other": 0.0},
                          backend=backend)
    check(out, torch.where(T(c), 1.0, 0.0))


def test_where_on_integers_keeps_int64(backend, rng):
    c = rng.standard_normal((2, 3, 5)) > 0
    i = rng.integers(0, 9, (2, 3, 5))
    (out,) = run_operator("torch.where", [c, i], params={"other": 3}, backend=backend)
    check(out, torch.where(T(c), T(i), 3))
    (out,) = run_operator("torch.where", [c, i], params={"other": 0.5}, backend=backend)
    check(out, torch.where(T(c), T(i), 0.5))   # a float scalar makes the result float32


@pytest.mark.parametrize("op", COMPARISONS)
def test_compare_tensors(backend, rng, op):
    a = rng.integers(-2, 3, (2, 3, 4, 5)).astype(np.float32)   # small ints: many ties for eq
    b = rng.integers(-2, 3, (5,)).astype(np.float32)
    (out,) = run_operator(f"torch.{op}", [a, b], backend=backend)
    check(out, getattr(torch, op)(T(a), T(b)))


@pytest.mark.parametrize("op", COMPARISONS)
@pytest.mark.parametrize("other", [0.5, -1, 0.3])
def test_compare_with_scalar(backend, rng, op, other):
    a = np.concatenate([rng.standard_normal(11), [0.5, -1.0, 0.3]]).astype(np.float32)
    (out,) = run_operator(f"torch.{op}", [a], params={"other": other}, backend=backend)
    check(out, getattr(torch, op)(T(a), other))


@pytest.mark.parametrize("op", ["gt", "eq"])
def test_compare_integers(backend, rng, op):
    a = rng.integers(-3, 4, (3, 7))
    b = rng.integers(-3, 4, (3, 1)).astype(np.int32)
    (out,) = run_operator(f"torch.{op}", [a, b], backend=backend)
    check(out, getattr(torch, op)(T(a), T(b)))
    (out,) = run_operator(f"torch.{op}", [a], params={"other": 0.5}, backend=backend)
    check(out, getattr(torch, op)(T(a), 0.5))


@pytest.mark.parametrize("mask_shape", [(2, 3, 4, 5), (1, 3, 1, 5), (5,)])
@pytest.mark.parametrize("value", [-1e9, 2.0, "-inf", 0])
def test_masked_fill(backend, rng, mask_shape, value):
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    m = rng.standard_normal(mask_shape) > 0
    (out,) = run_operator("Tensor.masked_fill", [x, m], params={"value": value},
                          backend=backend)
    check(out, T(x).masked_fill(T(m), float(value)))


def test_masked_fill_with_tensor_value(backend, rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    m = rng.standard_normal((3, 4)) > 0
    v = np.array(7.5, dtype=np.float32)
    (out,) = run_operator("Tensor.masked_fill", [x, m, v], backend=backend)
    check(out, T(x).masked_fill(T(m), T(v)))


def test_where_and_compare_from_a_pnnx_export(backend, rng, export_model):
    class Select(torch.nn.Module):
        def forward(self, x, y):
            keep = x > 0.5
            return (torch.where(keep, x, y), torch.where(keep, 1.0, 0.0),
                    x.masked_fill(x < 0.2, float("-inf")), torch.le(x, y), torch.ne(x, 0.3))

    x = rng.random((2, 3, 4, 5)).astype(np.float32)
    y = rng.random((3, 1, 5)).astype(np.float32)
    module = Select()
    path = export_model("where_compare_select", module, [T(x), T(y)])
    outputs = kuiper.load(path, backend=backend).forward(x, y)
    expected = module(T(x), T(y))
    assert len(outputs) == len(expected)
    for actual, ref in zip(outputs, expected):
        check(actual, ref)


def test_where_with_only_a_condition_raises(rng):
    with pytest.raises(OperatorError, match="nonzero"):
        run_operator("torch.where", [rng.standard_normal((3,)) > 0])


def test_where_shapes_that_do_not_broadcast_raise(rng):
    c = rng.standard_normal((3,)) > 0
    x = rng.standard_normal((4,)).astype(np.float32)
    with pytest.raises(OperatorError, match="broadcast"):
        run_operator("torch.where", [c, x, x])


def test_masked_fill_mask_larger_than_input_raises(rng):
    x = rng.standard_normal((3,)).astype(np.float32)
    with pytest.raises(OperatorError, match="does not broadcast to the input"):
        run_operator("Tensor.masked_fill", [x, rng.standard_normal((2, 3)) > 0],
                     params={"value": 0.0})


def test_compare_bad_scalar_raises(rng):
    x = rng.standard_normal((3,)).astype(np.float32)
    with pytest.raises(OperatorError, match="'other' should be a number"):
        run_operator("torch.gt", [x], params={"other": "banana"})
