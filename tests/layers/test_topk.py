"""torch.topk, torch.sort and torch.argsort against torch on both backends.

Indices of equal values may legally differ from torch's, so results are checked on values,
and indices by gathering the input with them (ties: compare values only). sort/argsort are
checked exactly against torch's *stable* sort, which our ordering always is.
"""

import numpy as np
import pytest
import torch

import kuiper
from kuiper import OperatorError
from kuiper.testing import assert_close, run_operator
from tests.conftest import skip_without_opencl

T = torch.from_numpy


def check_topk(x, values, indices, expected_values, dim, sorted_):
    assert indices.dtype == np.int64
    assert_close(np.take_along_axis(x, indices, dim), values)   # indices point at the values
    if not sorted_:   # torch may return the k winners in any order
        values, expected_values = np.sort(values, axis=dim), np.sort(expected_values, axis=dim)
    assert_close(values, expected_values)


@pytest.mark.parametrize("k, dim", [(3, 1), (1, -1), (5, 3), (13, 1), (2, 0)])
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("sorted_", [True, False])
def test_topk(backend, rng, k, dim, largest, sorted_):
    x = rng.standard_normal((2, 13, 3, 5)).astype(np.float32)
    x[0, 2:6, 1, :] = 0.25   # ties
    values, indices = run_operator(
        "torch.topk", [x], params={"k": k, "dim": dim, "largest": largest, "sorted": sorted_},
        n_outputs=2, backend=backend)
    expected = torch.topk(T(x), k, dim=dim, largest=largest, sorted=sorted_)
    check_topk(x, values, indices, expected.values.numpy(), dim, sorted_)


def test_topk_long_rows_and_nan(backend, rng):
    x = rng.standard_normal((3, 700)).astype(np.float32)
    x[1, 17] = np.nan   # NaN is the largest value, as in torch
    values, indices = run_operator("torch.topk", [x], params={"k": 4, "dim": 1},
                                   n_outputs=2, backend=backend)
    expected = torch.topk(T(x), 4, dim=1)
    assert_close(values, expected.values.numpy())
    np.testing.assert_array_equal(indices, expected.indices.numpy())


def test_topk_single_output(backend, rng):
    # pnnx may keep only one output; the declared dtype tells values from indices.
    x = rng.standard_normal((4, 9)).astype(np.float32)
    expected = torch.topk(T(x), 3)
    (values,) = run_operator("torch.topk", [x], params={"k": 3}, backend=backend,
                             output_specs=[((4, 3), np.float32)])
    assert_close(values, expected.values.numpy())
    (indices,) = run_operator("torch.topk", [x], params={"k": 3}, backend=backend,
                              output_specs=[((4, 3), np.int64)])
    np.testing.assert_array_equal(indices, expected.indices.numpy())


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_and_argsort(backend, rng, dim, descending):
    x = rng.integers(-3, 4, (5, 7, 6)).astype(np.float32)   # many ties
    values, indices = run_operator("torch.sort", [x],
                                   params={"dim": dim, "descending": descending},
                                   n_outputs=2, backend=backend)
    expected = torch.sort(T(x), dim=dim, descending=descending, stable=True)
    assert_close(values, expected.values.numpy())
    np.testing.assert_array_equal(indices, expected.indices.numpy())
    (order,) = run_operator("torch.argsort", [x], params={"dim": dim, "descending": descending},
                            backend=backend)
    np.testing.assert_array_equal(order, expected.indices.numpy())


def test_topk_of_integers(backend, rng):
    x = rng.integers(-100, 100, (3, 11))
    values, indices = run_operator("torch.topk", [x], params={"k": 4, "dim": 1},
                                   n_outputs=2, backend=backend)
    expected = torch.topk(T(x), 4, dim=1)
    np.testing.assert_array_equal(values, expected.values.numpy())
    np.testing.assert_array_equal(np.take_along_axis(x, indices, 1), values)


