"""The `.pnnx.bin` reader: a zip of stored entries, each read into memory of its own and
validated before use.

Broken archives must give a `ModelFormatError` naming the file, the zip entry and what was
expected -- never a zipfile/struct/NumPy exception.
"""

from __future__ import annotations

import zipfile

import numpy as np
import pytest
import torch

import kuiper
from kuiper.core.errors import ModelFormatError
from kuiper.parser.binfile import WeightArchive

SUFFIXES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i64": np.int64,
            "i32": np.int32, "i16": np.int16, "i8": np.int8, "u8": np.uint8, "bool": np.bool_,
            "c64": np.complex64, "c128": np.complex128}


def write_zip(path, entries: dict[str, bytes], compression=zipfile.ZIP_STORED,
              force_zip64: bool = False):
    with zipfile.ZipFile(path, "w", compression) as z:
        for name, data in entries.items():
            info = zipfile.ZipInfo(name)
            info.compress_type = compression
            with z.open(info, "w", force_zip64=force_zip64) as f:
                f.write(data)
    return path


def sample(rng, suffix: str, shape) -> np.ndarray:
    dtype = SUFFIXES[suffix]
    if suffix == "bool":
        return rng.random(shape) > 0.5
    if suffix.startswith("c"):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return (rng.standard_normal(shape) * 50).astype(dtype)


@pytest.mark.parametrize("suffix", list(SUFFIXES))
def test_every_dtype_reads_back_exactly(tmp_path, rng, suffix):
    data = sample(rng, suffix, (3, 1, 5))
    path = write_zip(tmp_path / "m.pnnx.bin", {"op.weight": data.tobytes()})
    with WeightArchive(path) as archive:
        got = archive.read("op.weight", (3, 1, 5), suffix)
        assert got.dtype == data.dtype and got.shape == (3, 1, 5)
        np.testing.assert_array_equal(got, data)


def test_arrays_own_their_memory_and_are_read_only(tmp_path, rng):
    data = sample(rng, "f32", (4, 4))
    path = write_zip(tmp_path / "m.pnnx.bin", {"a.data": data.tobytes()})
    archive = WeightArchive(path)
    got = archive.read("a.data", (4, 4), "f32")
    assert not got.flags.writeable  # several layers may share one weight
    archive.close()
    path.write_bytes(b"\0" * 10)  # the file rewritten and shrunk after the read
    np.testing.assert_array_equal(got, data)  # the verified bytes, not the file's new ones


def test_unaligned_entries_and_zip64_local_headers(tmp_path, rng):
    # An odd-length name puts the data at an odd offset; force_zip64 adds a local 'extra'
    # field that the central directory does not have: the data offset must come from the
    # local header.
    a, b = sample(rng, "f64", (7,)), sample(rng, "i16", (3, 3))
    path = write_zip(tmp_path / "m.pnnx.bin", {"x.w": a.tobytes(), "layer.1.bias": b.tobytes()},
                     force_zip64=True)
    with WeightArchive(path) as archive:
        np.testing.assert_array_equal(archive.read("x.w", (7,), "f64"), a)
        np.testing.assert_array_equal(archive.read("layer.1.bias", (3, 3), "i16"), b)
        assert sorted(archive.names()) == ["layer.1.bias", "x.w"]


def test_bf16_weights_widen_to_float32(tmp_path):
    t = torch.tensor([[1.5, -2.25, 3.0e-3], [1e20, -0.0, 7.0]], dtype=torch.bfloat16)
    raw = t.view(torch.int16).numpy().tobytes()
    path = write_zip(tmp_path / "m.pnnx.bin", {"fc.weight": raw})
    with WeightArchive(path) as archive:
        got = archive.read("fc.weight", (2, 3), "bf16")
    assert got.dtype == np.float32 and got.shape == (2, 3)
    np.testing.assert_array_equal(got, t.float().numpy())


