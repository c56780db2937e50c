"""F.affine_grid (2-D and 3-D, align_corners) against torch, on both backends."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kuiper
from kuiper import OperatorError, ShapeError
from kuiper.testing import assert_close, run_operator


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("size", [(3, 3, 24, 24), (2, 1, 7, 13), (1, 5, 1, 9), (2, 2, 6, 1),
                                  (2, 3, 10, 20, 30), (1, 2, 3, 1, 7), (3, 1, 1, 5, 4)])
def test_affine_grid_matches_torch(backend, rng, size, align_corners):
    dims = len(size) - 2
    theta = rng.standard_normal((size[0], dims, dims + 1)).astype(np.float32)
    (y,) = run_operator("F.affine_grid", [theta], backend=backend,
                        params={"size": size, "align_corners": align_corners})
    assert_close(y, F.affine_grid(torch.from_numpy(theta), size, align_corners).numpy())


def test_affine_grid_takes_the_batch_from_theta(backend, rng):
    """A model exported at one batch size runs at another: the batch of `size` is ignored."""
    theta = rng.standard_normal((5, 2, 3)).astype(np.float32)
    (y,) = run_operator("F.affine_grid", [theta], backend=backend,
                        params={"size": (1, 3, 4, 6), "align_corners": False})
    assert_close(y, F.affine_grid(torch.from_numpy(theta), (5, 3, 4, 6), False).numpy())


@pytest.mark.parametrize("params, theta, error, message", [
    ({"size": (1, 3, 4)}, (1, 2, 3), OperatorError, r"expected \(N, C, H, W\)"),
    ({"size": (1, 3, 0, 4)}, (1, 2, 3), OperatorError, "must be >= 1"),
    ({"size": (1, 3, 4, 4)}, (1, 3, 4), ShapeError, r"theta should be \(N, 2, 3\)"),
    ({"size": (1, 3, 2, 4, 4)}, (1, 2, 3), ShapeError, r"theta should be \(N, 3, 4\)"),
])
def test_affine_grid_bad_input(backend, params, theta, error, message):
    with pytest.raises(error, match=message):
        run_operator("F.affine_grid", [np.ones(theta, np.float32)], params=params,
                     backend=backend)


class Grids(torch.nn.Module):
    def forward(self, x, y):
        return (F.affine_grid(x, torch.Size((4, 3, 24, 24)), align_corners=False),
                F.affine_grid(x, torch.Size((4, 3, 7, 5)), align_corners=True),
                F.affine_grid(y, torch.Size((2, 3, 10, 20, 30)), align_corners=False))


@pytest.mark.slow
def test_affine_grid_pnnx_export(backend, rng, export_model):
    x = torch.from_numpy(rng.random((4, 2, 3)).astype(np.float32))
    y = torch.from_numpy(rng.random((2, 3, 4)).astype(np.float32))
    module = Grids().eval()
    graph = kuiper.load(export_model("affine_grids", module, (x, y)), backend=backend)
    assert not graph.fallbacks
    for got, want in zip(graph.forward(x.numpy(), y.numpy()), module(x, y)):
        assert_close(got, want.numpy())
