"""Models that reach PNNX through ONNX: torch.onnx.export(dynamo=False), then the pnnx command
line on the .onnx. That route names things differently (input `in0`, `F.*` activations, layers
named after ONNX nodes, one `pnnx.Output` per model output), and Kuiper must not care.
"""

from __future__ import annotations

import re

import pytest
import torch

import kuiper
from tests.models import zoo
from tests.models.common import check_model, image, kuiper_outputs

pytestmark = pytest.mark.slow


def example(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0))


@pytest.fixture(scope="module")
def cnn(export_onnx_model):
    module = zoo.make(zoo.OnnxCNN, example(1, 3, 32, 32))
    return module, export_onnx_model("onnx_cnn", module, example(1, 3, 32, 32))


@pytest.fixture(scope="module")
def mixer(export_onnx_model):
    module = zoo.make(zoo.OnnxMLPMixer, example(1, 3, 32, 32))
    return module, export_onnx_model("onnx_mixer", module, example(1, 3, 32, 32))


@pytest.fixture(scope="module")
def unet(export_onnx_model):
    module = zoo.make(zoo.UNet, example(1, 3, 32, 32))
    return module, export_onnx_model("onnx_unet", module, example(1, 3, 32, 32))


def operator_types(param) -> list[str]:
    return [line.split()[0] for line in param.read_text().splitlines()[2:] if line.strip()]


def test_onnx_route_naming(cnn):
    _module, param = cnn
    types = operator_types(param)
    assert types.count("pnnx.Output") == 2  # logits and probabilities: one Output each
    assert {"F.relu", "F.hardswish", "F.leaky_relu", "F.softmax", "F.max_pool2d"} <= set(types)
    assert re.search(r"^pnnx\.Input\s+in0\s", param.read_text(), re.MULTILINE)
    graph = kuiper.load(param)
    assert [op.name for op in graph.input_ops] == ["in0"]
    assert graph.inputs[0].shape == (1, 3, 32, 32)
    assert [op.name for op in graph.operators if op.type == "pnnx.Output"] == ["out0", "out1"]
    assert [p.shape for p in graph.outputs] == [(1, 7), (1, 7)]


@pytest.mark.parametrize("shape", [(1, 3, 32, 32), (4, 3, 32, 32), (2, 3, 48, 40)],
                         ids=["export_size", "batch4", "2x3x48x40"])
def test_onnx_cnn_two_outputs(cnn, backend, rng, shape):
    module, param = cnn
    logits, probs = check_model(param, module, [image(rng, *shape)], backend)
    assert logits.shape == probs.shape == (shape[0], 7)


def test_onnx_mixer(mixer, backend, rng):
    module, param = mixer
    check_model(param, module, [image(rng, 1, 3, 32, 32)], backend)


def test_onnx_mixer_batch4(mixer, backend, rng):
    # The ONNX route bakes the batch into Tensor.reshape shape=(1,32,64); a change of batch
    # alone is one Kuiper follows.
    module, param = mixer
    assert "shape=(1,32,64)" in param.read_text()
    check_model(param, module, [image(rng, 4, 3, 32, 32)], backend)


def test_onnx_mixer_other_size_is_refused(mixer, backend, rng):
    # 48x40 gives 12x10 patches: the baked (1,32,64) cannot hold them, and the error says why.
    _, param = mixer
    with pytest.raises(kuiper.ShapeError, match="re-export"):
        kuiper_outputs(param, backend, [image(rng, 1, 3, 48, 40)])


@pytest.mark.parametrize("shape", [(1, 3, 32, 32), (4, 3, 32, 32), (2, 3, 64, 48)],
                         ids=["export_size", "batch4", "2x3x64x48"])
def test_onnx_unet(unet, backend, rng, shape):
    module, param = unet
    assert "F.interpolate" in param.read_text()  # ONNX Resize arrives as F.interpolate
    check_model(param, module, [image(rng, *shape)], backend)
