"""GLU against torch along every dim, on both backends."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kuiper
from kuiper import ShapeError
from kuiper.testing import assert_close, run_operator


@pytest.mark.parametrize("op_type", ["nn.GLU", "F.glu"])
@pytest.mark.parametrize("shape, dim", [((2, 14, 5, 6), 1), ((2, 13, 5, 6), -1), ((2, 3, 4, 6), 2),
                                        ((4, 3, 5), 0), ((3, 26), 1), ((2,), 0),
                                        ((1, 2, 1, 1), -3)])
def test_glu_matches_torch(backend, rng, op_type, shape, dim):
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    x.reshape(-1)[:2] = [-100.0, 100.0]
    (y,) = run_operator(op_type, [x], params={"dim": dim}, backend=backend)
    assert_close(y, F.glu(torch.from_numpy(x), dim).numpy())


def test_glu_default_dim_is_last(backend, rng):
    x = rng.standard_normal((3, 5, 8)).astype(np.float32)
    (y,) = run_operator("nn.GLU", [x], backend=backend)
    assert_close(y, F.glu(torch.from_numpy(x)).numpy())


@pytest.mark.parametrize("shape, dim, message", [
    ((2, 5, 4), 1, "size must be even"),
    ((2, 4), 2, "dim=2 is out of range"),
])
def test_glu_bad_shapes(backend, shape, dim, message):
    with pytest.raises(ShapeError, match=message):
        run_operator("F.glu", [np.ones(shape, np.float32)], params={"dim": dim}, backend=backend)


class Glus(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.glu = torch.nn.GLU(1)

    def forward(self, x):
        return self.glu(x), F.glu(x, -1), F.glu(x, 2)


@pytest.mark.slow
def test_glu_pnnx_export(backend, rng, export_model):
    x = torch.from_numpy(rng.standard_normal((2, 6, 4, 8)).astype(np.float32))
    module = Glus().eval()
    graph = kuiper.load(export_model("glus", module, (x,)), backend=backend)
    assert not graph.fallbacks
    for got, want in zip(graph.forward(x.numpy()), module(x)):
        assert_close(got, want.numpy())
