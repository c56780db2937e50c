"""Max pooling (1-D, 2-D, with and without indices) against torch on both backends."""

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kuiper
from kuiper.core.errors import OperatorError, ShapeError
from kuiper.layers.common.pooling import Window
from kuiper.testing import assert_close, run_operator


def _grid(variants, kernels, strides, paddings, dilations):
    """Every combination PyTorch accepts (padding at most half the kernel, per axis), each with
    one of the (type, indices, shape) variants, chosen pseudo-randomly so that no parameter
    always meets the same variant (crossing them all would double an already large grid)."""
    combos = [(k, s, p, d, c) for k, s, p, d, c in
              itertools.product(kernels, strides, paddings, dilations, (False, True))
              if all(pi <= ki // 2 for ki, pi in zip(*np.broadcast_arrays(np.atleast_1d(k),
                                                                           np.atleast_1d(p))))]
    picks = np.random.default_rng(0).integers(len(variants), size=len(combos))
    return [variants[i] + combo for i, combo in zip(picks, combos)]


def _pnnx(value):
    """Parameters as pnnx writes them: tuples; stride None stays None."""
    if value is None:
        return None
    return list(value) if isinstance(value, tuple) else [value]


def _run_and_check(backend, rng, op_type, shape, k, s, p, d, c, indices):
    x = rng.standard_normal(shape).astype(np.float32)
    params = {"kernel_size": _pnnx(k), "stride": _pnnx(s), "padding": _pnnx(p),
              "dilation": _pnnx(d), "ceil_mode": c, "return_indices": indices}
    outs = run_operator(op_type, [x], params=params, n_outputs=2 if indices else 1,
                        backend=backend)
    pool = {"1d": F.max_pool1d, "2d": F.max_pool2d, "3d": F.max_pool3d}[op_type[-2:]]
    ref = pool(torch.from_numpy(x), k, s, p, d, ceil_mode=c, return_indices=True)
    assert_close(outs[0], ref[0].numpy())
    if indices:
        assert outs[1].dtype == np.int64
        np.testing.assert_array_equal(outs[1], ref[1].numpy())


VARIANTS_2D = [("nn.MaxPool2d", False, (1, 5, 11, 9)), ("F.max_pool2d", True, (3, 13, 10, 7))]


@pytest.mark.parametrize("op_type,indices,shape,k,s,p,d,c",
                         _grid(VARIANTS_2D, [1, 3, (3, 2)], [None, 1, (2, 3)], [0, 1, (1, 0)],
                               [1, (2, 1)]))
def test_maxpool2d_matches_torch(backend, rng, op_type, indices, shape, k, s, p, d, c):
    _run_and_check(backend, rng, op_type, shape, k, s, p, d, c, indices)


VARIANTS_1D = [("nn.MaxPool1d", False, (1, 5, 17)), ("F.max_pool1d", True, (3, 13, 16))]


@pytest.mark.parametrize("op_type,indices,shape,k,s,p,d,c",
                         _grid(VARIANTS_1D, [1, 2, 4], [None, 1, 3], [0, 1, 2], [1, 2]))
def test_maxpool1d_matches_torch(backend, rng, op_type, indices, shape, k, s, p, d, c):
    _run_and_check(backend, rng, op_type, shape, k, s, p, d, c, indices)


VARIANTS_3D = [("nn.MaxPool3d", False, (1, 3, 7, 6, 9)), ("F.max_pool3d", True, (2, 5, 6, 9, 5)),
               ("nn.MaxPool3d", True, (3, 8, 5, 7))]  # the last one unbatched


@pytest.mark.parametrize("op_type,indices,shape,k,s,p,d,c",
                         _grid(VARIANTS_3D, [2, (3, 1, 2)], [None, 1, (2, 1, 3)], [0, (1, 0, 1)],
                               [1, (1, 2, 1)]))
def test_maxpool3d_matches_torch(backend, rng, op_type, indices, shape, k, s, p, d, c):
    _run_and_check(backend, rng, op_type, shape, k, s, p, d, c, indices)


@pytest.mark.parametrize("op_type,shape", [("F.max_pool2d", (7, 6, 5)), ("F.max_pool1d", (7, 9)),
                                           ("nn.MaxPool2d", (2, 1, 1, 1)),
                                           ("F.max_pool3d", (2, 1, 1, 1, 1))])
def test_maxpool_unbatched_and_tiny(backend, rng, op_type, shape):
    k = 1 if shape[-1] == 1 else 2
    _run_and_check(backend, rng, op_type, shape, k, None, 0, 1, True, True)


def test_maxpool_nan_and_ties(backend):
    """A NaN wins its window; among equal values the first in row-major order is reported."""
    x = np.zeros((1, 2, 4, 4), np.float32)
    x[0, 0, 1, 2] = np.nan
    x[0, 1] = 1.0
    params = {"kernel_size": [2, 2], "stride": None, "padding": [1, 1], "return_indices": True}
    y, idx = run_operator("F.max_pool2d", [x], params=params, n_outputs=2, backend=backend)
    ry, ri = F.max_pool2d(torch.from_numpy(x), 2, padding=1, return_indices=True)
    assert_close(y, ry.numpy())
    np.testing.assert_array_equal(idx, ri.numpy())


