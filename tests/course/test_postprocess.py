"""kuiper/io/postprocess.py beyond the lesson-8 exercises: `detect` and `softmax`."""

from __future__ import annotations

import numpy as np
import torch

from kuiper.io.postprocess import detect, softmax


def row(cx, cy, w, h, obj, cls, n_classes=3, score=1.0):
    scores = [0.0] * n_classes
    scores[cls] = score
    return [cx, cy, w, h, obj, *scores]


def test_detect_runs_nms_per_class_and_sorts_by_score():
    pred = np.array([[
        row(50, 50, 20, 20, 0.9, 0),    # kept
        row(51, 50, 20, 20, 0.8, 0),    # same class, IoU 0.9 with the first: suppressed
        row(50, 51, 20, 20, 0.7, 1),    # other class, same place: kept
        row(10, 10, 4, 4, 0.1, 2),      # below the confidence threshold
        row(90, 90, 10, 10, 0.95, 2),   # kept, best score
    ]], np.float32)
    (dets,) = detect(pred, conf_threshold=0.25, iou_threshold=0.45)
    assert dets.shape == (3, 6) and dets.dtype == np.float32
    np.testing.assert_allclose(dets[:, 4], [0.95, 0.9, 0.7], rtol=1e-6)
    assert dets[:, 5].tolist() == [2, 0, 1]
    np.testing.assert_allclose(dets[1, :4], [40, 40, 60, 60])


def test_detect_handles_a_batch_with_an_empty_image_and_caps_the_count():
    crowd = [row(10 * i, 0, 5, 5, 0.9, 0) for i in range(8)]   # disjoint boxes
    empty = [row(0, 0, 5, 5, 0.01, 0)] * 8
    out = detect(np.array([crowd, empty], np.float32), max_detections=5)
    assert [len(d) for d in out] == [5, 0]


def test_softmax_matches_torch_and_survives_large_logits():
    x = np.random.default_rng(0).standard_normal((4, 7)).astype(np.float32) * 50
    np.testing.assert_allclose(softmax(x), torch.softmax(torch.from_numpy(x), 1).numpy(),
                               rtol=1e-5, atol=1e-7)
    assert np.isfinite(softmax(np.array([[1e4, -1e4, 0.0]], np.float32))).all()
