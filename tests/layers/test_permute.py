"""Permute-like operators (permute, transpose, t, mT, T, movedim) vs torch, plus the strided
`View` bookkeeping the OpenCL twins are built on."""

import numpy as np
import pytest
import torch

import kuiper
from kuiper.layers.opencl_helpers.strided import View
from kuiper.testing import assert_close, run_operator
from tests.conftest import opencl_available


@pytest.mark.parametrize("op_type", ["Tensor.permute", "torch.permute"])
@pytest.mark.parametrize("dims", [(0, 2, 3, 1), (0, 3, 1, 2), (3, 2, 1, 0), (0, 1, 2, 3),
                                  (-1, 0, -2, 1)])
def test_permute(backend, rng, op_type, dims):
    x = rng.standard_normal((2, 13, 3, 5)).astype(np.float32)
    (y,) = run_operator(op_type, [x], params={"dims": list(dims)}, backend=backend)
    assert_close(y, torch.from_numpy(x).permute(dims).numpy())


def test_permute_int64(backend, rng):
    x = rng.integers(-1000, 1000, (3, 1, 7, 2), dtype=np.int64)
    (y,) = run_operator("Tensor.permute", [x], params={"dims": [2, 0, 3, 1]}, backend=backend)
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, torch.from_numpy(x).permute(2, 0, 3, 1).numpy())


@pytest.mark.parametrize("op_type", ["torch.transpose", "Tensor.transpose"])
@pytest.mark.parametrize("dim0, dim1", [(1, -1), (2, 3), (0, 1), (-2, 1), (2, 2)])
def test_transpose(backend, rng, op_type, dim0, dim1):
    x = rng.standard_normal((3, 13, 1, 6)).astype(np.float32)
    (y,) = run_operator(op_type, [x], params={"dim0": dim0, "dim1": dim1}, backend=backend)
    assert_close(y, torch.transpose(torch.from_numpy(x), dim0, dim1).numpy())