@pytest.mark.parametrize("k", [5, 9, 13])
def test_maxpool_spp_windows_with_nans(backend, rng, k):
    """YOLOv5's SPP pools (k x k, stride 1, padding k // 2) with NaNs sprinkled in: the NumPy
    backend pools these one axis at a time, and a NaN must still win its whole box."""
    x = rng.standard_normal((1, 6, 11, 13)).astype(np.float32)
    x[0, rng.integers(6, size=4), rng.integers(11, size=4), rng.integers(13, size=4)] = np.nan
    params = {"kernel_size": [k, k], "stride": [1, 1], "padding": [k // 2, k // 2]}
    (y,) = run_operator("nn.MaxPool2d", [x], params=params, backend=backend)
    expected = F.max_pool2d(torch.from_numpy(x), k, 1, k // 2).numpy()
    np.testing.assert_array_equal(np.isnan(y), np.isnan(expected))
    assert_close(y, expected)


def test_maxpool3d_nan_and_ties(backend):
    """3-D indices are flat per plane, (z*H + y)*W + x; NaN wins, ties go to the first tap."""
    x = np.zeros((1, 2, 3, 4, 4), np.float32)
    x[0, 0, 1, 2, 3] = np.nan
    x[0, 1] = 1.0
    params = {"kernel_size": [2, 2, 2], "stride": None, "padding": [1, 1, 1],
              "return_indices": True}
    y, idx = run_operator("F.max_pool3d", [x], params=params, n_outputs=2, backend=backend)
    ry, ri = F.max_pool3d(torch.from_numpy(x), 2, padding=1, return_indices=True)
    assert_close(y, ry.numpy())
    np.testing.assert_array_equal(idx, ri.numpy())


def test_window_out_size_matches_torch():
    """The ceil_mode rule (last window must start inside the input or left padding)."""
    for n, k, s, d, c in itertools.product(range(1, 10), range(1, 5), range(1, 4), (1, 2),
                                           (False, True)):
        for p in range(k // 2 + 1):
            w = Window(k, s, p, d, c)
            try:
                expected = F.max_pool1d(torch.zeros(1, 1, n), k, s, p, d, c).shape[-1]
            except RuntimeError:
                assert w.out_size(n) < 1, (n, k, s, p, d, c)
                continue
            assert w.out_size(n) == expected, (n, k, s, p, d, c)


def test_maxpool_padding_over_half_kernel_is_refused(backend, rng):
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    with pytest.raises(RuntimeError):  # PyTorch refuses it as well
        F.max_pool2d(torch.from_numpy(x), 3, padding=2)
    with pytest.raises(OperatorError, match="more than half of kernel_size"):
        run_operator("nn.MaxPool2d", [x], params={"kernel_size": [3, 3], "padding": [2, 2]},
                     backend=backend)


@pytest.mark.parametrize("params,message", [
    ({"kernel_size": [0, 3]}, "kernel_size"),
    ({"kernel_size": [3, 3], "stride": [0, 1]}, "stride"),
    ({"kernel_size": [3, 3], "dilation": [1, 0]}, "dilation"),
    ({"kernel_size": [2, 2], "return_indices": True}, "return_indices"),
])
def test_maxpool_bad_params(backend, rng, params, message):
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    with pytest.raises(OperatorError, match=message):
        run_operator("F.max_pool2d", [x], params=params, backend=backend)


def test_maxpool_input_too_small(backend, rng):
    x = rng.standard_normal((1, 3, 2, 8)).astype(np.float32)
    with pytest.raises(ShapeError, match="too small"):
        run_operator("nn.MaxPool2d", [x], params={"kernel_size": [3, 3], "dilation": [2, 2]},
                     backend=backend)


def test_maxpool_wrong_rank(backend, rng):
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    with pytest.raises(ShapeError, match="2-D .unbatched. or 3-D"):
        run_operator("nn.MaxPool1d", [x], params={"kernel_size": [3]}, backend=backend)


@pytest.mark.slow
def test_maxpool3d_from_a_pnnx_export(backend, export_model):
    """A real export: nn.MaxPool3d with dilation, ceil_mode and indices (pnnx writes two
    outputs), and F.max_pool3d without indices."""

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.pool = torch.nn.MaxPool3d((2, 3, 2), stride=(1, 2, 2), padding=(1, 1, 0),
                                           dilation=(2, 1, 2), ceil_mode=True,
                                           return_indices=True)

        def forward(self, x):
            values, indices = self.pool(x)
            return values, indices, F.max_pool3d(x, 3, 2, 1)

    x = torch.randn(2, 3, 7, 6, 9, generator=torch.Generator().manual_seed(0))
    path = export_model("maxpool3d_net", Net(), (x,))
    text = path.read_text()
    assert "nn.MaxPool3d" in text and "F.max_pool3d" in text
    outs = kuiper.load(path, backend=backend).forward(x.numpy())
    refs = Net()(x)
    assert outs[1].dtype == np.int64
    np.testing.assert_array_equal(outs[1], refs[1].numpy())
    assert_close(outs[0], refs[0].numpy())
    assert_close(outs[2], refs[2].numpy())
