"""torch.lgamma and torch.positive against torch, on both backends."""

import numpy as np
import pytest
import torch

import kuiper
from kuiper import OperatorError
from kuiper.testing import assert_close, run_operator


@pytest.mark.parametrize("shape", [(6, 13), (2, 3, 17), (1,)])
def test_lgamma_matches_torch(backend, rng, shape):
    x = (rng.standard_normal(shape) * 6).astype(np.float32)
    x.reshape(-1)[:1] = 0.5
    (y,) = run_operator("torch.lgamma", [x], backend=backend)
    assert_close(y, torch.lgamma(torch.from_numpy(x)).numpy())


def test_lgamma_special_values(backend):
    """Poles (0, negative integers) are +inf; large and tiny arguments stay accurate."""
    x = np.array([0.0, -1.0, -7.0, 1.0, 2.0, 1e-6, 30.5, 1000.0, -2.5, np.inf, np.nan],
                 np.float32)
    (y,) = run_operator("torch.lgamma", [x], backend=backend)
    want = torch.lgamma(torch.from_numpy(x)).numpy()
    np.testing.assert_array_equal(np.isinf(y), np.isinf(want))
    np.testing.assert_array_equal(np.isnan(y), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(y[finite], want[finite], rtol=2e-6, atol=2e-6)


def test_lgamma_refuses_integers(backend):
    with pytest.raises(OperatorError, match="lgamma takes a float tensor, got int64"):
        run_operator("torch.lgamma", [np.ones((2, 3), np.int64)], backend=backend)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int32])
def test_positive_is_identity(backend, rng, dtype):
    x = (rng.standard_normal((3, 7, 5)) * 9).astype(dtype)
    (y,) = run_operator("torch.positive", [x], backend=backend)
    np.testing.assert_array_equal(y, torch.positive(torch.from_numpy(x)).numpy())


def test_positive_refuses_bools(backend):
    with pytest.raises(OperatorError, match="does not take a bool tensor"):
        run_operator("torch.positive", [np.ones(3, bool)], backend=backend)


class Special(torch.nn.Module):
    def forward(self, x):
        return torch.lgamma(x), torch.positive(x) * 2, x.lgamma()


@pytest.mark.slow
def test_special_pnnx_export(backend, rng, export_model):
    x = torch.from_numpy((rng.standard_normal((3, 16)) * 4).astype(np.float32))
    module = Special().eval()
    graph = kuiper.load(export_model("special", module, (x,)), backend=backend)
    assert not graph.fallbacks
    for got, want in zip(graph.forward(x.numpy()), module(x)):
        assert_close(got, want.numpy())
