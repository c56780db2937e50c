"""LPPool1d/2d against torch (every norm_type and ceil_mode pnnx's tests use), on both backends."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kuiper
from kuiper import OperatorError, ShapeError
from kuiper.testing import assert_close, run_operator


def _reference(x, rank, params):
    pool = F.lp_pool1d if rank == 1 else F.lp_pool2d
    return pool(torch.from_numpy(x), params["norm_type"], params["kernel_size"],
                params.get("stride"), params.get("ceil_mode", False)).numpy()


CASES_2D = [  # pnnx's test_F_lp_pool2d chain, then awkward extras
    {"norm_type": 2, "kernel_size": (3, 3), "stride": None},
    {"norm_type": 2, "kernel_size": (4, 4), "stride": (2, 2)},
    {"norm_type": 1, "kernel_size": (1, 3), "stride": (1, 1), "ceil_mode": False},
    {"norm_type": 1, "kernel_size": (4, 5), "stride": (1, 2), "ceil_mode": True},
    {"norm_type": 1.2, "kernel_size": (5, 3), "stride": (2, 1), "ceil_mode": False},
    {"norm_type": 0.5, "kernel_size": (2, 2), "stride": (1, 1), "ceil_mode": True},
    {"norm_type": 0.1, "kernel_size": (5, 4), "stride": (1, 1), "ceil_mode": False},
    {"norm_type": 3.0, "kernel_size": (3, 2), "stride": (2, 3), "ceil_mode": True},
    {"norm_type": math.inf, "kernel_size": (3, 3), "stride": (2, 2), "ceil_mode": True},
]
CASES_1D = [
    {"norm_type": 2, "kernel_size": 3, "stride": None},
    {"norm_type": 2, "kernel_size": 4, "stride": 2},
    {"norm_type": 1, "kernel_size": 3, "stride": 1, "ceil_mode": False},
    {"norm_type": 1, "kernel_size": 5, "stride": 1, "ceil_mode": True},
    {"norm_type": 1.2, "kernel_size": 3, "stride": 2, "ceil_mode": False},
    {"norm_type": 0.5, "kernel_size": 2, "stride": 1, "ceil_mode": True},
    {"norm_type": 0.1, "kernel_size": 4, "stride": 1, "ceil_mode": False},
    {"norm_type": 2.0, "kernel_size": 3, "stride": 2, "ceil_mode": True},
    {"norm_type": -math.inf, "kernel_size": 2, "stride": 3, "ceil_mode": True},
]


def _input(rng, shape, p):
    # A fractional p of a negative number is NaN in torch too: test those on positive inputs,
    # and integer p (where the sign matters) on signed ones.
    x = rng.standard_normal(shape).astype(np.float32)
    return x if float(p).is_integer() or math.isinf(p) else np.abs(x) + 0.05


@pytest.mark.parametrize("op_type", ["nn.LPPool2d", "F.lp_pool2d"])
@pytest.mark.parametrize("params", CASES_2D, ids=str)
@pytest.mark.parametrize("shape", [(2, 5, 13, 11), (3, 9, 17)])
def test_lppool2d_matches_torch(backend, rng, op_type, params, shape):
    x = _input(rng, shape, params["norm_type"])
    (y,) = run_operator(op_type, [x], params=params, backend=backend)
    assert_close(y, _reference(x, 2, params))


@pytest.mark.parametrize("op_type", ["nn.LPPool1d", "F.lp_pool1d"])
@pytest.mark.parametrize("params", CASES_1D, ids=str)
@pytest.mark.parametrize("shape", [(2, 5, 23), (7, 16)])
def test_lppool1d_matches_torch(backend, rng, op_type, params, shape):
    x = _input(rng, shape, params["norm_type"])
    (y,) = run_operator(op_type, [x], params=params, backend=backend)
    assert_close(y, _reference(x, 1, params))


def test_lppool_negative_input_fractional_p_is_nan_like_torch(backend, rng):
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    params = {"norm_type": 1.5, "kernel_size": (2, 2), "stride": (2, 2)}
    (y,) = run_operator("F.lp_pool2d", [x], params=params, backend=backend)
    want = _reference(x, 2, params)
    assert np.isnan(want).any()
    assert_close(y, want)


@pytest.mark.parametrize("op_type, params, shape, error, message", [
    ("nn.LPPool2d", {"norm_type": 0, "kernel_size": 2}, (1, 2, 4, 4), OperatorError,
     "needs p != 0"),
    ("nn.LPPool2d", {"norm_type": 2, "kernel_size": 2, "padding": 1}, (1, 2, 4, 4),
     OperatorError, "LP pooling has no padding"),
    ("nn.LPPool2d", {"norm_type": 2}, (1, 2, 4, 4), OperatorError, "kernel_size"),
    ("nn.LPPool2d", {"norm_type": 2, "kernel_size": 5}, (1, 2, 4, 4), ShapeError, "too small"),
    ("nn.LPPool1d", {"norm_type": 2, "kernel_size": 2}, (1, 2, 4, 4), ShapeError,
     "should be 2-D"),
])
def test_lppool_bad_input(backend, op_type, params, shape, error, message):
    with pytest.raises(error, match=message):
        run_operator(op_type, [np.ones(shape, np.float32)], params=params, backend=backend)


class LPPools(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.pool2 = torch.nn.LPPool2d(norm_type=1.2, kernel_size=(4, 5), stride=(1, 2),
                                       ceil_mode=True)
        self.pool1 = torch.nn.LPPool1d(norm_type=2, kernel_size=3, stride=2, ceil_mode=True)

    def forward(self, x):
        return (self.pool2(x), F.lp_pool2d(x, 0.5, 2, 1, True), F.lp_pool2d(x, 2, (2, 3)),
                self.pool1(x[0]), F.lp_pool1d(x[0], 1, 4, 1))


@pytest.mark.slow
def test_lppool_pnnx_export(backend, rng, export_model):
    x = torch.from_numpy(rng.random((2, 6, 11, 13)).astype(np.float32))
    module = LPPools().eval()
    graph = kuiper.load(export_model("lppools", module, (x,)), backend=backend)
    assert not graph.fallbacks
    for got, want in zip(graph.forward(x.numpy()), module(x)):
        assert_close(got, want.numpy())
