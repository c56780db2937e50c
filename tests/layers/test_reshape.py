"""Reshape-like operators (reshape/view, flatten, squeeze, unsqueeze, unflatten) vs torch.

Data movement is exact, so outputs are compared with assert_close at its default tolerance
(they must in fact be equal). Also covered: a shape arriving as a known second input, the batch
rule for shapes baked into a static export, and the errors for shapes that cannot work.
"""

import numpy as np
import pytest
import torch
from torch import nn

import kuiper
from kuiper.testing import assert_close, run_operator, write_operator_model


@pytest.mark.parametrize("op_type", ["Tensor.reshape", "Tensor.view", "torch.reshape"])
@pytest.mark.parametrize("shape", [(3, 13, 20), (3, -1), (-1,), (39, 4, 5), (3, 1, 13, 1, 20)])
def test_reshape_param(backend, rng, op_type, shape):
    x = rng.standard_normal((3, 13, 4, 5)).astype(np.float32)
    (y,) = run_operator(op_type, [x], params={"shape": list(shape)}, backend=backend)
    assert_close(y, torch.from_numpy(x).reshape(shape).numpy())


def test_reshape_to_scalar_and_int64(backend):
    # shape=None is how pnnx writes reshape(()) on a one-element tensor.
    x = np.array([[7]], dtype=np.int64)
    (y,) = run_operator("Tensor.reshape", [x], params={"shape": None}, backend=backend)
    assert y.shape == () and y.dtype == np.int64 and int(y) == 7


@pytest.mark.parametrize("shape", [[2, -1, 5], [26, 5]])
def test_reshape_shape_from_known_input(backend, rng, shape):
    # A shape input whose value is known at build time (here a constant, in real models a
    # pnnx.Expression like [size(@0,0),-1]).
    x = rng.standard_normal((2, 13, 5)).astype(np.float32)
    target = np.array(shape, dtype=np.int64)
    (y,) = run_operator("Tensor.reshape", [x, target], constants=[1], backend=backend)
    assert_close(y, torch.from_numpy(x).reshape(shape).numpy())


@pytest.mark.parametrize("shape", [(1, 13, 20), (1, -1), (1, 13, 4, 5)])
def test_reshape_batch_rule(backend, rng, tmp_path, shape):
    """Written for batch 1 (as a static pnnx export would), run at batch 3."""
    x1 = rng.standard_normal((1, 13, 4, 5)).astype(np.float32)
    path = write_operator_model(tmp_path, "Tensor.reshape", [x1], {"shape": list(shape)})
    graph = kuiper.load(path, backend=backend)
    x3 = rng.standard_normal((3, 13, 4, 5)).astype(np.float32)
    (y,) = graph.forward(x3)
    assert_close(y, torch.from_numpy(x3).reshape((3,) + tuple(shape[1:])).numpy())


class _Heads(nn.Module):
    """A real export: view(size(0), -1) and a reshape whose leading 1 pnnx bakes in."""

    def forward(self, x):
        y = x.view(x.size(0), -1)
        z = x.reshape(x.shape[0], 13, -1).transpose(1, 2)
        return y, torch.flatten(z, 1)


def test_reshape_batch_rule_on_real_export(backend, rng, export_model):
    path = export_model("reshape_heads", _Heads(), torch.zeros(1, 13, 4, 5))
    assert "shape=(1," in path.read_text()  # the batch really is baked into the file
    graph = kuiper.load(path, backend=backend)
    x = rng.standard_normal((3, 13, 4, 5)).astype(np.float32)
    got = graph.forward(x)
    with torch.no_grad():
        want = _Heads()(torch.from_numpy(x))
    for g, w in zip(got, want):
        assert_close(g, w.numpy())


def test_reshape_baked_shape_error(backend, rng, tmp_path):
    # x.view(-1) exported at batch 4 is `shape=(140)`: nothing says which part was the batch.
    x4 = rng.standard_normal((4, 7, 5)).astype(np.float32)
    path = write_operator_model(tmp_path, "Tensor.reshape", [x4], {"shape": [140]})
    graph = kuiper.load(path, backend=backend)
    with pytest.raises(kuiper.ShapeError, match=r"\(140,\).*re-export"):
        graph.forward(rng.standard_normal((2, 7, 5)).astype(np.float32))


@pytest.mark.parametrize("shape, message", [([-1, -1], "more than one -1"),
                                            ([7, 7], "cannot reshape"),
                                            ([-1, 4], "cannot reshape")])
def test_reshape_bad_shape(backend, shape, message):
    x = np.zeros((2, 3, 5), np.float32)
    with pytest.raises(kuiper.OperatorError, match=message):
        run_operator("Tensor.reshape", [x], params={"shape": shape}, backend=backend)


def test_reshape_unknown_shape_input(backend):
    x, shape = np.zeros((2, 6), np.float32), np.array([3, 4], np.int64)
    with pytest.raises(kuiper.OperatorError, match="not known when the model is built"):
        run_operator("Tensor.reshape", [x, shape], backend=backend)


