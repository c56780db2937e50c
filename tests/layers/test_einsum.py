"""torch.einsum (every kind of equation in pnnx's test_torch_einsum) and torch.mv against
torch, on both backends."""

import numpy as np
import pytest
import torch

import kuiper
from kuiper import OperatorError, ShapeError
from kuiper.testing import assert_close, run_operator

X, Y0, Y1, Z0, Z1 = (4, 4), (5,), (4,), (3, 2, 5), (3, 5, 4)
W, R0, R1, R2, S0, S1 = (2, 3, 4, 5), (2, 5), (3, 5, 4), (2, 4), (2, 3, 4, 5), (6, 3, 7, 4)

EQUATIONS = [
    ("i", [Y0]), ("ijkl", [W]),                                           # identity
    ("ij->ji", [X]), ("ba", [X]), ("ijk->kij", [Z0]), ("kjil", [W]), ("ijkl->jilk", [W]),
    ("...ij->...ji", [W]), ("abc...->cba...", [W]), ("lkji", [W]),        # permutations
    ("ii", [X]),                                                          # trace
    ("ij->", [X]), ("xyz->", [Z0]), ("ijkl->", [W]),                      # sums
    ("ij->j", [X]), ("ijk->ik", [Z0]), ("ijkl->jk", [W]), ("ijkl->ijl", [W]),
    ("ij,j->i", [R0, Y0]), ("i,jki->jk", [Y1, R1]),                       # matrix-vector
    ("i,j->ij", [Y0, Y1]), ("a,b,c,d->abcd", [Y0, Y1, Y0, Y1]),           # outer products
    ("bij,bjk->bik", [Z0, Z1]), ("bjk,bij->bik", [Z1, Z0]),               # batched matmul
    ("bn,anm,bm->ba", [R0, R1, R2]),                                      # bilinear
    ("pqrs,tqvr->pstv", [S0, S1]),                                        # contraction
    ("...j,j->...", [W, Y0]), ("i...,...->...", [Y0, Y0]),                # ellipsis
]


@pytest.mark.parametrize("equation, shapes", EQUATIONS, ids=[e for e, _ in EQUATIONS])
def test_einsum_matches_torch(backend, rng, equation, shapes):
    ops = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    (y,) = run_operator("torch.einsum", ops, params={"equation": equation}, backend=backend)
    want = torch.einsum(equation, *[torch.from_numpy(o) for o in ops]).numpy()
    assert_close(y, want)


def test_einsum_integers_and_broadcast_ones(backend, rng):
    a = rng.integers(-5, 5, (3, 1, 4)).astype(np.int64)
    b = rng.integers(-5, 5, (3, 6, 4)).astype(np.int64)
    (y,) = run_operator("torch.einsum", [a, b], params={"equation": "bij,bkj->bik"},
                        backend=backend)
    np.testing.assert_array_equal(y, np.einsum("bij,bkj->bik", np.broadcast_to(a, (3, 1, 4)),
                                               b))


@pytest.mark.parametrize("equation, shapes, error, message", [
    ("ij,jk->ik", [(2, 3), (4, 5)], ShapeError, "letter 'j' has sizes 3 and 4"),
    ("ij->ik", [(2, 3)], OperatorError, "output letter 'k' is in no operand"),
    ("ijk", [(2, 3)], ShapeError, "names 3 dims"),
    ("ij,j->i", [(2, 3)], OperatorError, "2 operand"),
])
def test_einsum_bad_equations(backend, equation, shapes, error, message):
    ops = [np.ones(s, np.float32) for s in shapes]
    with pytest.raises(error, match=message):
        run_operator("torch.einsum", ops, params={"equation": equation}, backend=backend)


@pytest.mark.parametrize("rows, cols", [(2, 3), (13, 1), (1, 300), (64, 65)])
def test_mv_matches_torch(backend, rng, rows, cols):
    a = rng.standard_normal((rows, cols)).astype(np.float32)
    v = rng.standard_normal(cols).astype(np.float32)
    (y,) = run_operator("torch.mv", [a, v], backend=backend)
    assert_close(y, torch.mv(torch.from_numpy(a), torch.from_numpy(v)).numpy())


def test_mv_shapes(backend):
    with pytest.raises(ShapeError, match="do not match"):
        run_operator("torch.mv", [np.ones((2, 3), np.float32), np.ones(4, np.float32)],
                     backend=backend)
    with pytest.raises(ShapeError, match="a matrix and a vector"):
        run_operator("torch.mv", [np.ones(3, np.float32), np.ones(3, np.float32)],
                     backend=backend)


class Contractions(torch.nn.Module):
    def forward(self, z0, z1, r0, r1, r2, x, v):
        return (torch.einsum("bij,bjk->bik", z0, z1), torch.einsum("bn,anm,bm->ba", r0, r1, r2),
                torch.einsum("ii", x), torch.einsum("...ij->...ji", z0), torch.mv(x, v))


@pytest.mark.slow
def test_einsum_pnnx_export(backend, rng, export_model):
    inputs = [torch.from_numpy(rng.random(s).astype(np.float32))
              for s in [Z0, Z1, R0, R1, R2, X, Y1]]
    module = Contractions().eval()
    graph = kuiper.load(export_model("einsums", module, inputs), backend=backend)
    assert not graph.fallbacks
    for got, want in zip(graph.forward(*[t.numpy() for t in inputs]), module(*inputs)):
        assert_close(got, want.numpy())
