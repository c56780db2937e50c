"""F.pairwise_distance against torch (p, eps, keepdim, broadcasting), on both backends."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kuiper
from kuiper import ShapeError
from kuiper.testing import assert_close, run_operator


@pytest.mark.parametrize("params", [
    {"p": 1.0, "keepdim": False, "eps": 1e-6},
    {"p": 2.0, "keepdim": True, "eps": 1e-6},
    {},                                       # torch's defaults: p=2, eps=1e-6, keepdim=False
    {"eps": 1e-3},
    {"p": 3.5, "eps": 0.0},
    {"p": 0.5, "keepdim": True},
    {"p": math.inf},
    {"p": -math.inf, "keepdim": True},
    {"p": 0.0},
], ids=str)
@pytest.mark.parametrize("shapes", [((12, 13, 129), (12, 13, 129)), ((3, 17), (3, 17)),
                                    ((5, 1, 7), (4, 7)), ((11,), (11,)), ((2, 3, 300), (300,))])
def test_pairwise_distance_matches_torch(backend, rng, params, shapes):
    x1 = rng.standard_normal(shapes[0]).astype(np.float32)
    x2 = rng.standard_normal(shapes[1]).astype(np.float32)
    (y,) = run_operator("F.pairwise_distance", [x1, x2], params=params, backend=backend)
    want = F.pairwise_distance(torch.from_numpy(x1), torch.from_numpy(x2),
                               p=params.get("p", 2.0), eps=params.get("eps", 1e-6),
                               keepdim=params.get("keepdim", False))
    assert_close(y, want.numpy())


@pytest.mark.parametrize("shapes, message", [
    (((3, 4), (3, 5)), "do not broadcast"),
    (((), ()), "at least 1 dim"),
])
def test_pairwise_distance_bad_shapes(backend, shapes, message):
    x1, x2 = (np.ones(s, np.float32) for s in shapes)
    with pytest.raises(ShapeError, match=message):
        run_operator("F.pairwise_distance", [x1, x2], backend=backend)


class Distances(torch.nn.Module):
    def forward(self, x, y):
        return (F.pairwise_distance(x, y, p=1, keepdim=False),
                F.pairwise_distance(x, y, p=2, keepdim=True), F.pairwise_distance(x, y),
                F.pairwise_distance(x, y, eps=1e-3))


@pytest.mark.slow
def test_pairwise_distance_pnnx_export(backend, rng, export_model):
    x = torch.from_numpy(rng.random((6, 9, 31)).astype(np.float32))
    y = torch.from_numpy(rng.random((6, 9, 31)).astype(np.float32))
    module = Distances().eval()
    graph = kuiper.load(export_model("pairwise_distances", module, (x, y)), backend=backend)
    assert not graph.fallbacks
    for got, want in zip(graph.forward(x.numpy(), y.numpy()), module(x, y)):
        assert_close(got, want.numpy())