def test_zero_dim_entry(tmp_path):
    path = write_zip(tmp_path / "m.pnnx.bin", {"c.data": np.float32(2.5).tobytes()})
    with WeightArchive(path) as archive:
        assert archive.read("c.data", (), "f32") == 2.5


# --- broken archives --------------------------------------------------------------------------

def expect_error(path, entry: str, shape, dtype: str, *parts: str) -> str:
    with pytest.raises(ModelFormatError) as info, WeightArchive(path) as archive:
        archive.read(entry, shape, dtype)
    message = str(info.value)
    assert str(path) in message, message
    for part in parts:
        assert part in message, f"{part!r} not in {message!r}"
    return message


def test_missing_entry(tmp_path):
    path = write_zip(tmp_path / "m.pnnx.bin", {"conv.bias": b"\0" * 8})
    expect_error(path, "conv.weight", (2,), "f32", "entry 'conv.weight'", "missing")


def test_compressed_entry(tmp_path):
    path = write_zip(tmp_path / "m.pnnx.bin", {"conv.weight": b"\0" * 64},
                     compression=zipfile.ZIP_DEFLATED)
    expect_error(path, "conv.weight", (16,), "f32", "entry 'conv.weight'", "compressed",
                 "uncompressed")


def test_wrong_size(tmp_path):
    path = write_zip(tmp_path / "m.pnnx.bin", {"fc.weight": b"\0" * 20})
    expect_error(path, "fc.weight", (2, 3), "f32", "entry 'fc.weight'", "20 bytes",
                 "(2, 3)", "needs 24")


def test_wrong_dtype_is_a_wrong_size(tmp_path):
    path = write_zip(tmp_path / "m.pnnx.bin", {"fc.weight": np.zeros(6, np.float32).tobytes()})
    expect_error(path, "fc.weight", (2, 3), "f64", "24 bytes", "f64 needs 48")


@pytest.mark.parametrize("dtype", ["c32", "null"])
def test_unsupported_weight_dtype(tmp_path, dtype):
    path = write_zip(tmp_path / "m.pnnx.bin", {"fc.weight": b"\0" * 8})
    expect_error(path, "fc.weight", (2,), dtype, "entry 'fc.weight'", f"'{dtype}'",
                 "not supported")


def test_truncated_zip(tmp_path, rng):
    good = write_zip(tmp_path / "good.bin", {"fc.weight": sample(rng, "f32", (64,)).tobytes()})
    path = tmp_path / "m.pnnx.bin"
    path.write_bytes(good.read_bytes()[:150])  # the central directory is gone
    expect_error(path, "fc.weight", (64,), "f32", "not a zip archive", ".pnnx.bin")


def test_damaged_local_header(tmp_path, rng):
    good = write_zip(tmp_path / "good.bin", {"fc.weight": sample(rng, "f32", (8,)).tobytes()})
    data = bytearray(good.read_bytes())
    data[0:4] = b"XXXX"  # the local header magic of the first (only) entry
    path = tmp_path / "m.pnnx.bin"
    path.write_bytes(bytes(data))
    expect_error(path, "fc.weight", (8,), "f32", "entry 'fc.weight'", "local zip header")


@pytest.mark.parametrize("content", [b"", b"7767517\n3 2\n", b"\x89PNG\r\n\x1a\n" + b"\0" * 64])
def test_not_a_zip(tmp_path, content):
    path = tmp_path / "m.pnnx.bin"
    path.write_bytes(content)
    expect_error(path, "fc.weight", (2,), "f32", "not a zip archive", "pnnx")


def test_unsupported_zip_version(tmp_path, rng):
    good = write_zip(tmp_path / "good.bin", {"fc.weight": sample(rng, "f32", (8,)).tobytes()})
    data = bytearray(good.read_bytes())
    central = data.index(b"PK\x01\x02")
    data[central + 6:central + 8] = (244).to_bytes(2, "little")  # "version needed: 24.4"
    path = tmp_path / "m.pnnx.bin"
    path.write_bytes(bytes(data))
    expect_error(path, "fc.weight", (8,), "f32", "not a zip archive", "version")


