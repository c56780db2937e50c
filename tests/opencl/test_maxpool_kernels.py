"""Both OpenCL max-pooling kernels, each forced, against PyTorch.

layers/opencl/maxpool.py binds `maxpool_runs` (8 outputs of a row per work-item, from a row of
column maxima) for
1-D and 2-D pools without indices on CPU devices, and the per-output `maxpool` elsewhere, so a
test run on one device exercises only one of them through tests/layers/test_maxpool.py. Here
each is forced on every device: rows shorter and longer than a run, runs that touch the padding
or the row's end (the scalar fallback), strides 1-3, dilation, ceil mode and NaN.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from kuiper.layers.opencl import maxpool
from kuiper.testing import assert_close, run_operator
from tests.conftest import opencl_available

pytestmark = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")

# (shape, kernel, stride, padding, dilation, ceil_mode)
CASES = [((1, 8, 112, 112), 3, 2, 1, 1, False),       # ResNet's stem pool, 8 planes
         ((2, 3, 13, 29), 3, 1, 1, 1, False),          # stride 1, rows of 3 runs + 5
         ((1, 5, 9, 40), (2, 3), (1, 3), (1, 0), 1, True),
         ((1, 2, 17, 33), 3, 2, 0, (1, 2), True),      # dilated columns
         ((3, 4, 7, 7), 2, 2, 0, 1, False),            # rows shorter than a run
         ((1, 6, 20, 64), 5, 3, 2, 1, False),
         ((1, 3, 4, 90), (2, 9), (1, 1), (1, 4), (1, 7), False)]   # a run spanning 64 inputs


def ids(case) -> str:
    shape, k, s, p, d, c = case
    return f"{'x'.join(map(str, shape))}-k{k}-s{s}-p{p}-d{d}{'-ceil' if c else ''}"


def pair(v) -> list:
    return list(v) if isinstance(v, tuple) else [v, v]


@pytest.mark.parametrize("kernel", ["maxpool", "maxpool_runs"])
@pytest.mark.parametrize("case", CASES, ids=ids)
def test_forced_kernel_matches_torch(monkeypatch, rng, kernel, case):
    monkeypatch.setattr(maxpool, "KERNEL", kernel)
    shape, k, s, p, d, c = case
    x = rng.standard_normal(shape).astype(np.float32)
    x.reshape(-1)[rng.integers(x.size, size=7)] = np.nan    # a NaN wins its window
    params = {"kernel_size": pair(k), "stride": pair(s), "padding": pair(p),
              "dilation": pair(d), "ceil_mode": c, "return_indices": False}
    (y,) = run_operator("nn.MaxPool2d", [x], params=params, backend="opencl")
    ref = F.max_pool2d(torch.from_numpy(x), k, s, p, d, ceil_mode=c)
    assert_close(y, ref.numpy())


@pytest.mark.parametrize("kernel", ["maxpool", "maxpool_runs"])
def test_forced_kernel_on_a_1d_pool(monkeypatch, rng, kernel):
    monkeypatch.setattr(maxpool, "KERNEL", kernel)
    x = rng.standard_normal((2, 3, 37)).astype(np.float32)
    x[1, 2, [0, 20]] = np.nan
    params = {"kernel_size": [3], "stride": [2], "padding": [1], "dilation": [1],
              "ceil_mode": True, "return_indices": False}
    (y,) = run_operator("nn.MaxPool1d", [x], params=params, backend="opencl")
    assert_close(y, F.max_pool1d(torch.from_numpy(x), 3, 2, 1, ceil_mode=True).numpy())


def test_the_runs_kernel_is_the_cpu_default_and_indices_keep_the_walk(tmp_path):
    """Which kernel each layer binds: maxpool_runs needs no indices and a CPU device."""
    import kuiper
    from kuiper.opencl.device.runtime import is_cpu
    from kuiper.testing import write_operator_model

    x = np.zeros((1, 2, 9, 9), np.float32)
    kernels, device = {}, None
    for indices in (False, True):
        params = {"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1],
                  "dilation": [1, 1], "ceil_mode": False, "return_indices": indices}
        folder = tmp_path / f"indices{indices}"
        folder.mkdir()
        path = write_operator_model(folder, "F.max_pool2d", [x],
                                    params=params, n_outputs=2 if indices else 1)
        with kuiper.load(path, backend="opencl") as graph:
            layer = next(op.layer for op in graph.order if op.type == "F.max_pool2d")
            kernels[indices] = layer.launches[0].kernel.function_name
            device = layer.runtime.device
    assert kernels[True] == "maxpool"
    assert kernels[False] == ("maxpool_runs" if is_cpu(device) else "maxpool")


@pytest.mark.parametrize("kernel", [9, 10])
def test_runs_wider_than_the_span_limit_take_the_per_output_kernel(monkeypatch, rng, tmp_path,
                                                                   kernel):
    """maxpool_runs keeps a run's columns in a private row of RUNS_SPAN_MAX values at most:
    windows of 9 columns dilated by 7 span exactly 64 for 8 outputs and may run there, 10 do
    not, and the layer binds the per-output kernel even when the runs kernel is forced."""
    import kuiper
    from kuiper.testing import write_operator_model

    monkeypatch.setattr(maxpool, "KERNEL", "maxpool_runs")
    x = rng.standard_normal((1, 2, 3, 90)).astype(np.float32)
    params = {"kernel_size": [1, kernel], "stride": [1, 1], "padding": [0, 0],
              "dilation": [1, 7], "ceil_mode": False, "return_indices": False}
    path = write_operator_model(tmp_path, "nn.MaxPool2d", [x], params=params)
    with kuiper.load(path, backend="opencl") as graph:
        layer = next(op.layer for op in graph.order if op.type == "nn.MaxPool2d")
        name = layer.launches[0].kernel.function_name
        (y,) = graph.forward(x)
    span = 7 + (kernel - 1) * 7 + 1
    assert name == ("maxpool_runs" if span <= maxpool.RUNS_SPAN_MAX else "maxpool")
    ref = F.max_pool2d(torch.from_numpy(x), (1, kernel), 1, 0, (1, 7))
    assert_close(y, ref.numpy())
