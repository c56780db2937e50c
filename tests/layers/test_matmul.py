"""torch.matmul / mm / bmm / addmm / baddbmm against torch on both backends."""

import numpy as np
import pytest
import torch

import kuiper
from kuiper import OperatorError
from kuiper.testing import assert_close, run_operator

T = torch.from_numpy


def rand(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("a_shape, b_shape", [
    ((2, 3, 4, 5), (2, 3, 5, 6)),      # batched, equal batch dims
    ((2, 1, 17, 33), (3, 33, 19)),     # batch dims broadcast, several 16x16 tiles, odd sizes
    ((5,), (2, 5, 6)),                 # 1-D left operand: a row vector, its dim disappears
    ((2, 3, 4, 5), (5,)),              # 1-D right operand: a column vector
    ((13,), (13,)),                    # dot product -> 0-dim
    ((13,), (13, 7)),
    ((1, 1), (1, 1)),
    ((3, 17, 1), (1, 9)),              # K = 1
    ((37, 45), (45, 29)),              # plain 2-D across tile edges
])
def test_matmul_matches_torch(backend, rng, a_shape, b_shape):
    a, b = rand(rng, a_shape), rand(rng, b_shape)
    (y,) = run_operator("torch.matmul", [a, b], backend=backend)
    assert_close(y, torch.matmul(T(a), T(b)).numpy())


def test_matmul_same_operand_twice(backend, rng):
    # pnnx writes `torch.matmul ... 0 0` when both operands are one tensor.
    a = rand(rng, (3, 7, 7))
    (y,) = run_operator("torch.matmul", [a, a], backend=backend)
    assert_close(y, torch.matmul(T(a), T(a)).numpy())


def test_mm_and_bmm(backend, rng):
    a, b = rand(rng, (5, 11)), rand(rng, (11, 3))
    (y,) = run_operator("torch.mm", [a, b], backend=backend)
    assert_close(y, torch.mm(T(a), T(b)).numpy())
    a, b = rand(rng, (3, 5, 11)), rand(rng, (3, 11, 2))
    (y,) = run_operator("torch.bmm", [a, b], backend=backend)
    assert_close(y, torch.bmm(T(a), T(b)).numpy())


@pytest.mark.parametrize("bias_shape", [(6,), (4, 6), (1, 6), (4, 1)])
@pytest.mark.parametrize("alpha, beta", [(1.0, 1.0), (2.0, 0.5), (-1.5, 0.0)])
def test_addmm(backend, rng, bias_shape, alpha, beta):
    a, b, c = rand(rng, (4, 5)), rand(rng, (5, 6)), rand(rng, bias_shape)
    if beta == 0.0:
        c[...] = np.nan  # torch ignores `input` entirely when beta == 0
    (y,) = run_operator("torch.addmm", [c, a, b], params={"alpha": alpha, "beta": beta},
                        backend=backend)
    assert_close(y, torch.addmm(T(c), T(a), T(b), alpha=alpha, beta=beta).numpy())


@pytest.mark.parametrize("bias_shape", [(3, 4, 6), (1, 4, 6), (6,)])
def test_baddbmm(backend, rng, bias_shape):
    a, b, c = rand(rng, (3, 4, 5)), rand(rng, (3, 5, 6)), rand(rng, bias_shape)
    (y,) = run_operator("torch.baddbmm", [c, a, b], params={"alpha": 2.0, "beta": 0.5},
                        backend=backend)
    assert_close(y, torch.baddbmm(T(c), T(a), T(b), alpha=2.0, beta=0.5).numpy())


def test_addmm_integer_params_as_pnnx_writes_them(backend, rng):
    # pnnx writes the defaults as `alpha=1 beta=1` (ints).
    a, b, c = rand(rng, (4, 5)), rand(rng, (5, 6)), rand(rng, (6,))
    (y,) = run_operator("torch.addmm", [c, a, b], params={"alpha": 1, "beta": 1},
                        backend=backend)
    assert_close(y, torch.addmm(T(c), T(a), T(b)).numpy())


def test_matmul_from_pnnx_export(backend, rng, export_model):
    class AttentionScores(torch.nn.Module):
        def forward(self, x):
            return torch.matmul(x, x.transpose(-1, -2))

    x = rand(rng, (2, 3, 4, 5))
    path = export_model("matmul_scores", AttentionScores(), [T(x)])
    (y,) = kuiper.load(path, backend=backend).forward(x)
    assert_close(y, torch.matmul(T(x), T(x).transpose(-1, -2)).numpy())


@pytest.mark.parametrize("op_type, a_shape, b_shape, message", [
    ("torch.matmul", (2, 4, 5), (6, 3), "inner dims"),
    ("torch.matmul", (2, 4, 5), (3, 5, 6), "do not broadcast"),
    ("torch.mm", (2, 4, 5), (5, 3), "2-D"),
    ("torch.bmm", (2, 4, 5), (3, 5, 3), "equal batch"),
])
def test_bad_shapes_raise(rng, op_type, a_shape, b_shape, message):
    with pytest.raises(OperatorError, match=message):
        run_operator(op_type, [rand(rng, a_shape), rand(rng, b_shape)])


def test_addmm_bias_that_does_not_broadcast_raises(rng):
    with pytest.raises(OperatorError, match="does not broadcast"):
        run_operator("torch.addmm", [rand(rng, (3,)), rand(rng, (4, 5)), rand(rng, (5, 6))])


def test_addmm_bad_alpha_raises(rng):
    with pytest.raises(OperatorError, match="alpha"):
        run_operator("torch.addmm", [rand(rng, (6,)), rand(rng, (4, 5)), rand(rng, (5, 6))],
                     params={"alpha": "big"})


def test_new_input_sizes_rebind(backend, rng, tmp_path):
    from kuiper.testing import write_operator_model
    a, b = rand(rng, (2, 3, 4, 5)), rand(rng, (2, 3, 5, 6))
    graph = kuiper.load(write_operator_model(tmp_path, "torch.matmul", [a, b]), backend=backend)
    for a_shape, b_shape in [((2, 3, 4, 5), (2, 3, 5, 6)), ((1, 3, 19, 7), (1, 3, 7, 2))]:
        a, b = rand(rng, a_shape), rand(rng, b_shape)
        (y,) = graph.forward(a, b)
        assert_close(y, torch.matmul(T(a), T(b)).numpy())
