"""The `.pnnx.bin` reader: a zip archive with one *stored* (uncompressed) entry per weight.

Because entries are stored, their bytes sit in the file as they are. We mmap the file once and
hand out `np.frombuffer` views into the map: loading a 50 MB ResNet costs no copy at all. The
arrays are read-only (they are the file) and may be unaligned; NumPy handles both.

Before trusting an entry we check that it exists, is stored, and holds exactly
prod(shape) * itemsize bytes of the declared dtype.
"""

from __future__ import annotations

import mmap
import os
import struct
import zipfile

import numpy as np

from kuiper.parser.errors import ModelFormatError
from kuiper.parser.values import DTYPES

LOCAL_HEADER_SIZE = 30
LOCAL_HEADER_MAGIC = b"PK\x03\x04"


class WeightArchive:
    """Zero-copy access to the weights of one model. Use as a context manager or call close()."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        try:
            self._file = open(self.path, "rb")
        except FileNotFoundError:
            raise ModelFormatError("weight file not found (pnnx writes it next to the "
                                   ".pnnx.param with the same stem)", self.path) from None
        try:
            size = os.fstat(self._file.fileno()).st_size
            self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
            self._zip = zipfile.ZipFile(self._file)
        # A damaged central directory can also claim an unknown zip version
        # (NotImplementedError) or hold impossible sizes/offsets (ValueError, EOFError).
        except (zipfile.BadZipFile, NotImplementedError, ValueError, EOFError) as e:
            self._file.close()
            raise ModelFormatError(f"not a zip archive ({e}); expected the .pnnx.bin pnnx wrote",
                                   self.path) from None
        self._entries = {info.filename: info for info in self._zip.infolist()}

    def __enter__(self) -> WeightArchive:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        # Arrays handed out keep the map alive through their base; only the file handle goes.
        self._zip.close()
        self._file.close()

    def names(self) -> list[str]:
        return list(self._entries)

    def read(self, entry: str, shape: tuple[int, ...], dtype: str) -> np.ndarray:
        """The array stored under `entry`, checked against the declared shape and dtype."""
        info = self._entries.get(entry)
        if info is None:
            raise ModelFormatError("entry is missing from the weight archive (expected by the "
                                   ".pnnx.param; were the two files written by the same export?)",
                                   self.path, entry=entry)
        if info.compress_type != zipfile.ZIP_STORED:
            raise ModelFormatError("entry is compressed; pnnx stores every weight uncompressed",
                                   self.path, entry=entry)
        np_dtype = DTYPES.get(dtype)
        if np_dtype is None:
            raise ModelFormatError(f"weights of dtype '{dtype}' are not supported", self.path,
                                   entry=entry)
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        expected = count * np_dtype.itemsize
        if info.file_size != expected:
            raise ModelFormatError(
                f"entry holds {info.file_size} bytes but the declared shape {tuple(shape)} of "
                f"{dtype} needs {expected}", self.path, entry=entry)
        offset = self._data_offset(info)
        if offset + expected > len(self._map):
            raise ModelFormatError("entry runs past the end of the file (truncated archive?)",
                                   self.path, entry=entry)
        array = np.frombuffer(self._map, dtype=np_dtype, count=count, offset=offset)
        if dtype == "bf16":  # bfloat16 is the top half of a float32
            array = (array.astype(np.uint32) << 16).view(np.float32)
        return array.reshape(shape)

    def _data_offset(self, info: zipfile.ZipInfo) -> int:
        """Data begins after the *local* header, whose name/extra lengths may differ from the
        central directory's, so read them from the local header itself."""
        start = info.header_offset
        header = bytes(self._map[start:start + LOCAL_HEADER_SIZE])
        if len(header) < LOCAL_HEADER_SIZE or header[:4] != LOCAL_HEADER_MAGIC:
            raise ModelFormatError("local zip header is damaged", self.path, entry=info.filename)
        name_len, extra_len = struct.unpack_from("<HH", header, 26)
        return start + LOCAL_HEADER_SIZE + name_len + extra_len