def test_corrupted_archives_fail_cleanly(tmp_path, rng):
    """Seeded random byte edits, deletions and truncations of a valid archive: loading must work
    (the damage missed everything that matters) or raise a ModelFormatError."""
    import random

    param = write_constant_model(tmp_path, "(4,5)f32", {})
    good = write_zip(tmp_path / "good.bin", {"other.data": b"x" * 7,
                                             "const.data": sample(rng, "f32", (4, 5)).tobytes()})
    good_bytes = good.read_bytes()
    rnd = random.Random(0)
    outcomes: dict[str, int] = {}
    for _ in range(300):
        data = bytearray(good_bytes)
        for _ in range(rnd.randint(1, 4)):
            if not data:
                break
            k, roll = rnd.randrange(len(data)), rnd.random()
            if roll < 0.5:
                data[k] = rnd.randrange(256)
            elif roll < 0.75:
                del data[k]
            else:
                del data[k:]
        (tmp_path / "c.pnnx.bin").write_bytes(bytes(data))
        try:
            kuiper.load(param)
            outcome = "ok"
        except kuiper.ModelFormatError as e:
            assert "c.pnnx.bin" in str(e), str(e)
            outcome = "error"
        except Exception as e:
            raise AssertionError(f"{type(e).__name__}: {e} for bytes {bytes(data)!r}") from e
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert outcomes.get("error", 0) > 100, outcomes


def test_missing_bin_file(tmp_path):
    expect_error(tmp_path / "nothing.pnnx.bin", "fc.weight", (2,), "f32", "not found")


# --- through kuiper.load: the graph reads every declared weight at init --------------------------

def write_constant_model(tmp_path, data_decl: str, entries: dict[str, bytes], **zip_kw):
    param = tmp_path / "c.pnnx.param"
    param.write_text("\n".join([
        "7767517", "3 2",
        "pnnx.Input pnnx_input_0 0 1 0 #0=(2,3)f32",
        f"pnnx.Attribute const 0 1 1 @data={data_decl}",
        "pnnx.Output pnnx_output_0 2 0 0 1", ""]))
    write_zip(tmp_path / "c.pnnx.bin", entries, **zip_kw)
    return param


def test_load_reports_the_entry_of_a_bad_weight(tmp_path):
    param = write_constant_model(tmp_path, "(2,3)f32", {"const.data": b"\0" * 12})
    with pytest.raises(kuiper.ModelFormatError) as info:
        kuiper.load(param)
    message = str(info.value)
    assert "c.pnnx.bin" in message and "entry 'const.data'" in message and "needs 24" in message


def test_load_reports_a_missing_entry(tmp_path):
    param = write_constant_model(tmp_path, "(2)f32", {"other.data": b"\0" * 8})
    with pytest.raises(kuiper.ModelFormatError, match=r"entry 'const\.data'.*missing"):
        kuiper.load(param)


def test_load_reports_a_compressed_entry(tmp_path):
    param = write_constant_model(tmp_path, "(16)f32", {"const.data": b"\0" * 64},
                                 compression=zipfile.ZIP_DEFLATED)
    with pytest.raises(kuiper.ModelFormatError, match=r"entry 'const\.data'.*compressed"):
        kuiper.load(param)


def test_load_reads_a_bf16_constant_as_float32(tmp_path):
    t = torch.tensor([0.5, -3.0, 1.0e-2, 4096.0], dtype=torch.bfloat16)
    param = write_constant_model(tmp_path, "(4)bf16",
                                 {"const.data": t.view(torch.int16).numpy().tobytes()})
    graph = kuiper.load(param)
    x = np.ones((2, 3), np.float32)
    y, c = graph(x)
    np.testing.assert_array_equal(y, x)
    assert np.asarray(c).dtype == np.float32
    np.testing.assert_array_equal(c, t.float().numpy())
