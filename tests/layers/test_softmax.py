"""Softmax, LogSoftmax and Softmin against torch along every dim, on both backends."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kuiper
from kuiper import OperatorError, ShapeError
from kuiper.testing import assert_close, run_operator

OPS = [("nn.Softmax", F.softmax), ("F.softmax", F.softmax), ("torch.softmax", F.softmax),
       ("nn.LogSoftmax", F.log_softmax), ("F.log_softmax", F.log_softmax),
       ("torch.log_softmax", F.log_softmax), ("nn.Softmin", F.softmin), ("F.softmin", F.softmin)]


@pytest.mark.parametrize("op_type, reference", OPS, ids=[o[0] for o in OPS])
def test_softmax_type_names(backend, rng, op_type, reference):
    x = (rng.standard_normal((2, 13, 5, 7)) * 3).astype(np.float32)
    (y,) = run_operator(op_type, [x], params={"dim": 1}, backend=backend)
    assert_close(y, reference(torch.from_numpy(x), dim=1).numpy())


@pytest.mark.parametrize("op_type, reference", OPS[::3], ids=[o[0] for o in OPS[::3]])
@pytest.mark.parametrize("dim", [0, 1, 2, 3, -1, -2, -3, -4])
def test_softmax_every_dim(backend, rng, op_type, reference, dim):
    x = (rng.standard_normal((2, 13, 5, 7)) * 3).astype(np.float32)
    (y,) = run_operator(op_type, [x], params={"dim": dim}, backend=backend)
    assert_close(y, reference(torch.from_numpy(x), dim=dim).numpy())


# Rows shorter than, equal to and much longer than a work-group; rows of one element.
@pytest.mark.parametrize("shape, dim", [((1,), 0), ((3, 1), 1), ((1, 1000), -1), ((2, 257), 1),
                                        ((4, 3, 2, 300), 3), ((600, 3), 0), ((2, 64), -1),
                                        ((2, 3, 4, 5, 6), 2)])
@pytest.mark.parametrize("op_type, reference", OPS[::3], ids=[o[0] for o in OPS[::3]])
def test_softmax_shapes(backend, rng, op_type, reference, shape, dim):
    x = (rng.standard_normal(shape) * 5).astype(np.float32)
    (y,) = run_operator(op_type, [x], params={"dim": dim}, backend=backend)
    assert_close(y, reference(torch.from_numpy(x), dim=dim).numpy())


@pytest.mark.parametrize("op_type, reference", OPS[::3], ids=[o[0] for o in OPS[::3]])
def test_softmax_is_stable_for_large_inputs(backend, op_type, reference):
    x = np.array([[1000.0, 1000.0, -1000.0], [-1e30, 0.0, 88.0], [-np.inf, 1.0, 2.0]],
                 np.float32)
    (y,) = run_operator(op_type, [x], params={"dim": 1}, backend=backend)
    assert_close(y, reference(torch.from_numpy(x), dim=1).numpy())


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4), (2, 3, 4, 5)])
def test_softmax_without_dim_uses_the_legacy_rule(backend, rng, shape):
    # nn.Softmax(dim=None) reaches pnnx as dim=None: PyTorch picks dim 0 for 1-D/3-D, else 1.
    x = rng.standard_normal(shape).astype(np.float32)
    (y,) = run_operator("nn.Softmax", [x], params={"dim": None}, backend=backend)
    legacy = 0 if len(shape) in (1, 3) else 1
    assert_close(y, F.softmax(torch.from_numpy(x), dim=legacy).numpy())


@pytest.mark.parametrize("params, error, message", [
    ({"dim": 4}, ShapeError, r"dim=4 is out of range for a 4-D input"),
    ({"dim": -5}, ShapeError, r"expected -4\.\.3"),
    ({"dim": 1.5}, OperatorError, "parameter 'dim' should be an integer"),
])
def test_softmax_bad_params(backend, params, error, message):
    with pytest.raises(error, match=message):
        run_operator("F.softmax", [np.ones((2, 3, 4, 5), np.float32)], params=params,
                     backend=backend)


class Softmaxes(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.softmax, self.log_softmax = torch.nn.Softmax(1), torch.nn.LogSoftmax(-2)

    def forward(self, x):
        return (self.softmax(x), self.log_softmax(x), F.softmax(x, -1), torch.softmax(x, 2),
                F.log_softmax(x, 3), F.softmin(x, 1), x.softmax(0))


@pytest.mark.slow
def test_softmax_pnnx_export(backend, rng, export_model):
    x = torch.from_numpy(rng.standard_normal((2, 5, 4, 6)).astype(np.float32))
    module = Softmaxes().eval()
    graph = kuiper.load(export_model("softmaxes", module, (x,)), backend=backend)
    assert not graph.fallbacks
    for got, want in zip(graph.forward(x.numpy()), module(x)):
        assert_close(got, want.numpy())


@pytest.mark.parametrize("shape", [(2, 13, 5, 7), (1, 12, 24, 64), (7, 3, 9), (1, 1, 4, 4)])
def test_softmax2d_matches_torch(backend, rng, shape):
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    (y,) = run_operator("nn.Softmax2d", [x], backend=backend)
    assert_close(y, torch.nn.Softmax2d()(torch.from_numpy(x)).numpy())


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4, 5, 6)])
def test_softmax2d_needs_3d_or_4d(backend, shape):
    with pytest.raises(ShapeError, match="Softmax2d needs a 3-D"):
        run_operator("nn.Softmax2d", [np.ones(shape, np.float32)], backend=backend)


class Softmax2dModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.act = torch.nn.Softmax2d()

    def forward(self, x):
        return self.act(x * 2 - 1)


@pytest.mark.slow
def test_softmax2d_pnnx_export(backend, rng, export_model):
    x = torch.from_numpy(rng.random((1, 12, 6, 10)).astype(np.float32))
    module = Softmax2dModel().eval()
    path = export_model("softmax2d", module, (x,))
    assert "nn.Softmax2d" in path.read_text()
    graph = kuiper.load(path, backend=backend)
    assert not graph.fallbacks
    (got,) = graph.forward(x.numpy())
    assert_close(got, module(x).numpy())
