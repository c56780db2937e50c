"""Lesson 8: softmax top-k against PyTorch; IoU, box decoding and NMS on known answers."""

import numpy as np
import pytest
import torch

from kuiper.course.lessons import check_array, implementation

REFERENCE = {
    "softmax_topk": "kuiper.io.postprocess:softmax_topk",
    "box_iou": "kuiper.io.postprocess:box_iou",
    "decode_boxes": "kuiper.io.postprocess:decode_boxes",
    "nms": "kuiper.io.postprocess:nms",
}
ex = implementation(__file__, REFERENCE)


@pytest.mark.parametrize("n, c, k", [(1, 10, 5), (3, 1000, 5), (4, 7, 1), (2, 3, 5)])
def test_softmax_topk_matches_torch(n, c, k):
    logits = np.random.default_rng(8).standard_normal((n, c)).astype(np.float32) * 5
    probs, classes = ex.softmax_topk(logits, k)
    t_probs, t_classes = torch.topk(torch.softmax(torch.from_numpy(logits).double(), 1),
                                    min(k, c))
    check_array(classes, t_classes.numpy(), "classes", exact=False)
    check_array(probs, t_probs.numpy(), "probabilities", rtol=1e-9)


def test_softmax_topk_does_not_overflow_and_breaks_ties_by_index():
    logits = np.array([[1000.0, 1000.0, -1000.0, 999.0]], np.float32)
    probs, classes = ex.softmax_topk(logits, 3)
    assert classes.tolist() == [[0, 1, 3]]
    assert np.isfinite(probs).all() and abs(probs[0, 0] - probs[0, 1]) < 1e-12


def test_box_iou():
    a = np.array([[0, 0, 10, 10], [5, 5, 15, 15], [20, 20, 30, 30]], np.float32)
    b = np.array([[0, 0, 10, 10], [0, 0, 5, 5], [10, 0, 20, 10], [3, 3, 3, 3]], np.float32)
    expected = np.array([[1, 0.25, 0, 0],
                         [25 / 175, 0, 25 / 175, 0],
                         [0, 0, 0, 0]])
    check_array(ex.box_iou(a, b), expected, "box_iou", rtol=1e-6)


def test_decode_boxes():
    pred = np.array([
        # cx,  cy,  w,   h,  obj, c0,  c1,  c2
        [50, 40, 20, 10, 0.9, 0.1, 0.8, 0.1],   # class 1, score 0.72
        [10, 10, 4, 4, 0.2, 0.9, 0.0, 0.1],     # score 0.18: dropped at 0.25
        [30, 60, 10, 30, 0.5, 0.0, 0.2, 0.7],   # class 2, score 0.35
    ], np.float32)
    boxes, scores, classes = ex.decode_boxes(pred, 0.25)
    check_array(boxes, np.array([[40, 35, 60, 45], [25, 45, 35, 75]], np.float32), "boxes")
    check_array(scores, np.array([0.72, 0.35], np.float32), "scores")
    check_array(classes, np.array([1, 2]), "classes", exact=False)


def test_nms_on_a_known_case():
    boxes = np.array([[0, 0, 10, 10],     # 0: score 0.9, kept
                      [1, 1, 11, 11],     # 1: IoU 0.68 with box 0: dropped
                      [20, 20, 30, 30],   # 2: alone: kept
                      [0, 0, 10, 9],      # 3: IoU 0.9 with box 0: dropped
                      [6, 0, 16, 10]],    # 4: IoU 0.25 with box 0: kept at 0.45
                     np.float32)
    scores = np.array([0.9, 0.8, 0.3, 0.95, 0.5], np.float32)
    # box 3 has the best score: it is kept, and box 0 (IoU 0.9 with it) goes instead
    check_array(ex.nms(boxes, scores, 0.45), np.array([3, 4, 2]), "kept indices")
    check_array(ex.nms(boxes, scores, 0.95), np.array([3, 0, 1, 4, 2]), "kept at 0.95")


def test_nms_ties_keep_the_lower_index():
    boxes = np.array([[0, 0, 10, 10], [0, 0, 10, 10], [0, 0, 10, 10]], np.float32)
    check_array(ex.nms(boxes, np.array([0.5, 0.7, 0.7], np.float32)), np.array([1]),
                "kept indices of three identical boxes")


def test_nms_of_nothing():
    kept = ex.nms(np.zeros((0, 4), np.float32), np.zeros((0,), np.float32))
    assert len(kept) == 0


@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.7])
def test_nms_on_random_boxes_keeps_exactly_what_greedy_nms_keeps(threshold):
    from kuiper.io.postprocess import box_iou  # the framework's, as a measuring stick

    rng = np.random.default_rng(int(threshold * 10))
    xy = rng.uniform(0, 100, (200, 2)).astype(np.float32)
    boxes = np.concatenate([xy, xy + rng.uniform(5, 40, (200, 2)).astype(np.float32)], 1)
    scores = rng.random(200).astype(np.float32)
    kept = np.asarray(ex.nms(boxes, scores, threshold))
    assert kept.dtype.kind == "i" and len(set(kept.tolist())) == len(kept)
    assert np.all(np.diff(scores[kept]) <= 0), "kept boxes must come best first"
    iou = box_iou(boxes, boxes)
    # These two rules define greedy NMS completely (go through the boxes best first):
    # no two kept boxes overlap too much, and every dropped box overlaps a better kept box.
    inside = iou[np.ix_(kept, kept)] - np.eye(len(kept))
    assert inside.max(initial=0) <= threshold, "two kept boxes overlap above the threshold"
    dropped = np.setdiff1d(np.arange(len(boxes)), kept)
    for d in dropped:
        better = kept[scores[kept] >= scores[d]]
        assert (iou[d, better] > threshold).any(), f"box {d} was dropped but nothing covers it"
