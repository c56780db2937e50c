"""slice_copy / slice_scatter, scatter_add and index_put against torch, on both backends."""


import numpy as np
import pytest
import torch

import kuiper
from kuiper import OperatorError, ShapeError
from kuiper.testing import assert_close, run_operator, write_param

INT_MAX = 2147483647


def write_model(folder, lines: list[str], constants: dict[str, np.ndarray]) -> str:
    """A hand-written .pnnx.param (`lines`, without the header) and a .bin holding the
    `constants` ({"name.data": array}) of its pnnx.Attribute lines."""
    return write_param(folder, lines, constants)


def torch_put(x, indices, values, accumulate):
    return torch.from_numpy(x).index_put([torch.from_numpy(i) for i in indices],
                                         torch.from_numpy(values), accumulate=accumulate).numpy()


@pytest.mark.parametrize("op_type", ["Tensor.slice_copy", "torch.slice_scatter"])
@pytest.mark.parametrize("shape, params, src_shape", [
    ((8, 8), {"dim": 0, "start": 6}, (2, 8)),
    ((8, 8), {"dim": 1, "start": 2, "end": 6, "step": 2}, (8, 2)),
    ((19, 20), {"dim": 0, "start": 0, "end": 1, "step": 1}, (1, 20)),
    ((120,), {"dim": 0, "start": 80, "end": INT_MAX, "step": 2}, (20,)),
    ((15, 19, 20), {"dim": -1, "start": -5, "end": -1, "step": 1}, (1, 4)),   # src broadcasts
])
def test_slice_scatter_matches_torch(backend, rng, op_type, shape, params, src_shape):
    x = rng.standard_normal(shape).astype(np.float32)
    src = rng.standard_normal(src_shape).astype(np.float32)
    (y,) = run_operator(op_type, [x, src], params=params, backend=backend)
    d = params["dim"]
    region = [slice(None)] * len(shape)
    end = params.get("end", INT_MAX)
    region[d] = slice(params.get("start", 0), None if end == INT_MAX else end,
                      params.get("step", 1))
    want = torch.from_numpy(x).clone()
    want[tuple(region)] = torch.from_numpy(src)
    assert_close(y, want.numpy())


# torch.slice_scatter(x, y, start=6) comes out of pnnx as `end=None` (pnnx's
# test_torch_slice_scatter); None start/step are 0 and 1.
@pytest.mark.parametrize("params, dim, start, end, step", [
    ("dim=0 end=None start=6 step=1", 0, 6, None, 1),
    ("dim=1 end=None start=None step=None", 1, None, None, 1),
    ("dim=-1 end=6 start=None step=2", -1, None, 6, 2),
    ("dim=0 end=None start=-3 step=1", 0, -3, None, 1),
])
def test_slice_scatter_with_none_bounds(backend, rng, tmp_path, params, dim, start, end, step):
    x = rng.standard_normal((8, 8)).astype(np.float32)
    region = [slice(None)] * 2
    region[dim] = slice(start, end, step)
    src_shape = x[tuple(region)].shape
    src = rng.standard_normal(src_shape).astype(np.float32)
    shape = ",".join(map(str, src_shape))
    path = write_model(tmp_path, ["pnnx.Input in0 0 1 x #x=(8,8)f32",
                                  f"pnnx.Input in1 0 1 src #src=({shape})f32",
                                  f"torch.slice_scatter op0 2 1 x src y {params}",
                                  "pnnx.Output out 1 0 y"], {})
    (y,) = kuiper.load(path, backend=backend).forward(x, src)
    want = torch.slice_scatter(torch.from_numpy(x), torch.from_numpy(src), dim=dim,
                               start=start, end=end, step=step)
    assert_close(y, want.numpy())


def test_slice_copy_multi_dim_form(backend, rng):
    """x[:, :, 3, ::2] = src, in the dims/starts/ends/steps/selects form."""
    x = rng.standard_normal((5, 6, 7, 9)).astype(np.float32)
    src = rng.standard_normal((5, 6, 5)).astype(np.float32)
    params = {"dims": (2, 3), "starts": (0, 0), "ends": (INT_MAX, INT_MAX), "steps": (1, 2),
              "selects": (3, INT_MAX)}
    (y,) = run_operator("Tensor.slice_copy", [x, src], params=params, backend=backend)
    want = x.copy()
    want[:, :, 3, ::2] = src
    assert_close(y, want)


