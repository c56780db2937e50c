"""ReLU against torch on both backends: the pattern every layer test follows."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from kuiper.testing import assert_close, run_operator


@pytest.mark.parametrize("op_type", ["nn.ReLU", "F.relu"])
@pytest.mark.parametrize("shape", [(1, 13, 7, 5), (3, 17), (2, 3, 1, 129)])
def test_relu_matches_torch(backend, rng, op_type, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    (y,) = run_operator(op_type, [x], backend=backend)
    assert_close(y, F.relu(torch.from_numpy(x)).numpy())
