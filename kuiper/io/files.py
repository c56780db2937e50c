"""File arguments of the command line: is it a readable regular file, is it an image?

Kept apart from tools/inputs.py so that tools/preprocess.py can use them too without the two
importing each other (inputs.py builds on preprocess.py for images).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from kuiper.core.errors import InputError

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm",
                  ".pgm"}
PILLOW_HINT = "reading images needs Pillow: `pip install pillow` (or pass a .npy file)"


def require_file(path: str | os.PathLike, what: str) -> Path:
    """`path` if it names a regular file that can be read; otherwise an InputError that says
    what it is instead (missing, a folder, a symlink loop, a device such as /dev/zero, which
    would be read forever) and what was expected (`what`, e.g. "a .npy array")."""
    path = Path(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise InputError(f"{path}: file not found (expected {what})") from None
    except OSError as e:  # a symlink loop, a permission problem on a folder on the way...
        raise InputError(f"{path}: cannot be opened ({e.strerror}); expected {what}") from None
    if stat.S_ISDIR(info.st_mode):
        raise InputError(f"{path}: is a folder, not a file (expected {what})")
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"{path}: not a regular file (a device, a pipe or a socket); expected "
                         f"{what}")
    if not os.access(path, os.R_OK):
        raise InputError(f"{path}: not readable (permission denied); expected {what}")
    return path


def is_image(path: str | os.PathLike) -> bool:
    return Path(path).suffix.lower() in IMAGE_SUFFIXES
