"""torch.split / chunk / tensor_split / unbind vs torch: several outputs, every one checked."""

import numpy as np
import pytest
import torch

import kuiper
from kuiper.testing import assert_close, run_operator, write_operator_model


def _check(outputs, expected):
    assert len(outputs) == len(expected)
    for k, (got, want) in enumerate(zip(outputs, expected)):
        assert_close(got, want.numpy(), what=f"output {k}")


@pytest.mark.parametrize("size, dim", [(2, 1), (3, 1), (7, 1), (10, 1), (1, -1), (4, 0)])
def test_split_size(backend, rng, size, dim):
    x = rng.standard_normal((3, 7, 5)).astype(np.float32)
    want = torch.split(torch.from_numpy(x), size, dim)
    outs = run_operator("torch.split", [x], params={"split_size_or_sections": size, "dim": dim},
                        n_outputs=len(want), backend=backend)
    _check(outs, want)


@pytest.mark.parametrize("sections, dim", [([1, 2, 2], -1), ([7], 1), ([0, 3, 4], 1),
                                           ([2, 1], 0)])
def test_split_sections(backend, rng, sections, dim):
    x = rng.standard_normal((3, 7, 5)).astype(np.float32)
    want = torch.split(torch.from_numpy(x), sections, dim)
    outs = run_operator("torch.split", [x], params={"split_size_or_sections": sections,
                                                     "dim": dim},
                        n_outputs=len(want), backend=backend)
    _check(outs, want)


@pytest.mark.parametrize("chunks, dim", [(3, 1), (2, 1), (7, 1), (4, -1), (1, 0), (6, 2)])
def test_chunk(backend, rng, chunks, dim):
    # (6, 2): 5 elements in chunks of 1 -> only 5 outputs; (4, -1) -> chunks of 2: 3 outputs.
    x = rng.standard_normal((2, 7, 5)).astype(np.float32)
    want = torch.chunk(torch.from_numpy(x), chunks, dim)
    outs = run_operator("torch.chunk", [x], params={"chunks": chunks, "dim": dim},
                        n_outputs=len(want), backend=backend)
    _check(outs, want)


@pytest.mark.parametrize("params, split", [
    ({"sections": 3, "dim": 2}, lambda t: torch.tensor_split(t, 3, 2)),
    ({"sections": 4, "dim": 1}, lambda t: torch.tensor_split(t, 4, 1)),
    ({"sections": 9, "dim": 1}, lambda t: torch.tensor_split(t, 9, 1)),
    ({"indices": [1, 4], "dim": 1}, lambda t: torch.tensor_split(t, [1, 4], 1)),
    ({"indices": [2, -1], "dim": -1}, lambda t: torch.tensor_split(t, [2, -1], -1)),
    ({"indices": [3, 1, 9], "dim": 1}, lambda t: torch.tensor_split(t, [3, 1, 9], 1)),
])
def test_tensor_split(backend, rng, params, split):
    x = rng.standard_normal((2, 7, 5)).astype(np.float32)
    want = split(torch.from_numpy(x))
    outs = run_operator("torch.tensor_split", [x], params=params, n_outputs=len(want),
                        backend=backend)
    _check(outs, want)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_unbind(backend, rng, dim):
    x = rng.standard_normal((2, 3, 5)).astype(np.float32)
    want = torch.unbind(torch.from_numpy(x), dim)
    outs = run_operator("torch.unbind", [x], params={"dim": dim}, n_outputs=len(want),
                        backend=backend)
    _check(outs, want)


def test_split_int64(backend, rng):
    x = rng.integers(0, 100, (4, 6), dtype=np.int64)
    outs = run_operator("torch.chunk", [x], params={"chunks": 2, "dim": 1}, n_outputs=2,
                        backend=backend)
    for got, want in zip(outs, np.split(x, 2, 1)):
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, want)


