"""Hostile `.pnnx.bin` archives (issue 14): damage that used to load *silently wrong* weights,
or fail with a bare ValueError, must give a `ModelFormatError` naming the file, the zip entry
and what was expected.

Each case starts from a correct archive of two entries of the same size and patches a few bytes
of it, the way a bit flip or a crafted file would.
"""

from __future__ import annotations

import io
import struct
import warnings
import zipfile

import numpy as np
import pytest

import kuiper
from kuiper.core.errors import ModelFormatError
from kuiper.parser.binfile import WeightArchive

A = np.arange(6, dtype=np.float32)
B = -np.arange(6, dtype=np.float32)  # same size as A: pointing at the wrong one fits exactly


def archive_bytes(entries: list[tuple[str, bytes]]) -> bytearray:
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # zipfile warns on duplicate names
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as z:
            for name, data in entries:
                z.writestr(name, data)
    return bytearray(buffer.getvalue())


def two_entries() -> bytearray:
    return archive_bytes([("a.data", A.tobytes()), ("b.data", B.tobytes())])


def local_header(raw: bytes, name: str) -> int:
    """Offset of the local header of `name` (its name follows the 30 fixed bytes)."""
    at = raw.find(b"PK\x03\x04")
    while at >= 0:
        name_len = struct.unpack_from("<H", raw, at + 26)[0]
        if raw[at + 30:at + 30 + name_len] == name.encode():
            return at
        at = raw.find(b"PK\x03\x04", at + 4)
    raise AssertionError(f"no local header for {name}")


def central_header(raw: bytes, name: str) -> int:
    at = raw.find(b"PK\x01\x02")
    while at >= 0:
        name_len = struct.unpack_from("<H", raw, at + 28)[0]
        if raw[at + 46:at + 46 + name_len] == name.encode():
            return at
        at = raw.find(b"PK\x01\x02", at + 4)
    raise AssertionError(f"no central header for {name}")


def read_error(tmp_path, raw: bytes, entry: str, *parts: str) -> str:
    path = tmp_path / "w.pnnx.bin"
    path.write_bytes(bytes(raw))
    with pytest.raises(ModelFormatError) as info:
        with WeightArchive(path) as archive:
            archive.read(entry, (6,), "f32")
    message = str(info.value)
    for part in (str(path), *parts):
        assert part in message, f"{part!r} not in {message!r}"
    return message


def test_untouched_archive_reads_both_entries(tmp_path):
    path = tmp_path / "w.pnnx.bin"
    path.write_bytes(bytes(two_entries()))
    with WeightArchive(path) as archive:
        np.testing.assert_array_equal(archive.read("a.data", (6,), "f32"), A)
        np.testing.assert_array_equal(archive.read("b.data", (6,), "f32"), B)


@pytest.mark.parametrize("bit", [0, 1, 3])
def test_bit_flip_in_local_name_length(tmp_path, bit):
    raw = two_entries()
    at = local_header(raw, "b.data")
    raw[at + 26] ^= 1 << bit  # name_len: the data would start this many bytes off
    read_error(tmp_path, raw, "b.data", "entry 'b.data'", "not this entry")


@pytest.mark.parametrize("bit", [0, 1, 2])
def test_bit_flip_in_local_extra_length(tmp_path, bit):
    raw = two_entries()
    raw[local_header(raw, "a.data") + 28] ^= 1 << bit  # the name still matches: the CRC tells
    read_error(tmp_path, raw, "a.data", "entry 'a.data'", "CRC-32", "damaged")


def test_flipped_data_bit_fails_the_crc(tmp_path):
    raw = two_entries()
    raw[local_header(raw, "b.data") + 30 + len("b.data") + 5] ^= 0x10
    read_error(tmp_path, raw, "b.data", "CRC-32")


def test_central_offset_pointing_at_another_entry_of_the_same_size(tmp_path):
    raw = two_entries()
    struct.pack_into("<I", raw, central_header(raw, "b.data") + 42, local_header(raw, "a.data"))
    read_error(tmp_path, raw, "b.data", "entry 'b.data'", "names 'a.data'", "not this entry")


def test_central_offset_outside_the_file(tmp_path):
    raw = two_entries()
    struct.pack_into("<I", raw, central_header(raw, "b.data") + 42, len(raw) + 100)
    read_error(tmp_path, raw, "b.data", "outside the")


def test_crafted_end_record_giving_a_negative_offset(tmp_path):
    # A central-directory offset larger than the real one makes zipfile compute a negative
    # header offset ("concatenated archive"); NumPy then said "offset must be non-negative".
    raw = two_entries()
    end = raw.rfind(b"PK\x05\x06")
    cd_offset = struct.unpack_from("<I", raw, end + 16)[0]
    struct.pack_into("<I", raw, end + 16, cd_offset + 1000)
    read_error(tmp_path, raw, "a.data", "not exactly one zip archive",
               f"at offset {cd_offset + 1000}, 1000 bytes past where it can start")


