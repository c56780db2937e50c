"""torch.diag against torch, on both backends: vector -> matrix and matrix -> vector, with
positive and negative diagonal offsets."""

import numpy as np
import pytest
import torch

import kuiper
from kuiper import ShapeError
from kuiper.testing import assert_close, run_operator


@pytest.mark.parametrize("shape", [(7,), (1,), (5, 5), (4, 8), (9, 3)])
@pytest.mark.parametrize("diagonal", [0, 1, -1, 3, -4, 9])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_diag_matches_torch(backend, rng, shape, diagonal, dtype):
    x = (rng.standard_normal(shape) * 10).astype(dtype)
    (y,) = run_operator("torch.diag", [x], params={"diagonal": diagonal}, backend=backend)
    assert_close(y, torch.diag(torch.from_numpy(x), diagonal).numpy())


def test_diag_default_is_main_diagonal(backend, rng):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    (y,) = run_operator("torch.diag", [x], backend=backend)
    assert_close(y, np.diag(x))


def test_diag_needs_1d_or_2d(backend):
    with pytest.raises(ShapeError, match="1-D or 2-D input"):
        run_operator("torch.diag", [np.ones((2, 3, 4), np.float32)], backend=backend)


class Diags(torch.nn.Module):
    """pnnx's test_torch_diag."""

    def forward(self, x, y, z):
        return torch.diag(x, -1), torch.diag(y), torch.diag(z, 3)


@pytest.mark.slow
def test_diag_pnnx_export(backend, rng, export_model):
    inputs = [torch.from_numpy(rng.random(s).astype(np.float32)) for s in [(7,), (5, 5), (4, 8)]]
    module = Diags().eval()
    graph = kuiper.load(export_model("diags", module, inputs), backend=backend)
    assert not graph.fallbacks
    for got, want in zip(graph.forward(*[t.numpy() for t in inputs]), module(*inputs)):
        assert_close(got, want.numpy())
