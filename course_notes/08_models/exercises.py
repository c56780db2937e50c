"""Lesson 8 exercises: post-processing a classifier's and a detector's outputs.

Fill in the functions, then run `kuiper course check 8`. The answers are the engine's own
functions of the same names, in kuiper/io/postprocess.py: try first, read them after.
"""

from __future__ import annotations

import numpy as np


def softmax_topk(logits: np.ndarray, k: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """The k most probable classes of each row of `logits` (N, C): (probabilities, classes).

    Probabilities are the softmax of the row (subtract the row's max before exp, so that
    nothing overflows), computed in float64. Both results have shape (N, min(k, C)), best
    first; equal probabilities keep the lower class index first.
    """
    raise NotImplementedError("lesson 8: write softmax_topk")


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Intersection over union of every box of `a` (A, 4) with every box of `b` (B, 4).

    Boxes are corners (x1, y1, x2, y2) with x1 <= x2, y1 <= y2. Returns (A, B) float64.
    IoU = area of the intersection / area of the union; when the union is empty, 0.
    """
    raise NotImplementedError("lesson 8: write box_iou")


def decode_boxes(pred: np.ndarray, conf_threshold: float = 0.25
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows (B, 5 + classes) of ONE image from a YOLOv5-style head -> (boxes, scores, classes).

    A row is cx, cy, w, h, objectness, then one score per class. Its class is the best class,
    its score objectness * that class's score. Keep rows whose score is above
    `conf_threshold`, in their original order, and return boxes (K, 4) as corners
    x1 = cx - w/2, y1 = cy - h/2, x2 = cx + w/2, y2 = cy + h/2; scores (K,); classes (K,) int.
    """
    raise NotImplementedError("lesson 8: write decode_boxes")


def nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float = 0.45) -> np.ndarray:
    """Greedy non-maximum suppression. Returns the indices of the boxes kept (int64),
    highest score first.

    Repeat: take the remaining box with the highest score (equal scores: the lower index
    first), keep it, and drop every remaining box whose IoU with it is above `iou_threshold`.
    """
    raise NotImplementedError("lesson 8: write nms")
