"""A ViT-tiny (patch conv, class token cat, position embedding add, nn.MultiheadAttention,
GELU, LayerNorm) end to end on both backends against PyTorch.

The traced export folds the class token expanded to batch 1 into a constant, so batch 4 gets its
own export; the batch-1 export at batch 4 must be right or refused. Another image size changes
the number of tokens, which the position embedding cannot follow (PyTorch fails too): Kuiper
must refuse it with a ShapeError.
"""

from __future__ import annotations

import pytest
import torch

import kuiper
from tests.models import zoo
from tests.models.common import (
    check_model,
    check_resized_or_refused,
    image,
    kuiper_outputs,
    torch_outputs,
)

pytestmark = pytest.mark.slow


def example(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0))


@pytest.fixture(scope="module")
def vit():
    return zoo.make(zoo.ViTTiny, example(1, 3, 32, 32))


@pytest.fixture(scope="module")
def vit_1(vit, export_model):
    return export_model("vit_tiny", vit, example(1, 3, 32, 32))


def test_vit_matches_torch(vit, vit_1, backend, rng):
    check_model(vit_1, vit, [image(rng, 1, 3, 32, 32)], backend)


def test_vit_batch4(vit, export_model, backend, rng):
    param = export_model("vit_tiny_b4", vit, example(4, 3, 32, 32))
    check_model(param, vit, [image(rng, 4, 3, 32, 32)], backend)


def test_vit_batch1_export_at_batch4_is_right_or_refused(vit, vit_1, backend, rng):
    check_resized_or_refused(vit_1, vit, [image(rng, 4, 3, 32, 32)], backend)


def test_vit_other_image_size_is_refused(vit, vit_1, backend, rng):
    x = image(rng, 1, 3, 48, 48)
    with pytest.raises(RuntimeError):
        torch_outputs(vit, [x])  # 145 tokens vs a 65-token position embedding
    with pytest.raises(kuiper.ShapeError):
        kuiper_outputs(vit_1, backend, [x])


def test_vit_export_has_the_operators_it_claims(vit_1):
    text = vit_1.read_text()
    for needle in ("nn.MultiheadAttention", "batch_first=True", "nn.GELU", "nn.LayerNorm",
                   "torch.cat", "pnnx.Attribute", "Tensor.select"):
        assert needle in text, needle


def test_the_residual_add_rides_on_the_attention_and_the_mlp(vit, vit_1, backend, rng):
    """Each block's `x + attn(...)` is stored by the attention's output projection, and its
    `x + mlp(...)` by the MLP's second Linear: no separate add kernel (kuiper info --passes)."""
    graph = kuiper.load(vit_1, backend=backend)
    producers = {op.name: op.type for op in graph.order}
    fused = [producers[name] for name, e in graph.plan.epilogues.items() if e.residual]
    assert fused.count("nn.MultiheadAttention") == 2 and fused.count("nn.Linear") >= 2
    check_model(vit_1, vit, [image(rng, 1, 3, 32, 32)], backend)
