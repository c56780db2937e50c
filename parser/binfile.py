"""The `.pnnx.bin` reader: a zip archive with one *stored* (uncompressed) entry per weight.

Because entries are stored, their bytes sit in the file as they are: each weight is read with
one `readinto` straight into a NumPy array of its own, and its CRC-32 is computed on that
array. So the graph owns the very bytes that were verified, and nothing the file does after the
load (truncated or rewritten in place by a re-export) can reach a running graph. Kuiper used to
hand out zero-copy views of an mmap of the file instead; truncating the file under a running
graph then killed the process with SIGBUS at the next inference, and rewriting it silently
changed the weights. parser/PNNX_FORMAT.md, section 2, weighs the two designs.

Before trusting the archive we check that it is exactly one zip: nothing before its first
local header, nothing after its end record (a second archive appended to the first would
otherwise win). Before trusting an entry we check that it exists, is stored, and holds exactly
prod(shape) * itemsize bytes of the declared dtype; that its local header is where the central
directory says, is intact and carries the *same name* (a flipped bit in an offset or a length
would otherwise load another entry's bytes, or these bytes shifted); and that the bytes match
the entry's CRC-32. Entry names must be unique (with duplicates, which one is meant?).
"""

from __future__ import annotations

import math
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
END_RECORD_MAGIC = b"PK\x05\x06"
END_RECORD_SIZE = 22
ZIP64_LOCATOR_MAGIC = b"PK\x06\x07"
ZIP64_LOCATOR_SIZE = 20
ZIP64_END_RECORD_MAGIC = b"PK\x06\x06"
MIN_ZIP_BYTES = END_RECORD_SIZE  # an empty zip is just its end-of-central-directory record
MAX_COMMENT = 0xFFFF


