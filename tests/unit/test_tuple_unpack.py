"""prim::TupleUnpack (kuiper/graph/tuple_unpack.py): the producer of the tuple takes over its items.

pnnx writes `nn.AdaptiveMaxPool*d(..., return_indices=True)` as one tuple output and a
prim::TupleUnpack; these models must run on both backends with the indices PyTorch gives.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kuiper
from kuiper.core.errors import GraphError
from kuiper.testing import assert_close
from tests.unit.test_graph import write_model

POOLS = {  # type, input shape, output_size, the torch function
    "nn.AdaptiveMaxPool1d": ((2, 5, 13), "(4)", lambda x: F.adaptive_max_pool1d(x, 4, True)),
    "nn.AdaptiveMaxPool2d": ((2, 5, 9, 7), "(4,3)",
                             lambda x: F.adaptive_max_pool2d(x, (4, 3), True)),
    "nn.AdaptiveMaxPool3d": ((1, 3, 5, 9, 7), "(2,4,3)",
                             lambda x: F.adaptive_max_pool3d(x, (2, 4, 3), True)),
}


@pytest.mark.parametrize("op_type", POOLS)
def test_unpacked_pool_indices_match_torch(tmp_path, backend, op_type):
    shape, size, reference = POOLS[op_type]
    dims = ",".join(map(str, shape))
    path = write_model(tmp_path, [
        f"pnnx.Input in 0 1 x #x=({dims})f32",
        f"{op_type} pool 1 1 x t output_size={size} return_indices=True",
        "prim::TupleUnpack unpack 1 2 t v i",
        "nn.ReLU relu 1 1 v r",  # the values feed on into the model
        "pnnx.Output out 2 0 r i"])
    graph = kuiper.load(path, backend=backend)
    assert [op.type for op in graph.operators].count("prim::TupleUnpack") == 0
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    values, indices = graph(x)
    ref_values, ref_indices = reference(torch.from_numpy(x))
    assert_close(values, F.relu(ref_values).numpy())
    assert indices.dtype == np.int64
    np.testing.assert_array_equal(indices, ref_indices.numpy())
    assert not graph.fallbacks  # the OpenCL kernels ran, not a CPU fallback


def test_unpack_of_a_graph_input_is_refused(tmp_path):
    path = write_model(tmp_path, [
        "pnnx.Input in 0 1 t #t=(2,3)f32",
        "prim::TupleUnpack unpack 1 2 t a b",
        "pnnx.Output out 2 0 a b"])
    with pytest.raises(GraphError, match=r"line 4: operator 'unpack' \(prim::TupleUnpack\).*"
                                         r"returned by one operator"):
        kuiper.load(path)


def test_a_tuple_read_twice_is_refused(tmp_path):
    path = write_model(tmp_path, [
        "pnnx.Input in 0 1 x #x=(1,3,8,8)f32",
        "nn.AdaptiveMaxPool2d pool 1 1 x t output_size=(2,2) return_indices=True",
        "prim::TupleUnpack unpack 1 2 t a b",
        "nn.ReLU relu 1 1 t c",
        "pnnx.Output out 3 0 a b c"])
    with pytest.raises(GraphError, match="read by 2 operator"):
        kuiper.load(path)


def test_unpack_without_a_tuple_is_refused(tmp_path):
    path = write_model(tmp_path, [
        "pnnx.Input in 0 1 x #x=(1,3,8,8)f32",
        "prim::TupleUnpack unpack 0 2 a b",
        "pnnx.Output out 2 0 a b"])
    with pytest.raises(GraphError, match="expected 1 input"):
        kuiper.load(path)


@pytest.mark.slow
def test_pools_with_indices_from_a_pnnx_export(backend, export_model):
    """A real export: the adaptive max pools (1-D, 2-D, 3-D) come out as a tuple and a
    prim::TupleUnpack, MaxPool2d/3d and F.adaptive_max_pool2d with two outputs."""

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a1 = torch.nn.AdaptiveMaxPool1d(3, return_indices=True)
            self.a2 = torch.nn.AdaptiveMaxPool2d((2, 3), return_indices=True)
            self.a3 = torch.nn.AdaptiveMaxPool3d((2, 1, 3), return_indices=True)
            self.m2 = torch.nn.MaxPool2d(3, 2, 1, return_indices=True)
            self.m3 = torch.nn.MaxPool3d(2, ceil_mode=True, return_indices=True)

        def forward(self, v, x, z):
            return (*self.a1(v), *self.a2(x), *self.a3(z), *self.m2(x), *self.m3(z),
                    *F.adaptive_max_pool2d(x, 4, return_indices=True))

    net = Net().eval()
    g = torch.Generator().manual_seed(0)
    v, x, z = (torch.randn(s, generator=g) for s in ((1, 4, 11), (1, 3, 9, 7), (1, 2, 5, 6, 7)))
    path = export_model("pools_with_indices", net, (v, x, z))
    assert path.read_text().count("prim::TupleUnpack") == 3
    outs = kuiper.load(path, backend=backend).forward(v.numpy(), x.numpy(), z.numpy())
    with torch.no_grad():
        refs = net(v, x, z)
    assert len(outs) == len(refs) == 12
    for got, ref in zip(outs, refs):
        if ref.dtype == torch.int64:
            assert got.dtype == np.int64
            np.testing.assert_array_equal(got, ref.numpy())
        else:
            assert_close(got, ref.numpy())