def test_slice_scatter_refuses_a_src_that_does_not_fit(backend):
    with pytest.raises(ShapeError, match=r"src of shape \(3, 8\) does not broadcast to \(2, 8\)"):
        run_operator("torch.slice_scatter", [np.ones((8, 8), np.float32),
                                             np.ones((3, 8), np.float32)],
                     params={"dim": 0, "start": 6}, backend=backend)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("index_shape", [(1, 15), (12, 15), (5, 7)])
def test_scatter_add_matches_torch(backend, rng, dim, index_shape):
    x = rng.standard_normal((13, 15)).astype(np.float32)
    src = rng.standard_normal((12, 15)).astype(np.float32)
    index = rng.integers(0, x.shape[dim], size=index_shape)
    (y,) = run_operator("torch.scatter_add", [x, index, src], params={"dim": dim},
                        backend=backend)
    want = torch.scatter_add(torch.from_numpy(x), dim, torch.from_numpy(index),
                             torch.from_numpy(src)).numpy()
    assert_close(y, want)


def test_scatter_add_3d_constant_index_and_ints(backend, rng):
    x = rng.integers(-9, 9, (4, 6, 5)).astype(np.int32)
    src = rng.integers(-9, 9, (4, 6, 5)).astype(np.int32)
    index = rng.integers(0, 6, (3, 6, 4))
    (y,) = run_operator("torch.scatter_add", [x, index, src], params={"dim": 1},
                        constants=[1], backend=backend)
    np.testing.assert_array_equal(y, torch.scatter_add(
        torch.from_numpy(x), 1, torch.from_numpy(index), torch.from_numpy(src)).numpy())


def test_scatter_add_errors(backend):
    x = np.zeros((3, 4), np.float32)
    with pytest.raises(ShapeError, match="larger than src"):
        run_operator("torch.scatter_add", [x, np.zeros((4, 4), np.int64), x],
                     params={"dim": 1}, backend=backend)
    with pytest.raises(OperatorError, match="index should be an integer tensor"):
        run_operator("torch.scatter_add", [x, x, x], params={"dim": 0}, backend=backend)


def index_put_model(tmp_path, x, indices, values, accumulate):
    """x.index_put([i0, i1, ...], values): constant indices joined by `[@0,@1]`, as pnnx
    writes them."""
    lines = [f"pnnx.Input in0 0 1 x #x=({','.join(map(str, x.shape))})f32",
             f"pnnx.Input in1 0 1 v #v=({','.join(map(str, values.shape))})f32"]
    names, constants = [], {}
    for k, index in enumerate(indices):
        lines.append(f"pnnx.Attribute c{k} 0 1 i{k} @data=({','.join(map(str, index.shape))})"
                     f"i64")
        names.append(f"i{k}")
        constants[f"c{k}.data"] = index.astype(np.int64)
    refs = ",".join(f"@{k}" for k in range(len(indices)))
    lines.append(f"pnnx.Expression list {len(indices)} 1 {' '.join(names)} idx expr=[{refs}]")
    lines.append(f"Tensor.index_put op0 3 1 x idx v y accumulate={accumulate}")
    lines.append("pnnx.Output out 1 0 y")
    return write_model(tmp_path, lines, constants)


