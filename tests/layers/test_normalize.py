"""F.normalize against torch on both backends."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from kuiper import OperatorError
from kuiper.testing import assert_close, run_operator

T = torch.from_numpy


@pytest.mark.parametrize("p", [2.0, 1, 3.0, 0.5, "inf"])
@pytest.mark.parametrize("dim", [1, -1, 0, 2])
def test_normalize_matches_torch(backend, rng, p, dim):
    x = rng.standard_normal((2, 13, 3, 5)).astype(np.float32)
    (y,) = run_operator("F.normalize", [x], params={"p": p, "dim": dim, "eps": 1e-12},
                        backend=backend)
    assert_close(y, F.normalize(T(x), p=float(p), dim=dim).numpy())


@pytest.mark.parametrize("eps", [1e-12, 1e-3, 10.0])
def test_eps_bounds_the_denominator(backend, rng, eps):
    x = rng.standard_normal((3, 7)).astype(np.float32)
    x[1] = 0.0          # a zero vector: the result is 0, not NaN
    x[2] *= 1e-4        # a tiny vector: eps decides when it is large enough
    (y,) = run_operator("F.normalize", [x], params={"p": 2.0, "dim": 1, "eps": eps},
                        backend=backend)
    assert_close(y, F.normalize(T(x), dim=1, eps=eps).numpy())


def test_defaults_and_long_vectors(backend, rng):
    x = rng.standard_normal((2, 600)).astype(np.float32)
    (y,) = run_operator("F.normalize", [x], backend=backend)   # p=2, dim=1, eps=1e-12
    assert_close(y, F.normalize(T(x)).numpy())


def test_from_a_pnnx_export(backend, rng, export_model):
    class Norms(torch.nn.Module):
        def forward(self, x):
            return F.normalize(x), F.normalize(x, p=1, dim=-1, eps=1e-3)

    import kuiper
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    path = export_model("normalize_norms", Norms(), [T(x)])
    outputs = kuiper.load(path, backend=backend).forward(x)
    for actual, expected in zip(outputs, Norms()(T(x))):
        assert_close(actual, expected.numpy())


def test_bad_params_raise(rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    with pytest.raises(OperatorError, match="eps"):
        run_operator("F.normalize", [x], params={"eps": -1.0})
    with pytest.raises(OperatorError, match="out of range"):
        run_operator("F.normalize", [x], params={"dim": 2})
    with pytest.raises(OperatorError, match="'p' should be a number"):
        run_operator("F.normalize", [x], params={"p": "two"})
