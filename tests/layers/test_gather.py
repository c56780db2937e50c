"""torch.index_select, torch.gather, Tensor.index (aten::index) and ONNX Gather vs torch."""

import numpy as np
import pytest
import torch
from torch import nn

import kuiper
from kuiper.testing import assert_close, run_operator

SHAPE = (3, 7, 5, 6)


def _x(rng):
    return rng.standard_normal(SHAPE).astype(np.float32)


@pytest.mark.parametrize("dim, index", [(1, [0, 2, 6]), (-1, [5, 0, 0, 3, 1]), (0, [2]),
                                        (2, [-1, 0]), (1, [])])
@pytest.mark.parametrize("index_dtype", [np.int64, np.int32])
def test_index_select(backend, rng, dim, index, index_dtype):
    x, idx = _x(rng), np.array(index, dtype=index_dtype)
    # An empty index is given as a constant: the executors do not take empty graph inputs.
    (y,) = run_operator("torch.index_select", [x, idx], params={"dim": dim}, backend=backend,
                        constants=[1] if idx.size == 0 else [])
    t = torch.from_numpy(x)
    want = torch.index_select(t, dim, torch.from_numpy(idx % x.shape[dim]).long())
    assert_close(y, want.numpy())


def test_index_select_constant_index_and_int64_data(backend, rng):
    x = rng.integers(-99, 99, (4, 9), dtype=np.int64)
    idx = np.array([8, 1, 1], np.int64)
    (y,) = run_operator("torch.index_select", [x, idx], params={"dim": 1}, constants=[1],
                        backend=backend)
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, x[:, idx])


@pytest.mark.parametrize("dim, index_shape", [(0, (2, 7, 5, 6)), (1, (3, 4, 5, 6)),
                                              (2, (3, 7, 9, 6)), (-1, (1, 2, 3, 2)),
                                              (3, (3, 7, 5, 1))])
def test_gather(backend, rng, dim, index_shape):
    x = _x(rng)
    idx = rng.integers(-x.shape[dim], x.shape[dim], index_shape).astype(np.int64)
    (y,) = run_operator("torch.gather", [x, idx], params={"dim": dim}, backend=backend)
    want = torch.gather(torch.from_numpy(x), dim, torch.from_numpy(idx % x.shape[dim]))
    assert_close(y, want.numpy())


@pytest.mark.parametrize("expr, index", [
    ("[None,[0,2]]", np.s_[:, [0, 2]]),
    ("[[2,0,0]]", np.s_[[2, 0, 0]]),
    ("[None,None,[[0,1],[4,3]]]", np.s_[:, :, [[0, 1], [4, 3]]]),
    ("[None,None,None,[-1]]", np.s_[..., [-1]]),
    ("[None,None]", np.s_[:, :]),
])
def test_index_constant_list(backend, rng, expr, index):
    # x[:, [0, 2]] with a literal list: pnnx keeps the indices in the `expr` parameter.
    x = _x(rng)
    (y,) = run_operator("Tensor.index", [x], params={"expr": expr}, backend=backend)
    assert_close(y, torch.from_numpy(x)[index].numpy())


def test_index_tensor_given_directly(backend, rng):
    x, idx = _x(rng), np.array([[1, 0], [2, 2]], np.int64)
    (y,) = run_operator("Tensor.index", [x, idx], backend=backend)
    assert_close(y, torch.from_numpy(x)[torch.from_numpy(idx)].numpy())


def test_index_known_bool_mask(backend, rng):
    x = _x(rng)
    mask = np.array([True, False, True, True, False, False, True])
    (y,) = run_operator("Tensor.index", [x], params={"expr": "[None,[True,False,True,True,"
                                                               "False,False,True]]"},
                        backend=backend)
    assert_close(y, torch.from_numpy(x)[:, torch.from_numpy(mask)].numpy())


@pytest.mark.parametrize("expr, index", [
    ("[[0,2],None,[1,4]]", ([0, 2], slice(None), [1, 4])),          # separated: joint dims first
    ("[None,[1,-1,3],[0,4,2]]", (slice(None), [1, -1, 3], [0, 4, 2])),  # adjacent
    ("[[[0],[2]],[1,3,5]]", ([[0], [2]], [1, 3, 5])),               # broadcast to (2, 3)
    ("[[1],[6],[0]]", ([1], [6], [0])),                              # every dim indexed
])
def test_index_several_tensors(backend, rng, expr, index):
    """Several index tensors broadcast together; where their dims go follows NumPy and
    PyTorch (in place when adjacent, first when separated)."""
    x = rng.standard_normal((3, 7, 5)).astype(np.float32)
    (y,) = run_operator("Tensor.index", [x], params={"expr": expr}, backend=backend)
    t_index = tuple(i if isinstance(i, slice) else torch.tensor(i) for i in index)
    assert_close(y, torch.from_numpy(x)[t_index].numpy())


