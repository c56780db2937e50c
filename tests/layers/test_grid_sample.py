"""F.grid_sample against torch: every mode x padding_mode x align_corners, 4-D and 5-D inputs,
on both backends."""

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kuiper
from kuiper import OperatorError, ShapeError
from kuiper.testing import assert_close, run_operator

COMBOS_4D = list(itertools.product(("bilinear", "nearest", "bicubic"),
                                   ("zeros", "border", "reflection"), (False, True)))
COMBOS_5D = [c for c in COMBOS_4D if c[0] != "bicubic"]  # torch has no 5-D bicubic


def _check(backend, x, grid, mode, padding_mode, align_corners):
    params = {"mode": mode, "padding_mode": padding_mode, "align_corners": align_corners}
    (y,) = run_operator("F.grid_sample", [x, grid], params=params, backend=backend)
    want = F.grid_sample(torch.from_numpy(x), torch.from_numpy(grid), mode, padding_mode,
                         align_corners)
    assert_close(y, want.numpy())


def _grid(rng, shape, reach):
    """Points in [-reach, reach]: beyond [-1, 1] they exercise the padding modes."""
    return ((rng.random(shape) * 2 - 1) * reach).astype(np.float32)


@pytest.mark.parametrize("mode, padding_mode, align_corners", COMBOS_4D)
@pytest.mark.parametrize("x_shape, grid_shape", [((1, 3, 12, 16), (1, 21, 27, 2)),
                                                 ((2, 5, 7, 6), (2, 4, 9, 2)),
                                                 ((1, 2, 1, 5), (1, 3, 3, 2))])
def test_grid_sample_4d_matches_torch(backend, rng, mode, padding_mode, align_corners,
                                      x_shape, grid_shape):
    x = rng.standard_normal(x_shape).astype(np.float32)
    _check(backend, x, _grid(rng, grid_shape, 1.6), mode, padding_mode, align_corners)


@pytest.mark.parametrize("mode, padding_mode, align_corners", COMBOS_5D)
@pytest.mark.parametrize("x_shape, grid_shape", [((1, 5, 10, 12, 16), (1, 10, 21, 27, 3)),
                                                 ((2, 3, 4, 5, 6), (2, 3, 2, 7, 3))])
def test_grid_sample_5d_matches_torch(backend, rng, mode, padding_mode, align_corners,
                                      x_shape, grid_shape):
    x = rng.standard_normal(x_shape).astype(np.float32)
    _check(backend, x, _grid(rng, grid_shape, 1.6), mode, padding_mode, align_corners)


@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_far_points_and_ties(backend, rng, padding_mode, align_corners):
    """Points far outside (several reflections) and exactly between two pixels (nearest
    rounds ties to the even index, as torch does)."""
    x = rng.standard_normal((2, 3, 6, 8)).astype(np.float32)
    grid = _grid(rng, (2, 5, 7, 2), 6.0)
    grid[0, 0, :, 0] = np.linspace(-1, 1, 7)  # x = 0 is a tie for W = 8 without align_corners
    grid[0, 1, :, :] = 0.0
    for mode in ("nearest", "bilinear", "bicubic"):
        _check(backend, x, grid, mode, padding_mode, align_corners)


@pytest.mark.parametrize("params, shapes, error, message", [
    ({"mode": "area"}, ((1, 2, 4, 4), (1, 3, 3, 2)), OperatorError,
     "expected one of bilinear, nearest, bicubic"),
    ({"padding_mode": "circular"}, ((1, 2, 4, 4), (1, 3, 3, 2)), OperatorError,
     "expected one of zeros, border, reflection"),
    ({}, ((1, 2, 4), (1, 3, 2)), ShapeError, "4-D"),
    ({}, ((1, 2, 4, 4), (1, 3, 3, 3)), ShapeError, "the grid should be"),
    ({}, ((2, 2, 4, 4), (1, 3, 3, 2)), ShapeError, "the grid should be"),
    ({"mode": "bicubic"}, ((1, 2, 4, 4, 4), (1, 3, 3, 3, 3)), ShapeError, "4-D inputs only"),
])
def test_grid_sample_bad_input(backend, params, shapes, error, message):
    x, grid = (np.zeros(s, np.float32) for s in shapes)
    with pytest.raises(error, match=message):
        run_operator("F.grid_sample", [x, grid], params=params, backend=backend)


class Samplers(torch.nn.Module):
    """pnnx's test_F_grid_sample chain (every combination), and a spatial transformer."""

    def forward(self, x, xg1, xg2, y, yg, theta):
        xg1, xg2, yg = xg1 * 2 - 1, xg2 * 2 - 1, yg * 2 - 1
        for i, (mode, padding, align) in enumerate(COMBOS_4D):
            x = F.grid_sample(x, xg1 if i % 2 == 0 else xg2, mode, padding, align)
        for mode, padding, align in COMBOS_5D:
            y = F.grid_sample(y, yg, mode, padding, align)
        grid = F.affine_grid(theta, torch.Size((1, 3, 12, 16)), align_corners=False)
        return x, y, F.grid_sample(x, grid, align_corners=False)


@pytest.mark.slow
def test_grid_sample_pnnx_export(backend, rng, export_model):
    shapes = [(1, 3, 12, 16), (1, 12, 16, 2), (1, 12, 16, 2), (1, 5, 6, 7, 8), (1, 6, 7, 8, 3),
              (1, 2, 3)]
    inputs = [torch.from_numpy(rng.random(s).astype(np.float32)) for s in shapes]
    module = Samplers().eval()
    path = export_model("grid_samples", module, inputs)
    types = [line.split()[0] for line in path.read_text().splitlines()[2:]]
    assert types.count("F.grid_sample") == len(COMBOS_4D) + len(COMBOS_5D) + 1
    graph = kuiper.load(path, backend=backend)
    assert not graph.fallbacks
    outs = graph.forward(*(t.numpy() for t in inputs))
    for got, want in zip(outs, module(*inputs)):
        assert_close(got, want.numpy())
