"""GLU against torch along every dim, on both backends."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

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
