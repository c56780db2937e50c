"""Average pooling (1-D, 2-D; count_include_pad, ceil_mode, divisor_override) against torch."""

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kuiper
from kuiper.core.errors import OperatorError, ShapeError
from kuiper.testing import assert_close, run_operator


def _grid(variants, kernels, strides, paddings, overrides):
    """Every combination PyTorch accepts, each with one (type, shape) variant chosen
    pseudo-randomly, so that no parameter always meets the same variant."""
    combos = [(k, s, p, c, inc, o) for k, s, p, c, inc, o in
              itertools.product(kernels, strides, paddings, (False, True), (False, True),
                                overrides)
              if all(pi <= ki // 2 for ki, pi in zip(*np.broadcast_arrays(np.atleast_1d(k),
                                                              np.atleast_1d(p))))]
    picks = np.random.default_rng(0).integers(len(variants), size=len(combos))
    return [variants[i] + combo for i, combo in zip(picks, combos)]


def _pnnx(value):
    if value is None:
        return None
    return list(value) if isinstance(value, tuple) else [value]


VARIANTS_2D = [("nn.AvgPool2d", (1, 5, 11, 9)), ("F.avg_pool2d", (3, 13, 10, 7))]


@pytest.mark.parametrize("op_type,shape,k,s,p,c,inc,o",
                         _grid(VARIANTS_2D, [1, 3, (3, 2)], [None, 1, (2, 3)], [0, 1, (1, 0)],
                               [None, 5]))
def test_avgpool2d_matches_torch(backend, rng, op_type, shape, k, s, p, c, inc, o):
    x = rng.standard_normal(shape).astype(np.float32)
    params = {"kernel_size": _pnnx(k), "stride": _pnnx(s), "padding": _pnnx(p), "ceil_mode": c,
              "count_include_pad": inc, "divisor_override": o}
    (y,) = run_operator(op_type, [x], params=params, backend=backend)
    ref = F.avg_pool2d(torch.from_numpy(x), k, s, p, c, inc, o)
    assert_close(y, ref.numpy())


VARIANTS_1D = [("nn.AvgPool1d", (1, 5, 17)), ("F.avg_pool1d", (3, 13, 16))]


@pytest.mark.parametrize("op_type,shape,k,s,p,c,inc,o",
                         _grid(VARIANTS_1D, [1, 2, 4], [None, 1, 3], [0, 1, 2], [None]))
def test_avgpool1d_matches_torch(backend, rng, op_type, shape, k, s, p, c, inc, o):
    x = rng.standard_normal(shape).astype(np.float32)
    params = {"kernel_size": [k], "stride": _pnnx(s), "padding": [p], "ceil_mode": c,
              "count_include_pad": inc}
    (y,) = run_operator(op_type, [x], params=params, backend=backend)
    assert_close(y, F.avg_pool1d(torch.from_numpy(x), k, s, p, c, inc).numpy())


VARIANTS_3D = [("nn.AvgPool3d", (1, 3, 7, 6, 9)), ("F.avg_pool3d", (2, 5, 6, 9, 5)),
               ("nn.AvgPool3d", (3, 8, 5, 7))]  # the last one unbatched


@pytest.mark.parametrize("op_type,shape,k,s,p,c,inc,o",
                         _grid(VARIANTS_3D, [2, (3, 1, 2)], [None, (2, 1, 3)], [0, (1, 0, 1)],
                               [None, 7]))
def test_avgpool3d_matches_torch(backend, rng, op_type, shape, k, s, p, c, inc, o):
    x = rng.standard_normal(shape).astype(np.float32)
    params = {"kernel_size": _pnnx(k), "stride": _pnnx(s), "padding": _pnnx(p), "ceil_mode": c,
              "count_include_pad": inc, "divisor_override": o}
    (y,) = run_operator(op_type, [x], params=params, backend=backend)
    ref = F.avg_pool3d(torch.from_numpy(x), k, s, p, c, inc, o)
    assert_close(y, ref.numpy())


@pytest.mark.parametrize("shape", [(7, 6, 5), (2, 3, 1, 1)])
def test_avgpool_unbatched_and_tiny(backend, rng, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    k = 1 if shape[-1] == 1 else 3
    params = {"kernel_size": [k, k], "stride": [2, 2], "padding": [k // 2, k // 2],
              "ceil_mode": True, "count_include_pad": True, "divisor_override": None}
    (y,) = run_operator("nn.AvgPool2d", [x], params=params, backend=backend)
    ref = F.avg_pool2d(torch.from_numpy(x), k, 2, k // 2, True, True)
    assert_close(y, ref.numpy())


def test_avgpool_padding_over_half_kernel_is_refused(backend, rng):
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    with pytest.raises(RuntimeError):  # PyTorch refuses it as well
        F.avg_pool2d(torch.from_numpy(x), 2, padding=2)
    with pytest.raises(OperatorError, match="more than half of kernel_size"):
        run_operator("F.avg_pool2d", [x], params={"kernel_size": [2, 2], "padding": [2, 1]},
                     backend=backend)


def test_avgpool_complex_input_is_refused(backend, rng):
    # found by `kuiper fuzz` (seed 20261128): a complex graph input reached the float32 sums
    # as a bare NumPy casting error; PyTorch has no complex average pooling either
    x = (rng.standard_normal((1, 2, 5, 7)) + 1j).astype(np.complex128)
    with pytest.raises(OperatorError, match="complex128, but F.avg_pool2d takes float16"):
        run_operator("F.avg_pool2d", [x], params={"kernel_size": [2, 2]}, backend=backend)


def test_avgpool_zero_divisor_is_refused(backend, rng):
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    with pytest.raises(OperatorError, match="divisor_override=0"):
        run_operator("nn.AvgPool2d", [x], params={"kernel_size": [2, 2], "divisor_override": 0},
                     backend=backend)


def test_avgpool_input_too_small(backend, rng):
    x = rng.standard_normal((2, 3, 5)).astype(np.float32)
    with pytest.raises(ShapeError, match="too small"):
        run_operator("F.avg_pool1d", [x], params={"kernel_size": [7]}, backend=backend)


@pytest.mark.slow
def test_avgpool3d_from_a_pnnx_export(backend, export_model):
    """A real export: nn.AvgPool3d with every option, and F.avg_pool3d (divisor_override=None
    written as None)."""

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.pool = torch.nn.AvgPool3d((3, 2, 3), stride=(2, 1, 2), padding=(1, 0, 1),
                                           ceil_mode=True, count_include_pad=False,
                                           divisor_override=5)

        def forward(self, x):
            return self.pool(x), F.avg_pool3d(x, 2, 1, 1, False, True, None)

    x = torch.randn(2, 3, 7, 6, 9, generator=torch.Generator().manual_seed(0))
    path = export_model("avgpool3d_net", Net(), (x,))
    text = path.read_text()
    assert "nn.AvgPool3d" in text and "F.avg_pool3d" in text
    outs = kuiper.load(path, backend=backend).forward(x.numpy())
    for got, ref in zip(outs, Net()(x), strict=True):
        assert_close(got, ref.numpy())
