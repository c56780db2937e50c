"""torch.cumsum / torch.cumprod against torch on both backends."""

import numpy as np
import pytest
import torch

from kuiper import OperatorError
from kuiper.testing import assert_close, run_operator

T = torch.from_numpy


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
@pytest.mark.parametrize("dim", [0, 1, -1, 2])
def test_float(backend, rng, op, dim):
    x = rng.uniform(0.6, 1.4, (2, 13, 3, 7)).astype(np.float32)
    if op == "cumsum":
        x -= 1.0
    (y,) = run_operator(f"torch.{op}", [x], params={"dim": dim}, backend=backend)
    assert y.dtype == np.float32
    assert_close(y, getattr(torch, op)(T(x), dim).numpy())


@pytest.mark.parametrize("dtype", [np.bool_, np.int32, np.int64])
def test_integers_accumulate_in_int64(backend, rng, dtype):
    x = rng.integers(-2, 3, (3, 17)).astype(dtype)
    for op in ("cumsum", "cumprod"):
        (y,) = run_operator(f"torch.{op}", [x], params={"dim": 1}, backend=backend)
        expected = getattr(torch, op)(T(x), 1).numpy()
        assert y.dtype == expected.dtype == np.int64
        np.testing.assert_array_equal(y, expected)


def test_one_dim_and_long_lines(backend, rng):
    x = rng.standard_normal((301,)).astype(np.float32)
    (y,) = run_operator("torch.cumsum", [x], params={"dim": 0}, backend=backend)
    assert_close(y, torch.cumsum(T(x), 0).numpy())


def test_from_a_pnnx_export(backend, rng, export_model):
    class Running(torch.nn.Module):
        def forward(self, x):
            return torch.cumsum(x, dim=1), torch.cumprod(x, dim=-1), torch.cumsum(x > 0.5, 2)

    import kuiper
    x = rng.random((2, 3, 4, 5)).astype(np.float32)
    path = export_model("cumsum_running", Running(), [T(x)])
    outputs = kuiper.load(path, backend=backend).forward(x)
    for actual, expected in zip(outputs, Running()(T(x))):
        assert actual.dtype == expected.numpy().dtype
        assert_close(actual, expected.numpy())


def test_bad_dim_raises(rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    with pytest.raises(OperatorError, match="out of range"):
        run_operator("torch.cumsum", [x], params={"dim": 2})
    with pytest.raises(OperatorError, match="'dim' is missing"):
        run_operator("torch.cumprod", [x])
