"""Fold and Unfold against torch (every kernel/stride/padding/dilation form pnnx writes),
on both backends."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kuiper
from kuiper import OperatorError, ShapeError
from kuiper.testing import assert_close, run_operator

# (kernel_size, stride, padding, dilation): pnnx's test_F_unfold / test_F_fold, then extras
GEOMETRIES = [
    ((3, 3), (1, 1), (0, 0), (1, 1)),
    ((2, 4), (2, 1), (2, 2), (1, 1)),
    ((1, 3), (1, 1), (2, 4), (1, 2)),
    ((2, 3), (1, 1), (2, 4), (1, 2)),
    ((3, 2), (3, 2), (1, 0), (2, 3)),
    ((1, 1), (2, 3), (0, 1), (1, 1)),
]


def _params(geometry):
    kernel, stride, padding, dilation = geometry
    return {"kernel_size": kernel, "stride": stride, "padding": padding, "dilation": dilation}


@pytest.mark.parametrize("op_type", ["nn.Unfold", "F.unfold"])
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=str)
@pytest.mark.parametrize("shape", [(2, 5, 13, 11), (3, 9, 10), (0, 4, 6, 6)])   # (a batch of 0)
def test_unfold_matches_torch(backend, rng, op_type, geometry, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    (y,) = run_operator(op_type, [x], params=_params(geometry), backend=backend)
    assert_close(y, F.unfold(torch.from_numpy(x), **_params(geometry)).numpy())


@pytest.mark.parametrize("op_type", ["nn.Fold", "F.fold"])
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=str)
@pytest.mark.parametrize("output_size, batch", [((13, 11), (2,)), ((9, 10), ()),
                                                ((22, 22), (1,))])
def test_fold_matches_torch(backend, rng, op_type, geometry, output_size, batch):
    params = _params(geometry)
    # the columns' shape is what unfold of an image of output_size gives
    probe = F.unfold(torch.zeros(1, 3, *output_size), **params)
    cols = rng.standard_normal(batch + tuple(probe.shape[1:])).astype(np.float32)
    (y,) = run_operator(op_type, [cols], params={**params, "output_size": output_size},
                        backend=backend)
    assert_close(y, F.fold(torch.from_numpy(cols), output_size, **params).numpy())


def test_fold_of_unfold_counts_the_overlaps(backend, rng):
    x = rng.standard_normal((1, 2, 7, 8)).astype(np.float32)
    params = _params(((3, 3), (1, 1), (1, 1), (1, 1)))
    (cols,) = run_operator("F.unfold", [x], params=params, backend=backend)
    (y,) = run_operator("F.fold", [cols], params={**params, "output_size": (7, 8)},
                        backend=backend)
    covers = F.fold(F.unfold(torch.ones(1, 2, 7, 8), **params), (7, 8), **params).numpy()
    assert_close(y, x * covers)


@pytest.mark.parametrize("op_type, params, shape, error, message", [
    ("F.unfold", {"kernel_size": (5, 5)}, (1, 2, 4, 4), ShapeError, "too small"),
    ("F.unfold", {"kernel_size": (2, 2)}, (4, 4), ShapeError, r"3-D \(C, H, W\) or 4-D"),
    ("F.unfold", {"kernel_size": (2, 2), "stride": (0, 1)}, (1, 2, 4, 4), OperatorError,
     r"stride=\(0, 1\)"),
    ("F.unfold", {}, (1, 2, 4, 4), OperatorError, "kernel_size"),
    ("F.fold", {"kernel_size": (2, 2), "output_size": (3, 3)}, (1, 6, 4), ShapeError,
     "divisible by kh\\*kw = 4"),
    ("F.fold", {"kernel_size": (2, 2), "output_size": (3, 3)}, (1, 8, 5), ShapeError,
     "number of blocks, 2\\*2 = 4"),
    ("F.fold", {"kernel_size": (2, 2)}, (1, 8, 4), OperatorError, "output_size"),
])
def test_fold_bad_input(backend, op_type, params, shape, error, message):
    with pytest.raises(error, match=message):
        run_operator(op_type, [np.ones(shape, np.float32)], params=params, backend=backend)


class Blocks(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.unfold = torch.nn.Unfold(kernel_size=(1, 3), stride=1, padding=(2, 4),
                                      dilation=(1, 2))
        self.fold = torch.nn.Fold(output_size=(17, 18), kernel_size=(2, 4), stride=(2, 1),
                                  padding=2, dilation=1)

    def forward(self, x, cols):
        return (self.unfold(x), F.unfold(x, kernel_size=3), self.fold(cols),
                F.fold(cols, output_size=(17, 18), kernel_size=(2, 4), stride=(2, 1), padding=2))


@pytest.mark.slow
def test_fold_pnnx_export(backend, rng, export_model):
    x = torch.from_numpy(rng.standard_normal((2, 3, 9, 10)).astype(np.float32))
    cols = torch.from_numpy(rng.standard_normal((2, 3 * 8, 190)).astype(np.float32))
    module = Blocks().eval()
    path = export_model("fold_unfold", module, (x, cols))
    text = path.read_text()
    assert all(t in text for t in ("nn.Unfold", "F.unfold", "nn.Fold", "F.fold"))
    graph = kuiper.load(path, backend=backend)
    assert not graph.fallbacks
    for got, want in zip(graph.forward(x.numpy(), cols.numpy()), module(x, cols)):
        assert_close(got, want.numpy())
