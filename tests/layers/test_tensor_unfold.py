"""Tensor.unfold / aten::unfold (windows along one dim as a new last dim) against torch."""

import numpy as np
import pytest
import torch
from torch import nn

import kuiper
from kuiper.testing import assert_close, run_operator

ARGS = ("dimension", "size", "step")


@pytest.mark.parametrize("shape, args", [
    ((2, 5, 7), (2, 3, 2)),      # windows overlap less than they step: the tail is dropped
    ((2, 5, 7), (-1, 7, 1)),     # one window, the whole dim
    ((2, 5, 7), (1, 5, 10)),     # a step past the end
    ((3, 13), (0, 2, 1)),        # overlapping windows
    ((4, 1, 9, 6), (2, 4, 3)),
    ((2, 5, 7), (1, 0, 1)),      # windows of no value: an empty output
    ((11,), (0, 3, 4)),
    ((), (0, 1, 1)),             # a 0-D input is one value
])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_tensor_unfold_matches_torch(backend, rng, shape, args, dtype):
    x = np.asarray(rng.standard_normal(shape) * 10).astype(dtype)
    (y,) = run_operator("Tensor.unfold", [x], params=dict(zip(ARGS, args)), backend=backend)
    want = torch.from_numpy(x).unfold(*args).numpy()
    assert y.shape == want.shape and y.dtype == want.dtype
    assert_close(y, want)


def test_aten_unfold_takes_its_arguments_as_inputs(backend, rng):
    # as pnnx writes it for timm's HaloNet: aten::unfold with three computed constants
    x = rng.standard_normal((1, 6, 20, 20)).astype(np.float32)
    args = [np.array(2, np.int64), np.array(12, np.int64), np.array(8, np.int64)]
    (y,) = run_operator("aten::unfold", [x, *args], constants=[1, 2, 3], backend=backend)
    assert_close(y, torch.from_numpy(x).unfold(2, 12, 8).numpy())


class Blocks(nn.Module):
    """HaloNet's block cut: windows along H, then along W, of 4 values 3 apart."""

    def forward(self, x):
        return x.unfold(2, 4, 3).unfold(3, 4, 3).sum(dim=(-1, -2))


def test_unfold_from_pnnx_export(backend, rng, tmp_path):
    pytest.importorskip("pnnx", reason="pnnx is not installed (it is in the test extras)")
    from tests.models.export import export_with_pnnx

    x = rng.standard_normal((1, 3, 11, 10)).astype(np.float32)
    try:
        path = export_with_pnnx(tmp_path, Blocks(), torch.from_numpy(x))
    except SyntaxError:   # pnnx writes `aten::unfold(...)` into its own Python rebuild of the
        path = tmp_path / "model.pnnx.param"   # model, which then fails; the .param is whole
    graph = kuiper.load(path, backend=backend)
    assert {"aten::unfold", "Tensor.unfold"} & {op.type for op in graph.order}
    assert_close(graph(x), Blocks()(torch.from_numpy(x)).numpy())


@pytest.mark.parametrize("args, error, message", [
    ((1, 6, 1), kuiper.ShapeError, "size=6 does not fit dim 1 of length 5"),
    ((1, 2, 0), kuiper.OperatorError, "step=0 must be >= 1"),
    ((3, 2, 1), kuiper.ShapeError, "dimension=3 is out of range"),
])
def test_tensor_unfold_bad_arguments(backend, args, error, message):
    x = np.zeros((2, 5, 7), np.float32)
    with pytest.raises(error, match=message):
        run_operator("Tensor.unfold", [x], params=dict(zip(ARGS, args)), backend=backend)


def test_aten_unfold_needs_known_arguments(backend):
    x = np.zeros((2, 5, 7), np.float32)
    with pytest.raises(kuiper.OperatorError, match="the size input is not known"):
        run_operator("aten::unfold", [x, np.array(1), np.array(2), np.array(1)],
                     constants=[1, 3], backend=backend)


def test_tensor_unfold_says_where_its_arguments_are_missing(backend):
    x = np.zeros((2, 5, 7), np.float32)
    with pytest.raises(kuiper.OperatorError, match=r"got parameter\(s\) \['dimension'\] and 1"):
        run_operator("Tensor.unfold", [x], params={"dimension": 1}, backend=backend)
