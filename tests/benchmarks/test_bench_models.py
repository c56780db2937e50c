"""The benchmark models of issue 16, Kuiper (NumPy, OpenCL) beside PyTorch eager and onnxruntime.

ResNet-18 at batch 1 and 32, MobileNetV2 at 224, YOLOv5s-style at 640 and a UNet (base width
32) at 256: the models of `tests/models/zoo.py`, exported with pnnx (the model tests' exports
are reused where the module and the example are the same).

These are pytest-benchmark benchmarks, never timed assertions. The project's default options
(`--benchmark-disable`) run each body once, as a check that it works and agrees with PyTorch;
to measure, run them alone so nothing else competes for the cores:

    python -m pytest tests/benchmarks --benchmark-enable --benchmark-columns=median,min,rounds \
        --benchmark-group-by=param:model

Everything runs with 2 threads (PyTorch, onnxruntime, NumPy's BLAS). `kuiper bench MODEL
--against torch,onnxruntime` reports the same comparison from the command line, interleaved, with
ratios and a per-operator profile (on a GPU machine: `--against torch-cuda,torch-cuda-default`);
the README records its numbers with the machine.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch

import kuiper
from kuiper.testing import assert_close
from tests.models import zoo

pytestmark = pytest.mark.slow

THREADS = 2


@dataclass(frozen=True)
class Bench:
    export: str                     # the export's name (shared with the model tests)
    cls: type
    kwargs: dict
    example: tuple[int, ...]        # the shape the module is built and exported at
    shape: tuple[int, ...]          # the shape it is benchmarked at
    rand: bool = False              # pixels in [0, 1) (YOLO) rather than N(0, 1)
    export_shape: tuple[int, ...] | None = None   # export at another size than `example`


MODELS = {
    "resnet18_b1": Bench("resnet18", zoo.ResNet18, {}, (1, 3, 64, 64), (1, 3, 224, 224)),
    "resnet18_b32": Bench("resnet18", zoo.ResNet18, {}, (1, 3, 64, 64), (32, 3, 224, 224)),
    "mobilenetv2": Bench("mobilenet_v2", zoo.MobileNetV2, {}, (1, 3, 64, 64), (1, 3, 224, 224)),
    # YOLOv5s's widths (first layer 32, 80 classes), a third of its depth; YOLO folds its
    # grid at export time, so it is exported at the benchmark size
    "yolov5s_640": Bench("yolov5s_640", zoo.YoloV5Small, {"num_classes": 80, "width": 32},
                         (1, 3, 320, 320), (1, 3, 640, 640), rand=True,
                         export_shape=(1, 3, 640, 640)),
    "unet_256": Bench("unet32_256", zoo.UNet, {"base": 32}, (1, 3, 256, 256), (1, 3, 256, 256)),
}


def _example(bench: Bench, shape: tuple[int, ...]) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    return (torch.rand(*shape, generator=generator) if bench.rand
            else torch.randn(*shape, generator=generator))


@pytest.fixture(scope="module", params=list(MODELS))
def model(request, export_model):
    bench = MODELS[request.param]
    module = zoo.make(bench.cls, _example(bench, bench.example), **bench.kwargs)
    param = export_model(bench.export, module, _example(bench, bench.export_shape
                                                         or bench.example))
    rng = np.random.default_rng(0)
    x = (rng.random(bench.shape, dtype=np.float32) if bench.rand
         else rng.standard_normal(bench.shape).astype(np.float32))
    torch.set_num_threads(THREADS)
    with torch.no_grad():
        expected = module(torch.from_numpy(x))
    expected = expected[0] if isinstance(expected, (tuple, list)) else expected
    return request.param, module, param, x, expected.numpy()


def test_kuiper(benchmark, model, backend):
    _, _, param, x, expected = model
    graph = kuiper.load(param, backend=backend, input_shapes=[x.shape],
                        **({"threads": THREADS} if backend == "cpu" else {}))
    first = graph(x)  # warm-up: OpenCL builds and binds, caches fill
    y = benchmark(graph, x)
    assert_close(first, expected)
    assert_close(y, expected)


def test_torch_eager(benchmark, model):
    _, module, _, x, expected = model
    tensor = torch.from_numpy(x)

    def run():
        with torch.inference_mode():
            out = module(tensor)
        return out[0] if isinstance(out, (tuple, list)) else out

    assert_close(benchmark(run).numpy(), expected)


def test_onnxruntime(benchmark, model, tmp_path):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed "
                              "(it is in the test extras)")
    name, module, _, x, expected = model
    path = tmp_path / f"{name}.onnx"
    with torch.no_grad():
        torch.onnx.export(module, (torch.from_numpy(x),), str(path), dynamo=False,
                          opset_version=17)
    options = ort.SessionOptions()
    options.intra_op_num_threads = THREADS
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    feed = {session.get_inputs()[0].name: x}
    y = benchmark(session.run, None, feed)[0]
    assert_close(y, expected)
