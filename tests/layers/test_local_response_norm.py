"""LocalResponseNorm against torch (3-D, 4-D and 5-D inputs), on both backends, and through
both routes into pnnx (TorchScript and ONNX)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kuiper
from kuiper import OperatorError, ShapeError
from kuiper.testing import assert_close, run_operator

# pnnx's tests: the defaults, and every (size, alpha, beta, k) they write
PARAMS = [
    {"size": 3},
    {"size": 5, "alpha": 0.001, "beta": 0.8, "k": 0.9},
    {"size": 4},
    {"size": 4, "alpha": 0.01, "beta": 0.2, "k": 1.9},
    {"size": 3, "alpha": 0.1, "beta": 0.3, "k": 0.2},
    {"size": 1, "alpha": 0.5, "beta": 1.5, "k": 2.0},
    {"size": 30, "alpha": 0.2, "beta": 0.75, "k": 1.0},  # wider than the channels
]


@pytest.mark.parametrize("op_type", ["nn.LocalResponseNorm", "F.local_response_norm"])
@pytest.mark.parametrize("params", PARAMS, ids=str)
@pytest.mark.parametrize("shape", [(2, 13, 9), (2, 7, 5, 6), (1, 10, 3, 4, 5)])
def test_local_response_norm_matches_torch(backend, rng, op_type, params, shape):
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    (y,) = run_operator(op_type, [x], params=params, backend=backend)
    want = F.local_response_norm(torch.from_numpy(x), params["size"], params.get("alpha", 1e-4),
                                 params.get("beta", 0.75), params.get("k", 1.0))
    assert_close(y, want.numpy())


@pytest.mark.parametrize("params, shape, error, message", [
    ({"size": 0}, (1, 3, 4), OperatorError, "size=0"),
    ({}, (1, 3, 4), OperatorError, "parameter 'size' is missing"),
    ({"size": 3, "alpha": "big"}, (1, 3, 4), OperatorError, "parameter 'alpha'"),
    ({"size": 3}, (3, 4), ShapeError, "3 or more dims"),
])
def test_local_response_norm_bad_input(backend, params, shape, error, message):
    with pytest.raises(error, match=message):
        run_operator("nn.LocalResponseNorm", [np.ones(shape, np.float32)], params=params,
                     backend=backend)


class LRNs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_0 = torch.nn.LocalResponseNorm(3)
        self.ln_1 = torch.nn.LocalResponseNorm(size=5, alpha=0.001, beta=0.8, k=0.9)

    def forward(self, x, y):
        return (self.ln_1(self.ln_0(x)), self.ln_1(self.ln_0(y)),
                F.local_response_norm(y, 4, 0.01, 0.2, 1.9))


@pytest.mark.slow
def test_local_response_norm_pnnx_export(backend, rng, export_model):
    x = torch.from_numpy(rng.random((1, 12, 24)).astype(np.float32))
    y = torch.from_numpy(rng.random((2, 7, 6, 5)).astype(np.float32))
    module = LRNs().eval()
    path = export_model("lrns", module, (x, y))
    assert "nn.LocalResponseNorm" in path.read_text()
    graph = kuiper.load(path, backend=backend)
    assert not graph.fallbacks
    for got, want in zip(graph.forward(x.numpy(), y.numpy()), module(x, y)):
        assert_close(got, want.numpy())


class OnnxLRN(torch.nn.Module):
    def forward(self, x):
        return F.local_response_norm(x, size=5, alpha=0.001, beta=0.8, k=0.9)


@pytest.mark.slow
def test_local_response_norm_onnx_route(backend, rng, export_dir):
    """torch.onnx.export + the pnnx command: a 3-D input's LRN arrives as
    F.local_response_norm. (A 4-D one arrives decomposed into mul, reshape, F.pad,
    F.avg_pool3d and an expression: no LocalResponseNorm type at all.)"""
    pytest.importorskip("onnx")
    from tests.models.onnx_export import export_with_onnx

    x = torch.from_numpy(rng.random((1, 12, 24)).astype(np.float32))
    module = OnnxLRN().eval()
    path = export_with_onnx(export_dir / "lrn_onnx", module, (x,))
    assert "F.local_response_norm" in path.read_text()
    graph = kuiper.load(path, backend=backend)
    assert not graph.fallbacks
    (got,) = graph.forward(x.numpy())
    assert_close(got, module(x).numpy())
