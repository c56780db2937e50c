"""Kuiper's cache folder: one home for everything Kuiper keeps between runs.

    <cache>/<stem>-<key>/      models converted by pnnx       kuiper/graph/convert.py
    <cache>/tuning.json        kernel timings, `kuiper tune`  kuiper/opencl/device/tuning_cache.py
    <cache>/vector_width.json  16-wide vectors on PoCL?       kuiper/opencl/device/vector_width.py
    <cache>/tensor_cores.json  PTX mma on an NVIDIA GPU?      kuiper/opencl/device/tensor_cores.py
    <cache>/ocr/               the OCR capstone's models      kuiper/ocr/app.py
    <cache>/kernels/           compiled OpenCL programs       kuiper/opencl/device/binary_cache.py

The folder is `$KUIPER_CACHE_DIR`, else `$XDG_CACHE_HOME/kuiper`, else `~/.cache/kuiper`
(`%LOCALAPPDATA%\\kuiper` on Windows). Delete it whenever you like: everything in it is made
again when needed.

A cache file is a convenience, never an input Kuiper trusts: `read_cache_file` reads one only if
it is a regular file of a bounded size, so a FIFO or `/dev/zero` put in its place (by mistake or
on purpose) cannot block a load or fill the memory; the caller then ignores it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

# Larger than any cache file Kuiper writes (a tuning cache of thousands of layers is ~1 MB).
MAX_CACHE_FILE_BYTES = 16 << 20


def cache_dir() -> Path:
    """The cache folder (see the module docstring); it may not exist yet."""
    if os.environ.get("KUIPER_CACHE_DIR"):
        return Path(os.environ["KUIPER_CACHE_DIR"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "kuiper"
    if os.name == "nt" and os.environ.get("LOCALAPPDATA"):
        return Path(os.environ["LOCALAPPDATA"]) / "kuiper"
    return Path.home() / ".cache" / "kuiper"


class UnreadableCacheFile(OSError):
    """A cache file that is not a regular file, or is larger than the limit: ignore it."""


def read_cache_file(path: str | os.PathLike, limit: int = MAX_CACHE_FILE_BYTES,
                    errors: str = "strict") -> str:
    """The text of a cache file; UnreadableCacheFile (an OSError) when it is a FIFO, a device,
    a folder or larger than `limit` bytes, FileNotFoundError when it is missing.

    The file is opened without blocking (a FIFO with no writer would otherwise wait forever)
    and checked with fstat on the open descriptor, so what is read is what was checked."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnreadableCacheFile(f"{path}: not a regular file")
        if info.st_size > limit:
            raise UnreadableCacheFile(f"{path}: {info.st_size} bytes, more than the "
                                      f"{limit} a cache file may have")
        with os.fdopen(fd, "rb", closefd=True) as f:
            fd = -1
            data = f.read(limit + 1)
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > limit:  # grew after the check
        raise UnreadableCacheFile(f"{path}: larger than {limit} bytes")
    return data.decode("utf-8", errors=errors)
