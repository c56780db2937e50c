"""A YOLOv5s-style detector (Focus slicing, Conv-BN-SiLU, C3, SPPF, nearest upsample + cat,
Detect head with grids and anchors) at 320 and 640, on both backends, against PyTorch.

The Detect head's grids and reshape targets are folded into the export for its input size, so
640 gets its own export, and running the 320 export at 640 must be refused with a clear error.
The batch is baked into the reshape targets too (`shape=(1,3,8,40,40)`), but a change of batch
alone is one Kuiper follows: batch 4 runs on the batch-1 export.
"""

from __future__ import annotations

import pytest
import torch

import kuiper
from tests.models import zoo
from tests.models.common import check_model, kuiper_outputs

pytestmark = pytest.mark.slow


def example(*shape: int) -> torch.Tensor:
    return torch.rand(*shape, generator=torch.Generator().manual_seed(0))


@pytest.fixture(scope="module")
def yolo():
    return zoo.make(zoo.YoloV5Small, example(1, 3, 320, 320))


@pytest.fixture(scope="module")
def yolo_320(yolo, export_model):
    return export_model("yolo_320", yolo, example(1, 3, 320, 320))


def images(rng, *shape: int):
    return [rng.random(shape, dtype="float32")]  # pixels in [0, 1) as YOLOv5 expects


def test_yolo_320(yolo, yolo_320, backend, rng):
    (boxes,) = check_model(yolo_320, yolo, images(rng, 1, 3, 320, 320), backend)
    assert boxes.shape == (1, 3 * (40 * 40 + 20 * 20 + 10 * 10), 8)


def test_yolo_320_batch4(yolo, yolo_320, backend, rng):
    check_model(yolo_320, yolo, images(rng, 4, 3, 320, 320), backend)


def test_yolo_640(yolo, export_model, backend, rng):
    param = export_model("yolo_640", yolo, example(1, 3, 640, 640))
    check_model(param, yolo, images(rng, 1, 3, 640, 640), backend)


def test_yolo_320_export_at_640_is_refused(yolo_320, backend, rng):
    # The folded 40x40 grid cannot be added to an 80x80 map: the graph must say so, and say
    # that the fix is a re-export.
    with pytest.raises(kuiper.ShapeError, match="re-export"):
        kuiper_outputs(yolo_320, backend, images(rng, 1, 3, 640, 640))


def test_yolo_export_has_the_operators_it_claims(yolo_320):
    text = yolo_320.read_text()
    for needle in ("Tensor.slice", "steps=(2,2)", "nn.SiLU", "nn.MaxPool2d", "nn.Upsample",
                   "mode=nearest", "torch.cat", "Tensor.reshape", "Tensor.permute",
                   "F.sigmoid", "pnnx.Attribute", "pnnx.Expression"):
        assert needle in text, needle
