"""Tensor.slice (both pnnx forms), Tensor.select and torch.narrow vs torch indexing."""

import numpy as np
import pytest
import torch
from torch import nn

import kuiper
from kuiper.testing import assert_close, run_operator

INT_MAX = 2147483647
SHAPE = (2, 7, 5, 6)


def _x(rng):
    return rng.standard_normal(SHAPE).astype(np.float32)


@pytest.mark.parametrize("dim, start, end, step, index", [
    (1, 1, 3, 1, np.s_[:, 1:3]),
    (1, -3, INT_MAX, 1, np.s_[:, -3:]),
    (2, 0, -1, 2, np.s_[:, :, 0:-1:2]),
    (3, 1, INT_MAX, 2, np.s_[..., 1::2]),
    (-1, -5, -2, 1, np.s_[..., -5:-2]),
    (0, 1, INT_MAX, 1, np.s_[1:]),
    (1, 4, 2, 1, np.s_[:, 4:2]),          # empty result
    (1, -100, 100, 3, np.s_[:, -100:100:3]),  # ends clamp like Python slices
])
def test_slice_single_dim(backend, rng, dim, start, end, step, index):
    x = _x(rng)
    params = {"dim": dim, "start": start, "end": end, "step": step}
    (y,) = run_operator("Tensor.slice", [x], params=params, backend=backend)
    assert_close(y, torch.from_numpy(x)[index].numpy())


def test_slice_single_dim_defaults(backend, rng):
    x = _x(rng)
    (y,) = run_operator("Tensor.slice", [x], params={"dim": 2, "start": 1}, backend=backend)
    assert_close(y, x[:, :, 1:])


# The forms below are copied from what pnnx writes for the indexing in the comment.
@pytest.mark.parametrize("dims, starts, ends, steps, selects, index", [
    # x[:, 1:3, ::2]
    ((1, 2), (1, 0), (3, INT_MAX), (1, 2), (INT_MAX, INT_MAX), np.s_[:, 1:3, ::2]),
    # Focus: x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2]
    ((2, 3), (0, 0), (INT_MAX, INT_MAX), (2, 2), (INT_MAX, INT_MAX), np.s_[..., ::2, ::2]),
    ((2, 3), (1, 0), (INT_MAX, INT_MAX), (2, 2), (INT_MAX, INT_MAX), np.s_[..., 1::2, ::2]),
    ((2, 3), (0, 1), (INT_MAX, INT_MAX), (2, 2), (INT_MAX, INT_MAX), np.s_[..., ::2, 1::2]),
    ((2, 3), (1, 1), (INT_MAX, INT_MAX), (2, 2), (INT_MAX, INT_MAX), np.s_[..., 1::2, 1::2]),
    # x[:, :, 1:-1, 2] (select after a slice)
    ((2, 3), (1, 0), (-1, 0), (1, 0), (INT_MAX, 2), np.s_[:, :, 1:-1, 2]),
    # x[:, 2, 1:3] (select *before* a slice: dims still index the input)
    ((1, 2), (0, 1), (0, 3), (0, 1), (2, INT_MAX), np.s_[:, 2, 1:3]),
    # x[1:, 2]
    ((0, 1), (1, 0), (INT_MAX, 0), (1, 0), (INT_MAX, 2), np.s_[1:, 2]),
    # x[:, -1, :, -2] and negative dims
    ((-3, -1), (0, 0), (0, 0), (0, 0), (-1, -2), np.s_[:, -1, :, -2]),
    # x[:, -4:-1:2, 3:]
    ((1, 2), (-4, 3), (-1, INT_MAX), (2, 1), (INT_MAX, INT_MAX), np.s_[:, -4:-1:2, 3:]),
])
def test_slice_multi_dim(backend, rng, dims, starts, ends, steps, selects, index):
    x = _x(rng)
    params = {"dims": dims, "starts": starts, "ends": ends, "steps": steps, "selects": selects}
    (y,) = run_operator("Tensor.slice", [x], params=params, backend=backend)
    assert_close(y, torch.from_numpy(x)[index].numpy())


