"""Opening model files safely: only regular files, and a .param of a sane size.

A path can name something that is not a file at all. `/dev/zero` reads forever (and a reader
that slurps it is killed for memory); a named pipe blocks `open()` until someone writes to it; a
directory cannot be read. So the model readers open through `open_model_file`, which

- opens without blocking (O_NONBLOCK: opening a FIFO for reading returns at once instead of
  waiting for a writer), then asks the *open* file what it is (fstat, so nothing can swap the
  path between the check and the read), and refuses anything but a regular file;
- refuses a file larger than the reader's bound. The one bound is `MAX_PARAM_BYTES` below: a
  `.pnnx.param` is text, one line per operator, and even a large transformer's is a few MB.
  The `.pnnx.bin` holds the weights and has no upper bound: it is mapped, never read whole
  (parser/binfile.py refuses one smaller than the smallest zip).
"""

from __future__ import annotations

import os
import stat

from kuiper.parser.errors import ModelFormatError

MAX_PARAM_MB = 64  # a .pnnx.param above this is refused: the one place that says N
MAX_PARAM_BYTES = MAX_PARAM_MB << 20


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def open_model_file(path: str, what: str, max_bytes: int | None = None):
    """Open `path` for binary reading if it is a regular file of a sane size.

    `what` names the file in errors ("the .pnnx.param"). Returns (file object, size in bytes).
    Raises ModelFormatError naming the path and what was expected.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise ModelFormatError(f"file not found (expected {what})", path) from None
    except IsADirectoryError:
        raise ModelFormatError(f"is a directory (expected {what}, a regular file)",
                               path) from None
    except OSError as e:
        raise ModelFormatError(f"cannot be opened ({e.strerror}); expected {what}",
                               path) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ModelFormatError(f"is {_kind(info.st_mode)}, not a regular file (expected "
                                   f"{what}; only regular files are read)", path)
        if max_bytes is not None and info.st_size > max_bytes:
            raise ModelFormatError(
                f"is {info.st_size / (1 << 20):.1f} MB; {what} is refused above "
                f"{max_bytes / (1 << 20):.0f} MB (kuiper.parser.files.MAX_PARAM_MB): "
                "is this really a pnnx text file?", path)
        # The file is regular: blocking reads are fine (and what buffered I/O expects).
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb"), info.st_size
    except BaseException:
        os.close(fd)
        raise
