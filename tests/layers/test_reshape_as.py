"""Tensor.reshape_as against torch, on both backends (pnnx's test_Tensor_reshape_as)."""

import numpy as np
import pytest
import torch

import kuiper
from kuiper import ShapeError
from kuiper.testing import assert_close, run_operator


@pytest.mark.parametrize("shape, other", [((1, 3, 16), (6, 2, 2, 2)), ((6, 2, 2, 2), (48,)),
                                          ((48,), (1, 3, 16)), ((5, 7), (7, 5))])
def test_reshape_as_matches_torch(backend, rng, shape, other):
    x = rng.standard_normal(shape).astype(np.float32)
    y_other = rng.standard_normal(other).astype(np.float32)
    (y,) = run_operator("Tensor.reshape_as", [x, y_other], backend=backend)
    assert_close(y, torch.from_numpy(x).reshape_as(torch.from_numpy(y_other)).numpy())


def test_reshape_as_needs_the_same_element_count(backend):
    with pytest.raises(ShapeError, match="does not hold the 6 elements"):
        run_operator("Tensor.reshape_as", [np.ones((2, 3), np.float32),
                                           np.ones((4,), np.float32)], backend=backend)


class ReshapeAs(torch.nn.Module):
    def forward(self, x, y, z):
        return x.reshape_as(y), y.reshape_as(z), z.reshape_as(x) * 2


@pytest.mark.slow
def test_reshape_as_pnnx_export(backend, rng, export_model):
    inputs = [torch.from_numpy(rng.random(s).astype(np.float32))
              for s in [(1, 3, 16), (6, 2, 2, 2), (48,)]]
    module = ReshapeAs().eval()
    graph = kuiper.load(export_model("reshape_as", module, inputs), backend=backend)
    assert not graph.fallbacks
    for got, want in zip(graph.forward(*[t.numpy() for t in inputs]), module(*inputs)):
        assert_close(got, want.numpy())