def test_index_several_run_time_tensors(backend, rng, tmp_path):
    """x[i, :, j] with i and j model inputs, through pnnx's `[@0,None,@1]` list."""
    from tests.layers.test_scatter import write_model
    path = write_model(tmp_path, ["pnnx.Input in0 0 1 x #x=(4,6,5)f32",
                                  "pnnx.Input in1 0 1 i #i=(2,3)i64",
                                  "pnnx.Input in2 0 1 j #j=(3)i64",
                                  "pnnx.Expression list 2 1 i j idx expr=[@0,None,@1]",
                                  "Tensor.index op0 2 1 x idx y",
                                  "pnnx.Output out 1 0 y"], {})
    graph = kuiper.load(path, backend=backend)
    assert not graph.fallbacks
    x = rng.standard_normal((4, 6, 5)).astype(np.float32)
    i, j = rng.integers(-4, 4, (2, 3)), rng.integers(0, 5, 3)
    (y,) = graph.forward(x, i, j)
    assert_close(y, torch.from_numpy(x)[torch.from_numpy(i), :, torch.from_numpy(j)].numpy())


@pytest.mark.parametrize("expr, index", [("[floor_divide(@0,2)]", lambda t: (t // 2,)),
                                         ("[None,sub(@0,1)]", lambda t: (slice(None), t - 1))])
def test_index_list_with_a_computed_item(backend, rng, tmp_path, expr, index):
    """Mixtral's router (Hugging Face transformers 5): `[floor_divide(@0,2)]`, a list whose
    item is computed. Evaluated as a list, its tensor indexed as one more dim: (1, 46, 64)
    where the model has (46, 64), and a later layer failed on it."""
    from tests.layers.test_scatter import write_model
    path = write_model(tmp_path, ["pnnx.Input in0 0 1 x #x=(6,7)f32",
                                  "pnnx.Input in1 0 1 t #t=(9)i64",
                                  f"pnnx.Expression list 1 1 t idx expr={expr}",
                                  "Tensor.index op0 2 1 x idx y",
                                  "pnnx.Output out 1 0 y"], {})
    graph = kuiper.load(path, backend=backend)
    x = rng.standard_normal((6, 7)).astype(np.float32)
    t = rng.integers(1, 7, 9)
    (y,) = graph.forward(x, t)
    want = torch.from_numpy(x)[index(torch.from_numpy(t))].numpy()
    assert y.shape == want.shape and graph.specs[graph.output_operands[0].name].shape == y.shape
    assert_close(y, want)


def test_index_list_with_two_computed_items_is_refused(tmp_path):
    from tests.layers.test_scatter import write_model
    path = write_model(tmp_path, ["pnnx.Input in0 0 1 x #x=(6,7)f32",
                                  "pnnx.Input in1 0 1 t #t=(9)i64",
                                  "pnnx.Expression list 1 1 t idx expr=[sub(@0,1),sub(@0,2)]",
                                  "Tensor.index op0 2 1 x idx y",
                                  "pnnx.Output out 1 0 y"], {})
    with pytest.raises(kuiper.OperatorError, match="only a list with one computed item"):
        kuiper.load(path, backend="cpu")


class _Indexing(nn.Module):
    def forward(self, x, i):
        return x[i], x[:, :, i], x[:, i, 1]


def test_index_real_export(backend, rng, export_model):
    """pnnx builds the index list with `pnnx.Expression expr=[None,None,@0]`; run at the
    export shapes and at others (other batch, other index length, negative indices)."""
    x, i = torch.zeros(4, 7, 5), torch.tensor([0, 2, 1])
    path = export_model("gather_indexing", _Indexing(), (x, i))
    assert "expr=[None,None,@0]" in path.read_text()
    graph = kuiper.load(path, backend=backend)
    for shape, index in [((4, 7, 5), [0, 2, 1]), ((6, 7, 5), [3, -1, 0, 4])]:
        xv = rng.standard_normal(shape).astype(np.float32)
        iv = np.array(index, np.int64)
        with torch.no_grad():
            want = _Indexing()(torch.from_numpy(xv), torch.from_numpy(iv))
        got = graph.forward(xv, iv)
        for k, (g, w) in enumerate(zip(got, want)):
            assert_close(g, w.numpy(), what=f"{shape} output {k}")


# ONNX Gather as pnnx's ONNX route leaves it (onnx/test_convnext_tiny and onnx/test_swin_t with
# the dynamo exporter: `Gather axis=0` of a (768) tensor by a (1,768,1,1) i64 index): np.take,
# the index's shape replaces dim `axis`; negative indices count from the end.
@pytest.mark.parametrize("axis, index_shape", [(0, (1, 3, 1, 1)), (1, (2, 4)), (-1, (5,)),
                                               (2, ()), (3, (2, 1, 3))])
@pytest.mark.parametrize("index_dtype", [np.int64, np.int32])
@pytest.mark.parametrize("constant", [False, True])
def test_onnx_gather(backend, rng, axis, index_shape, index_dtype, constant):
    x = _x(rng)
    n = x.shape[axis]
    idx = rng.integers(-n, n, index_shape).astype(index_dtype)
    (y,) = run_operator("Gather", [x, idx], params={"axis": axis}, backend=backend,
                        constants=[1] if constant or idx.ndim == 0 else [])
    t, i = torch.from_numpy(x), torch.from_numpy(np.asarray(idx.astype(np.int64) % n))
    want = torch.index_select(t, axis, i.reshape(-1)).reshape(
        x.shape[:axis % 4] + index_shape + x.shape[axis % 4 + 1:])
    assert_close(y, want.numpy())


def test_onnx_gather_int64_data_and_default_axis(backend, rng):
    x = rng.integers(-99, 99, (6, 3), dtype=np.int64)
    idx = np.array([[5, -6], [0, 1]], np.int64)
    (y,) = run_operator("Gather", [x, idx], constants=[1], backend=backend)
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, np.take(x, idx, axis=0))


class _OnnxGather(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("idx", torch.tensor([[3, -1], [0, 2]]))

    def forward(self, x):
        return x.mean((-1, -2)).reshape(-1)[self.idx] * 2, x[:, self.idx]


@pytest.mark.slow
def test_onnx_gather_real_export(backend, rng, export_dir):
    """torch.onnx.export + the pnnx command: indexing by a constant 2-D tensor stays an ONNX
    `Gather` (axis=0 and axis=1, with a negative index)."""
    pytest.importorskip("onnx")
    from tests.models.onnx_export import export_with_onnx

    x = torch.from_numpy(rng.standard_normal((1, 5, 4, 3)).astype(np.float32))
    module = _OnnxGather().eval()
    path = export_with_onnx(export_dir / "gather_onnx", module, (x,))
    assert "Gather " in path.read_text()
    graph = kuiper.load(path, backend=backend)
    assert not graph.fallbacks
    with torch.no_grad():
        want = module(x)
    for k, (g, w) in enumerate(zip(graph.forward(x.numpy()), want)):
        assert_close(g, w.numpy(), what=f"output {k}")


@pytest.mark.parametrize("op_type, inputs, params, error, message", [
    ("torch.index_select", [np.zeros((2, 3), np.float32), np.zeros((1, 2), np.int64)],
     {"dim": 1}, kuiper.ShapeError, "0-D or 1-D"),
    ("torch.index_select", [np.zeros((2, 3), np.float32), np.zeros(2, np.float32)],
     {"dim": 1}, kuiper.OperatorError, "integer tensor"),
    ("torch.gather", [np.zeros((2, 3), np.float32), np.zeros((3, 3), np.int64)],
     {"dim": 1}, kuiper.ShapeError, "larger than input"),
    ("torch.gather", [np.zeros((2, 3), np.float32), np.zeros(3, np.int64)],
     {"dim": 0}, kuiper.ShapeError, "as many dims"),
    ("Tensor.index", [np.zeros((2, 3), np.float32)], {"expr": "[None,None,[0]]"},
     kuiper.ShapeError, "3 indices for a 2-D input"),
    ("Tensor.index", [np.zeros((2, 3), np.float32)], {"expr": "[None,x]"},
     kuiper.OperatorError, "not a list of None and integer lists"),
    ("Tensor.index", [np.zeros((2, 3), np.float32), np.zeros(3, np.bool_)], {},
     kuiper.ShapeError, "boolean mask"),
    ("Gather", [np.zeros((2, 3), np.float32), np.zeros(2, np.float32)], {"axis": 1},
     kuiper.OperatorError, "integer tensor"),
    ("Gather", [np.zeros((2, 3), np.float32), np.zeros(2, np.int64)], {"axis": 2},
     kuiper.ShapeError, "dim"),
])
def test_gather_bad(backend, op_type, inputs, params, error, message):
    with pytest.raises(error, match=message):
        run_operator(op_type, inputs, params=params, backend=backend)


def test_index_out_of_range_on_cpu(rng):
    # The CPU backend checks index values (a device cannot raise: it writes 0 instead).
    with pytest.raises(kuiper.ShapeError, match="out of range for dim 0 of size 3"):
        run_operator("Tensor.index", [_x(rng), np.array([3], np.int64)])


def test_onnx_gather_out_of_range_on_cpu(rng):
    with pytest.raises(kuiper.ShapeError, match="out of range for axis 1 of size 7"):
        run_operator("Gather", [_x(rng), np.array([7], np.int64)], params={"axis": 1})


def test_index_without_inputs_names_the_count(tmp_path):
    # fuzz seed 60613, case 2061: a Tensor.index line with no inputs at all reached
    # `inputs[0]` before the count was checked (an IndexError under the OperatorError)
    param = kuiper.testing.write_param(tmp_path, [
        "pnnx.Input in0 0 1 x #x=(2,3)f32",
        "Tensor.index idx 0 1 y",
        "pnnx.Output out0 1 0 y",
    ])
    with pytest.raises(kuiper.OperatorError, match="expected 2 input") as caught:
        kuiper.load(param)
    assert not isinstance(caught.value.__cause__, IndexError)