@pytest.mark.parametrize("op_type, params, expected", [
    ("torch.flatten", {"start_dim": 1, "end_dim": -1}, lambda t: torch.flatten(t, 1)),
    ("torch.flatten", {"start_dim": 1, "end_dim": 2}, lambda t: torch.flatten(t, 1, 2)),
    ("torch.flatten", {"start_dim": -2, "end_dim": -1}, lambda t: torch.flatten(t, -2)),
    ("torch.flatten", {}, lambda t: torch.flatten(t)),
    ("torch.flatten", {"start_dim": 2, "end_dim": 2}, lambda t: torch.flatten(t, 2, 2)),
    ("nn.Flatten", {}, nn.Flatten()),
    ("nn.Flatten", {"start_dim": 0, "end_dim": 1}, nn.Flatten(0, 1)),
])
def test_flatten(backend, rng, op_type, params, expected):
    x = rng.standard_normal((2, 13, 3, 5)).astype(np.float32)
    (y,) = run_operator(op_type, [x], params=params, backend=backend)
    assert_close(y, expected(torch.from_numpy(x)).numpy())


def test_flatten_bad_dims(backend):
    with pytest.raises(kuiper.OperatorError, match="start_dim=2 comes after end_dim=1"):
        run_operator("torch.flatten", [np.zeros((2, 3, 4), np.float32)],
                     params={"start_dim": 2, "end_dim": 1}, backend=backend)


@pytest.mark.parametrize("dim", [None, 1, -1, [1, 3], [0, 2], 2])
def test_squeeze(backend, rng, dim):
    x = rng.standard_normal((1, 1, 7, 1)).astype(np.float32)
    params = {} if dim is None else {"dim": dim}
    (y,) = run_operator("torch.squeeze", [x], params=params, backend=backend)
    t = torch.from_numpy(x)
    want = torch.squeeze(t) if dim is None else torch.squeeze(t, tuple(np.atleast_1d(dim)))
    assert_close(y, want.numpy())


@pytest.mark.parametrize("dim", [0, 1, 3, -1, -4])
def test_unsqueeze(backend, rng, dim):
    x = rng.standard_normal((2, 13, 3)).astype(np.float32)
    (y,) = run_operator("torch.unsqueeze", [x], params={"dim": dim}, backend=backend)
    assert_close(y, torch.unsqueeze(torch.from_numpy(x), dim).numpy())


def torch_unsqueeze_dims(t, dims):
    """ONNX Unsqueeze, as pnnx writes it on its ONNX route (`dim=(0,1)`): each dim is a
    position in the output, so unsqueezing the sorted, normalized dims one at a time."""
    rank = t.dim() + len(dims)
    for d in sorted(d % rank for d in dims):
        t = torch.unsqueeze(t, d)
    return t


# Lines as pnnx's ONNX route writes them (onnx/test_torch_unsqueeze, onnx/test_onnx_layout_ops).
@pytest.mark.parametrize("dim, dims", [("(0,1)", [0, 1]), ("(-1,1)", [-1, 1]), ("(2,3)", [2, 3]),
                                       ("(-2,-1)", [-2, -1]), ("(3,0,-1)", [3, 0, -1]),
                                       ("(1)", [1]), ([0, 4], [0, 4])])
def test_unsqueeze_several_dims(backend, rng, dim, dims):
    x = rng.standard_normal((2, 13, 3)).astype(np.float32)
    (y,) = run_operator("torch.unsqueeze", [x], params={"dim": dim}, backend=backend)
    want = torch_unsqueeze_dims(torch.from_numpy(x), dims)
    assert y.shape == tuple(want.shape)
    assert_close(y, want.numpy())


# onnx/test_F_group_norm: an ONNX Unsqueeze with no axes comes out as `dim=()`: no new dim.
@pytest.mark.parametrize("dim", ["()", None])
def test_unsqueeze_no_dims_is_identity(backend, rng, dim):
    x = rng.standard_normal((16,)).astype(np.float32)
    (y,) = run_operator("torch.unsqueeze", [x], params={"dim": dim}, backend=backend)
    assert_close(y, x)


def test_unsqueeze_several_dims_bad(backend):
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(kuiper.ShapeError, match="dim=4 is out of range"):
        run_operator("torch.unsqueeze", [x], params={"dim": "(0,4)"}, backend=backend)
    with pytest.raises(kuiper.OperatorError, match="names the same dim twice"):
        run_operator("torch.unsqueeze", [x], params={"dim": "(1,-3)"}, backend=backend)


def test_unsqueeze_bad_dim(backend):
    with pytest.raises(kuiper.ShapeError, match="dim=4 is out of range"):
        run_operator("torch.unsqueeze", [np.zeros((2, 3), np.float32)], params={"dim": 4},
                     backend=backend)


@pytest.mark.parametrize("op_type, params, dim, sizes", [
    ("Tensor.unflatten", {"dim": 1, "sizes": [13, 4]}, 1, (13, 4)),
    ("Tensor.unflatten", {"dim": -1, "sizes": [2, -1]}, -1, (2, -1)),
    ("nn.Unflatten", {"dim": 1, "unflattened_size": [2, 2, 13]}, 1, (2, 2, 13)),
])
def test_unflatten(backend, rng, op_type, params, dim, sizes):
    x = rng.standard_normal((3, 52, 6)).astype(np.float32)
    (y,) = run_operator(op_type, [x], params=params, backend=backend)
    assert_close(y, torch.unflatten(torch.from_numpy(x), dim, sizes).numpy())


def test_unflatten_bad_sizes(backend):
    with pytest.raises(kuiper.ShapeError, match="do not multiply"):
        run_operator("Tensor.unflatten", [np.zeros((2, 12), np.float32)],
                     params={"dim": 1, "sizes": [5, 2]}, backend=backend)
