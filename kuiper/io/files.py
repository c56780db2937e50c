"""File arguments of the command line: is it a readable regular file, can an output be written
there, is it an image?

Kept apart from tools/inputs.py so that tools/preprocess.py can use them too without the two
importing each other (inputs.py builds on preprocess.py for images).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from kuiper.core.errors import InputError, KuiperError

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm",
                  ".pgm"}
PILLOW_HINT = "reading images needs Pillow: `pip install pillow` (or pass a .npy file)"
# The longest file name and path most file systems take (Linux: NAME_MAX, PATH_MAX, in bytes).
NAME_MAX, PATH_MAX = 255, 4096


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


def require_writable(path: str | os.PathLike, option: str, example: str) -> Path:
    """`path` if a file can be written there: a name the file system takes, in a folder that
    exists, and not itself a folder; otherwise a KuiperError naming `option` (`--output`)
    and, for a folder, an `example` file name to give instead. Checked before the model runs,
    so a typo does not cost a whole inference, and so that nothing (a 300-character name:
    ENAMETOOLONG) ends in a traceback."""
    path = Path(path)
    raw = os.fsencode(path)
    longest = max((len(part) for part in raw.split(os.fsencode(os.sep))), default=0)
    if longest > NAME_MAX or len(raw) > PATH_MAX:
        raise KuiperError(f"{option} {str(path)[:80]}...: a file name of {longest} bytes (a path "
                          f"of {len(raw)}); file systems take at most {NAME_MAX} ({PATH_MAX}): "
                          "give a shorter name")
    try:
        folder_ok = path.parent.is_dir()
        is_folder = path.is_dir()
    except OSError as e:  # a symlink loop, a permission problem on the way ...
        raise KuiperError(f"{option} {path}: cannot be written ({e.strerror or e})") from None
    if not folder_ok:
        raise KuiperError(f"{option} {path}: the folder {path.parent} does not exist; create it "
                          "first, or write elsewhere")
    if is_folder:
        raise KuiperError(f"{option} {path}: is a folder; give a file name such as "
                          f"{path / example}")
    return path
