"""torch.cat / torch.concat / torch.stack vs torch, including one operand used several times."""

import numpy as np
import pytest
import torch

import kuiper
from kuiper.testing import assert_close, run_operator


@pytest.mark.parametrize("op_type", ["torch.cat", "torch.concat"])
@pytest.mark.parametrize("dim", [0, 1, 2, 3, -1, -3])
def test_cat(backend, rng, op_type, dim):
    shapes = []
    for size in (1, 5, 2):  # inputs differ along `dim` only
        shape = [2, 13, 3, 7]
        shape[dim] = size
        shapes.append(shape)
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    (y,) = run_operator(op_type, xs, params={"dim": dim}, backend=backend)
    assert_close(y, torch.cat([torch.from_numpy(x) for x in xs], dim).numpy())


@pytest.mark.parametrize("sizes", [(3, 1, 4, 2, 5), (2, 0, 1, 1, 3, 0, 2, 4, 1), (6,) * 8])
@pytest.mark.parametrize("dim", [1, -1])
def test_cat_of_many_inputs(backend, rng, sizes, dim):
    """More inputs than one OpenCL launch takes (four, clkernels/cat.cl), empty ones among them."""
    shapes = []
    for size in sizes:
        shape = [3, 4, 7]
        shape[dim] = size
        shapes.append(shape)
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    (y,) = run_operator("torch.cat", xs, params={"dim": dim}, backend=backend)
    assert_close(y, torch.cat([torch.from_numpy(x) for x in xs], dim).numpy())


@pytest.mark.parametrize("op_type, join", [("torch.cat", torch.cat), ("torch.stack", torch.stack)])
def test_same_input_several_times(backend, rng, tmp_path, op_type, join):
    # pnnx writes cat([x, x, y, x]) as `torch.cat ... 4 1 0 0 1 0 2 dim=1`; run_operator
    # feeds distinct inputs only, so this model file is written by hand.
    x = rng.standard_normal((2, 3, 5)).astype(np.float32)
    z = rng.standard_normal((2, 3, 5)).astype(np.float32)
    param = tmp_path / "model.pnnx.param"
    param.write_text(
        "7767517\n4 3\n"
        "pnnx.Input in0 0 1 0 #0=(2,3,5)f32\n"
        "pnnx.Input in1 0 1 1 #1=(2,3,5)f32\n"
        f"{op_type} op0 4 1 0 0 1 0 2 dim=1\n"
        "pnnx.Output out0 1 0 2\n")
    graph = kuiper.load(param, backend=backend)
    (y,) = graph.forward(x, z)
    tx, tz = torch.from_numpy(x), torch.from_numpy(z)
    assert_close(y, join([tx, tx, tz, tx], 1).numpy())


@pytest.mark.parametrize("dim", [0, 1, 3, -1, -4])
def test_stack(backend, rng, dim):
    xs = [rng.standard_normal((2, 13, 5)).astype(np.float32) for _ in range(3)]
    (y,) = run_operator("torch.stack", xs, params={"dim": dim}, backend=backend)
    assert_close(y, torch.stack([torch.from_numpy(x) for x in xs], dim).numpy())


def test_cat_int64_and_single_input(backend, rng):
    x = rng.integers(-50, 50, (3, 1, 4), dtype=np.int64)
    (y,) = run_operator("torch.cat", [x, x[:, :, :1]], params={"dim": -1}, backend=backend)
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, np.concatenate([x, x[:, :, :1]], -1))
    (y,) = run_operator("torch.cat", [x], params={"dim": 1}, backend=backend)
    np.testing.assert_array_equal(y, x)


def test_cat_default_dim_is_0(backend, rng):
    xs = [rng.standard_normal((n, 4)).astype(np.float32) for n in (1, 3)]
    (y,) = run_operator("torch.cat", xs, backend=backend)
    assert_close(y, np.concatenate(xs, 0))


