"""From image files to the input batch of a model, saying what was done (`kuiper run`).

Every vision model was trained on images prepared one particular way, and feeding it images
prepared another way gives confident nonsense, not an error. So the preparation is explicit:

    resize      squash       stretch to the input size (aspect ratio lost)
                center-crop  scale so the image covers the input, cut the middle out
                             (torchvision's classifiers: Resize + CenterCrop)
                letterbox    scale so the image fits inside, pad the rest with grey 114
                             (YOLOv5 and most detectors)
    scale       pixels / 255, to [0, 1]
    normalise   (x - mean) / std per channel, e.g. ImageNet's mean and std for torchvision's
                pretrained classifiers; nothing for detectors, which take [0, 1]

`Preprocessing.for_task` picks the defaults per task (classify: center-crop + ImageNet, detect:
letterbox and no normalisation, raw: squash and no normalisation), and `describe()` prints the
choice, so a wrong one is visible. A `Placement` per image remembers how the original image sits
in the input, so detector boxes can be drawn back on the original picture.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kuiper.core.errors import InputError
from kuiper.graph.runtime_graph import Port
from kuiper.io.files import PILLOW_HINT, is_image, require_file

log = logging.getLogger("kuiper.tools")

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
RESIZE_MODES = ("squash", "center-crop", "letterbox")
LETTERBOX_GREY = 114  # YOLOv5's padding colour, 0..255
TASKS = ("classify", "detect", "raw")
ALPHA_MODES = ("RGBA", "LA", "PA", "RGBa", "La")


@dataclass(frozen=True)
class Preprocessing:
    """How images become input tensors; `source` says where the choice came from."""

    resize: str = "squash"
    mean: tuple[float, ...] | None = None  # in [0, 1] units (after / 255)
    std: tuple[float, ...] | None = None
    source: str = ""

    @classmethod
    def for_task(cls, task: str, channels: int = 3, resize: str | None = None, mean=None,
                 std=None, normalize: bool = True) -> Preprocessing:
        """The task's defaults, overridden by what the user gave. ImageNet's mean and std are
        the default only for 3-channel classifiers (torchvision's); grey models get [0, 1]."""
        default_resize = {"classify": "center-crop", "detect": "letterbox"}.get(task, "squash")
        if not normalize:
            mean = std = None
            source = "--no-normalize"
        elif mean is not None or std is not None:
            mean = tuple(mean) if mean is not None else (0.0,)
            std = tuple(std) if std is not None else (1.0,)
            source = "--mean/--std"
        elif task == "classify" and channels == 3:
            mean, std = IMAGENET_MEAN, IMAGENET_STD
            source = "the classify default; --no-normalize or --mean/--std to change"
        elif task == "classify":
            source = f"ImageNet's is the default for 3-channel classifiers, not {channels}-channel"
        else:
            source = f"none for task {task}; --mean/--std to add one"
        return cls(resize or default_resize, mean, std, source)

    def describe(self, channels: int) -> str:
        parts = [f"resize {self.resize}", "pixels / 255"]
        if self.mean is None:
            parts.append(f"no normalisation ({self.source})")
        else:
            mean, std = self.channel_values(channels)
            name = ("ImageNet " if (self.mean, self.std) == (IMAGENET_MEAN, IMAGENET_STD)
                    else "")
            parts.append(f"{name}normalisation mean {fmt(mean)} std {fmt(std)} ({self.source})")
        return ", ".join(parts)

    def channel_values(self, channels: int) -> tuple[np.ndarray, np.ndarray]:
        """mean and std as float32 arrays of `channels` values (one value is repeated).

        ImageNet's three values on a grey model: their average, the usual convention."""
        values = []
        for what, v in (("--mean", self.mean), ("--std", self.std)):
            v = np.asarray(v, dtype=np.float32)
            if v.size == 3 and channels == 1:
                v = v.mean(keepdims=True)
            if v.size not in (1, channels):
                raise InputError(f"{what}: {v.size} values for a {channels}-channel input; "
                                 f"give 1 or {channels}")
            values.append(np.broadcast_to(v, (channels,)).astype(np.float32))
        if np.any(values[1] == 0):
            raise InputError("--std: a standard deviation of 0 would divide by zero")
        return values[0], values[1]


def fmt(values) -> str:
    return ",".join(f"{v:g}" for v in np.asarray(values).ravel())


@dataclass(frozen=True)
class Placement:
    """Where an original image landed in the network input: input = original * scale + offset
    (per axis). Inverted, it maps a detector's boxes back onto the original picture."""

    path: str
    size: tuple[int, int]  # the original (width, height)
    scale: tuple[float, float]
    offset: tuple[float, float]

    def to_original(self, boxes: np.ndarray) -> np.ndarray:
        """(K, 4) corner boxes in input pixels -> original pixels, clipped to the image."""
        boxes = np.asarray(boxes, dtype=np.float32).copy()
        for axis in (0, 1):
            boxes[:, axis::2] = (boxes[:, axis::2] - self.offset[axis]) / self.scale[axis]
            boxes[:, axis::2] = boxes[:, axis::2].clip(0, self.size[axis])
        return boxes


def image_files(paths: Sequence[str | os.PathLike]) -> list[Path]:
    """The image files named: a folder stands for the images inside it, sorted by name."""
    files: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and is_image(p))
            if not found:
                raise InputError(f"{path}: a folder with no image in it (looked for "
                                 ".png, .jpg, ... files)")
            files += found
        else:
            files.append(path)
    return files


