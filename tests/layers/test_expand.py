"""Tensor.expand / expand_as, Tensor.repeat and torch.repeat_interleave vs torch."""

import numpy as np
import pytest
import torch

import kuiper
from kuiper import OperatorError
from kuiper.testing import assert_close, run_operator


@pytest.mark.parametrize("shape, sizes", [
    ((1, 13, 1), (2, 13, 4)),
    ((1, 13, 1), (-1, -1, 4)),
    ((3, 1), (2, 5, 3, 7)),        # new leading dims
    ((2, 1, 5), (2, 1, 5)),        # nothing to do
    ((1,), (3, 0)),                # expanding to zero elements
])
def test_expand(backend, rng, shape, sizes):
    x = rng.standard_normal(shape).astype(np.float32)
    (y,) = run_operator("Tensor.expand", [x], params={"sizes": list(sizes)}, backend=backend)
    assert_close(y, torch.from_numpy(x).expand(*sizes).numpy())


def test_expand_sizes_from_known_input(backend, rng):
    x = rng.standard_normal((1, 13, 1)).astype(np.float32)
    sizes = np.array([3, -1, 6], np.int64)
    (y,) = run_operator("Tensor.expand", [x, sizes], constants=[1], backend=backend)
    assert_close(y, torch.from_numpy(x).expand(3, -1, 6).numpy())


def test_expand_as(backend, rng):
    x = rng.standard_normal((1, 3, 1)).astype(np.float32)
    other = rng.standard_normal((2, 3, 4)).astype(np.float32)
    (y,) = run_operator("Tensor.expand_as", [x, other], backend=backend)
    assert_close(y, torch.from_numpy(x).expand_as(torch.from_numpy(other)).numpy())


def test_expand_int64(backend, rng):
    x = rng.integers(0, 9, (2, 1), dtype=np.int64)
    (y,) = run_operator("Tensor.expand", [x], params={"sizes": [2, 5]}, backend=backend)
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, np.broadcast_to(x, (2, 5)))


@pytest.mark.parametrize("shape, reps", [((1, 3, 1), (2, 1, 3)), ((2, 3), (2, 2)),
                                         ((2, 3), (3, 1, 2)), ((13,), (1, 2, 1, 3)),
                                         ((2, 3), (1, 0))])
def test_repeat(backend, rng, shape, reps):
    x = rng.standard_normal(shape).astype(np.float32)
    (y,) = run_operator("Tensor.repeat", [x], params={"sizes": list(reps)}, backend=backend)
    assert_close(y, torch.from_numpy(x).repeat(*reps).numpy())


@pytest.mark.parametrize("repeats, dim", [(2, 1), (3, -1), (2, 0), (4, None), (1, 2)])
def test_repeat_interleave(backend, rng, repeats, dim):
    x = rng.standard_normal((2, 3, 5)).astype(np.float32)
    params = {"repeats": repeats} if dim is None else {"repeats": repeats, "dim": dim}
    (y,) = run_operator("torch.repeat_interleave", [x], params=params, backend=backend)
    assert_close(y, torch.repeat_interleave(torch.from_numpy(x), repeats, dim=dim).numpy())


@pytest.mark.parametrize("repeats, dim", [([1, 0, 3], 1), ([2, 1, 1, 2, 3], -1), ([3], 1)])
def test_repeat_interleave_counts(backend, rng, repeats, dim):
    x = rng.standard_normal((2, 3, 5)).astype(np.float32)
    (y,) = run_operator("torch.repeat_interleave", [x], params={"repeats": repeats, "dim": dim},
                        backend=backend)
    want = torch.repeat_interleave(torch.from_numpy(x), torch.tensor(repeats), dim=dim)
    assert_close(y, want.numpy())


@pytest.mark.parametrize("op_type, shape, params, error, message", [
    ("Tensor.expand", (2, 3), {"sizes": [4, 3]}, kuiper.ShapeError, "neither 1 nor 4"),
    ("Tensor.expand", (2, 3), {"sizes": [3]}, kuiper.ShapeError, "fewer dims"),
    ("Tensor.expand", (2, 3), {"sizes": [-1, 2, 3]}, kuiper.OperatorError,
     "-1 is not allowed for the new leading dim 0"),
    ("Tensor.expand", (2, 3), {}, kuiper.OperatorError, "'sizes' is missing"),
    ("Tensor.repeat", (2, 3), {"sizes": [2]}, kuiper.ShapeError, "at least one size per"),
    ("Tensor.repeat", (2, 3), {"sizes": [2, -1]}, kuiper.OperatorError, "must not be negative"),
    ("torch.repeat_interleave", (2, 3), {"repeats": [1, 2], "dim": 1}, kuiper.ShapeError,
     "2 repeats for dim 1 of size 3"),
])
def test_expand_bad(backend, op_type, shape, params, error, message):
    with pytest.raises(error, match=message):
        run_operator(op_type, [np.zeros(shape, np.float32)], params=params, backend=backend)


