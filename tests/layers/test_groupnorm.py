"""GroupNorm (nn.GroupNorm, F.group_norm) against torch."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from kuiper.core.errors import OperatorError, ShapeError
from kuiper.testing import assert_close, run_operator

CASES = [((3, 12, 7, 5), 1), ((3, 12, 7, 5), 3), ((3, 12, 7, 5), 4), ((1, 12, 7, 5), 12),
         ((2, 13, 9), 13), ((2, 13, 9), 1), ((3, 6), 2), ((2, 8, 40, 33), 2),
         ((2, 3, 1, 1), 3)]  # rows of one value: y = bias


def _t(a):
    return None if a is None else torch.from_numpy(a)


@pytest.mark.parametrize("shape,groups", CASES)
@pytest.mark.parametrize("affine", [True, False])
def test_groupnorm_module_matches_torch(backend, rng, shape, groups, affine):
    x = (rng.standard_normal(shape) - 1.5).astype(np.float32)
    c = shape[1]
    w = rng.standard_normal(c).astype(np.float32) if affine else None
    b = rng.standard_normal(c).astype(np.float32) if affine else None
    params = {"num_groups": groups, "eps": 1e-5, "affine": affine}
    if affine:  # pnnx leaves out num_channels when affine=False
        params["num_channels"] = c
    (y,) = run_operator("nn.GroupNorm", [x], params=params,
                        weights={"weight": w, "bias": b} if affine else None, backend=backend)
    assert_close(y, F.group_norm(torch.from_numpy(x), groups, _t(w), _t(b), 1e-5).numpy())


@pytest.mark.parametrize("given", ["wb", "w", "b", ""])
def test_functional_group_norm(backend, rng, given):
    x = rng.standard_normal((3, 15, 4, 3)).astype(np.float32)
    w = rng.standard_normal(15).astype(np.float32) if "w" in given else None
    b = rng.standard_normal(15).astype(np.float32) if "b" in given else None
    params = {"num_groups": 5, "eps": 1e-3}
    params.update({k: None for k, a in (("weight", w), ("bias", b)) if a is None})
    inputs = [x] + [a for a in (w, b) if a is not None]
    (y,) = run_operator("F.group_norm", inputs, params=params, backend=backend)
    assert_close(y, F.group_norm(torch.from_numpy(x), 5, _t(w), _t(b), 1e-3).numpy())


def test_groupnorm_single_value_is_refused(backend, rng):
    x = rng.standard_normal((1, 3, 1, 1)).astype(np.float32)
    with pytest.raises(ValueError):  # PyTorch refuses it as well
        F.group_norm(torch.from_numpy(x), 3)
    with pytest.raises(ShapeError, match="more than 1 value"):
        run_operator("nn.GroupNorm", [x], params={"num_groups": 3, "affine": False},
                     backend=backend)


def test_groupnorm_channels_not_divisible(backend, rng):
    x = rng.standard_normal((2, 10, 3)).astype(np.float32)
    with pytest.raises(OperatorError, match="not divisible by num_groups=4"):
        run_operator("nn.GroupNorm", [x],
                     params={"num_groups": 4, "num_channels": 10, "affine": False},
                     backend=backend)


def test_groupnorm_input_channels_mismatch(backend, rng):
    x = rng.standard_normal((2, 9, 3)).astype(np.float32)
    with pytest.raises(ShapeError, match="expected 6"):
        run_operator("nn.GroupNorm", [x], params={"num_groups": 3, "num_channels": 6},
                     weights={"weight": np.ones(6, np.float32), "bias": np.ones(6, np.float32)},
                     backend=backend)


@pytest.mark.parametrize("op_type, params, shape", [
    ("nn.GroupNorm", {"num_groups": 2, "num_channels": 4, "affine": False}, (2, 4, 0, 6)),
    ("nn.LayerNorm", {"normalized_shape": [6], "elementwise_affine": False}, (0, 6)),
    ("nn.InstanceNorm2d", {"num_features": 4, "affine": False}, (2, 4, 0, 6)),
])
def test_a_norm_of_an_empty_input_is_empty(backend, op_type, params, shape):
    # fuzz seed 4417, case 6992: rows of no values divided by their length 0 (PyTorch returns
    # an empty tensor of the input's shape)
    (y,) = run_operator(op_type, [np.zeros(shape, np.float32)], params=params, backend=backend)
    assert y.shape == shape and y.dtype == np.float32
