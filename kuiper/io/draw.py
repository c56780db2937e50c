"""Detector boxes drawn on the original image (`kuiper run --task detect --output boxes.png`)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from kuiper.core.errors import KuiperError

# A few colours that differ on screen and in print; class c gets PALETTE[c % len(PALETTE)].
PALETTE = ((230, 25, 75), (60, 180, 75), (0, 130, 200), (245, 130, 48), (145, 30, 180),
           (70, 240, 240), (240, 50, 230), (210, 245, 60))


def draw_boxes(image_path: str | os.PathLike, detections: np.ndarray,
               out_path: str | os.PathLike, labels: Sequence[str] | None = None) -> None:
    """Draw rows (x1, y1, x2, y2, score, class) in original-image pixels; save to out_path."""
    from PIL import Image, ImageDraw

    image = Image.open(image_path).convert("RGB")
    pen = ImageDraw.Draw(image)
    width = max(1, round(min(image.size) / 200))  # visible on a large photo, not on a thumbnail
    for x1, y1, x2, y2, score, c in np.asarray(detections, dtype=np.float32):
        colour = PALETTE[int(c) % len(PALETTE)]
        name = labels[int(c)] if labels is not None and int(c) < len(labels) else f"{int(c)}"
        pen.rectangle((x1, y1, x2, y2), outline=colour, width=width)
        text = f"{name} {score:.2f}"
        left, top, right, bottom = pen.textbbox((x1, y1), text)
        lift = bottom - top + 2  # the label sits above the box, or inside it at the top edge
        y = y1 - lift if y1 - lift >= 0 else y1
        pen.rectangle((x1, y, x1 + right - left + 4, y + lift), fill=colour)
        pen.text((x1 + 2, y + 1), text, fill=(255, 255, 255))
    try:
        image.save(out_path)
    except (OSError, ValueError) as e:
        raise KuiperError(f"--output {out_path}: cannot be written ({e})") from None
