"""InstanceNorm (nn.InstanceNorm1d/2d/3d, F.instance_norm) against torch."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from kuiper.core.errors import ShapeError
from kuiper.testing import assert_close, run_operator

CASES = [("nn.InstanceNorm2d", (3, 13, 11, 9)), ("nn.InstanceNorm2d", (13, 11, 9)),
         ("nn.InstanceNorm2d", (1, 3, 30, 31)), ("nn.InstanceNorm1d", (3, 13, 17)),
         ("nn.InstanceNorm1d", (13, 2)), ("nn.InstanceNorm3d", (2, 3, 4, 5, 3))]


def _module(op_type, c, **kwargs):
    return getattr(nn, op_type.split(".")[1])(c, **kwargs).eval()


@pytest.mark.parametrize("op_type,shape", CASES)
@pytest.mark.parametrize("affine", [True, False])
def test_instancenorm_module_matches_torch(backend, rng, op_type, shape, affine):
    x = (rng.standard_normal(shape) + 4).astype(np.float32)
    spatial = int(op_type[-2])  # InstanceNorm2d -> 2
    c = shape[0] if len(shape) == spatial + 1 else shape[1]  # unbatched (C, ...) or (N, C, ...)
    module = _module(op_type, c, affine=affine, eps=1e-3)
    weights = None
    if affine:
        with torch.no_grad():
            module.weight.normal_()
            module.bias.normal_()
        weights = {"weight": module.weight.detach().numpy(), "bias": module.bias.detach().numpy()}
    params = {"num_features": c, "affine": affine, "eps": 1e-3, "track_running_stats": False}
    (y,) = run_operator(op_type, [x], params=params, weights=weights, backend=backend)
    with torch.no_grad():
        assert_close(y, module(torch.from_numpy(x)).numpy())


@pytest.mark.parametrize("shape", [(3, 13, 11, 9), (2, 5, 7)])
@pytest.mark.parametrize("affine", [True, False])
def test_instancenorm_running_stats(backend, rng, shape, affine):
    """track_running_stats=True: an eval-mode InstanceNorm uses the stored statistics."""
    c = shape[1]
    op_type = f"nn.InstanceNorm{len(shape) - 2}d"
    module = _module(op_type, c, affine=affine, track_running_stats=True)
    with torch.no_grad():
        module.running_mean.normal_()
        module.running_var.uniform_(0.5, 2)
        if affine:
            module.weight.normal_()
            module.bias.normal_()
    weights = {k: v.detach().numpy() for k, v in module.state_dict().items()
               if k != "num_batches_tracked"}
    x = rng.standard_normal(shape).astype(np.float32)
    params = {"num_features": c, "affine": affine, "eps": 1e-5, "track_running_stats": True}
    (y,) = run_operator(op_type, [x], params=params, weights=weights, backend=backend)
    with torch.no_grad():
        assert_close(y, module(torch.from_numpy(x)).numpy())


@pytest.mark.parametrize("given", ["wb", "w", ""])
def test_functional_instance_norm(backend, rng, given):
    x = rng.standard_normal((3, 7, 5, 4)).astype(np.float32)
    w = rng.standard_normal(7).astype(np.float32) if "w" in given else None
    b = rng.standard_normal(7).astype(np.float32) if "b" in given else None
    params = {"eps": 1e-5, "running_mean": None, "running_var": None}
    params.update({k: None for k, a in (("weight", w), ("bias", b)) if a is None})
    inputs = [x] + [a for a in (w, b) if a is not None]
    (y,) = run_operator("F.instance_norm", inputs, params=params, backend=backend)
    ref = F.instance_norm(torch.from_numpy(x), weight=None if w is None else torch.from_numpy(w),
                          bias=None if b is None else torch.from_numpy(b))
    assert_close(y, ref.numpy())


def test_instancenorm_needs_more_than_one_spatial_element(backend, rng):
    x = rng.standard_normal((2, 3, 1, 1)).astype(np.float32)
    with pytest.raises(ValueError):  # PyTorch refuses it as well
        F.instance_norm(torch.from_numpy(x))
    with pytest.raises(ShapeError, match="more than 1"):
        run_operator("nn.InstanceNorm2d", [x], params={"num_features": 3}, backend=backend)


def test_instancenorm_wrong_rank(backend, rng):
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    with pytest.raises(ShapeError, match="2-D .unbatched. or 3-D"):
        run_operator("nn.InstanceNorm1d", [x], params={"num_features": 3}, backend=backend)


def test_instancenorm_num_features_mismatch(backend, rng):
    x = rng.standard_normal((2, 4, 5)).astype(np.float32)
    with pytest.raises(ShapeError, match="num_features=3"):
        run_operator("nn.InstanceNorm1d", [x], params={"num_features": 3, "affine": True},
                     weights={"weight": np.ones(3, np.float32), "bias": np.ones(3, np.float32)},
                     backend=backend)
