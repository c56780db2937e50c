"""torch.flip and torch.roll vs torch."""

import numpy as np
import pytest
import torch

import kuiper
from kuiper.testing import assert_close, run_operator


@pytest.mark.parametrize("dims", [[1], [0, -1], [0, 1, 2, 3], [-2], []])
def test_flip(backend, rng, dims):
    x = rng.standard_normal((2, 13, 1, 5)).astype(np.float32)
    (y,) = run_operator("torch.flip", [x], params={"dims": dims}, backend=backend)
    assert_close(y, torch.flip(torch.from_numpy(x), dims).numpy())


@pytest.mark.parametrize("shifts, dims", [([2], [1]), ([1, -2], [1, 2]), ([3], None),
                                          ([-7], None), ([17, 0], [-1, 0]), ([-1], [2])])
def test_roll(backend, rng, shifts, dims):
    x = rng.standard_normal((2, 13, 1, 5)).astype(np.float32)
    params = {"shifts": shifts, "dims": dims}  # pnnx writes dims=None for "flattened"
    (y,) = run_operator("torch.roll", [x], params=params, backend=backend)
    want = torch.roll(torch.from_numpy(x), shifts, dims) if dims is not None else \
        torch.roll(torch.from_numpy(x), shifts[0])
    assert_close(y, want.numpy())


def test_flip_roll_int64(backend, rng):
    x = rng.integers(-9, 9, (3, 4), dtype=np.int64)
    (y,) = run_operator("torch.flip", [x], params={"dims": [0, 1]}, backend=backend)
    np.testing.assert_array_equal(y, x[::-1, ::-1])
    (y,) = run_operator("torch.roll", [x], params={"shifts": [1], "dims": [1]}, backend=backend)
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, np.roll(x, 1, 1))


@pytest.mark.parametrize("op_type, params, error, message", [
    ("torch.flip", {"dims": [0, 0]}, kuiper.OperatorError, "names the same dim twice"),
    ("torch.flip", {"dims": [3]}, kuiper.ShapeError, "dims=3 is out of range"),
    ("torch.roll", {"shifts": [1, 2], "dims": [0]}, kuiper.OperatorError, "differ in length"),
    ("torch.roll", {"shifts": [1, 2]}, kuiper.OperatorError, "needs one dim per shift"),
    ("torch.roll", {"dims": [0]}, kuiper.OperatorError, "'shifts' is missing"),
])
def test_flip_bad(backend, op_type, params, error, message):
    with pytest.raises(error, match=message):
        run_operator(op_type, [np.zeros((2, 3, 4), np.float32)], params=params, backend=backend)


class _Turns(torch.nn.Module):
    def forward(self, x):
        return torch.flip(x, [1]), torch.flip(x, (0, -1)), torch.roll(x, 2, 1), \
            torch.roll(x, (1, -2), (1, 2)), torch.roll(x, 3)


def test_real_export(backend, rng, export_model):
    path = export_model("flip_turns", _Turns(), torch.zeros(2, 3, 4))
    graph = kuiper.load(path, backend=backend)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    with torch.no_grad():
        want = _Turns()(torch.from_numpy(x))
    for k, (g, w) in enumerate(zip(graph.forward(x), want)):
        assert_close(g, w.numpy(), what=f"output {k}")
