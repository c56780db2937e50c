"""PReLU (nn.PReLU with 1 or C slopes, F.prelu) against torch."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from kuiper.core.errors import ShapeError
from kuiper.testing import assert_close, run_operator

SHAPES = [(3, 13, 11, 9), (2, 13), (3, 13, 7), (1, 13, 1, 1), (2, 13, 3, 2, 2)]


# A 1-D input has a single channel, so only the shared slope applies to it.
@pytest.mark.parametrize("shape,per_channel", [(s, p) for s in SHAPES for p in (True, False)]
                         + [((5,), False)])
def test_prelu_module_matches_torch(backend, rng, shape, per_channel):
    x = rng.standard_normal(shape).astype(np.float32)
    count = shape[1] if per_channel else 1
    w = rng.uniform(-1, 1, count).astype(np.float32)
    (y,) = run_operator("nn.PReLU", [x], params={"num_parameters": count},
                        weights={"weight": w}, backend=backend)
    assert_close(y, F.prelu(torch.from_numpy(x), torch.from_numpy(w)).numpy())


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("per_channel", [True, False])
def test_functional_prelu(backend, rng, shape, per_channel):
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.uniform(-1, 1, shape[1] if per_channel else 1).astype(np.float32)
    (y,) = run_operator("F.prelu", [x, w], backend=backend)
    assert_close(y, F.prelu(torch.from_numpy(x), torch.from_numpy(w)).numpy())


def test_prelu_slope_count_mismatch(backend, rng):
    x = rng.standard_normal((2, 5, 3)).astype(np.float32)
    with pytest.raises(RuntimeError):  # PyTorch refuses it as well
        F.prelu(torch.from_numpy(x), torch.ones(4))
    with pytest.raises(ShapeError, match="expected 1 or the channel count 5"):
        run_operator("nn.PReLU", [x], params={"num_parameters": 4},
                     weights={"weight": np.ones(4, np.float32)}, backend=backend)
