"""Recurrent models end to end on both backends against PyTorch:

- a CRNN text recogniser (conv stack to height 1, squeeze/permute, 2-layer bidirectional LSTM,
  linear, log-softmax), sequence-first as the classic CRNN;
- a keyword-spotting audio model (1-D convs, 2-layer batch-first GRU, per-frame linear and a
  clip-level mean: two outputs, so the export ends in a prim::TupleConstruct).

Neither graph fixes the batch or the sequence length, so one export runs every size.
"""

from __future__ import annotations

import pytest
import torch

from tests.models import zoo
from tests.models.common import check_model, image

pytestmark = pytest.mark.slow


def example(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0))


@pytest.fixture(scope="module")
def crnn(export_model):
    module = zoo.make(zoo.CRNN, example(1, 1, 32, 100))
    return module, export_model("crnn", module, example(1, 1, 32, 100))


@pytest.fixture(scope="module")
def audio(export_model):
    module = zoo.make(zoo.AudioGRU, example(1, 20, 50))
    return module, export_model("audio_gru", module, example(1, 20, 50))


@pytest.mark.parametrize("shape", [(1, 1, 32, 100), (4, 1, 32, 100), (3, 1, 32, 160)],
                         ids=["export_size", "batch4", "3x1x32x160"])
def test_crnn_matches_torch(crnn, backend, rng, shape):
    module, param = crnn
    (scores,) = check_model(param, module, [image(rng, *shape)], backend)
    assert scores.shape == (shape[3] // 4, shape[0], 11)  # T x N x classes


@pytest.mark.parametrize("shape", [(1, 20, 50), (4, 20, 50), (2, 20, 77)],
                         ids=["export_size", "batch4", "2x20x77"])
def test_audio_gru_matches_torch(audio, backend, rng, shape):
    module, param = audio
    frames, clip = check_model(param, module, [image(rng, *shape)], backend)
    frames_out = (shape[2] + 1) // 2
    assert frames.shape == (shape[0], frames_out, 6) and clip.shape == (shape[0], 6)


def test_recurrent_exports(crnn, audio):
    crnn_text, audio_text = crnn[1].read_text(), audio[1].read_text()
    assert "nn.LSTM" in crnn_text and "bidirectional=True" in crnn_text
    assert "num_layers=2" in crnn_text
    assert "nn.GRU" in audio_text and "batch_first=True" in audio_text
    assert "nn.Conv1d" in audio_text and "prim::TupleConstruct" in audio_text