@pytest.mark.parametrize("accumulate", [True, False])
@pytest.mark.parametrize("x_shape, indices, v_shape", [
    ((12,), [[10, 2]], (2,)),
    ((6, 9), [[1, 0, 0], [3, 2, 1]], (3,)),
    ((6, 9), [[1, 0, 1, -1]], (4, 9)),          # repeated rows, negative index
    ((6, 9), [[4, 4, 4]], (9,)),                 # values broadcast
    ((3, 4, 5), [[0, 2, 0], [1, 1, 1]], (3, 5)),
    ((12,), [[]], (0,)),
])
def test_index_put_matches_torch(backend, rng, tmp_path, accumulate, x_shape, indices,
                                 v_shape):
    x = rng.standard_normal(x_shape).astype(np.float32)
    idx = [np.asarray(i, np.int64) for i in indices]
    v = rng.standard_normal(v_shape).astype(np.float32)
    graph = kuiper.load(index_put_model(tmp_path, x, idx, v, accumulate), backend=backend)
    assert not graph.fallbacks
    (y,) = graph.forward(x, v)
    if not accumulate and len(idx) == 1 and len(set(idx[0].tolist())) < idx[0].size:
        # Repeated targets without accumulate: PyTorch leaves the winner unspecified; the
        # CPU's is the last one, and so is Kuiper's on both backends.
        want = x.copy()
        for k, row in enumerate(idx[0]):
            want[row] = np.broadcast_to(v, (len(idx[0]),) + x_shape[1:])[k]
    else:
        want = torch_put(x, idx, v, accumulate)
    assert_close(y, want)


# pnnx's test_Tensor_index_put: `x[torch.tensor([1])] = torch.tensor(45).float()` comes out as
# a two-input Tensor.index_put with the value as a parameter, `values=45.0`.
@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("x_shape, dtype, indices, value", [
    ((12,), "f32", [[1]], "45.0"),
    ((12,), "f32", [[]], "233.0"),                      # empty index: nothing changes
    ((6, 9), "f32", [[4, 0, 4]], "-2.5"),               # whole rows, repeated
    ((6, 9), "f32", [[1, 0, 5], [3, 2, -1]], "7.0"),
    ((5, 3), "i64", [[0, 3]], "7"),
])
def test_index_put_with_a_values_parameter(backend, rng, tmp_path, accumulate, x_shape, dtype,
                                           indices, value):
    np_dtype = {"f32": np.float32, "i64": np.int64}[dtype]
    x = (rng.standard_normal(x_shape) * 10).astype(np_dtype)
    idx = [np.asarray(i, np.int64) for i in indices]
    lines = [f"pnnx.Input in0 0 1 x #x=({','.join(map(str, x_shape))}){dtype}"]
    names, constants = [], {}
    for k, index in enumerate(idx):
        lines.append(f"pnnx.Attribute c{k} 0 1 i{k} @data=({index.size})i64")
        names.append(f"i{k}")
        constants[f"c{k}.data"] = index
    refs = ",".join(f"@{k}" for k in range(len(idx)))
    lines += [f"pnnx.Expression list {len(idx)} 1 {' '.join(names)} idx expr=[{refs}]",
              f"Tensor.index_put op0 2 1 x idx y accumulate={accumulate} values={value}",
              "pnnx.Output out 1 0 y"]
    graph = kuiper.load(write_model(tmp_path, lines, constants), backend=backend)
    assert not graph.fallbacks
    (y,) = graph.forward(x)
    v = torch.tensor(float(value) if dtype == "f32" else int(value),
                     dtype=torch.from_numpy(x).dtype)
    want = torch.from_numpy(x).index_put([torch.from_numpy(i) for i in idx], v,
                                         accumulate=accumulate)
    assert y.dtype == x.dtype
    assert_close(y, want.numpy())


def test_index_put_values_parameter_with_a_run_time_index(backend, rng):
    x = rng.standard_normal((6, 4)).astype(np.float32)
    index = np.array([5, 0, 5])
    (y,) = run_operator("Tensor.index_put", [x, index], params={"accumulate": True,
                                                                 "values": 1.5},
                        backend=backend, allow_fallback=True)
    assert_close(y, torch_put(x, [index], np.array(1.5, np.float32), True))


def test_index_put_after_a_colon_runs_on_the_host(backend, rng, tmp_path):
    """x[:, i] += v: the list is [None,@0]; OpenCL runs the CPU layer (graph.fallbacks)."""
    x = rng.standard_normal((3, 6)).astype(np.float32)
    v = rng.standard_normal((3, 2)).astype(np.float32)
    path = write_model(tmp_path, ["pnnx.Input in0 0 1 x #x=(3,6)f32",
                                  "pnnx.Input in1 0 1 v #v=(3,2)f32",
                                  "pnnx.Attribute c0 0 1 i @data=(2)i64 #i=(2)i64",
                                  "pnnx.Expression list 1 1 i idx expr=[None,@0]",
                                  "Tensor.index_put op0 3 1 x idx v y accumulate=True",
                                  "pnnx.Output out 1 0 y"], {"c0.data": np.array([4, 1])})
    graph = kuiper.load(path, backend=backend)
    assert [op.name for op in graph.fallbacks] == (["op0"] if backend == "opencl" else [])
    (y,) = graph.forward(x, v)
    want = torch.from_numpy(x).clone()
    want[:, torch.tensor([4, 1])] += torch.from_numpy(v)
    assert_close(y, want.numpy())


