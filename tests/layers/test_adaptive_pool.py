"""Adaptive average/max pooling, output sizes that do not divide the input, against torch."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kuiper
from kuiper.core.errors import OperatorError
from kuiper.layers.cpu.adaptive_pool import adaptive_bounds
from kuiper.testing import assert_close, run_operator

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


SIZES_3D = [(1, 1, 1), (2, 3, 4), (5, 0, 2), (0, 0, 7), (9, 1, 3)]
#            global     uneven     H kept     D,H kept   enlarge D and W


@pytest.mark.parametrize("op_type,shape,indices", [
    ("nn.AdaptiveAvgPool3d", (1, 3, 7, 6, 5), False),
    ("F.adaptive_avg_pool3d", (5, 4, 9, 6), False),       # unbatched
    ("nn.AdaptiveMaxPool3d", (2, 3, 7, 6, 5), False),
    ("F.adaptive_max_pool3d", (3, 5, 4, 9, 6), True),
    ("F.adaptive_max_pool3d", (5, 7, 3, 6), True)])      # unbatched
@pytest.mark.parametrize("size", SIZES_3D)
def test_adaptive_pool3d_matches_torch(backend, rng, op_type, shape, indices, size):
    x = rng.standard_normal(shape).astype(np.float32)
    params = {"output_size": list(size)}
    if "max" in op_type.lower():
        params["return_indices"] = indices
    outs = run_operator(op_type, [x], params=params, n_outputs=2 if indices else 1,
                        backend=backend)
    t = torch.from_numpy(x)
    if "max" in op_type.lower():
        ref, ref_idx = F.adaptive_max_pool3d(t, _torch_size(size), True)
    else:
        ref, ref_idx = F.adaptive_avg_pool3d(t, _torch_size(size)), None
    assert_close(outs[0], ref.numpy())
    if indices:
        assert outs[1].dtype == np.int64
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


@pytest.mark.slow
def test_adaptive_pool3d_from_a_pnnx_export(backend, export_model):
    """A real export: nn.AdaptiveAvgPool3d with a None size (pnnx writes 0) and
    nn.AdaptiveMaxPool3d with indices (a tuple and a prim::TupleUnpack,
    kuiper/graph/tuple_unpack.py), F.adaptive_max_pool3d with two outputs."""

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.avg = torch.nn.AdaptiveAvgPool3d((2, None, 3))
            self.max = torch.nn.AdaptiveMaxPool3d((3, 2, 4), return_indices=True)

        def forward(self, x):
            return (self.avg(x), *self.max(x),
                    *F.adaptive_max_pool3d(x, (1, 4, 2), return_indices=True))

    x = torch.randn(2, 3, 7, 6, 9, generator=torch.Generator().manual_seed(0))
    path = export_model("adaptive_pool3d_net", Net(), (x,))
    text = path.read_text()
    assert "output_size=(2,0,3)" in text and "prim::TupleUnpack" in text
    outs = kuiper.load(path, backend=backend).forward(x.numpy())
    refs = Net()(x)
    assert len(outs) == len(refs) == 5
    for got, ref in zip(outs, refs):
        if ref.dtype == torch.int64:
            np.testing.assert_array_equal(got, ref.numpy())
        else:
            assert_close(got, ref.numpy())
