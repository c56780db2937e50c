"""RMSNorm (nn.RMSNorm and F.rms_norm) against torch, on both backends."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kuiper
from kuiper import OperatorError, ShapeError
from kuiper.testing import assert_close, run_operator


def _reference(x, normalized, weight, eps):
    w = None if weight is None else torch.from_numpy(weight)
    return F.rms_norm(torch.from_numpy(x), normalized, w, eps).numpy()


@pytest.mark.parametrize("shape, normalized", [((2, 7, 13), (13,)), ((1, 12, 24), (12, 24)),
                                               ((2, 3, 12, 16), (16,)), ((3, 300), (300,)),
                                               ((1, 10, 12, 16, 5), (12, 16, 5)), ((7,), (7,))])
@pytest.mark.parametrize("eps", [None, 1e-3, 1e-2])
@pytest.mark.parametrize("affine", [True, False])
def test_nn_rmsnorm_matches_torch(backend, rng, shape, normalized, eps, affine):
    x = (rng.standard_normal(shape) * 3 + 0.5).astype(np.float32)
    weight = rng.random(normalized).astype(np.float32) + 0.5 if affine else None
    params = {"normalized_shape": list(normalized), "eps": eps, "elementwise_affine": affine}
    (y,) = run_operator("nn.RMSNorm", [x], params=params,
                        weights={"weight": weight} if affine else {}, backend=backend)
    assert_close(y, _reference(x, normalized, weight, eps))


@pytest.mark.parametrize("shape, normalized", [((2, 7, 13), (13,)), ((2, 3, 12, 16), (12, 16))])
@pytest.mark.parametrize("eps", [None, 1e-3])
def test_f_rms_norm_weight_input_matches_torch(backend, rng, shape, normalized, eps):
    """F.rms_norm whose weight is a tensor of the graph ($weight, an input)."""
    x = rng.standard_normal(shape).astype(np.float32)
    weight = rng.random(normalized).astype(np.float32)
    (y,) = run_operator("F.rms_norm", [x, weight],
                        params={"normalized_shape": list(normalized), "eps": eps},
                        backend=backend)
    assert_close(y, _reference(x, normalized, weight, eps))


def test_f_rms_norm_without_weight(backend, rng):
    x = rng.standard_normal((2, 5, 6, 9)).astype(np.float32)
    (y,) = run_operator("F.rms_norm", [x], backend=backend,
                        params={"normalized_shape": [6, 9], "eps": 1e-2, "weight": None})
    assert_close(y, _reference(x, (6, 9), None, 1e-2))


def test_rmsnorm_tiny_rows_use_float32_epsilon(backend):
    """eps=None is torch.finfo(float32).eps: it decides the result for an all-tiny row."""
    x = np.full((2, 4), 1e-5, np.float32)
    (y,) = run_operator("nn.RMSNorm", [x], backend=backend,
                        params={"normalized_shape": [4], "eps": None,
                                "elementwise_affine": False})
    assert_close(y, _reference(x, (4,), None, None))


@pytest.mark.parametrize("op_type, params, weights, shape, error, message", [
    ("nn.RMSNorm", {"normalized_shape": [5]}, {}, (2, 5), OperatorError, "weight '@weight'"),
    ("nn.RMSNorm", {"normalized_shape": [0], "elementwise_affine": False}, {}, (2, 5),
     OperatorError, "every dim must be >= 1"),
    ("nn.RMSNorm", {"normalized_shape": [4], "elementwise_affine": False}, {}, (2, 5),
     ShapeError, "should end with normalized_shape"),
    ("nn.RMSNorm", {"normalized_shape": [5], "eps": "tiny"},
     {"weight": np.ones(5, np.float32)}, (2, 5), OperatorError, "parameter 'eps'"),
])
def test_rmsnorm_bad_input(backend, op_type, params, weights, shape, error, message):
    with pytest.raises(error, match=message):
        run_operator(op_type, [np.ones(shape, np.float32)], params=params, weights=weights,
                     backend=backend)


class T5LayerNorm(torch.nn.Module):
    """RMSNorm written out by hand (T5, LLaMA): pnnx fuses it into one nn.RMSNorm."""

    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(hidden_size))
        self.variance_epsilon = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.variance_epsilon))


class RMSNorms(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)  # the export is cached per session: every instance must agree
        self.rms_0 = torch.nn.RMSNorm(24)
        self.rms_0.weight = torch.nn.Parameter(torch.rand(24))
        self.rms_1 = torch.nn.RMSNorm((12, 24), eps=1e-2, elementwise_affine=False)
        self.w = torch.nn.Parameter(torch.rand(24))
        self.t5 = T5LayerNorm(24)

    def forward(self, x, w):
        return (self.rms_1(self.rms_0(x)), F.rms_norm(x, (24,), w),
                F.rms_norm(x, (12, 24), None, eps=1e-3), F.rms_norm(x, (24,), self.w),
                self.t5(x))


@pytest.mark.slow
def test_rmsnorm_pnnx_export(backend, rng, export_model):
    x = torch.from_numpy(rng.standard_normal((2, 12, 24)).astype(np.float32))
    w = torch.from_numpy(rng.random(24).astype(np.float32))
    module = RMSNorms().eval()
    path = export_model("rmsnorms", module, (x, w))
    text = path.read_text()
    assert "nn.RMSNorm" in text and "F.rms_norm" in text and "torch.rsqrt" not in text
    graph = kuiper.load(path, backend=backend)
    assert not graph.fallbacks
    for got, want in zip(graph.forward(x.numpy(), w.numpy()), module(x, w)):
        assert_close(got, want.detach().numpy())
