"""Lesson 2: index arithmetic on NCHW tensors, checked against NumPy and PyTorch."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from kuiper.course.lessons import check_array, implementation

REFERENCE = {
    "contiguous_strides": "kuiper.layers.common.datamove:contiguous_strides",
    "broadcast_strides": "kuiper.layers.opencl_helpers.buffers:broadcast_strides",
    "source_table": "kuiper.layers.cpu.pad:source_table",
    "flatten_shape": "kuiper.layers.cpu.reshape:flatten_shape",
}
ex = implementation(__file__, REFERENCE)

SHAPES = [(2, 3, 4, 5), (13,), (7, 1, 3), (1, 1, 1), (3, 17, 1, 129)]


@pytest.mark.parametrize("shape", SHAPES)
def test_contiguous_strides_match_numpy(shape):
    expected = tuple(s // 4 for s in np.empty(shape, np.float32).strides)
    got = ex.contiguous_strides(shape)
    assert tuple(got) == expected, f"contiguous_strides({shape}) = {got}, expected {expected}"


def test_contiguous_strides_find_every_element():
    x = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    strides = ex.contiguous_strides(x.shape)
    flat = x.ravel()
    for index in [(0, 0, 0, 0), (1, 2, 3, 4), (1, 0, 2, 1), (0, 2, 0, 3)]:
        offset = sum(i * s for i, s in zip(index, strides))
        assert flat[offset] == x[index], f"element {index} is not at offset {offset}"


@pytest.mark.parametrize("shape, out_shape", [
    ((3, 1), (2, 3, 4)), ((4,), (2, 3, 4)), ((1, 3, 1, 1), (2, 3, 5, 7)), ((2, 3), (2, 3)),
    ((1,), (5,)), ((5, 1, 7), (5, 6, 7)),
])
def test_broadcast_strides_read_what_numpy_broadcasting_reads(shape, out_shape):
    x = np.arange(int(np.prod(shape))).reshape(shape)
    strides = ex.broadcast_strides(shape, out_shape)
    assert len(strides) == len(out_shape), f"expected {len(out_shape)} strides, got {strides}"
    expected = np.broadcast_to(x, out_shape)
    got = np.empty(out_shape, x.dtype)
    for index in np.ndindex(*out_shape):
        got[index] = x.ravel()[sum(i * s for i, s in zip(index, strides))]
    check_array(got, expected, f"x of shape {shape} read through strides {strides}")
    padded = (1,) * (len(out_shape) - len(shape)) + tuple(shape)
    for d, (n, m) in enumerate(zip(padded, out_shape)):
        if n == 1 and m > 1:
            assert strides[d] == 0, f"dim {d} is broadcast: its stride should be 0"


NP_MODE = {"constant": "constant", "reflect": "reflect", "replicate": "edge",
           "circular": "wrap"}


def cropped(size, before, after):
    """What is left of arange(size) after the negative amounts crop it (cropping comes first)."""
    return np.arange(size)[max(0, -before):size - max(0, -after)]


def valid(size, before, after, mode):
    """PyTorch's limits: reflect pads less than the size, circular at most the size."""
    longest = max(before, after, 0)
    n = len(cropped(size, before, after))
    return {"reflect": longest < n, "circular": longest <= n}.get(mode, True)


CASES = [(size, before, after, mode)
         for size, before, after in [(4, 2, 2), (5, 0, 3), (5, 3, 0), (6, 1, 4), (1, 2, 2),
                                     (7, -2, 3), (7, 2, -3), (8, -3, -2), (3, 0, 0)]
         for mode in NP_MODE if valid(size, before, after, mode)]


@pytest.mark.parametrize("size, before, after, mode", CASES)
def test_source_table(size, before, after, mode):
    pad = (max(before, 0), max(after, 0))
    extra = {"constant_values": -1} if mode == "constant" else {}
    expected = np.pad(cropped(size, before, after), pad, mode=NP_MODE[mode], **extra)
    got = ex.source_table(size, before, after, mode)
    check_array(np.asarray(got), expected, f"source_table({size}, {before}, {after}, {mode!r})")


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_padding_an_image_by_gathering_through_the_tables(mode):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
    pads = (2, 1, 1, 3)  # F.pad order: (left, right, top, bottom)
    rows = np.asarray(ex.source_table(5, pads[2], pads[3], mode))
    cols = np.asarray(ex.source_table(6, pads[0], pads[1], mode))
    y = x[:, :, np.maximum(rows, 0)[:, None], np.maximum(cols, 0)[None, :]]
    y = np.where((rows[:, None] >= 0) & (cols[None, :] >= 0), y, np.float32(0))
    expected = F.pad(torch.from_numpy(x), pads, mode=mode).numpy()
    check_array(y, expected, f"{mode} padding built from your source tables")


@pytest.mark.parametrize("shape, start, end", [
    ((2, 3, 4, 5), 1, -1), ((2, 3, 4, 5), 0, -1), ((2, 3, 4, 5), 1, 2), ((2, 3, 4, 5), -2, -1),
    ((7,), 0, 0), ((2, 1, 3), 0, 1), ((4, 5), 1, 1), ((), 0, -1),
])
def test_flatten_shape_matches_torch(shape, start, end):
    expected = tuple(torch.flatten(torch.empty(shape), start, end).shape)
    got = ex.flatten_shape(shape, start, end)
    assert tuple(got) == expected, (f"flatten_shape({shape}, {start}, {end}) = {got}, "
                                    f"expected {expected}")


def test_flatten_moves_no_element():
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    flat = np.frombuffer(x.tobytes(), np.float32).reshape(ex.flatten_shape(x.shape, 1))
    check_array(flat, torch.flatten(torch.from_numpy(x), 1).numpy(), "x flattened from dim 1")


@pytest.mark.parametrize("start, end", [(2, 1), (0, 4), (-5, -1)])
def test_flatten_shape_refuses_bad_dims(start, end):
    with pytest.raises(ValueError):
        ex.flatten_shape((2, 3, 4, 5), start, end)