def test_slice_int64(backend, rng):
    x = rng.integers(-9, 9, (3, 8), dtype=np.int64)
    (y,) = run_operator("Tensor.slice", [x], params={"dim": 1, "start": 1, "end": INT_MAX,
                                                      "step": 3}, backend=backend)
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, x[:, 1::3])


@pytest.mark.parametrize("dim, index", [(1, 2), (1, -1), (3, 0), (-1, 5), (0, 1)])
def test_select(backend, rng, dim, index):
    x = _x(rng)
    (y,) = run_operator("Tensor.select", [x], params={"dim": dim, "index": index},
                        backend=backend)
    assert_close(y, torch.from_numpy(x).select(dim, index).numpy())


@pytest.mark.parametrize("dim, start, length", [(1, 1, 3), (-1, 0, 6), (2, -2, 2), (1, 6, 1),
                                                (0, 0, 0)])
def test_narrow(backend, rng, dim, start, length):
    x = _x(rng)
    params = {"dim": dim, "start": start, "length": length}
    (y,) = run_operator("torch.narrow", [x], params=params, backend=backend)
    assert_close(y, torch.narrow(torch.from_numpy(x), dim, start, length).numpy())


@pytest.mark.parametrize("op_type, params, error, message", [
    ("Tensor.slice", {"dim": 1, "start": 0, "end": 3, "step": 0}, kuiper.OperatorError,
     "step=0 must be positive"),
    ("Tensor.slice", {"dim": 1, "start": 3, "end": 0, "step": -1}, kuiper.OperatorError,
     "step=-1 must be positive"),
    ("Tensor.slice", {"dim": 4, "start": 0, "end": 1, "step": 1}, kuiper.ShapeError,
     "dims=4 is out of range"),
    ("Tensor.slice", {"dims": (1, 1), "starts": (0, 0), "ends": (1, 1), "steps": (1, 1),
                      "selects": (INT_MAX, INT_MAX)}, kuiper.OperatorError, "names dim 1 twice"),
    ("Tensor.slice", {"dims": (1, 2), "starts": (0, 0, 0), "ends": (1, 1), "steps": (1, 1),
                      "selects": (INT_MAX, INT_MAX)}, kuiper.OperatorError,
     "'starts' should have 2 values"),
    ("Tensor.slice", {"start": 0}, kuiper.OperatorError, "parameter 'dim' is missing"),
    ("Tensor.select", {"dim": 1, "index": 7}, kuiper.ShapeError,
     "index 7 is out of range for dim 1 of size 7"),
    ("torch.narrow", {"dim": 1, "start": 5, "length": 3}, kuiper.ShapeError, "does not fit"),
])
def test_slice_bad(backend, rng, op_type, params, error, message):
    with pytest.raises(error, match=message):
        run_operator(op_type, [_x(rng)], params=params, backend=backend)


class _Indexing(nn.Module):
    def forward(self, x):
        focus = torch.cat([x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2],
                           x[..., 1::2, 1::2]], 1)
        return focus, x[..., 0], x[:, 2, 1:3], x[:, :, 1:-1, 2], x[:, -3:]


def test_real_export_at_another_batch(backend, rng, export_model):
    """What pnnx really writes for these indexings, run at the export batch and another."""
    path = export_model("slice_indexing", _Indexing(), torch.zeros(1, 4, 8, 6))
    text = path.read_text()
    assert "selects=" in text and "Tensor.select" in text
    graph = kuiper.load(path, backend=backend)
    for batch in (1, 3):
        x = rng.standard_normal((batch, 4, 8, 6)).astype(np.float32)
        with torch.no_grad():
            want = _Indexing()(torch.from_numpy(x))
        got = graph.forward(x)
        for k, (g, w) in enumerate(zip(got, want)):
            assert_close(g, w.numpy(), what=f"batch {batch} output {k}")
