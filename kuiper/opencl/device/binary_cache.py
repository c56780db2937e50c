"""Kuiper's own cache of compiled OpenCL programs, on disk, for every driver.

A first run compiles every kernel program of a model (ResNet-18: 13 programs; PP-OCRv5's two
networks: ~100); later processes should not. Drivers and pyopencl each cache some of it, not
all, and not everywhere: pyopencl keeps binaries only for drivers it does not trust to cache
(it defers to PoCL's and NVIDIA's own caches, which `POCL_KERNEL_CACHE=0`,
`CUDA_CACHE_DISABLE=1` or a read-only home turn off), and other drivers cache nothing. So
Kuiper keeps the binaries itself, the same way on every driver:

    <cache>/kernels/<key>.bin     clGetProgramInfo(CL_PROGRAM_BINARIES) of one built program

The key (SHA-256) covers what the binary depends on: the device and its driver (platform name
and version, device name and version, driver version), the build options, the source text,
and every header the source may include (the `.h` and `.cl` files of the include folders:
clkernels/ and a plugin's own folder). A changed kernel or header, or a driver update, is a
new key, so a stale binary is never used; a binary the driver refuses anyway is rebuilt from
source and replaced. `<cache>` is kuiper/core/cache.py's folder. Delete `<cache>/kernels`
whenever you like; `kuiper devices` lists every kernel cache folder with its size
(`cache_folders`).

Not on PoCL, by default: there, clGetProgramInfo(CL_PROGRAM_BINARIES) makes PoCL compile every
kernel of the program for every work-group size first (14 s per program of the GEMM family on
the 2-core test machine, where building it takes 0.7 s), and PoCL's own cache (`kcache`,
~/.cache/pocl/kcache or POCL_CACHE_DIR) already keeps both of its steps across processes: the
program (Clang, at build) and each kernel's work-group function (LLVM's optimiser and code
generator, at the kernel's first launch with a given work-group size: most of a cold start).
KUIPER_KERNEL_CACHE=1 turns Kuiper's cache on there too, KUIPER_KERNEL_CACHE=0 off everywhere.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path

from kuiper.core.cache import cache_dir

logger = logging.getLogger(__name__)

ENV = "KUIPER_KERNEL_CACHE"
FOLDER = "kernels"
# Larger than any program binary Kuiper builds (PoCL's bitcode of the GEMM file: ~0.3 MB;
# NVIDIA's PTX of it: ~1 MB); a larger file in the folder is not Kuiper's and is ignored.
MAX_BINARY_BYTES = 64 << 20
HEADER_SUFFIXES = (".h", ".cl", ".clh")


def enabled(device) -> bool:
    """Whether programs for `device` go through this cache (see the module docstring)."""
    setting = os.environ.get(ENV, "").strip().lower()
    if setting in ("0", "false", "no", "off"):
        return False
    if setting in ("1", "true", "yes", "on"):
        return True
    return not _is_pocl(device)


def _is_pocl(device) -> bool:
    platform = getattr(device, "platform", None)
    return platform is not None and "portable computing language" in platform.name.lower()


def folder() -> Path:
    return cache_dir() / FOLDER


def device_identity(device) -> str:
    """What a compiled binary depends on besides the source: the device and its driver."""
    platform = device.platform
    return "|".join(str(x).strip() for x in (platform.name, platform.version, device.name,
                                             device.version, device.driver_version))


@functools.lru_cache(maxsize=64)
def _folder_digest(path: str, stamp: tuple) -> str:
    """SHA-256 of the headers and kernel files in `path` (`stamp`: their names, sizes and
    modification times, so that an edited header is seen within one process too)."""
    digest = hashlib.sha256()
    for name, _size, _mtime in stamp:
        digest.update(name.encode() + b"\0")
        digest.update((Path(path) / name).read_bytes())
    return digest.hexdigest()


def headers_digest(include: Sequence[str | os.PathLike]) -> str:
    """A digest of every file the source may #include from the folders `include`."""
    parts = []
    for path in include:
        try:
            entries = sorted((e.name, e.stat().st_size, e.stat().st_mtime_ns)
                             for e in os.scandir(path)
                             if e.is_file() and e.name.endswith(HEADER_SUFFIXES))
            parts.append(_folder_digest(str(path), tuple(entries)))
        except OSError:   # a folder that went away: the compiler will say so
            parts.append(f"missing {path}")
    return "|".join(parts)


def key(device, source: str, options: Sequence[str],
        include: Sequence[str | os.PathLike]) -> str:
    digest = hashlib.sha256()
    for part in (device_identity(device), "\0".join(options), headers_digest(include), source):
        digest.update(part.encode("utf-8", "surrogatepass") + b"\0\1")
    return digest.hexdigest()


def load(cache_key: str) -> bytes | None:
    """The stored binary, or None: missing, not a regular file, or too large."""
    path = folder() / f"{cache_key}.bin"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_BINARY_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=True) as f:
            fd = -1
            return f.read(MAX_BINARY_BYTES + 1) or None
    except OSError:
        return None
    finally:
        if fd >= 0:
            os.close(fd)


def store(cache_key: str, binary: bytes) -> None:
    """Write the binary atomically (another process may be reading or writing the same key);
    a cache that cannot be written is skipped, with a debug line."""
    if not binary or len(binary) > MAX_BINARY_BYTES:
        return
    target = folder()
    try:
        target.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target, prefix=f".{cache_key[:16]}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(binary)
            os.replace(tmp, target / f"{cache_key}.bin")
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as e:
        logger.debug("kernel cache %s not written: %s", target, e)


def usage(path: str | os.PathLike | None = None) -> tuple[int, int]:
    """(files, bytes) under `path` (default: this cache's folder) now; (0, 0) when absent."""
    files = size = 0
    for root, _dirs, names in os.walk(path if path is not None else folder()):
        for name in names:
            try:
                size += os.lstat(os.path.join(root, name)).st_size
                files += 1
            except OSError:
                pass
    return files, size


def _user_cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


def cache_folders() -> list[tuple[str, Path]]:
    """Every folder where compiled OpenCL kernels of Kuiper's may be kept, (what, path): this
    cache, PoCL's, pyopencl's, NVIDIA's (as each is found from its environment variables)."""
    pocl = os.environ.get("POCL_CACHE_DIR") or _user_cache() / "pocl" / "kcache"
    nvidia = os.environ.get("CUDA_CACHE_PATH") or Path.home() / ".nv" / "ComputeCache"
    return [("Kuiper's kernel binaries (every driver but PoCL)", folder()),
            ("PoCL's kcache (programs and compiled kernels)", Path(pocl)),
            ("pyopencl's binaries (drivers without a cache of their own)",
             _user_cache() / "pyopencl"),
            ("NVIDIA's ComputeCache", Path(nvidia))]
