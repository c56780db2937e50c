"""After the model: from raw output tensors to answers.

A network stops at numbers; an application wants "a cat, 92%" or "three boxes". Two cases:

Classifier, logits (N, C):

    softmax_topk  -> probabilities of the k most likely classes, best first

Detector with a YOLOv5-style head, (N, B, 5 + classes): for each of B candidate boxes the Detect
head already applied the sigmoid and the grid/anchor arithmetic, so a row reads

    cx, cy, w, h (pixels of the network input), objectness, class 0 score, class 1 score, ...

    decode_boxes  -> corner boxes (x1, y1, x2, y2), score = objectness * best class score, class,
                     keeping rows whose score clears a threshold
    nms           -> greedy non-maximum suppression: of boxes that overlap too much (IoU above a
                     threshold), keep the highest-scoring one
    detect        -> both, per image, with NMS done per class

Everything is plain NumPy on host arrays: it runs once per image on a few thousand rows, after
the heavy part, whichever backend ran the network.
"""

from __future__ import annotations

import numpy as np


def softmax(logits: np.ndarray, axis: int = -1) -> np.ndarray:
    """exp(x) / sum(exp(x)) along `axis`, shifted by the max first so exp never overflows."""
    z = logits - logits.max(axis=axis, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_topk(logits: np.ndarray, k: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """The k most probable classes of each row of `logits` (N, C): (probabilities, classes).

    Both are (N, min(k, C)), best first; equal probabilities keep the lower class first.
    Computed in float64: a softmax over 1000 classes sums 1000 small numbers.
    """
    if logits.ndim != 2:
        raise ValueError(f"expected logits of shape (N, classes), got {logits.shape}")
    probs = softmax(np.asarray(logits, dtype=np.float64))
    k = min(k, probs.shape[1])
    classes = np.argsort(-probs, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(probs, classes, axis=1), classes


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Intersection over union of every box of `a` (A, 4) with every box of `b` (B, 4): (A, B).

    Boxes are corners (x1, y1, x2, y2). Two empty boxes have IoU 0, not 0/0.
    """
    lo = np.maximum(a[:, None, :2], b[None, :, :2])   # top-left of each intersection
    hi = np.minimum(a[:, None, 2:], b[None, :, 2:])   # bottom-right
    inter = np.prod(np.clip(hi - lo, 0, None), axis=2)
    area_a = np.prod(np.clip(a[:, 2:] - a[:, :2], 0, None), axis=1)
    area_b = np.prod(np.clip(b[:, 2:] - b[:, :2], 0, None), axis=1)
    union = area_a[:, None] + area_b[None, :] - inter
    return np.divide(inter, union, out=np.zeros_like(inter, dtype=np.float64), where=union > 0)


def decode_boxes(pred: np.ndarray, conf_threshold: float = 0.25
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows (B, 5 + classes) of ONE image -> (boxes (K, 4) x1 y1 x2 y2, scores (K,), classes (K,)).

    A row's score is objectness * its best class score (YOLOv5's confidence); rows with a score
    at or below `conf_threshold` are dropped. Survivors keep their original order.
    """
    if pred.ndim != 2 or pred.shape[1] < 6:
        raise ValueError(f"expected rows of (cx, cy, w, h, objectness, classes...), got shape "
                         f"{pred.shape}")
    pred = np.asarray(pred, dtype=np.float32)
    classes = pred[:, 5:].argmax(axis=1)
    scores = pred[:, 4] * pred[np.arange(len(pred)), 5 + classes]
    keep = scores > conf_threshold
    cx, cy, w, h = pred[keep, :4].T
    boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1)
    return boxes, scores[keep], classes[keep]


def nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float = 0.45) -> np.ndarray:
    """Greedy non-maximum suppression: indices of the boxes kept, highest score first.

    Take the best remaining box, keep it, drop every remaining box whose IoU with it is above
    `iou_threshold`, repeat. Equal scores keep the lower index first.
    """
    order = np.argsort(-np.asarray(scores), kind="stable")
    keep: list[int] = []
    while order.size:
        best, rest = order[0], order[1:]
        keep.append(int(best))
        overlap = box_iou(boxes[best][None], boxes[rest])[0]
        order = rest[overlap <= iou_threshold]
    return np.asarray(keep, dtype=np.int64)


def yolo_rows_problem(pred: np.ndarray) -> str | None:
    """None when `pred` can be YOLO-style rows (N, B, 5 + classes) of a detector, else what is
    wrong with it. The shape alone is not enough: a transformer's (1, 8, 32) hidden states have
    it too. A detector's columns 4 on (objectness, class scores) are probabilities, in [0, 1],
    and its boxes have a width and height of 0 or more; anything else decoded as detections
    gives "scores" above 1 and negative boxes."""
    pred = np.asarray(pred)
    dims = "x".join(map(str, pred.shape))
    if pred.ndim != 3 or pred.shape[2] < 6:
        return f"the output {dims} is not rows of N x boxes x (5 + classes)"
    if not np.issubdtype(pred.dtype, np.floating) or pred.size == 0:
        return f"the output {dims} holds {pred.dtype} values, not scores"
    scores, sizes = pred[..., 4:], pred[..., 2:4]
    tolerance = 1e-5  # a sigmoid computed in float32 may land a hair outside [0, 1]
    if not np.isfinite(pred).all():
        return f"the output {dims} holds NaN or infinite values"
    low, high = float(scores.min()), float(scores.max())
    if low < -tolerance or high > 1 + tolerance:
        return (f"its columns 4 on must be objectness and class scores in [0, 1], and they "
                f"range from {low:.4g} to {high:.4g}")
    if float(sizes.min()) < -tolerance:
        return (f"its columns 2 and 3 must be box widths and heights (0 or more), and they go "
                f"down to {float(sizes.min()):.4g}")
    return None


def detect(pred: np.ndarray, conf_threshold: float = 0.25, iou_threshold: float = 0.45,
           max_detections: int = 300) -> list[np.ndarray]:
    """Detections of each image of a YOLO-style output (N, B, 5 + classes).

    Returns one (K, 6) float32 array per image: x1, y1, x2, y2, score, class; best first. NMS
    runs per class (a person and the bicycle under them may overlap): shifting every box by
    class * (a large offset) makes boxes of different classes never overlap, so one NMS call
    does all classes at once.
    """
    results = []
    for rows in np.asarray(pred):
        boxes, scores, classes = decode_boxes(rows, conf_threshold)
        offset = classes[:, None].astype(np.float32) * (float(np.abs(boxes).max(initial=0)) + 1)
        kept = nms(boxes + offset, scores, iou_threshold)[:max_detections]
        results.append(np.concatenate([boxes[kept], scores[kept, None],
                                       classes[kept, None].astype(np.float32)], axis=1))
    return results