@pytest.mark.parametrize("op_type, shapes, params, message", [
    ("torch.cat", [(2, 3), (2, 4)], {"dim": 0}, "differs from input 0"),
    ("torch.cat", [(2, 3), (2, 3, 1)], {"dim": 0}, "expected the rank of"),
    ("torch.cat", [(2, 3), (2, 3)], {"dim": 2}, "dim=2 is out of range"),
    ("torch.stack", [(2, 3), (2, 4)], {"dim": 0}, "expected the same shape"),
    ("torch.stack", [(2, 3), (2, 3)], {"dim": -4}, "dim=-4 is out of range"),
])
def test_cat_bad(backend, op_type, shapes, params, message):
    xs = [np.zeros(s, np.float32) for s in shapes]
    with pytest.raises(kuiper.ShapeError, match=message):
        run_operator(op_type, xs, params=params, backend=backend)


class _Joins(torch.nn.Module):
    def forward(self, x, y):
        return torch.cat([x, x, y], 1), torch.stack([x, y, x], -1), torch.concat([y, x], 0)


def test_real_export(backend, rng, export_model):
    path = export_model("cat_joins", _Joins(), (torch.zeros(1, 3, 4), torch.zeros(1, 3, 4)))
    graph = kuiper.load(path, backend=backend)
    for batch in (1, 2):
        x, y = (rng.standard_normal((batch, 3, 4)).astype(np.float32) for _ in range(2))
        with torch.no_grad():
            want = _Joins()(torch.from_numpy(x), torch.from_numpy(y))
        for k, (g, w) in enumerate(zip(graph.forward(x, y), want)):
            assert_close(g, w.numpy(), what=f"batch {batch} output {k}")


@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.int64, np.float16])
@pytest.mark.parametrize("inner", [8, 4, 2, 1, 32, 3])
def test_cat_copy_units(backend, rng, dtype, inner):
    """On OpenCL a work-item copies 32, 16, 8 bytes or one element, the widest unit that every
    row length divides (layers/opencl_helpers/blocks.py): rows of `inner` x 8 bytes ... per
    part, five parts (two launches), DenseNet's layout (dim 1 of a batch of one) and a batch of
    two (rows > 1)."""
    for batch in (1, 2):
        xs = [(rng.standard_normal((batch, c, inner)) * 50).astype(dtype) for c in (2, 1, 3, 2, 4)]
        (y,) = run_operator("torch.cat", xs, params={"dim": 1}, backend=backend)
        np.testing.assert_array_equal(y, np.concatenate(xs, axis=1))


@pytest.mark.parametrize("by_rows", [True, False], ids=["row_per_work_item", "unit_per_work_item"])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_cat_and_split_each_opencl_copy(rng, monkeypatch, by_rows, dtype):
    """Both copies of layers/opencl_helpers/blocks.py forced on whatever OpenCL device there
    is (CPU devices pick the row per work-item for many short rows): YOLOv5s's detection-head
    layout (rows of 85 = 2 + 2 + 81, no vector width divides them), five parts (two launches)
    and parts of length 0 (an empty tensor_split piece)."""
    from tests.conftest import opencl_available

    if not opencl_available():
        pytest.skip("no OpenCL device: these are the OpenCL copies (the CPU twin runs above)")
    monkeypatch.setattr("kuiper.layers.opencl_helpers.strided.ROWS_PER_WORK_ITEM", by_rows)
    x = (rng.standard_normal((3, 70, 85)) * 50).astype(dtype)
    pieces = run_operator("torch.tensor_split", [x], params={"indices": [2, 4], "dim": -1},
                          n_outputs=3, backend="opencl")
    for got, want in zip(pieces, np.split(x, [2, 4], axis=-1)):
        np.testing.assert_array_equal(got, want)
    (joined,) = run_operator("torch.cat", list(pieces), params={"dim": -1}, backend="opencl")
    np.testing.assert_array_equal(joined, x)
    parts = [x[..., :1], x[..., 1:4], x[..., 4:4], x[..., 4:9], x[..., 9:10], x[..., 10:]]
    (joined,) = run_operator("torch.cat", parts, params={"dim": 2}, backend="opencl")
    np.testing.assert_array_equal(joined, x)
    pieces = run_operator("torch.tensor_split", [x], params={"indices": [3, 3, 50], "dim": 2},
                          n_outputs=4, backend="opencl")
    for got, want in zip(pieces, np.split(x, [3, 3, 50], axis=2)):
        np.testing.assert_array_equal(got, want)
