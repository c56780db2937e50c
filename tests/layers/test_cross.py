"""torch.cross against torch, on both backends (with and without dim, broadcasting)."""

import numpy as np
import pytest
import torch

import kuiper
from kuiper import ShapeError
from kuiper.testing import assert_close, run_operator


@pytest.mark.parametrize("a_shape, b_shape, dim", [((3, 3), (3, 3), 1), ((3, 3), (3, 3), 0),
                                                   ((5, 3), (5, 3), -1), ((4, 3, 7), (3, 1), 1),
                                                   ((2, 5, 3), (5, 3), None),
                                                   ((3,), (3,), 0)])
def test_cross_matches_torch(backend, rng, a_shape, b_shape, dim):
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    params = {} if dim is None else {"dim": dim}
    (y,) = run_operator("torch.cross", [a, b], params=params, backend=backend)
    ta, tb = torch.broadcast_tensors(torch.from_numpy(a), torch.from_numpy(b))
    want = torch.linalg.cross(ta, tb, dim=-1 if dim is None else dim)
    if dim is None:  # torch.cross's old default: the first dim of size 3
        first = [d for d, s in enumerate(ta.shape) if s == 3][0]
        want = torch.linalg.cross(ta, tb, dim=first)
    assert_close(y, want.numpy())


def test_cross_needs_size_3(backend):
    with pytest.raises(ShapeError, match="should have size 3"):
        run_operator("torch.cross", [np.ones((4, 2), np.float32)] * 2, params={"dim": 1},
                     backend=backend)
    with pytest.raises(ShapeError, match="no dim of size 3"):
        run_operator("torch.cross", [np.ones((4, 2), np.float32)] * 2, backend=backend)


class Crosses(torch.nn.Module):
    """pnnx's test_torch_cross."""

    def forward(self, x, y, z, w):
        return torch.cross(x, y, dim=0), torch.cross(x, y, dim=1), torch.cross(z, w, dim=-1)


@pytest.mark.slow
def test_cross_pnnx_export(backend, rng, export_model):
    inputs = [torch.from_numpy(rng.random(s).astype(np.float32))
              for s in [(3, 3), (3, 3), (5, 3), (5, 3)]]
    module = Crosses().eval()
    graph = kuiper.load(export_model("crosses", module, inputs), backend=backend)
    assert not graph.fallbacks
    for got, want in zip(graph.forward(*[t.numpy() for t in inputs]), module(*inputs)):
        assert_close(got, want.numpy())
