"""The `.pnnx.bin` reader: a zip archive with one *stored* (uncompressed) entry per weight.

Because entries are stored, their bytes sit in the file as they are. We mmap the file once and
hand out `np.frombuffer` views into the map: loading a 50 MB ResNet costs no copy at all. The
arrays are read-only (they are the file) and may be unaligned; NumPy handles both.

Before trusting an entry we check that it exists, is stored, and holds exactly
prod(shape) * itemsize bytes of the declared dtype; that its local header is where the central
directory says, is intact and carries the *same name* (a flipped bit in an offset or a length
would otherwise load another entry's bytes, or these bytes shifted); and that the bytes match
the entry's CRC-32. Entry names must be unique (with duplicates, which one is meant?). The cost
of the CRC on ResNet-18 is measured in parser/PNNX_FORMAT.md, section 2.
"""

from __future__ import annotations

import math
import mmap
import os
import struct
import zipfile
import zlib

import numpy as np

from kuiper.parser.errors import ModelFormatError
from kuiper.parser.files import open_model_file
from kuiper.parser.values import DTYPES

LOCAL_HEADER_SIZE = 30
LOCAL_HEADER_MAGIC = b"PK\x03\x04"
MIN_ZIP_BYTES = 22  # an empty zip is just its end-of-central-directory record


class WeightArchive:
    """Zero-copy access to the weights of one model. Use as a context manager or call close()."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self._file, size = open_model_file(
            self.path, "the .pnnx.bin pnnx wrote next to the .pnnx.param (same stem)")
        if size < MIN_ZIP_BYTES:
            self._file.close()
            raise ModelFormatError(f"not a zip archive (only {size} bytes, the smallest zip has "
                                   f"{MIN_ZIP_BYTES}); expected the .pnnx.bin pnnx wrote",
                                   self.path)
        try:
            self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
            self._zip = zipfile.ZipFile(self._file)
        # A damaged central directory can also claim an unknown zip version
        # (NotImplementedError) or hold impossible sizes/offsets (ValueError, EOFError,
        # struct.error, OSError for a seek before the start).
        except (zipfile.BadZipFile, NotImplementedError, ValueError, EOFError, struct.error,
                OSError) as e:
            self._file.close()
            raise ModelFormatError(f"not a zip archive ({e}); expected the .pnnx.bin pnnx wrote",
                                   self.path) from None
        self._entries: dict[str, zipfile.ZipInfo] = {}
        for info in self._zip.infolist():
            if info.filename in self._entries:
                self.close()
                raise ModelFormatError("the archive holds two entries of this name; pnnx "
                                       "writes each weight once (which one is meant?)",
                                       self.path, entry=info.filename)
            self._entries[info.filename] = info

    def __enter__(self) -> WeightArchive:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Close the file, and unmap it unless arrays handed out still view the map: those
        keep it alive through their base, and it goes with the last of them."""
        self._zip.close()
        self._file.close()
        try:
            self._map.close()
        except BufferError:  # "cannot close exported pointers exist": arrays still use it
            pass

    @property
    def closed(self) -> bool:
        """True once the file is closed and the map released."""
        return self._file.closed and self._map.closed

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
        count = math.prod(shape)  # a Python int: np.prod would wrap around int64
        expected = count * np_dtype.itemsize
        if info.file_size != expected:
            raise ModelFormatError(
                f"entry holds {info.file_size} bytes but the declared shape {tuple(shape)} of "
                f"{dtype} needs {expected}", self.path, entry=entry)
        offset = self._data_offset(info)
        if offset + expected > len(self._map):
            raise ModelFormatError("entry runs past the end of the file (truncated archive?)",
                                   self.path, entry=entry)
        self._check_crc(info, offset, expected)
        array = np.frombuffer(self._map, dtype=np_dtype, count=count, offset=offset)
        if dtype == "bf16":  # bfloat16 is the top half of a float32
            array = (array.astype(np.uint32) << 16).view(np.float32)
        return array.reshape(shape)

    def _check_crc(self, info: zipfile.ZipInfo, offset: int, size: int) -> None:
        """The bytes must match the CRC-32 the archive recorded for them: the one check that
        catches damage anywhere in the data, or a header pointing a few bytes off."""
        crc = zlib.crc32(memoryview(self._map)[offset:offset + size])
        if crc != info.CRC:
            raise ModelFormatError(f"the data's CRC-32 is {crc:08x} but the archive records "
                                   f"{info.CRC:08x}: the weights are damaged", self.path,
                                   entry=info.filename)

    def _data_offset(self, info: zipfile.ZipInfo) -> int:
        """Data begins after the *local* header, whose extra length may differ from the central
        directory's, so read it from the local header itself -- after checking that the local
        header is the one of this entry: same name, stored."""
        start = info.header_offset
        if not 0 <= start <= len(self._map) - LOCAL_HEADER_SIZE:
            raise ModelFormatError(f"the central directory puts the local header at offset "
                                   f"{start}, outside the {len(self._map)}-byte file",
                                   self.path, entry=info.filename)
        header = bytes(self._map[start:start + LOCAL_HEADER_SIZE])
        if header[:4] != LOCAL_HEADER_MAGIC:
            raise ModelFormatError(f"no local zip header at offset {start} (expected "
                                   "'PK\\x03\\x04'): the header or the central directory is "
                                   "damaged", self.path, entry=info.filename)
        flags, method = struct.unpack_from("<HH", header, 6)
        name_len, extra_len = struct.unpack_from("<HH", header, 26)
        raw_name = bytes(self._map[start + LOCAL_HEADER_SIZE:
                                   start + LOCAL_HEADER_SIZE + name_len])
        name = raw_name.decode("utf-8" if flags & 0x800 else "cp437", errors="replace")
        if name != info.orig_filename:
            raise ModelFormatError(f"the local header at offset {start} names "
                                   f"'{name[:80]}', not this entry: the central directory or "
                                   "the header is damaged", self.path, entry=info.filename)
        if method != zipfile.ZIP_STORED:
            raise ModelFormatError("the local header says the entry is compressed; pnnx "
                                   "stores every weight uncompressed", self.path,
                                   entry=info.filename)
        return start + LOCAL_HEADER_SIZE + name_len + extra_len