def test_topk_from_a_pnnx_export(backend, rng, export_model):
    class Best(torch.nn.Module):
        def forward(self, x):
            v, i = torch.topk(x, 3, dim=1)
            return v, i, torch.topk(x, 2, dim=-1, largest=False)[0]

    import kuiper
    x = rng.standard_normal((2, 6, 5)).astype(np.float32)
    path = export_model("topk_best", Best(), [T(x)])
    outputs = kuiper.load(path, backend=backend).forward(x)
    expected = Best()(T(x))
    assert len(outputs) == 3
    assert_close(outputs[0], expected[0].numpy())
    np.testing.assert_array_equal(outputs[1], expected[1].numpy())
    assert_close(outputs[2], expected[2].numpy())


def test_bad_k_raises(rng):
    x = rng.standard_normal((2, 5)).astype(np.float32)
    with pytest.raises(OperatorError, match="larger than dim"):
        run_operator("torch.topk", [x], params={"k": 6, "dim": 1}, n_outputs=2)
    with pytest.raises(OperatorError, match="'k' should be >= 0"):
        run_operator("torch.topk", [x], params={"k": -1}, n_outputs=2)
    with pytest.raises(OperatorError, match="'k' is missing"):
        run_operator("torch.topk", [x], n_outputs=2)


class UnsortedTopK(torch.nn.Module):
    def forward(self, x):
        return torch.topk(x, 9, dim=1, sorted=False)


@pytest.mark.slow
def test_compare_treats_unsorted_topk_as_sets(rng, export_model, capsys):
    """Kuiper returns topk(sorted=False) sorted; PyTorch's CPU returns another order. `kuiper
    compare` documents that and compares the two as sets, so they agree."""
    from kuiper.bench.compare import compare

    skip_without_opencl("it compares the two backends")
    x = rng.standard_normal((2, 12, 3)).astype(np.float32)
    expected = UnsortedTopK()(T(x))
    path = export_model("topk_unsorted", UnsortedTopK(), [T(x)])
    values, _ = kuiper.load(path).forward(x)
    assert not np.array_equal(values, expected.values.numpy()), "orders happen to agree"
    assert_close(np.sort(values, 1), np.sort(expected.values.numpy(), 1))
    assert compare(str(path), ["cpu", "opencl"], ["torch"], [x]) == 0
    assert "MISMATCH" not in capsys.readouterr().out


@pytest.mark.parametrize("stable", [None, True])
@pytest.mark.parametrize("dim, descending", [(-1, False), (0, True), (1, False)])
def test_aten_sort_takes_its_arguments_as_inputs(backend, rng, stable, dim, descending):
    # as pnnx writes Mixtral's router (Hugging Face transformers 5): a stable sort of expert
    # ids, full of ties, with (dim, descending) or (stable, dim, descending) as computed inputs
    x = rng.integers(0, 4, (5, 37)).astype(np.int64)
    args = [np.array(dim, np.int64), np.array(descending)]
    if stable is not None:
        args.insert(0, np.array(stable))
    values, indices = run_operator("aten::sort", [x, *args], n_outputs=2,
                                   constants=list(range(1, len(args) + 1)), backend=backend)
    want = torch.sort(torch.from_numpy(x), dim=dim, descending=descending, stable=True)
    assert np.array_equal(values, want.values.numpy())
    assert np.array_equal(indices, want.indices.numpy())   # ties in their original order


def test_aten_sort_needs_known_arguments(rng):
    x = rng.standard_normal(7).astype(np.float32)
    with pytest.raises(kuiper.OperatorError, match="expected 3 inputs"):
        run_operator("aten::sort", [x, np.array(-1, np.int64)], constants=[1])
    with pytest.raises(kuiper.OperatorError, match="descending one bool"):
        run_operator("aten::sort", [x, np.array(-1, np.int64), np.array(5, np.int64)],
                     constants=[1, 2])
