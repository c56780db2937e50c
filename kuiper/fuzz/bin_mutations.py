"""Structured mutations of a `.pnnx.bin` weight archive (a zip file).

The archive's structure is three kinds of records (parser/PNNX_FORMAT.md): a local header before
each entry's data, a central directory entry per entry, and the end record pointing at the
directory. These mutations set one field of one record to a value that breaks it the way a bad
disk, a bad download or a crafted file would: a size off by one or huge, an offset pointing at
another entry, a name length flipped, a compression method unknown, a duplicate name, a zip64
record with nonsense offsets. Plus the blunt ones: truncation and random bit flips.
"""

from __future__ import annotations

import io
import random
import struct
import warnings
import zipfile

LOCAL, CENTRAL, END = b"PK\x03\x04", b"PK\x01\x02", b"PK\x05\x06"
# (offset inside the record, struct format) of the fields worth breaking
LOCAL_FIELDS = {"method": (8, "<H"), "crc": (14, "<I"), "csize": (18, "<I"),
                "usize": (22, "<I"), "name_len": (26, "<H"), "extra_len": (28, "<H")}
CENTRAL_FIELDS = {"method": (10, "<H"), "crc": (16, "<I"), "csize": (20, "<I"),
                  "usize": (24, "<I"), "name_len": (28, "<H"), "extra_len": (30, "<H"),
                  "comment_len": (32, "<H"), "offset": (42, "<I")}
END_FIELDS = {"entries_disk": (8, "<H"), "entries": (10, "<H"), "cd_size": (12, "<I"),
              "cd_offset": (16, "<I"), "comment_len": (20, "<H")}


def _records(data: bytes, signature: bytes) -> list[int]:
    found, start = [], 0
    while (i := data.find(signature, start)) >= 0:
        found.append(i)
        start = i + 1
    return found


def _edge_values(rng: random.Random, old: int, fmt: str, others: list[int]) -> int:
    top = 0xFFFF if fmt == "<H" else 0xFFFFFFFF
    choices = [0, 1, old + 1, max(old - 1, 0), top, old ^ (1 << rng.randrange(8)), old * 2]
    choices += others
    return min(max(int(rng.choice(choices)), 0), top)


def field(rng: random.Random, data: bytes) -> bytes:
    """Set one field of one local header, directory entry or end record to an edge value."""
    kinds = [(LOCAL, LOCAL_FIELDS), (CENTRAL, CENTRAL_FIELDS), (END, END_FIELDS)]
    signature, fields = rng.choice(kinds)
    starts = _records(data, signature)
    if not starts:
        return flip(rng, data)
    start = rng.choice(starts)
    name = rng.choice(list(fields))
    offset, fmt = fields[name]
    size = struct.calcsize(fmt)
    if start + offset + size > len(data):
        return data[:start]
    (old,) = struct.unpack_from(fmt, data, start + offset)
    others = _records(data, LOCAL) if name in ("offset", "cd_offset") else []
    new = _edge_values(rng, old, fmt, others)
    return data[:start + offset] + struct.pack(fmt, new) + data[start + offset + size:]


def flip(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return b"PK"
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
    return bytes(buf)


def truncate(rng: random.Random, data: bytes) -> bytes:
    return data[:rng.randrange(len(data) + 1)] if data else data


def append(rng: random.Random, data: bytes) -> bytes:
    return data + rng.choice([b"\x00" * 100, END + b"\xff" * 18, b"garbage" * 50])


def rezip(rng: random.Random, data: bytes) -> bytes:
    """Rewrite the archive: one entry twice, deflated, renamed, swapped or dropped."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            entries = [(i.filename, z.read(i.filename)) for i in z.infolist()]
    except Exception:  # noqa: BLE001 - already broken by an earlier mutation: flip instead
        return flip(rng, data)
    if not entries:
        return data
    k = rng.randrange(len(entries))
    roll = rng.random()
    method = zipfile.ZIP_STORED
    if roll < 0.25:
        entries.append(entries[k])  # a duplicate name
    elif roll < 0.45:
        method = zipfile.ZIP_DEFLATED
    elif roll < 0.65 and len(entries) > 1:
        j = rng.randrange(len(entries))
        (a, da), (b, db) = entries[k], entries[j]
        entries[k], entries[j] = (a, db), (b, da)  # two entries' data swapped
    elif roll < 0.8:
        entries[k] = (entries[k][0] + "x", entries[k][1])  # renamed: an entry goes missing
    else:
        name, payload = entries[k]
        entries[k] = (name, payload[: len(payload) // 2])  # shorter than declared
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", method) as z:
        for name, payload in entries:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "Duplicate name" is the point
                z.writestr(name, payload)
    return out.getvalue()


def zip64(rng: random.Random, data: bytes) -> bytes:
    """Put a zip64 end record and locator with nonsense offsets before the end record."""
    end = data.rfind(END)
    if end < 0:
        return flip(rng, data)
    bad = rng.choice([0, 2**63 - 1, 2**64 - 1, len(data) * 7, end])
    record = (b"PK\x06\x06" + struct.pack("<QHHIIQQQQ", 44, 45, 45, 0, 0, 1, 1, bad, bad))
    locator = b"PK\x06\x07" + struct.pack("<IQI", 0, rng.choice([bad, end, 0]), 1)
    return data[:end] + record + locator + data[end:]


MUTATIONS = [field, field, field, flip, truncate, append, rezip, rezip, zip64]


def mutate(rng: random.Random, data: bytes) -> bytes:
    for _ in range(rng.choice([1, 1, 2])):
        data = rng.choice(MUTATIONS)(rng, data)
    return data
