"""ResNet-18 at 1x3x224x224: Kuiper (NumPy, OpenCL) beside PyTorch eager and onnxruntime.

These are pytest-benchmark benchmarks, never timed assertions. The project's default options
(`--benchmark-disable`) run each body once, as a check that it works and agrees with PyTorch;
to measure, run them alone so nothing else competes for the cores:

    python -m pytest tests/benchmarks --benchmark-enable --benchmark-columns=median,min,rounds

All four run with 2 threads (PyTorch, onnxruntime, NumPy's BLAS through the machine's 2 cores).
`kuiper bench MODEL --against torch,onnxruntime` reports the same comparison from the command
line, with ratios and a per-operator profile; the README records its numbers.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import kuiper
from kuiper.tools.testing import assert_close
from tests.models import zoo

pytestmark = pytest.mark.slow

THREADS = 2
SHAPE = (1, 3, 224, 224)


@pytest.fixture(scope="module")
def resnet18(export_model):
    # Exactly the classifier tests' export (same module, seed and example): exported once.
    example = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    module = zoo.make(zoo.ResNet18, example)
    param = export_model("resnet18", module, example)
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    torch.set_num_threads(THREADS)
    with torch.no_grad():
        expected = module(torch.from_numpy(x)).numpy()
    return module, param, x, expected


def test_kuiper(benchmark, resnet18, backend):
    _, param, x, expected = resnet18
    graph = kuiper.load(param, backend=backend, input_shapes=[SHAPE])
    graph(x)  # warm-up: OpenCL builds and binds, caches fill
    y = benchmark(graph, x)
    assert_close(y, expected)


def test_torch_eager(benchmark, resnet18):
    module, _, x, expected = resnet18
    tensor = torch.from_numpy(x)

    def run():
        with torch.inference_mode():
            return module(tensor)

    assert_close(benchmark(run).numpy(), expected)


def test_onnxruntime(benchmark, resnet18, tmp_path):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed "
                              "(it is in the test extras)")
    module, _, x, expected = resnet18
    path = tmp_path / "resnet18.onnx"
    with torch.no_grad():
        torch.onnx.export(module, (torch.from_numpy(x),), str(path), dynamo=False,
                          opset_version=17)
    options = ort.SessionOptions()
    options.intra_op_num_threads = THREADS
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    y = benchmark(session.run, None, {name: x})[0]
    assert_close(y, expected)
