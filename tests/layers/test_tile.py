"""torch.tile against torch, on both backends (fewer dims than the input, more, the same)."""

import numpy as np
import pytest
import torch

import kuiper
from kuiper import OperatorError
from kuiper.testing import assert_close, run_operator


@pytest.mark.parametrize("shape, dims", [((1, 3, 16), (1, 2, 3)), ((2, 6, 48), (2, 3, 4)),
                                         ((1, 5, 9, 11), (1, 2, 1, 4)), ((2, 3, 5), (2,)),
                                         ((7,), (3, 1, 2)), ((4, 5), (0, 2))])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_tile_matches_torch(backend, rng, shape, dims, dtype):
    x = (rng.standard_normal(shape) * 10).astype(dtype)
    (y,) = run_operator("torch.tile", [x], params={"dims": dims}, backend=backend)
    assert_close(y, torch.tile(torch.from_numpy(x), dims).numpy())


def test_tile_refuses_negative_dims(backend):
    with pytest.raises(OperatorError, match="must not be negative"):
        run_operator("torch.tile", [np.ones((2, 3), np.float32)], params={"dims": (1, -2)},
                     backend=backend)


class Tiles(torch.nn.Module):
    """pnnx's test_torch_tile."""

    def forward(self, x, y, z):
        x = torch.tile(x, (1, 2, 3))
        x = torch.tile(x, (2, 3, 4))
        y = torch.tile(y, (1, 2, 1, 4))
        y = torch.tile(y, (3, 4, 5, 1))
        z = torch.tile(z, (1, 2, 3, 1, 5))
        z = torch.tile(z, (2, 3, 3, 1, 1))
        return x, y, z


@pytest.mark.slow
def test_tile_pnnx_export(backend, rng, export_model):
    inputs = [torch.from_numpy(rng.random(s).astype(np.float32))
              for s in [(1, 3, 16), (1, 5, 9, 11), (3, 2, 5, 3, 4)]]
    module = Tiles().eval()
    graph = kuiper.load(export_model("tiles", module, inputs), backend=backend)
    assert not graph.fallbacks
    for got, want in zip(graph.forward(*[t.numpy() for t in inputs]), module(*inputs)):
        assert_close(got, want.numpy())
