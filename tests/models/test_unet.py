"""A UNet (max-pool downsampling, ConvTranspose2d and bilinear upsampling, skip concatenations)
end to end on both backends against PyTorch, at three sizes from one export."""

from __future__ import annotations

import pytest
import torch

from tests.models import zoo
from tests.models.common import check_model, image

pytestmark = pytest.mark.slow

EXPORT_SHAPE = (1, 3, 64, 48)


@pytest.fixture(scope="module")
def unet(export_model):
    example = torch.randn(*EXPORT_SHAPE, generator=torch.Generator().manual_seed(0))
    module = zoo.make(zoo.UNet, example)
    return module, export_model("unet", module, example)


@pytest.mark.parametrize("shape", [EXPORT_SHAPE, (4, 3, 64, 48), (2, 3, 32, 80)],
                         ids=["export_size", "batch4", "2x3x32x80"])
def test_unet_matches_torch(unet, backend, rng, shape):
    module, param = unet
    (mask,) = check_model(param, module, [image(rng, *shape)], backend)
    assert mask.shape == (shape[0], 2, *shape[2:])


def test_unet_export_has_both_upsamplings(unet):
    text = unet[1].read_text()
    assert "nn.ConvTranspose2d" in text and "output_padding=(1,1)" in text
    assert "mode=bilinear" in text and "torch.cat" in text
