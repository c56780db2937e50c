"""Lesson 6: im2col against PyTorch's unfold, and whole convolutions against F.conv2d."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from kuiper.course.lessons import check_array, implementation

REFERENCE = {
    "conv_output_size": "kuiper.layers.common.conv_geometry:conv_output_size",
    "im2col": "kuiper.layers.cpu_helpers.im2col:im2col",
}
ex = implementation(__file__, REFERENCE)

# (kernel, stride, padding, dilation, groups), with awkward sizes
CONFIGS = [
    ((3, 3), (1, 1), (1, 1), (1, 1), 1),
    ((3, 3), (2, 2), (1, 1), (1, 1), 1),
    ((1, 1), (1, 1), (0, 0), (1, 1), 1),
    ((2, 3), (2, 1), (0, 2), (1, 1), 1),
    ((3, 3), (1, 2), (2, 2), (2, 2), 1),
    ((3, 3), (1, 1), (1, 1), (1, 1), 3),
    ((3, 1), (2, 2), (1, 0), (2, 1), 2),
    ((3, 3), (1, 1), (1, 1), (1, 1), 6),  # depthwise: one input channel per group
]
IDS = [f"k{k[0]}x{k[1]}-s{s[0]}x{s[1]}-p{p[0]}x{p[1]}-d{d[0]}x{d[1]}-g{g}"
       for k, s, p, d, g in CONFIGS]


@pytest.mark.parametrize("size, kernel, stride, pad, dilation", [
    (8, 3, 1, (1, 1), 1), (7, 3, 2, (1, 1), 1), (224, 7, 2, (3, 3), 1), (5, 3, 1, (0, 0), 2),
    (10, 2, 3, (0, 1), 1), (1, 1, 1, (0, 0), 1), (9, 4, 2, (2, 1), 2),
])
def test_conv_output_size(size, kernel, stride, pad, dilation):
    x = torch.empty(1, 1, 1, size)
    x = F.pad(x, (pad[0], pad[1]))
    expected = F.conv1d(x[0], torch.empty(1, 1, kernel), stride=stride,
                        dilation=dilation).shape[-1]
    got = ex.conv_output_size(size, kernel, stride, pad, dilation)
    assert got == expected, (f"conv_output_size({size}, {kernel}, {stride}, {pad}, "
                             f"{dilation}) = {got}, expected {expected}")


def padded_input(rng, n, c, h, w, padding):
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    ph, pw = padding
    return x, np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))


@pytest.mark.parametrize("kernel, stride, padding, dilation, groups", CONFIGS, ids=IDS)
def test_im2col_matches_unfold(kernel, stride, padding, dilation, groups):
    rng = np.random.default_rng(6)
    n, c = 2, 6
    x, xp = padded_input(rng, n, c, 9, 7, padding)
    out = [ex.conv_output_size(s, k, st, (p, p), d)
           for s, k, st, p, d in zip(x.shape[2:], kernel, stride, padding, dilation)]
    cols = np.array(ex.im2col(xp, kernel, stride, dilation, out, groups))  # copy it at once
    unfold = F.unfold(torch.from_numpy(xp), kernel, dilation=dilation, stride=stride).numpy()
    k = c // groups * kernel[0] * kernel[1]
    expected = unfold.reshape(n, groups, k, out[0] * out[1])
    check_array(cols, expected, f"im2col (kernel {kernel}, stride {stride}, dilation "
                f"{dilation}, groups {groups})")


@pytest.mark.parametrize("kernel, stride, padding, dilation, groups", CONFIGS, ids=IDS)
def test_a_whole_convolution_is_one_gemm_per_group(kernel, stride, padding, dilation, groups):
    rng = np.random.default_rng(7)
    n, c, cout = 2, 6, 12
    x, xp = padded_input(rng, n, c, 11, 8, padding)
    w = rng.standard_normal((cout, c // groups, *kernel)).astype(np.float32)
    out = [ex.conv_output_size(s, k, st, (p, p), d)
           for s, k, st, p, d in zip(x.shape[2:], kernel, stride, padding, dilation)]
    cols = ex.im2col(xp, kernel, stride, dilation, out, groups)     # (N, G, K, P)
    y = np.matmul(w.reshape(groups, cout // groups, -1), cols)       # (N, G, Cout/G, P)
    expected = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), stride=stride,
                        padding=padding, dilation=dilation, groups=groups).numpy()
    check_array(y.reshape(expected.shape), expected, "convolution through your im2col",
                rtol=1e-4)


def test_the_ones_row_adds_the_bias_in_the_gemm():
    rng = np.random.default_rng(8)
    x, xp = padded_input(rng, 2, 4, 6, 5, (1, 1))
    w = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    cols = ex.im2col(xp, (3, 3), (1, 1), (1, 1), (6, 5), 2, ones_row=True)
    assert cols.shape == (2, 2, 2 * 9 + 1, 30), f"cols shape {cols.shape}"
    check_array(np.asarray(cols)[:, :, -1], np.ones((2, 2, 30), np.float32), "the ones row")
    wb = np.concatenate([w.reshape(2, 3, -1), b.reshape(2, 3, 1)], axis=2)  # [W | b]
    y = np.matmul(wb, cols).reshape(2, 6, 6, 5)
    expected = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b),
                        padding=1, groups=2).numpy()
    check_array(y, expected, "[W | b] @ [cols; 1]", rtol=1e-4)


def test_im2col_keeps_the_dtype():
    xp = np.arange(2 * 3 * 5 * 5, dtype=np.float32).reshape(2, 3, 5, 5)
    cols = ex.im2col(xp, (3, 3), (1, 1), (1, 1), (3, 3))
    assert cols.dtype == np.float32 and cols.shape == (2, 1, 27, 9)
