"""masked_select against torch on both backends, and the data-dependent shape it brings:
the spec is dynamic, the executors handle the operators after it, `kuiper info` shows it."""

import numpy as np
import pytest
import torch

import kuiper
from kuiper import OperatorError, ShapeError
from kuiper.testing import assert_close, run_operator


@pytest.mark.parametrize("x_shape, mask_shape", [((3, 5, 7), (3, 5, 7)), ((3, 5, 7), (5, 1)),
                                                 ((1, 13), (4, 1)), ((300, 7), (300, 7)),
                                                 ((), ())])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8])
def test_masked_select_matches_torch(backend, rng, x_shape, mask_shape, dtype):
    x = np.asarray(rng.standard_normal(x_shape) * 10, dtype=dtype)
    mask = np.asarray(rng.random(mask_shape) > 0.4)
    (y,) = run_operator("torch.masked_select", [x, mask], backend=backend)
    want = torch.masked_select(torch.from_numpy(x), torch.from_numpy(mask)).numpy()
    assert y.dtype == want.dtype
    assert_close(y, want)


@pytest.mark.parametrize("fraction", [0.0, 1.0])
def test_masked_select_none_or_all(backend, rng, fraction):
    x = rng.standard_normal((4, 9)).astype(np.float32)
    mask = rng.random((4, 9)) < fraction
    (y,) = run_operator("torch.masked_select", [x, mask], backend=backend)
    assert_close(y, x[mask])


def test_masked_select_bad_inputs(backend):
    x = np.ones((2, 3), np.float32)
    with pytest.raises(OperatorError, match="mask should be a bool tensor, got float32"):
        run_operator("torch.masked_select", [x, x], backend=backend)
    with pytest.raises(ShapeError, match=r"do not broadcast"):
        run_operator("torch.masked_select", [x, np.ones((4,), bool)], backend=backend)


class SelectThenCompute(torch.nn.Module):
    def forward(self, x):
        picked = torch.masked_select(x, x > 0.5)
        return picked * 2 + 1, torch.masked_select(x, x > 0.1).sum().reshape(1), x + 1


@pytest.mark.slow
def test_masked_select_graph_is_dynamic(backend, rng, export_model):
    x = torch.from_numpy(rng.random((2, 5, 9)).astype(np.float32))
    module = SelectThenCompute().eval()
    graph = kuiper.load(export_model("masked_select", module, (x,)), backend=backend)
    info = graph.summary()
    assert "dynamic (data-dependent size" in info and "<=90 float32" in info
    dynamic = {o for o, s in graph.specs.items() if s.dynamic}
    assert dynamic, "masked_select's output should be marked dynamic"
    if backend == "opencl":  # the readers of a data-dependent size run on the host
        assert graph.fallbacks and all(op.type != "torch.masked_select"
                                       for op in graph.fallbacks)
    for _ in range(2):  # different masks, different sizes
        x = torch.from_numpy(rng.random((2, 5, 9)).astype(np.float32))
        for got, want in zip(graph.forward(x.numpy()), module(x)):
            assert_close(got, want.numpy())


def test_masked_select_of_an_empty_input(backend):
    # an empty input: the output's size is data-dependent (a bound of 0), so the operator
    # still runs on OpenCL (the executor skips only outputs empty by their static shape)
    x = np.zeros((0, 3), np.float32)
    (y,) = run_operator("torch.masked_select", [x, x > 0], backend=backend)
    assert y.shape == (0,) and y.dtype == np.float32
