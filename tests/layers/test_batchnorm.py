"""Inference BatchNorm (nn.BatchNorm1d/2d/3d folded at load, F.batch_norm) against torch."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import kuiper
from kuiper.core.errors import OperatorError, ShapeError
from kuiper.testing import assert_close, run_operator


def _stats(rng, c):
    return (rng.standard_normal(c).astype(np.float32),
            rng.uniform(0.2, 3.0, c).astype(np.float32),
            rng.standard_normal(c).astype(np.float32),
            rng.standard_normal(c).astype(np.float32))


def _t(*arrays):
    return [None if a is None else torch.from_numpy(a) for a in arrays]


@pytest.mark.parametrize("op_type,shape", [
    ("nn.BatchNorm1d", (3, 13)), ("nn.BatchNorm1d", (1, 13, 7)), ("nn.BatchNorm1d", (3, 5, 1)),
    ("nn.BatchNorm2d", (3, 13, 11, 9)), ("nn.BatchNorm2d", (1, 5, 1, 1)),
    ("nn.BatchNorm3d", (2, 3, 4, 5, 3)),
    # OpenCL's channel_affine does 8 or 4 values per work-item when the plane allows (inner
    # 56, 36): batchnorm.cl; 99 and 7 above take one at a time
    ("nn.BatchNorm2d", (2, 5, 8, 7)), ("nn.BatchNorm2d", (1, 7, 6, 6))])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("eps", [1e-5, 1e-3])
def test_batchnorm_module_matches_torch(backend, rng, op_type, shape, affine, eps):
    x = rng.standard_normal(shape).astype(np.float32)
    c = shape[1]
    mean, var, weight, bias = _stats(rng, c)
    weights = {"running_mean": mean, "running_var": var}
    if affine:
        weights.update(weight=weight, bias=bias)
    else:
        weight = bias = None
    (y,) = run_operator(op_type, [x], params={"affine": affine, "eps": eps, "num_features": c},
                        weights=weights, backend=backend)
    ref = F.batch_norm(*_t(x, mean, var, weight, bias), training=False, eps=eps)
    assert_close(y, ref.numpy())


@pytest.mark.parametrize("shape", [(3, 13), (2, 13, 7), (3, 13, 11, 9), (1, 3, 2, 5, 3)])
@pytest.mark.parametrize("given", ["wb", "w", "b", ""])
def test_functional_batch_norm_with_tensor_inputs(backend, rng, shape, given):
    """F.batch_norm whose statistics and affine are graph tensors (inputs here)."""
    x = rng.standard_normal(shape).astype(np.float32)
    mean, var, weight, bias = _stats(rng, shape[1])
    weight = weight if "w" in given else None
    bias = bias if "b" in given else None
    inputs = [x, mean, var] + [a for a in (weight, bias) if a is not None]
    params = {"eps": 1e-4}
    params.update({k: None for k, a in (("weight", weight), ("bias", bias)) if a is None})
    (y,) = run_operator("F.batch_norm", inputs, params=params, backend=backend)
    ref = F.batch_norm(*_t(x, mean, var, weight, bias), training=False, eps=1e-4)
    assert_close(y, ref.numpy())


class FunctionalBN(nn.Module):
    """F.batch_norm with buffers as statistics: pnnx exports them as pnnx.Attribute inputs."""

    def __init__(self, c):
        super().__init__()
        self.register_buffer("mean", torch.rand(c))
        self.register_buffer("var", torch.rand(c) + 0.5)

    def forward(self, x):
        return F.batch_norm(x, self.mean, self.var, eps=1e-3)


def test_batchnorm_from_pnnx_export(backend, export_model):
    torch.manual_seed(0)
    net, x = FunctionalBN(5), torch.randn(2, 5, 7, 3)
    graph = kuiper.load(export_model("functional_batch_norm", net, x), backend=backend)
    (y,) = graph.forward(x.numpy())
    assert_close(y, net(x).numpy())


def test_batchnorm_bad_input_rank(backend, rng):
    x = rng.standard_normal((3, 5, 7)).astype(np.float32)
    mean, var, _, _ = _stats(rng, 5)
    with pytest.raises(ShapeError, match="4-D"):
        run_operator("nn.BatchNorm2d", [x], params={"affine": False, "num_features": 5},
                     weights={"running_mean": mean, "running_var": var}, backend=backend)


def test_batchnorm_channel_mismatch(backend, rng):
    x = rng.standard_normal((3, 4, 7)).astype(np.float32)
    mean, var, _, _ = _stats(rng, 5)
    with pytest.raises(ShapeError, match="expected .4,."):
        run_operator("nn.BatchNorm1d", [x], params={"affine": False, "num_features": 5},
                     weights={"running_mean": mean, "running_var": var}, backend=backend)


def test_batchnorm_missing_weight_is_refused(backend, rng):
    x = rng.standard_normal((3, 5)).astype(np.float32)
    mean, var, _, _ = _stats(rng, 5)
    with pytest.raises(OperatorError, match="@weight"):
        run_operator("nn.BatchNorm1d", [x], params={"affine": True, "num_features": 5},
                     weights={"running_mean": mean, "running_var": var}, backend=backend)


def test_functional_batch_norm_needs_running_stats(backend, rng):
    x = rng.standard_normal((3, 5)).astype(np.float32)
    with pytest.raises(OperatorError, match="running_var"):
        run_operator("F.batch_norm", [x, np.ones(5, np.float32)],
                     params={"running_var": None, "weight": None, "bias": None}, backend=backend)