def open_image(path: Path, channels: int):
    """A Pillow image in RGB or L, warning when an alpha channel is dropped."""
    try:
        from PIL import Image
    except ImportError:
        raise InputError(PILLOW_HINT) from None
    require_file(path, "an image")
    try:
        image = Image.open(path)
        image.load()
    except (OSError, ValueError, SyntaxError) as e:  # Pillow's errors for a damaged file
        raise InputError(f"{path}: not an image Pillow can read ({e})") from None
    except Image.DecompressionBombError as e:  # an image of billions of pixels
        raise InputError(f"{path}: {e}") from None
    if image.mode in ALPHA_MODES or "transparency" in image.info:
        log.warning("%s has an alpha channel: it is dropped (transparent pixels keep their "
                    "colour values); flatten the image onto a background first if that "
                    "matters", path)
    return image.convert("RGB" if channels == 3 else "L")


def fit(image, width: int, height: int, mode: str):
    """`image` resized into width x height by `mode`; returns (image, Placement numbers)."""
    from PIL import Image

    w, h = image.size
    if mode == "squash":
        resized = image.resize((width, height), Image.Resampling.BILINEAR)
        return resized, (width / w, height / h), (0.0, 0.0)
    # center-crop covers the input (the larger scale), letterbox fits inside (the smaller)
    s = max(width / w, height / h) if mode == "center-crop" else min(width / w, height / h)
    new_w, new_h = max(1, round(w * s)), max(1, round(h * s))
    resized = image.resize((new_w, new_h), Image.Resampling.BILINEAR)
    left, top = (width - new_w) // 2, (height - new_h) // 2  # negative for a crop
    grey = (LETTERBOX_GREY,) * len(image.getbands())
    canvas = Image.new(image.mode, (width, height), grey if len(grey) > 1 else grey[0])
    canvas.paste(resized, (left, top))  # Pillow clips what falls outside
    return canvas, (new_w / w, new_h / h), (float(left), float(top))


def load_images(paths: Sequence[str | os.PathLike], port: Port, prep: Preprocessing,
                batch: int | None = None) -> tuple[np.ndarray, list[Placement]]:
    """Images (files or folders) -> one N x C x H x W float32 batch for `port`, and where each
    image went. `batch` (from --input-shape) must then match the number of images."""
    shape = port.shape
    if len(shape) != 4 or shape[1] not in (1, 3):
        raise InputError(f"an image can feed only a 1- or 3-channel NCHW input, but the "
                         f"model's input is {port}; pass a .npy file instead")
    files = image_files(paths)
    if batch is not None and batch != len(files):
        raise InputError(f"--input-shape asks for a batch of {batch}, but {len(files)} "
                         f"image(s) were given: pass {batch} images (or a folder of them), or "
                         f"set the batch to {len(files)}")
    channels = shape[1]
    mean, std = prep.channel_values(channels) if prep.mean is not None else (None, None)
    arrays, placements = [], []
    for path in files:
        image = open_image(path, channels)
        height = shape[2] if shape[2] is not None else image.height
        width = shape[3] if shape[3] is not None else image.width
        original = image.size
        image, scale, offset = fit(image, width, height, prep.resize)
        x = np.asarray(image, dtype=np.float32).reshape(height, width, channels) / 255.0
        if mean is not None:
            x = (x - mean) / std        # H x W x C, broadcast over the channels
        arrays.append(x.transpose(2, 0, 1))  # HWC (Pillow) -> CHW (PyTorch)
        placements.append(Placement(str(path), original, scale, offset))
    sizes = {a.shape for a in arrays}
    if len(sizes) > 1:
        raise InputError("the images have different sizes and the model's input size is "
                         "dynamic: give one with --input-shape NxCxHxW")
    return np.ascontiguousarray(np.stack(arrays), dtype=np.float32), placements