class _Repeats(torch.nn.Module):
    def forward(self, x, y):
        return (x.expand(-1, -1, 4), x.expand_as(y), x.repeat(2, 1, 3),
                torch.repeat_interleave(x, 2, dim=1), x.repeat_interleave(3, dim=-1))


def test_real_export(backend, rng, export_model):
    path = export_model("expand_repeats", _Repeats(), (torch.zeros(2, 3, 1),
                                                       torch.zeros(2, 3, 4)))
    graph = kuiper.load(path, backend=backend)
    x = rng.standard_normal((2, 3, 1)).astype(np.float32)
    y = rng.standard_normal((2, 3, 4)).astype(np.float32)
    with torch.no_grad():
        want = _Repeats()(torch.from_numpy(x), torch.from_numpy(y))
    for k, (g, w) in enumerate(zip(graph.forward(x, y), want)):
        assert_close(g, w.numpy(), what=f"output {k}")


@pytest.mark.parametrize("repeats, dim", [([2, 1, 3], 0), ([0, 4, 1, 1, 2, 3, 1], 1), (3, 2),
                                          ([2], None)])
def test_repeat_interleave_counts_from_a_constant_input(backend, rng, repeats, dim):
    """pnnx folds torch.tensor([2, 1, 3]) into a pnnx.Attribute feeding `$repeats`."""
    x = rng.standard_normal((3, 7, 8)).astype(np.float32)
    counts = np.asarray(repeats, np.int64)
    params = {} if dim is None else {"dim": dim}
    (y,) = run_operator("torch.repeat_interleave", [x, counts], params=params, constants=[1],
                        backend=backend)
    want = torch.repeat_interleave(torch.from_numpy(x), torch.from_numpy(counts), dim=dim)
    assert_close(y, want.numpy())


def test_repeat_interleave_counts_must_be_known(backend):
    with pytest.raises(kuiper.OperatorError, match="repeats input is not known"):
        run_operator("torch.repeat_interleave", [np.ones((3, 2), np.float32),
                                                 np.array([1, 2, 3])], params={"dim": 0},
                     backend=backend)
    with pytest.raises(kuiper.OperatorError, match="must not be negative"):
        run_operator("torch.repeat_interleave", [np.ones((3, 2), np.float32),
                                                 np.array([1, -2, 3])], params={"dim": 0},
                     constants=[1], backend=backend)


class RepeatCounts(torch.nn.Module):
    """pnnx's test_torch_repeat_interleave."""

    def forward(self, x, y, z):
        return (torch.repeat_interleave(x, 2), torch.repeat_interleave(y, 3, dim=1),
                torch.repeat_interleave(z, torch.tensor([2, 1, 3]), dim=0, output_size=6))


@pytest.mark.slow
def test_repeat_interleave_tensor_repeats_pnnx_export(backend, rng, export_model):
    inputs = [torch.from_numpy(rng.random(s).astype(np.float32)) for s in [(3,), (4, 5),
                                                                           (3, 7, 8)]]
    module = RepeatCounts().eval()
    path = export_model("repeat_counts", module, inputs)
    assert "$repeats=" in path.read_text()
    graph = kuiper.load(path, backend=backend)
    assert not graph.fallbacks
    for got, want in zip(graph.forward(*[t.numpy() for t in inputs]), module(*inputs)):
        assert_close(got, want.numpy())


def test_expand_as_without_its_inputs_is_refused(tmp_path, backend, rng):
    # found by `kuiper fuzz` (seed 99001): an expand_as with no input at all, an IndexError
    x = rng.standard_normal((2, 1)).astype(np.float32)
    with pytest.raises(OperatorError, match="expected 2 input\\(s\\), got 1"):
        run_operator("Tensor.expand_as", [x], backend=backend)
    path = tmp_path / "model.pnnx.param"
    path.write_text("7767517\n3 2\npnnx.Input in 0 1 0 #0=(2,1)f32\n"
                    "Tensor.expand_as e 0 1 1 #1=(2,3)f32\npnnx.Output out 1 0 1\n")
    with pytest.raises(OperatorError, match="expected 2 input\\(s\\), got 0"):
        kuiper.load(path, backend=backend)