@pytest.mark.parametrize("shape", [(13, 4), (7,), (1, 9)])
def test_t(backend, rng, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    (y,) = run_operator("torch.t", [x], backend=backend)
    assert_close(y, torch.t(torch.from_numpy(x)).numpy())


def test_matrix_and_numpy_t(backend, rng):
    x = rng.standard_normal((2, 3, 13, 5)).astype(np.float32)
    t = torch.from_numpy(x)
    (y,) = run_operator("aten::mT", [x], backend=backend)
    assert_close(y, t.mT.numpy())
    (y,) = run_operator("aten::numpy_T", [x[0, 0]], backend=backend)
    assert_close(y, t[0, 0].T.numpy())


@pytest.mark.parametrize("source, destination", [([0], [2]), ([1, 3], [0, -1]), ([-1], [0])])
def test_movedim(backend, rng, source, destination):
    # pnnx writes source/destination as constant inputs (pnnx.Expression expr=0).
    x = rng.standard_normal((2, 13, 3, 5)).astype(np.float32)
    src, dst = np.array(source, np.int64), np.array(destination, np.int64)
    (y,) = run_operator("aten::movedim", [x, src, dst], constants=[1, 2], backend=backend)
    assert_close(y, torch.movedim(torch.from_numpy(x), source, destination).numpy())


@pytest.mark.parametrize("op_type, params, message", [
    ("Tensor.permute", {"dims": [0, 1]}, "has 2 entries for a 3-D input"),
    ("Tensor.permute", {"dims": [0, 1, 1]}, "names the same dim twice"),
    ("torch.transpose", {"dim0": 0, "dim1": 3}, "dim1=3 is out of range"),
    ("torch.transpose", {"dim0": 0}, "parameter 'dim1' is missing"),
])
def test_permute_bad_params(backend, op_type, params, message):
    with pytest.raises(kuiper.OperatorError, match=message):
        run_operator(op_type, [np.zeros((2, 3, 4), np.float32)], params=params, backend=backend)


def test_t_rejects_3d(backend):
    with pytest.raises(kuiper.ShapeError, match="at most 2 dims"):
        run_operator("torch.t", [np.zeros((2, 3, 4), np.float32)], backend=backend)


# --- View: the strided bookkeeping, checked against NumPy's own views ----------------------------
def _read(base: np.ndarray, view: View) -> np.ndarray:
    """Materialise a view of `base` the way the strided_copy kernel does."""
    flat = base.reshape(-1)
    out = np.empty(view.shape, base.dtype)
    for i, coords in enumerate(np.ndindex(*view.shape)):
        out.reshape(-1)[i] = flat[view.offset + sum(c * s for c, s in zip(coords, view.strides))]
    return out


@pytest.mark.parametrize("make, expected", [
    (lambda v: v.permute((2, 0, 1)), lambda a: a.transpose(2, 0, 1)),
    (lambda v: v.index((slice(1, None), 2, slice(None, None, -2))), lambda a: a[1:, 2, ::-2]),
    (lambda v: v.index((slice(None), slice(5, 1, -1))), lambda a: a[:, 5:1:-1]),
    (lambda v: v.index((slice(None), slice(0, 2))).broadcast_to((2, 3, 2, 5)),
     lambda a: np.broadcast_to(a[:, 0:2], (2, 3, 2, 5))),
    (lambda v: v.insert(1, 3), lambda a: np.broadcast_to(a[:, None], (3, 3, 6, 5))),
])
def test_view_matches_numpy(make, expected):
    base = np.arange(3 * 6 * 5).reshape(3, 6, 5)
    view = make(View.of(base.shape))
    want = expected(base)
    np.testing.assert_array_equal(_read(base, view), want)
    merged = view.coalesce()  # fewer dims, same addresses in the same order
    assert len(merged.shape) <= len(view.shape)
    np.testing.assert_array_equal(_read(base, merged).reshape(-1), want.reshape(-1))


def test_coalesce_merges_contiguous_rows():
    # Rows 1..2 of a (4, 6, 5) tensor are one contiguous run of 60 elements.
    view = View.of((4, 6, 5)).index((slice(1, 3),)).coalesce()
    assert view == View((60,), (1,), 30)


class _Orders(torch.nn.Module):
    # x.mT and x.T export as aten::mT / aten::numpy_T, but pnnx.export then fails to import
    # the Python file it generates for them; they are tested with hand-written files above.
    def forward(self, x):
        return x.permute(0, 2, 3, 1), torch.transpose(x, 1, -1), x[0, 0].t()


def test_real_export(backend, rng, export_model):
    path = export_model("permute_orders", _Orders(), torch.zeros(1, 3, 4, 5))
    graph = kuiper.load(path, backend=backend)
    x = rng.standard_normal((1, 3, 4, 5)).astype(np.float32)
    with torch.no_grad():
        want = _Orders()(torch.from_numpy(x))
    for k, (g, w) in enumerate(zip(graph.forward(x), want)):
        assert_close(g, w.numpy(), what=f"output {k}")


def test_constant_input_is_folded(backend, rng, tmp_path):
    """A permute of a pnnx.Attribute is known when the model is built: its value is computed
    then (on the host), and the OpenCL executor never binds a kernel for it."""
    import zipfile

    c = rng.standard_normal((2, 3, 4)).astype(np.float32)
    x = rng.standard_normal((4, 2, 3)).astype(np.float32)
    (tmp_path / "model.pnnx.param").write_text(
        "7767517\n5 4\n"
        "pnnx.Input in0 0 1 0 #0=(4,2,3)f32\n"
        "pnnx.Attribute const 0 1 1 @data=(2,3,4)f32 #1=(2,3,4)f32\n"
        "Tensor.permute perm 1 1 1 2 dims=(2,0,1) #1=(2,3,4)f32 #2=(4,2,3)f32\n"
        "torch.cat cat 2 1 0 2 3 dim=0 #0=(4,2,3)f32 #2=(4,2,3)f32 #3=(8,2,3)f32\n"
        "pnnx.Output out0 1 0 3\n")
    with zipfile.ZipFile(tmp_path / "model.pnnx.bin", "w", zipfile.ZIP_STORED) as z:
        z.writestr("const.data", c.tobytes())
    graph = kuiper.load(tmp_path / "model.pnnx.param", backend=backend)
    assert graph.specs["2"].known
    if backend == "opencl":
        assert "perm" in graph.executor.folded
    (y,) = graph.forward(x)
    assert_close(y, np.concatenate([x, c.transpose(2, 0, 1)], 0))


@pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
@pytest.mark.parametrize("by_rows", [True, False], ids=["row-per-work-item", "value-per-work-item"])
@pytest.mark.parametrize("shape,dims", [
    ((1, 96, 56, 56), (0, 2, 3, 1)),     # ConvNeXt: NCHW -> NHWC, a (3136, 96) transpose
    ((1, 56, 56, 96), (0, 3, 1, 2)),     # and back
    ((2, 3, 5, 7), (3, 1, 0, 2)),        # rank 4 left after coalescing
    ((4, 3), (1, 0)),                    # rows of 4 (MIN_ROW)
    ((3, 5, 2), (0, 2, 1)),              # rows of 2, 3 and 5
    ((6, 1, 9), (2, 1, 0)),              # a size-1 dim dropped
])
@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.int64])
def test_permute_each_opencl_kernel(monkeypatch, rng, by_rows, shape, dims, dtype):
    """Both strided copies of clkernels/strided.h, forced on whatever device runs the tests (the
    device picks one: a work-item per output row on CPUs, per value on GPUs), every dtype size."""
    monkeypatch.setattr("kuiper.layers.opencl_helpers.strided.ROWS_PER_WORK_ITEM", by_rows)
    x = (rng.standard_normal(shape) * 50).astype(dtype)
    (y,) = run_operator("torch.permute", [x], params={"dims": list(dims)}, backend="opencl")
    np.testing.assert_array_equal(y, np.transpose(x, dims))
