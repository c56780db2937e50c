"""After an OCR model: from a probability map to boxes, and from per-step scores to text.

PP-OCR reads text in two networks (lesson 15, `kuiper/ocr/app.py` runs them):

The DETECTOR (DB, "differentiable binarization") outputs one probability per pixel, "this pixel
is inside a text line" (1, 1, H, W). Its post-processing turns blobs of likely pixels into
rotated boxes:

    threshold        mask = prob > threshold
    label_components the blobs of the mask (8-connected), numbered 1..K
    min_area_box     the smallest rotated rectangle around each blob
    unclip           grow it: DB learned to predict a SHRUNK text region, so the box is pushed
                     out by area * ratio / perimeter on every side (the "unclip" of the paper)
    text_boxes       all of the above, dropping tiny or unsure blobs

The RECOGNIZER reads one cropped line, 48 pixels high, and outputs, for each of T horizontal
steps, the probabilities of every character plus a "blank" (T, C). CTC greedy decoding
(`ctc_greedy_decode`) takes the best class per step, merges repeats and drops blanks: "hh-e-ll-
lo" -> "hello" (the blank between the two l's is what lets a word have a double letter).

Plain NumPy on host arrays, whichever backend ran the networks: a map has a few hundred
thousand pixels and a line a few dozen steps.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kuiper.core.errors import InputError

# The 8 neighbours of a pixel (dy, dx): diagonal pixels touch too, as in a drawn letter.
NEIGHBOURS = [(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1) if (dy, dx) != (0, 0)]


def ctc_greedy_decode(probs: np.ndarray, charset: Sequence[str], blank: int = 0
                      ) -> tuple[str, float]:
    """One line's text from its recognizer output `probs` (T steps, C classes): (text, score).

    The best class of each step; a run of the same class is one character; blanks are dropped;
    class c is the character charset[c]. The score is the mean of the kept steps' best
    probabilities (0.0 for an empty text).
    """
    probs = np.asarray(probs)
    if probs.ndim != 2 or probs.shape[1] != len(charset):
        raise InputError(f"ctc_greedy_decode: expected probabilities of shape (steps, "
                         f"{len(charset)}) for a charset of {len(charset)} classes, got "
                         f"{probs.shape}")
    best = probs.argmax(axis=1)
    # keep a step when it starts a run (differs from the step before) and is not a blank
    starts = np.ones(len(best), dtype=bool)
    starts[1:] = best[1:] != best[:-1]
    kept = np.flatnonzero(starts & (best != blank))
    text = "".join(charset[c] for c in best[kept])
    score = float(probs[kept, best[kept]].mean()) if kept.size else 0.0
    return text, score


def _shift(a: np.ndarray, dy: int, dx: int, fill) -> np.ndarray:
    """out[y, x] = a[y + dy, x + dx], `fill` outside the array."""
    out = np.full_like(a, fill)
    h, w = a.shape
    out[max(0, -dy):h - max(0, dy), max(0, -dx):w - max(0, dx)] = \
        a[max(0, dy):h - max(0, -dy), max(0, dx):w - max(0, -dx)]
    return out


def label_components(mask: np.ndarray) -> tuple[np.ndarray, int]:
    """The 8-connected blobs of a 2-D boolean `mask`: (labels, count).

    labels (same shape, int32) is 0 on the background and 1..count on the blobs, numbered in
    the order their first pixel comes in a row-by-row (raster) scan.

    How, without a Python loop per pixel: every foreground pixel holds the flat index of a
    pixel of its own blob, at first itself. Repeatedly (1) take the smallest index held by
    any neighbour and (2) "jump": replace what a pixel holds by what THAT pixel holds (a
    pointer to a pointer, so chains halve each time). When nothing changes, every pixel of a
    blob holds the blob's first pixel in raster order.
    """
    mask = np.asarray(mask)
    if mask.ndim != 2:
        raise InputError(f"label_components: expected a 2-D mask (H, W), got shape {mask.shape}")
    mask = mask.astype(bool)
    h, w = mask.shape
    none = h * w  # "no pixel": larger than every index
    held = np.where(mask, np.arange(h * w).reshape(h, w), none)
    while True:
        smallest = held
        for dy, dx in NEIGHBOURS:
            smallest = np.minimum(smallest, _shift(held, dy, dx, none))
        smallest = np.where(mask, smallest, none).ravel()
        fg = smallest < none
        while True:  # pointer jumping
            jumped = smallest[smallest[fg]]
            if np.array_equal(jumped, smallest[fg]):
                break
            smallest[fg] = jumped
        smallest = smallest.reshape(h, w)
        if np.array_equal(smallest, held):
            break
        held = smallest
    firsts = np.unique(held[mask])  # ascending flat index = raster order
    labels = np.zeros((h, w), dtype=np.int32)
    labels[mask] = np.searchsorted(firsts, held[mask]) + 1
    return labels, len(firsts)


def _convex_hull(points: np.ndarray) -> np.ndarray:
    """Andrew's monotone chain: the hull's vertices (counter-clockwise in x-right, y-up)."""
    pts = np.unique(points, axis=0)  # sorted by x, then y
    if len(pts) < 3:
        return pts

    def half(ordered):
        chain: list[np.ndarray] = []
        for p in ordered:
            while len(chain) >= 2:
                (ax, ay), (bx, by) = chain[-2], chain[-1]
                if (bx - ax) * (p[1] - ay) - (by - ay) * (p[0] - ax) > 0:
                    break  # a left turn: keep
                chain.pop()
            chain.append(p)
        return chain[:-1]

    return np.array(half(pts) + half(pts[::-1]))


def order_corners(corners: np.ndarray) -> np.ndarray:
    """The 4 corners clockwise on the image (y points down), starting at the top-left one
    (the smallest x + y)."""
    centre = corners.mean(axis=0)
    angle = np.arctan2(corners[:, 1] - centre[1], corners[:, 0] - centre[0])
    ring = corners[np.argsort(angle, kind="stable")]
    return np.roll(ring, -int(np.argmin(ring.sum(axis=1))), axis=0)


def min_area_box(points: np.ndarray) -> np.ndarray:
    """The smallest-area rotated rectangle containing `points` (N, 2) of (x, y): its 4
    corners (4, 2) float32, ordered as `order_corners` says.

    The best rectangle has a side along an edge of the points' convex hull (rotating
    calipers), so: for each hull edge, rotate the hull so the edge is horizontal, take the
    axis-aligned bounding box there, keep the smallest, rotate its corners back.
    """
    points = np.asarray(points, dtype=np.float64)
    if points.ndim != 2 or points.shape[1] != 2 or len(points) == 0:
        raise InputError(f"min_area_box: expected points of shape (N, 2) with N >= 1, got "
                         f"{points.shape}")
    hull = _convex_hull(points)
    edges = np.roll(hull, -1, axis=0) - hull
    edges = edges[np.hypot(edges[:, 0], edges[:, 1]) > 0]
    if len(edges) == 0:  # one distinct point
        return np.repeat(hull[:1], 4, axis=0).astype(np.float32)
    angles = np.arctan2(edges[:, 1], edges[:, 0])
    cos, sin = np.cos(angles), np.sin(angles)
    # hull coordinates along (u) and across (v) each edge: (edges, hull points)
    u = cos[:, None] * hull[None, :, 0] + sin[:, None] * hull[None, :, 1]
    v = -sin[:, None] * hull[None, :, 0] + cos[:, None] * hull[None, :, 1]
    areas = (u.max(1) - u.min(1)) * (v.max(1) - v.min(1))
    i = int(np.argmin(areas))
    us = [u[i].min(), u[i].max(), u[i].max(), u[i].min()]
    vs = [v[i].min(), v[i].min(), v[i].max(), v[i].max()]
    corners = np.array([[a * cos[i] - b * sin[i], a * sin[i] + b * cos[i]]
                        for a, b in zip(us, vs)])
    return order_corners(corners).astype(np.float32)


def box_sides(box: np.ndarray) -> tuple[float, float]:
    """(width, height) of a rectangle given by ordered corners: top side, right side."""
    box = np.asarray(box, dtype=np.float64)
    return float(np.linalg.norm(box[1] - box[0])), float(np.linalg.norm(box[2] - box[1]))


def unclip(box: np.ndarray, ratio: float) -> np.ndarray:
    """Push every side of a rectangle out by d = area * ratio / perimeter (DB's unclip).

    For a polygon this is an offset curve with round corners; for a rectangle, the smallest
    box around that curve is simply the rectangle grown by d on each side.
    """
    box = np.asarray(box, dtype=np.float64)
    width, height = box_sides(box)
    if width == 0 or height == 0:
        return box.astype(np.float32)
    d = width * height * ratio / (2 * (width + height))
    along = (box[1] - box[0]) / width * d    # d along the top side
    across = (box[3] - box[0]) / height * d  # d along the left side
    grown = box + np.array([-along - across, along - across, along + across, -along + across])
    return grown.astype(np.float32)


def text_boxes(prob_map: np.ndarray, threshold: float = 0.3, box_threshold: float = 0.6,
               unclip_ratio: float = 1.5, min_size: float = 3.0
               ) -> list[tuple[np.ndarray, float]]:
    """DB post-processing of one probability map (H, W): [(box (4, 2) float32, score)].

    Pixels above `threshold` form blobs (`label_components`). A blob's score is the mean
    probability over its pixels; blobs scoring below `box_threshold` are dropped. The rest get
    their `min_area_box` around the pixel centres, dropped when its shorter side is below
    `min_size` (noise), else `unclip`ped by `unclip_ratio` and clipped to the map. Boxes come
    in the order of their blobs' labels, in the map's pixel coordinates.
    """
    prob_map = np.asarray(prob_map, dtype=np.float32)
    if prob_map.ndim != 2:
        raise InputError(f"text_boxes: expected a probability map of shape (H, W), got "
                         f"{prob_map.shape}")
    labels, count = label_components(prob_map > threshold)
    h, w = prob_map.shape
    found = []
    for label in range(1, count + 1):
        ys, xs = np.nonzero(labels == label)
        score = float(prob_map[ys, xs].mean())
        if score < box_threshold:
            continue
        box = min_area_box(np.stack([xs, ys], axis=1))
        if min(box_sides(box)) < min_size:
            continue
        box = unclip(box, unclip_ratio)
        box[:, 0] = np.clip(box[:, 0], 0, w - 1)
        box[:, 1] = np.clip(box[:, 1], 0, h - 1)
        found.append((box, score))
    return found