def test_unused_outputs_still_exist(backend, rng, tmp_path):
    """torch.chunk(x, 3, 1)[0]: pnnx lists all 3 outputs, the model returns only the first."""
    x = rng.standard_normal((2, 7, 5)).astype(np.float32)
    param = tmp_path / "model.pnnx.param"
    param.write_text(
        "7767517\n3 4\n"
        "pnnx.Input in0 0 1 0 #0=(2,7,5)f32\n"
        "torch.chunk op0 1 3 0 1 2 3 chunks=3 dim=1 #0=(2,7,5)f32 #1=(2,3,5)f32 "
        "#2=(2,3,5)f32 #3=(2,1,5)f32\n"
        "pnnx.Output out0 1 0 1\n")
    (y,) = kuiper.load(param, backend=backend).forward(x)
    assert_close(y, torch.chunk(torch.from_numpy(x), 3, 1)[0].numpy())


def test_x0_as_unbind_at_another_batch(backend, rng, tmp_path):
    """pnnx writes x[0] on a batch-1 input as a one-output torch.unbind; at batch 3 it still
    means x[0] (the other pieces have no operand)."""
    x1 = rng.standard_normal((1, 7, 5)).astype(np.float32)
    path = write_operator_model(tmp_path, "torch.unbind", [x1], {"dim": 0})
    graph = kuiper.load(path, backend=backend)
    x3 = rng.standard_normal((3, 7, 5)).astype(np.float32)
    (y,) = graph.forward(x3)
    assert_close(y, x3[0])


@pytest.mark.parametrize("op_type, params, n_outputs, error, message", [
    ("torch.split", {"split_size_or_sections": [2, 2], "dim": 1}, 2, kuiper.ShapeError,
     "add up to 4, but dim 1 has size 7"),
    ("torch.split", {"split_size_or_sections": 0, "dim": 1}, 1, kuiper.OperatorError,
     "must be positive"),
    ("torch.chunk", {"chunks": 0, "dim": 1}, 1, kuiper.OperatorError, "chunks=0"),
    ("torch.chunk", {"chunks": 3, "dim": 0}, 3, kuiper.ShapeError,
     "splits into 2 piece\\(s\\) but the model uses 3 outputs"),
    ("torch.tensor_split", {"dim": 1}, 1, kuiper.OperatorError, "'sections' or 'indices'"),
    ("torch.unbind", {"dim": 3}, 1, kuiper.ShapeError, "dim=3 is out of range"),
])
def test_split_bad(backend, op_type, params, n_outputs, error, message):
    x = np.zeros((2, 7, 5), np.float32)
    with pytest.raises(error, match=message):
        run_operator(op_type, [x], params=params, n_outputs=n_outputs, backend=backend)


class _Pieces(torch.nn.Module):
    def forward(self, x):
        a, b = torch.split(x, [3, 4], 1)
        return torch.chunk(x, 3, 1)[0], torch.unbind(x, 2)[1], a, b, \
            torch.tensor_split(x, [1, 4], 2)[2]


def test_real_export(backend, rng, export_model):
    """chunk()[0] and unbind()[1]: pnnx keeps every output; run at two batch sizes."""
    path = export_model("split_pieces", _Pieces(), torch.zeros(1, 7, 5))
    graph = kuiper.load(path, backend=backend)
    for batch in (1, 3):
        x = rng.standard_normal((batch, 7, 5)).astype(np.float32)
        with torch.no_grad():
            want = _Pieces()(torch.from_numpy(x))
        _check(graph.forward(x), want)


@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.int64])
@pytest.mark.parametrize("inner", [8, 4, 2, 1, 3])
def test_split_copy_units(backend, rng, dtype, inner):
    """split4 copies in the widest unit every row length divides, as cat4 does (see
    test_cat_copy_units): five outputs, batches of one and two."""
    for batch in (1, 2):
        x = (rng.standard_normal((batch, 12, inner)) * 50).astype(dtype)
        sections = [2, 1, 3, 2, 4]
        outs = run_operator("torch.split", [x], params={"split_size_or_sections": sections,
                                                        "dim": 1},
                            n_outputs=len(sections), backend=backend)
        for got, want in zip(outs, np.split(x, np.cumsum(sections)[:-1], axis=1)):
            np.testing.assert_array_equal(got, want)
