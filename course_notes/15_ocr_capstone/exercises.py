"""Lesson 15 exercises: PP-OCR's post-processing, from a probability map to boxes, and from a
recognizer's scores to text.

Fill in the functions, then run `kuiper course check 15`. With the model fetched
(`kuiper course fetch-ocr`), the check also reads the lesson's sample.png with YOUR
`text_boxes` and `ctc_greedy_decode` inside the real pipeline. The answers are the engine's
own, in kuiper/ocr/postprocess.py beside the two helpers imported below: try first, open that
file after (`help(unclip)` tells what a helper does).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# helpers you may use in text_boxes: a rectangle's (width, height), and DB's unclip
from kuiper.ocr.postprocess import box_sides, unclip  # noqa: F401


def ctc_greedy_decode(probs: np.ndarray, charset: Sequence[str], blank: int = 0
                      ) -> tuple[str, float]:
    """One line's text from the recognizer's output `probs` (T steps, C classes).

    For each step take the most probable class. A run of equal classes on consecutive steps
    is ONE character; the class `blank` is no character (it separates a double letter: "l",
    blank, "l" is "ll"). Class c is the character charset[c]. Return (text, score): the score
    is the mean, over the steps you kept (the first step of each non-blank run), of their best
    probability; 0.0 when the text is empty.
    """
    raise NotImplementedError("lesson 15: write ctc_greedy_decode")


def label_components(mask: np.ndarray) -> tuple[np.ndarray, int]:
    """The 8-connected blobs of a 2-D boolean `mask`: (labels, count).

    Two foreground pixels are connected when they touch by a side or a corner. `labels` has
    the mask's shape, an integer dtype, 0 on the background and 1..count on the blobs,
    numbered in the order a row-by-row scan (y, then x) meets each blob's first pixel.
    (A flood fill from each unlabelled foreground pixel, in scan order, does that.)
    """
    raise NotImplementedError("lesson 15: write label_components")


def min_area_box(points: np.ndarray) -> np.ndarray:
    """The smallest-area rotated rectangle around `points` (N, 2) of (x, y), N >= 1.

    Hint: the best rectangle has one side along an edge of the points' convex hull. Return
    its 4 corners as a (4, 2) float32 array, ordered clockwise as seen on the image (y points
    down), starting at the corner with the smallest x + y.
    """
    raise NotImplementedError("lesson 15: write min_area_box")


def text_boxes(prob_map: np.ndarray, threshold: float = 0.3, box_threshold: float = 0.6,
               unclip_ratio: float = 1.5, min_size: float = 3.0
               ) -> list[tuple[np.ndarray, float]]:
    """DB post-processing of one probability map (H, W): a list of (box, score).

    1. Blobs: `label_components(prob_map > threshold)`.
    2. For each blob, in label order: its score is the mean of prob_map over its pixels; skip
       it when the score is below `box_threshold`.
    3. Its box: `min_area_box` of its pixels' (x, y); skip it when the shorter side
       (`box_sides(box)`) is below `min_size`.
    4. `unclip(box, unclip_ratio)`, then clip x to [0, W - 1] and y to [0, H - 1].
    Return [(box (4, 2) float32, score as a float), ...].
    """
    raise NotImplementedError("lesson 15: write text_boxes")
