"""Embedding (nn.Embedding, F.embedding) against torch; out-of-range indices."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from kuiper.core.errors import OperatorError
from kuiper.testing import assert_close, run_operator


@pytest.mark.parametrize("index_shape", [(2, 5), (7,), (3, 4, 2), (1, 1)])
@pytest.mark.parametrize("rows,dim", [(10, 4), (1, 3), (37, 129)])
@pytest.mark.parametrize("index_dtype", [np.int64, np.int32])
def test_embedding_matches_torch(backend, rng, index_shape, rows, dim, index_dtype):
    index = rng.integers(0, rows, index_shape).astype(index_dtype)
    table = rng.standard_normal((rows, dim)).astype(np.float32)
    params = {"num_embeddings": rows, "embedding_dim": dim, "sparse": False}
    (y,) = run_operator("nn.Embedding", [index], params=params,
                        weights={"weight": table}, backend=backend)
    assert_close(y, F.embedding(torch.from_numpy(index), torch.from_numpy(table)).numpy())


def test_functional_embedding_with_table_input(backend, rng):
    index = rng.integers(0, 11, (3, 6))
    table = rng.standard_normal((11, 5)).astype(np.float32)
    (y,) = run_operator("F.embedding", [index, table], backend=backend)
    assert_close(y, F.embedding(torch.from_numpy(index), torch.from_numpy(table)).numpy())


def test_embedding_max_norm(backend, rng):
    index = np.array([[0, 3, 3, 7]], np.int64)
    table = (rng.standard_normal((8, 6)) * 2).astype(np.float32)
    params = {"num_embeddings": 8, "embedding_dim": 6, "max_norm": 1.5}
    (y,) = run_operator("nn.Embedding", [index], params=params,
                        weights={"weight": table}, backend=backend)
    ref = F.embedding(torch.from_numpy(index), torch.from_numpy(table.copy()), max_norm=1.5)
    assert_close(y, ref.numpy())


@pytest.mark.parametrize("bad", [10, -1])
def test_embedding_index_out_of_range(backend, rng, bad):
    index = np.array([[1, bad, 2]], np.int64)
    table = rng.standard_normal((10, 4)).astype(np.float32)
    with pytest.raises(IndexError):  # PyTorch refuses it as well
        F.embedding(torch.from_numpy(index), torch.from_numpy(table))
    params, weights = {"num_embeddings": 10, "embedding_dim": 4}, {"weight": table}
    if backend == "cpu":
        with pytest.raises(OperatorError, match="out of range"):
            run_operator("nn.Embedding", [index], params=params, weights=weights, backend=backend)
        return
    # A kernel cannot raise: the bad row comes out as zeros, and nothing outside the table is
    # read (the Oclgrind run of this test checks that).
    (y,) = run_operator("nn.Embedding", [index], params=params, weights=weights, backend=backend)
    np.testing.assert_array_equal(y[0, 1], np.zeros(4, np.float32))
    assert_close(y[0, [0, 2]], table[[1, 2]])


def test_embedding_table_shape_is_checked(backend, rng):
    index = np.zeros((2, 3), np.int64)
    with pytest.raises(OperatorError, match="num_embeddings=12"):
        run_operator("nn.Embedding", [index], params={"num_embeddings": 12, "embedding_dim": 4},
                     weights={"weight": np.zeros((10, 4), np.float32)}, backend=backend)
