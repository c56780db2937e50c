"""Max pooling (1-D, 2-D, with and without indices) against torch on both backends."""

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from kuiper.errors import OperatorError, ShapeError
from kuiper.layers.common.pooling import Window
from kuiper.tools.testing import assert_close, run_operator


def _grid(variants, kernels, strides, paddings, dilations):
    """Every combination PyTorch accepts (padding at most half the kernel, per axis), each with
    one of the (type, indices, shape) variants, chosen pseudo-randomly so that no parameter
    always meets the same variant (crossing them all would double an already large grid)."""
    combos = [(k, s, p, d, c) for k, s, p, d, c in
              itertools.product(kernels, strides, paddings, dilations, (False, True))
              if all(pi <= ki // 2 for ki, pi in zip(np.broadcast_to(k, 2), np.broadcast_to(p, 2)))]
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
    pool = F.max_pool1d if op_type.endswith("1d") else F.max_pool2d
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


@pytest.mark.parametrize("op_type,shape", [("F.max_pool2d", (7, 6, 5)), ("F.max_pool1d", (7, 9)),
                                           ("nn.MaxPool2d", (2, 1, 1, 1))])
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
