"""torch.histc / aten::histc (values counted in equal bins) against torch, on both backends."""

import numpy as np
import pytest
import torch

import kuiper
from kuiper.testing import run_operator


def histc(x, bins, low, high):
    return torch.histc(torch.from_numpy(x), bins, low, high).numpy()


@pytest.mark.parametrize("seed", range(6))
def test_histc_matches_torch(backend, seed):
    """Normal values, integer values (many exactly on a bin's edge, as a router's expert ids),
    values outside the range and NaN, with a given range and the data's own."""
    rng = np.random.default_rng(seed)
    for case in range(8):
        n, bins = int(rng.integers(1, 300)), int(rng.integers(1, 40))
        if case % 2:
            x = rng.integers(-4, 12, n).astype(np.float32)
        else:
            x = (rng.standard_normal(n) * 3).astype(np.float32)
        if case == 3:
            x[rng.integers(0, n, 3)] = np.nan
        low, high = ((0.0, 0.0) if case % 4 == 0 else
                     sorted(float(v) for v in rng.choice([-3, -1, 0, 0.3, 1, 2.5, 7, 11], 2,
                                                         replace=False)))
        (y,) = run_operator("torch.histc", [x], params={"bins": bins, "min": low, "max": high},
                            backend=backend)
        want = histc(x, bins, low, high)
        assert y.dtype == np.float32 and np.array_equal(y, want), (n, bins, low, high)


@pytest.mark.parametrize("x", [np.zeros(0, np.float32), np.array(2.5, np.float32),
                               np.full((3, 4), 7.0, np.float32)],
                         ids=["empty", "0-d", "all equal"])
def test_histc_of_no_range(backend, x):
    # the data's own range: none (empty), one value, or equal values: one wider each way
    (y,) = run_operator("torch.histc", [x], params={"bins": 5}, backend=backend)
    assert np.array_equal(y, histc(x, 5, 0, 0))


def test_histc_of_float64(backend, rng):
    # computed by the CPU layer on OpenCL too (the kernel takes float32)
    x = rng.standard_normal((4, 9))
    (y,) = run_operator("torch.histc", [x], params={"bins": 7, "min": -1.5, "max": 2.0},
                        backend=backend, allow_fallback=True)
    assert y.dtype == np.float64 and np.array_equal(y, histc(x, 7, -1.5, 2.0))


def test_aten_histc_takes_its_arguments_as_inputs(backend):
    # as pnnx writes Mixtral's router (Hugging Face transformers 5): the tokens' expert ids,
    # counted per expert, with bins, min and max as computed inputs
    ids = np.array([3, 1, 0, 1, 2, 3, 3, 0, 1, 1, 2, 0, 3, 3], np.float32)
    args = [np.array(4, np.int64), np.array(0, np.int64), np.array(3, np.int64)]
    (y,) = run_operator("aten::histc", [ids, *args], constants=[1, 2, 3], backend=backend)
    assert np.array_equal(y, histc(ids, 4, 0, 3))


@pytest.mark.parametrize("x, params, message", [
    (np.arange(5), {"bins": 3}, "counts float32 or float64 values"),
    (np.zeros(5, np.float32), {"bins": 0}, "bins=0 must be >= 1"),
    (np.zeros(5, np.float32), {"bins": 3, "min": 2.0, "max": 1.0}, "min <= max"),
])
def test_histc_bad_arguments(backend, x, params, message):
    with pytest.raises(kuiper.OperatorError, match=message):
        run_operator("torch.histc", [x], params=params, backend=backend)


def test_histc_of_an_infinite_range_is_an_error_on_the_cpu():
    # PyTorch refuses it too; the OpenCL kernel, which cannot raise, writes NaN counts
    x = np.array([1.0, np.inf, 2.0], np.float32)
    with pytest.raises(kuiper.KuiperError, match="range .* is not finite"):
        run_operator("torch.histc", [x], params={"bins": 3})
