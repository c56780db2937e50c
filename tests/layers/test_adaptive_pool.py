"""Adaptive average/max pooling, output sizes that do not divide the input, against torch."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from kuiper.errors import OperatorError
from kuiper.layers.cpu.adaptive_pool import adaptive_bounds
from kuiper.tools.testing import assert_close, run_operator

SIZES_2D = [(1, 1), (4, 5), (3, 9), (11, 2), (7, 13), (0, 4), (5, 0), (20, 1)]
#            global  uneven  W kept  H kept  enlarge  None=0  None=0  enlarge H


def _torch_size(size):
    return tuple(None if s == 0 else s for s in size)


@pytest.mark.parametrize("op_type,shape", [("nn.AdaptiveAvgPool2d", (1, 5, 11, 9)),
                                           ("F.adaptive_avg_pool2d", (3, 13, 10, 7)),
                                           ("nn.AdaptiveAvgPool2d", (13, 10, 7))])
@pytest.mark.parametrize("size", SIZES_2D)
def test_adaptive_avg_pool2d_matches_torch(backend, rng, op_type, shape, size):
    x = rng.standard_normal(shape).astype(np.float32)
    (y,) = run_operator(op_type, [x], params={"output_size": list(size)}, backend=backend)
    ref = F.adaptive_avg_pool2d(torch.from_numpy(x), _torch_size(size))
    assert_close(y, ref.numpy())


@pytest.mark.parametrize("op_type,shape,indices", [("nn.AdaptiveMaxPool2d", (1, 5, 11, 9), False),
                                                   ("F.adaptive_max_pool2d", (3, 13, 10, 7), True),
                                                   ("F.adaptive_max_pool2d", (13, 10, 7), True)])
@pytest.mark.parametrize("size", SIZES_2D)
def test_adaptive_max_pool2d_matches_torch(backend, rng, op_type, shape, indices, size):
    x = rng.standard_normal(shape).astype(np.float32)
    params = {"output_size": list(size), "return_indices": indices}
    outs = run_operator(op_type, [x], params=params,
                        n_outputs=2 if indices else 1, backend=backend)
    ref, ref_idx = F.adaptive_max_pool2d(torch.from_numpy(x), _torch_size(size), True)
    assert_close(outs[0], ref.numpy())
    if indices:
        np.testing.assert_array_equal(outs[1], ref_idx.numpy())


@pytest.mark.parametrize("op_type", ["nn.AdaptiveAvgPool1d", "F.adaptive_avg_pool1d",
                                     "nn.AdaptiveMaxPool1d", "F.adaptive_max_pool1d"])
@pytest.mark.parametrize("shape", [(3, 13, 17), (1, 5, 4), (13, 6)])
@pytest.mark.parametrize("size", [1, 4, 5, 17, 23])
def test_adaptive_pool1d_matches_torch(backend, rng, op_type, shape, size):
    x = rng.standard_normal(shape).astype(np.float32)
    is_max = "max" in op_type.lower()
    indices = op_type.startswith("F.") and is_max  # pnnx writes both outputs for F.*max*
    params = {"output_size": [size]}
    if is_max:
        params["return_indices"] = indices
    outs = run_operator(op_type, [x], params=params, n_outputs=2 if indices else 1,
                        backend=backend)
    t = torch.from_numpy(x)
    if is_max:
        ref, ref_idx = F.adaptive_max_pool1d(t, size, True)
    else:
        ref, ref_idx = F.adaptive_avg_pool1d(t, size), None
    assert_close(outs[0], ref.numpy())
    if indices:
        np.testing.assert_array_equal(outs[1], ref_idx.numpy())


def test_adaptive_bounds_follow_torch_rule():
    starts, ends = adaptive_bounds(10, 4)  # windows [0,3) [2,5) [5,8) [7,10)
    np.testing.assert_array_equal(starts, [0, 2, 5, 7])
    np.testing.assert_array_equal(ends, [3, 5, 8, 10])


@pytest.mark.parametrize("size,message", [([2, 3, 4], "output_size"), ([-1, 2], ">= 1")])
def test_adaptive_pool_bad_output_size(backend, rng, size, message):
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    with pytest.raises(OperatorError, match=message):
        run_operator("nn.AdaptiveAvgPool2d", [x], params={"output_size": size},
                     backend=backend)