class WeightArchive:
    """The weights of one model, each read into memory of its own and verified. Use as a
    context manager or call close(): the arrays read stay valid after it."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self._file, self._size = open_model_file(
            self.path, "the .pnnx.bin pnnx wrote next to the .pnnx.param (same stem)")
        if self._size < MIN_ZIP_BYTES:
            self._file.close()
            raise ModelFormatError(f"not a zip archive (only {self._size} bytes, the smallest "
                                   f"zip has {MIN_ZIP_BYTES}); expected the .pnnx.bin pnnx "
                                   "wrote", self.path)
        try:
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
        try:
            self._check_one_archive()
            for info in self._zip.infolist():
                if info.filename in self._entries:
                    raise ModelFormatError("the archive holds two entries of this name; pnnx "
                                           "writes each weight once (which one is meant?)",
                                           self.path, entry=info.filename)
                self._entries[info.filename] = info
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> WeightArchive:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Close the file. The arrays already read own their memory and stay valid."""
        self._zip.close()
        self._file.close()

    @property
    def closed(self) -> bool:
        """True once the file is closed."""
        return self._file.closed

    def names(self) -> list[str]:
        return list(self._entries)

    def read(self, entry: str, shape: tuple[int, ...], dtype: str) -> np.ndarray:
        """The array stored under `entry`, checked against the declared shape and dtype, in
        memory of its own (read-only: several layers may share a weight)."""
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
        if offset + expected > self._size:
            raise ModelFormatError("entry runs past the end of the file (truncated archive?)",
                                   self.path, entry=entry)
        raw = self._read_exactly(offset, expected, entry)
        self._check_crc(info, raw)
        array = raw.view(np_dtype)
        if dtype == "bf16":  # bfloat16 is the top half of a float32
            array = (array.astype(np.uint32) << 16).view(np.float32)
        array.flags.writeable = False
        return array.reshape(shape)

    def _read_exactly(self, offset: int, size: int, entry: str) -> np.ndarray:
        """`size` bytes at `offset`, into a fresh array; a short read (the file shrank since
        it was opened) is a ModelFormatError, never a crash."""
        raw = np.empty(size, np.uint8)
        view, done = memoryview(raw), 0
        self._file.seek(offset)
        while done < size:
            n = self._file.readinto(view[done:])
            if not n:
                raise ModelFormatError(f"the file ends after {offset + done} bytes, inside this "
                                       "entry (truncated, or changed while it was read?)",
                                       self.path, entry=entry)
            done += n
        return raw

    def _pread(self, offset: int, size: int) -> bytes:
        self._file.seek(offset)
        return self._file.read(size)

    def _check_crc(self, info: zipfile.ZipInfo, raw: np.ndarray) -> None:
        """The bytes must match the CRC-32 the archive recorded for them: the one check that
        catches damage anywhere in the data, or a header pointing a few bytes off. It runs on
        the array the graph keeps, so what was verified is what runs."""
        crc = zlib.crc32(memoryview(raw))
        if crc != info.CRC:
            raise ModelFormatError(f"the data's CRC-32 is {crc:08x} but the archive records "
                                   f"{info.CRC:08x}: the weights are damaged", self.path,
                                   entry=info.filename)

    def _check_one_archive(self) -> None:
        """The file must be exactly one zip: its end record ends the file, and its central
        directory ends where that record (or the zip64 one) begins, counting from byte 0.
        zipfile accepts more (bytes before the archive, or after it, by design, for
        self-extracting files), so a second archive appended to the first would silently
        replace its weights."""
        tail_start = max(0, self._size - END_RECORD_SIZE - MAX_COMMENT)
        tail = self._pread(tail_start, self._size - tail_start)
        at = tail.rfind(END_RECORD_MAGIC)
        while at >= 0:  # the record whose comment ends exactly at the end of the file
            comment = struct.unpack_from("<H", tail, at + 20)[0] if \
                at + END_RECORD_SIZE <= len(tail) else -1
            if at + END_RECORD_SIZE + comment == len(tail):
                break
            at = tail.rfind(END_RECORD_MAGIC, 0, at)
        if at < 0:
            raise ModelFormatError("is not exactly one zip archive: bytes follow its end "
                                   "record (data appended to the .pnnx.bin pnnx wrote?)",
                                   self.path)
        end = tail_start + at
        cd_size, cd_offset = struct.unpack_from("<II", tail, at + 12)
        directory_end = end
        locator = end - ZIP64_LOCATOR_SIZE
        if locator >= 0 and self._pread(locator, 4) == ZIP64_LOCATOR_MAGIC:
            record = struct.unpack_from("<Q", self._pread(locator + 8, 8))[0]
            header = self._pread(record, 56) if record < locator else b""
            if len(header) < 56 or header[:4] != ZIP64_END_RECORD_MAGIC:
                raise ModelFormatError(f"the zip64 locator points at offset {record}, where "
                                       "there is no zip64 end record (damaged, or bytes "
                                       "before the archive?)", self.path)
            record_size, = struct.unpack_from("<Q", header, 4)  # after its first 12 bytes
            if record + 12 + record_size != locator:
                raise ModelFormatError("is not exactly one zip archive: bytes lie between its "
                                       "zip64 end record and the locator", self.path)
            cd_size, cd_offset = struct.unpack_from("<QQ", header, 40)
            directory_end = record
        extra = directory_end - cd_size - cd_offset
        if extra != 0:
            what = (f"{extra} bytes come before it (two archives joined, or data prepended "
                    "to the .pnnx.bin pnnx wrote?)" if extra > 0 else
                    f"its end record puts the central directory at offset {cd_offset}, "
                    f"{-extra} bytes past where it can start (damaged)")
            raise ModelFormatError(f"is not exactly one zip archive: {what}", self.path)
        offsets = [info.header_offset for info in self._zip.infolist()]
        if offsets and min(offsets) != 0:
            raise ModelFormatError(f"is not exactly one zip archive: its first entry starts "
                                   f"at offset {min(offsets)}, not 0 (bytes before it)",
                                   self.path)

    def _data_offset(self, info: zipfile.ZipInfo) -> int:
        """Data begins after the *local* header, whose extra length may differ from the central
        directory's, so read it from the local header itself -- after checking that the local
        header is the one of this entry: same name, stored."""
        start = info.header_offset
        if not 0 <= start <= self._size - LOCAL_HEADER_SIZE:
            raise ModelFormatError(f"the central directory puts the local header at offset "
                                   f"{start}, outside the {self._size}-byte file",
                                   self.path, entry=info.filename)
        header = self._pread(start, LOCAL_HEADER_SIZE)
        if header[:4] != LOCAL_HEADER_MAGIC or len(header) < LOCAL_HEADER_SIZE:
            raise ModelFormatError(f"no local zip header at offset {start} (expected "
                                   "'PK\\x03\\x04'): the header or the central directory is "
                                   "damaged", self.path, entry=info.filename)
        flags, method = struct.unpack_from("<HH", header, 6)
        name_len, extra_len = struct.unpack_from("<HH", header, 26)
        raw_name = self._pread(start + LOCAL_HEADER_SIZE, name_len)
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
