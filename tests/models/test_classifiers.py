"""ResNet-18, MobileNetV2 and MobileNetV3-small end to end, on both backends, against PyTorch.

Each is exported once at 1x3x64x64 (small inputs keep the suite fast; the architectures are the
standard full-width ones) and run at the export size, at batch 4, and at a second, non-square
size: nothing in these graphs fixes the batch or the image size.
"""

from __future__ import annotations

import pytest
import torch

from tests.models import zoo
from tests.models.common import check_model, image

pytestmark = pytest.mark.slow

CLASSIFIERS = {"resnet18": zoo.ResNet18, "mobilenet_v2": zoo.MobileNetV2,
               "mobilenet_v3_small": zoo.MobileNetV3Small}
EXPORT_SHAPE = (1, 3, 64, 64)
# Parameter counts of torchvision's resnet18, mobilenet_v2, mobilenet_v3_small: the zoo builds
# the standard architectures, not look-alikes.
TORCHVISION_PARAMETERS = {"resnet18": 11_689_512, "mobilenet_v2": 3_504_872,
                          "mobilenet_v3_small": 2_542_856}


@pytest.fixture(scope="module", params=list(CLASSIFIERS))
def classifier(request, export_model):
    example = torch.randn(*EXPORT_SHAPE, generator=torch.Generator().manual_seed(0))
    module = zoo.make(CLASSIFIERS[request.param], example)
    return request.param, module, export_model(request.param, module, example)


@pytest.mark.parametrize("shape", [EXPORT_SHAPE, (4, 3, 64, 64), (2, 3, 96, 80)],
                         ids=["export_size", "batch4", "2x3x96x80"])
def test_classifier_matches_torch(classifier, backend, rng, shape):
    _, module, param = classifier
    check_model(param, module, [image(rng, *shape)], backend)


def test_standard_architectures(classifier):
    name, module, param = classifier
    assert zoo.count_parameters(module) == TORCHVISION_PARAMETERS[name]
    text = param.read_text()
    # BatchNorm was folded into the convolutions: the random running statistics are in the
    # conv weights Kuiper reads, so the comparison above covers the fusion.
    assert "nn.BatchNorm2d" not in text and "nn.Conv2d" in text
    assert any(m.running_var.std() > 0.01 for m in module.modules()
               if isinstance(m, torch.nn.BatchNorm2d))
