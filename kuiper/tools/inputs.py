"""Inputs for the command line: `1x3x224x224` shapes, `.npy` files, images, random tensors.

Kept apart from the CLI so `kuiper run`, `kuiper bench` and notebooks share one definition of
"what an image becomes": resized to the model's input size, scaled to [0, 1], and for
3-channel models normalised with the ImageNet mean and standard deviation (what torchvision's
pretrained classifiers expect); 1-channel models get the plain [0, 1] grey levels.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from kuiper.errors import InputError
from kuiper.graph import Port

IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm",
                  ".pgm"}
PILLOW_HINT = "reading images needs Pillow: `pip install pillow` (or pass a .npy file)"


def parse_shape(text: str) -> tuple[int, ...]:
    """'1x3x224x224' -> (1, 3, 224, 224). Raises ValueError with the expected form."""
    try:
        dims = tuple(int(d) for d in text.lower().replace("*", "x").split("x"))
    except ValueError:
        raise ValueError(f"bad shape '{text}': expected dimensions joined by 'x', "
                         "like 1x3x224x224") from None
    if not dims or any(d <= 0 for d in dims):
        raise ValueError(f"bad shape '{text}': every dimension must be a positive integer")
    return dims


def parse_shapes(text: str) -> list[tuple[int, ...]]:
    """Several inputs: '1x3x224x224,1x10' -> [(1, 3, 224, 224), (1, 10)]."""
    return [parse_shape(part) for part in text.split(",") if part.strip()]


def random_inputs(ports: Sequence[Port], shapes: Sequence[Sequence[int]] | None = None,
                  seed: int = 0) -> list[np.ndarray]:
    """Seeded inputs for each port: standard normal floats, zeros for integer/bool inputs
    (zeros are a valid index for embeddings and a valid mask)."""
    rng = np.random.default_rng(seed)
    arrays = []
    for i, port in enumerate(ports):
        shape = tuple(shapes[i]) if shapes is not None else port.shape
        if any(d is None for d in shape):
            raise InputError(f"input '{port.name}' has a dynamic shape {port}: give one with "
                             "--input-shape")
        if np.issubdtype(port.dtype, np.floating):
            arrays.append(rng.standard_normal(shape).astype(port.dtype))
        else:
            arrays.append(np.zeros(shape, dtype=port.dtype))
    return arrays


def is_image(path: str | os.PathLike) -> bool:
    return Path(path).suffix.lower() in IMAGE_SUFFIXES


def load_image(path: str | os.PathLike, port: Port) -> np.ndarray:
    """An image file as a 1 x C x H x W float32 batch for `port` (C is 1 or 3)."""
    try:
        from PIL import Image
    except ImportError:
        raise InputError(PILLOW_HINT) from None
    shape = port.shape
    if len(shape) != 4 or shape[1] not in (1, 3):
        raise InputError(f"{path}: an image can feed only a 1- or 3-channel NCHW input, but "
                         f"the model's input is {port}; pass a .npy file instead")
    try:
        image = Image.open(path)
        image.load()
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except OSError as e:
        raise InputError(f"{path}: not an image Pillow can read ({e})") from None
    channels = shape[1]
    image = image.convert("RGB" if channels == 3 else "L")
    height = shape[2] if shape[2] is not None else image.height
    width = shape[3] if shape[3] is not None else image.width
    if image.size != (width, height):
        image = image.resize((width, height), Image.Resampling.BILINEAR)
    x = np.asarray(image, dtype=np.float32) / 255.0
    if channels == 3:
        x = (x - IMAGENET_MEAN) / IMAGENET_STD   # H x W x 3, broadcast over channels
        x = x.transpose(2, 0, 1)                 # HWC (Pillow) -> CHW (PyTorch)
    else:
        x = x[None, :, :]
    return np.ascontiguousarray(x[None], dtype=np.float32)


def load_input(path: str | os.PathLike, port: Port) -> np.ndarray:
    """A `.npy` array as it is, or an image prepared for `port`."""
    if is_image(path):
        return load_image(path, port)
    if Path(path).suffix.lower() != ".npy":
        raise InputError(f"{path}: expected a .npy array or an image "
                         f"({', '.join(sorted(IMAGE_SUFFIXES))})")
    try:
        return np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except ValueError as e:
        raise InputError(f"{path}: not a plain NumPy array file ({e})") from None