def test_local_header_says_compressed(tmp_path):
    raw = two_entries()
    struct.pack_into("<H", raw, local_header(raw, "a.data") + 8, zipfile.ZIP_DEFLATED)
    read_error(tmp_path, raw, "a.data", "compressed")


def test_no_local_header_where_the_directory_says(tmp_path):
    raw = two_entries()
    raw[local_header(raw, "b.data"):local_header(raw, "b.data") + 4] = b"XXXX"
    read_error(tmp_path, raw, "b.data", "no local zip header")


def test_duplicate_entry_names_are_refused(tmp_path):
    raw = archive_bytes([("a.data", A.tobytes()), ("a.data", B.tobytes())])
    path = tmp_path / "w.pnnx.bin"
    path.write_bytes(bytes(raw))
    with pytest.raises(ModelFormatError, match="two entries of this name") as info:
        WeightArchive(path)
    assert "entry 'a.data'" in str(info.value) and str(path) in str(info.value)


def test_tiny_file_is_not_a_zip(tmp_path):
    path = tmp_path / "w.pnnx.bin"
    path.write_bytes(b"PK\x05\x06")
    with pytest.raises(ModelFormatError, match="not a zip archive"):
        WeightArchive(path)


def test_damaged_weights_fail_the_whole_load(tmp_path):
    # Through kuiper.load: the error names the .bin and the operator's entry.
    (tmp_path / "m.pnnx.param").write_text(
        "7767517\n4 3\npnnx.Input in 0 1 x #x=(6)f32\n"
        "pnnx.Attribute w 0 1 k @data=(6)f32 #k=(6)f32\n"
        "pnnx.Expression e 2 1 x k y expr=add(@0,@1)\npnnx.Output out 1 0 y\n")
    raw = archive_bytes([("w.data", A.tobytes())])
    raw[local_header(raw, "w.data") + 30 + len("w.data")] ^= 1
    (tmp_path / "m.pnnx.bin").write_bytes(bytes(raw))
    with pytest.raises(ModelFormatError, match="CRC-32") as info:
        kuiper.load(tmp_path / "m.pnnx.param")
    assert "m.pnnx.bin" in str(info.value) and "entry 'w.data'" in str(info.value)


# --- exactly one archive (issue 31) ----------------------------------------------------------
# zipfile reads an archive with bytes before it (it shifts every offset) or after it (by design,
# for self-extracting files); with a second complete archive appended, the second one's weights
# loaded silently.

def test_a_second_archive_appended_is_refused(tmp_path):
    raw = two_entries() + archive_bytes([("a.data", B.tobytes()), ("b.data", A.tobytes())])
    read_error(tmp_path, raw, "a.data", "not exactly one zip archive",
               f"{len(two_entries())} bytes come before it", "two archives joined")


@pytest.mark.parametrize("junk", [b"x", b"PK\x03\x04" + b"\0" * 40, b"\0" * 4096])
def test_bytes_before_the_archive_are_refused(tmp_path, junk):
    read_error(tmp_path, junk + two_entries(), "a.data", "not exactly one zip archive",
               f"{len(junk)} bytes come before it")


@pytest.mark.parametrize("junk", [b"x", b"\0" * 4096, b"PK\x05\x06"])
def test_bytes_after_the_archive_are_refused(tmp_path, junk):
    # (a stray end-record signature at the very end already makes zipfile give up)
    expected = ("not a zip archive",) if junk.startswith(b"PK") else (
        "not exactly one zip archive", "bytes follow its end record")
    read_error(tmp_path, two_entries() + junk, "a.data", *expected)


def test_an_archive_comment_is_part_of_the_archive(tmp_path):
    # a comment is the end record's own field: the archive still ends the file
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as z:
        z.writestr("a.data", A.tobytes())
        z.comment = b"written by hand"
    path = tmp_path / "w.pnnx.bin"
    path.write_bytes(buffer.getvalue())
    with WeightArchive(path) as archive:
        np.testing.assert_array_equal(archive.read("a.data", (6,), "f32"), A)


def test_zip64_archive_with_bytes_before_is_refused(tmp_path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as z:
        with z.open(zipfile.ZipInfo("a.data"), "w", force_zip64=True) as f:
            f.write(A.tobytes())
    raw = bytearray(buffer.getvalue())
    path = tmp_path / "w.pnnx.bin"
    path.write_bytes(bytes(raw))
    with WeightArchive(path) as archive:  # the archive alone reads
        np.testing.assert_array_equal(archive.read("a.data", (6,), "f32"), A)
    read_error(tmp_path, b"\0" * 16 + raw, "a.data", "not exactly one zip archive")
