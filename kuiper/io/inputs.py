"""Inputs for the command line: `1x3x224x224` shapes, `.npy` files, images, random tensors.

Kept apart from the CLI so `kuiper run`, `kuiper bench` and notebooks share one definition of
each input kind. How an image becomes a tensor (resize mode, scaling, normalisation) lives in
tools/preprocess.py: `load_image` here uses its plain default (squash resize, [0, 1], no
normalisation) unless given a `Preprocessing`; `kuiper run` picks one per task and prints it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from kuiper.core import limits
from kuiper.core.errors import InputError
from kuiper.graph.runtime_graph import Port
from kuiper.io.files import (  # noqa: F401  (re-exported: the CLI's file checks)
    IMAGE_SUFFIXES,
    PILLOW_HINT,
    is_image,
    require_file,
)

log = logging.getLogger("kuiper.tools")


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
        # Refuse a shape like 1x3x100000x100000 before NumPy tries to allocate it.
        limits.current().check_tensor(shape, np.dtype(port.dtype).itemsize,
                                      f"random input '{port.name}'")
        if np.issubdtype(port.dtype, np.floating):
            arrays.append(rng.standard_normal(shape).astype(port.dtype))
        else:
            arrays.append(np.zeros(shape, dtype=port.dtype))
    return arrays


def read_labels(path: str | os.PathLike) -> list[str]:
    """Class names, one per line (`kuiper run --labels`)."""
    what = "a text file of class names, one per line"
    try:
        return require_file(path, what).read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a UTF-8 text file (expected {what})") from None
    except OSError as e:
        raise InputError(f"{path}: cannot be read ({e.strerror}); expected {what}") from None


def load_image(path: str | os.PathLike, port: Port, prep=None) -> np.ndarray:
    """An image file as a 1 x C x H x W float32 batch for `port` (C is 1 or 3), prepared by
    `prep` (a tools.preprocess.Preprocessing; default: squash resize to [0, 1], no
    normalisation)."""
    from kuiper.io.preprocess import Preprocessing, load_images

    batch, _ = load_images([path], port, prep or Preprocessing.for_task("raw"))
    return batch


ACCEPTED = f"a .npy array or an image ({', '.join(sorted(IMAGE_SUFFIXES))})"


def load_input(path: str | os.PathLike, port: Port, prep=None) -> np.ndarray:
    """A `.npy` array as it is, or an image prepared for `port` (see `load_image`)."""
    if is_image(path):
        return load_image(path, port, prep)
    if Path(path).suffix.lower() != ".npy":
        raise InputError(f"{path}: expected {ACCEPTED}")
    require_file(path, "a .npy array")
    try:
        array = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:  # what np.load raises on a damaged file
        raise InputError(f"{path}: not a plain NumPy array file ({e}); write one with "
                         "np.save") from None
    if not isinstance(array, np.ndarray):  # an .npz archive renamed to .npy
        raise InputError(f"{path}: holds several arrays (an .npz archive); save the input "
                         "alone with np.save")
    if warn_if_unscaled(path, array, port):  # said here, with the file's name: cast now, so
        return array.astype(port.dtype)       # that the graph does not say it again
    return array


def warn_if_unscaled(path, array: np.ndarray, port: Port) -> bool:
    """uint8 data for a float input is almost always raw pixels 0..255, while models expect the
    scaled values they were trained on; Kuiper feeds it as it is (it cannot know the scale).
    True when it warned."""
    if array.dtype == np.uint8 and np.issubdtype(port.dtype, np.floating):
        log.warning("%s holds uint8 values (0..255) and input '%s' is %s: they are fed "
                    "unscaled; divide by 255 (and normalise) first if the model expects "
                    "[0, 1]", path, port.name, port.dtype.name)
        return True
    return False
