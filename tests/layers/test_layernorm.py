"""LayerNorm (nn.LayerNorm, F.layer_norm) against torch, rows short and long."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import kuiper
from kuiper.core.errors import OperatorError, ShapeError
from kuiper.testing import assert_close, run_operator
from tests.conftest import opencl_available

CASES = [((3, 13, 11, 9), (9,)), ((3, 13, 11, 9), (11, 9)), ((1, 13, 11, 9), (13, 11, 9)),
         ((2, 7, 33), (33,)), ((5, 1000), (1000,)), ((4, 1), (1,)), ((7,), (7,)),
         ((2, 3, 257), (3, 257))]  # 1000 and 771 are longer than one work-group


@pytest.mark.parametrize("shape,normalized", CASES)
@pytest.mark.parametrize("affine", [True, False])
def test_layernorm_module_matches_torch(backend, rng, shape, normalized, affine):
    x = (rng.standard_normal(shape) * 3 + 2).astype(np.float32)  # a mean far from 0
    weights, w, b = {}, None, None
    if affine:
        w = rng.standard_normal(normalized).astype(np.float32)
        b = rng.standard_normal(normalized).astype(np.float32)
        weights = {"weight": w, "bias": b}
    params = {"normalized_shape": list(normalized), "eps": 1e-5, "elementwise_affine": affine}
    (y,) = run_operator("nn.LayerNorm", [x], params=params, weights=weights, backend=backend)
    ref = F.layer_norm(torch.from_numpy(x), normalized, None if w is None else torch.from_numpy(w),
                       None if b is None else torch.from_numpy(b), eps=1e-5)
    assert_close(y, ref.numpy())


@pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
@pytest.mark.parametrize("per_item", [True, False], ids=["row-per-work-item", "row-per-group"])
@pytest.mark.parametrize("shape,normalized", CASES + [((1, 56, 56, 96), (96,))])
@pytest.mark.parametrize("functional", [False, True])
def test_layernorm_each_opencl_kernel(monkeypatch, rng, per_item, shape, normalized, functional):
    """Both kernels of layernorm.cl, forced on whatever device runs the tests (the device picks
    one: a work-item per row on CPUs, a work-group per row on GPUs): row lengths that are and
    are not multiples of 8 (float8 loads or single floats), ConvNeXt's 96 channels at 56x56,
    weights as attributes and as inputs (F.layer_norm)."""
    monkeypatch.setattr("kuiper.layers.opencl.layernorm.ROW_PER_WORK_ITEM", per_item)
    x = (rng.standard_normal(shape) * 3 + 2).astype(np.float32)
    w = rng.standard_normal(normalized).astype(np.float32)
    b = rng.standard_normal(normalized).astype(np.float32)
    params = {"normalized_shape": list(normalized), "eps": 1e-5}
    if functional:
        (y,) = run_operator("F.layer_norm", [x, w, b], params=params, backend="opencl")
    else:
        (y,) = run_operator("nn.LayerNorm", [x], params={**params, "elementwise_affine": True},
                            weights={"weight": w, "bias": b}, backend="opencl")
    ref = F.layer_norm(*map(torch.from_numpy, (x,)), normalized, torch.from_numpy(w),
                       torch.from_numpy(b), eps=1e-5)
    assert_close(y, ref.numpy())


@pytest.mark.parametrize("given", ["wb", "w", "b", ""])
@pytest.mark.parametrize("eps", [1e-5, 0.1])
def test_functional_layer_norm(backend, rng, given, eps):
    x = rng.standard_normal((3, 5, 13)).astype(np.float32)
    w = rng.standard_normal(13).astype(np.float32) if "w" in given else None
    b = rng.standard_normal(13).astype(np.float32) if "b" in given else None
    params = {"normalized_shape": [13], "eps": eps}
    params.update({k: None for k, a in (("weight", w), ("bias", b)) if a is None})
    inputs = [x] + [a for a in (w, b) if a is not None]
    (y,) = run_operator("F.layer_norm", inputs, params=params, backend=backend)
    ref = F.layer_norm(torch.from_numpy(x), (13,), None if w is None else torch.from_numpy(w),
                       None if b is None else torch.from_numpy(b), eps=eps)
    assert_close(y, ref.numpy())


class ComputedAffine(nn.Module):
    """F.layer_norm whose weight is computed in the graph: pnnx names the inputs ($weight)."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.rand(9))
        self.b = nn.Parameter(torch.rand(9))

    def forward(self, x):
        return F.layer_norm(x, (9,), self.w * 2, self.b + 1)


def test_layernorm_from_pnnx_export(backend, export_model):
    torch.manual_seed(0)
    net, x = ComputedAffine(), torch.randn(2, 5, 9)
    graph = kuiper.load(export_model("layer_norm_computed_affine", net, x), backend=backend)
    (y,) = graph.forward(x.numpy())
    with torch.no_grad():
        assert_close(y, net(x).numpy())


def test_layernorm_shape_mismatch(backend, rng):
    x = rng.standard_normal((3, 5, 8)).astype(np.float32)
    with pytest.raises(ShapeError, match="should end with normalized_shape"):
        run_operator("nn.LayerNorm", [x],
                     params={"normalized_shape": [5, 7], "elementwise_affine": False},
                     backend=backend)


def test_layernorm_weight_shape_is_checked(backend, rng):
    x = rng.standard_normal((3, 8)).astype(np.float32)
    with pytest.raises(OperatorError, match="expected .8,."):
        run_operator("nn.LayerNorm", [x], params={"normalized_shape": [8]},
                     weights={"weight": np.ones(7, np.float32), "bias": np.ones(8, np.float32)},
                     backend=backend)