def test_index_put_with_a_run_time_index_runs_on_the_host(backend, rng):
    x = rng.standard_normal((6, 4)).astype(np.float32)
    index = np.array([5, 0, 5])
    v = rng.standard_normal((3, 4)).astype(np.float32)
    (y,) = run_operator("Tensor.index_put", [x, index, v], params={"accumulate": True},
                        backend=backend, allow_fallback=True)
    assert_close(y, torch_put(x, [index], v, True))


class Mutations(torch.nn.Module):
    """pnnx's test_Tensor_slice_copy, test_Tensor_index_put, test_torch_scatter_add and
    test_torch_slice_scatter in one."""

    def forward(self, x, y, z, w, a, b):
        x = x.clone()
        y = y.clone()
        w = w.clone()
        xx = x[8]
        x[2:10, ...] += 1
        xx[..., 1] = xx[..., -1] * 3
        x[:, :, 3, ::2].clamp_(0, 0.5)
        y[..., -1, -5:-1] = y[..., -4, 1:5] - 11
        w[80::2] = w[4:84:4] + 23
        z = z.clone()
        z.index_put_(indices=[torch.tensor([1, 0, 0]), torch.tensor([3, 2, 1])],
                     values=a[:3], accumulate=True)
        s = torch.scatter_add(b, 0, torch.tensor([[1, 2, 0, 1, 1, 2, 0, 0, 2]]), z[:1])
        t = torch.slice_scatter(b, z[:3, :2], dim=1, start=2, end=6, step=2)
        return x, y, z, w, s, t


class ScalarPutsAndOpenSlices(torch.nn.Module):
    """The parts of pnnx's test_Tensor_index_put and test_torch_slice_scatter that pnnx writes
    with parameters: a 0-D value (`values=45.0`) and an open end (`end=None`)."""

    def forward(self, x, a, b):
        x = x.clone()
        x[torch.tensor([1], dtype=torch.int64)] = torch.tensor(45).float()
        x[torch.tensor([], dtype=torch.int64)] = torch.tensor(233).float()
        return x, torch.slice_scatter(a, b, start=6)


@pytest.mark.slow
def test_index_put_value_and_open_slice_scatter_pnnx_export(backend, rng, export_model):
    shapes = [(12,), (8, 8), (2, 8)]
    inputs = [torch.from_numpy(rng.random(s).astype(np.float32)) for s in shapes]
    module = ScalarPutsAndOpenSlices().eval()
    path = export_model("scalar_puts", module, inputs)
    text = path.read_text()
    assert "values=45.0" in text and "end=None" in text  # the forms under test
    graph = kuiper.load(path, backend=backend)
    assert not graph.fallbacks
    for got, want in zip(graph.forward(*[t.numpy() for t in inputs]), module(*inputs)):
        assert_close(got, want.numpy())


@pytest.mark.slow
def test_scatter_pnnx_export(backend, rng, export_model):
    shapes = [(10, 15, 7, 8), (15, 19, 20), (6, 9), (120,), (5,), (3, 9)]
    inputs = [torch.from_numpy(rng.random(s).astype(np.float32)) for s in shapes]
    module = Mutations().eval()
    graph = kuiper.load(export_model("mutations", module, inputs), backend=backend)
    assert not graph.fallbacks
    types = {op.type for op in graph.operators}
    assert {"Tensor.slice_copy", "Tensor.index_put", "torch.scatter_add",
            "torch.slice_scatter"} <= types
    for got, want in zip(graph.forward(*[t.numpy() for t in inputs]), module(*inputs)):
        assert_close(got, want.numpy())
