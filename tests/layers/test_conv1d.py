"""Conv1d (nn.Conv1d, F.conv1d) against torch on both backends: every combination of stride,
padding (numbers, 'same', 'valid', pnnx's asymmetric pair), padding_mode, dilation, groups and
bias, odd channel counts, even kernel, batch alternating between 1 and 3."""

import itertools
import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kuiper
from kuiper.testing import assert_close, run_operator

CHANNELS = [(13, 7, 1), (15, 9, 3), (13, 26, 13)]  # plain, grouped, depthwise (multiplier 2)
CASES = [case for case in itertools.product(
    [1, 2],                                        # stride
    [0, 3, "same", "valid"],                       # padding
    ["zeros", "reflect", "replicate", "circular"],  # padding_mode
    [1, 2],                                        # dilation
    CHANNELS,
    [True, False],                                 # bias
) if not (case[1] == "same" and case[0] != 1)]


# tests/opencl/test_oclgrind.py runs these tests again on the Oclgrind simulator, which checks
# every memory access and is thousands of times slower than a real device: there only a sample
# of the combinations runs (a prime step, so that every factor still varies).
OCLGRIND_STEP = 13 if os.environ.get("KUIPER_OCLGRIND") == "1" else 1


def skip_unless_sampled(backend: str, index: int) -> None:
    if backend == "opencl" and index % OCLGRIND_STEP:
        pytest.skip(f"Oclgrind run: only every {OCLGRIND_STEP}th combination")


def params_of(cin, cout, kernel, stride, padding, dilation, groups, bias, mode):
    return {"in_channels": cin, "out_channels": cout, "kernel_size": (kernel,),
            "stride": (stride,), "padding": padding if isinstance(padding, str) else (padding,),
            "dilation": (dilation,), "groups": groups, "bias": bias, "padding_mode": mode}


def torch_conv1d(x, w, b, stride, padding, dilation, groups, mode):
    """PyTorch's nn.Conv1d with these weights on x (NumPy in, NumPy out)."""
    cout, cin_g, kernel = w.shape
    m = torch.nn.Conv1d(cin_g * groups, cout, kernel, stride, padding, dilation, groups,
                        b is not None, mode)
    with torch.no_grad():
        m.weight.copy_(torch.from_numpy(w))
        if b is not None:
            m.bias.copy_(torch.from_numpy(b))
        return m(torch.from_numpy(x)).numpy()


@pytest.mark.parametrize("index", range(len(CASES)))
def test_conv1d_all_parameter_combinations(backend, rng, index):
    skip_unless_sampled(backend, index)
    stride, padding, mode, dilation, (cin, cout, groups), bias = CASES[index]
    x = rng.standard_normal((1 + 2 * (index % 2), cin, 17)).astype(np.float32)
    w = rng.standard_normal((cout, cin // groups, 4)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32) if bias else None
    weights = {"weight": w} if b is None else {"weight": w, "bias": b}
    params = params_of(cin, cout, 4, stride, padding, dilation, groups, bias, mode)
    (y,) = run_operator("nn.Conv1d", [x], params=params, weights=weights, backend=backend)
    assert_close(y, torch_conv1d(x, w, b, stride, padding, dilation, groups, mode))


def test_conv1d_asymmetric_padding_pair(backend, rng):
    """pnnx writes padding=(before,after) after fusing a BatchNorm into a 'same' conv with an
    even kernel."""
    x = rng.standard_normal((2, 3, 10)).astype(np.float32)
    w = rng.standard_normal((5, 3, 4)).astype(np.float32)
    params = params_of(3, 5, 4, 1, 0, 1, 1, False, "zeros")
    params["padding"] = (1, 2)
    (y,) = run_operator("nn.Conv1d", [x], params=params, weights={"weight": w}, backend=backend)
    expected = F.conv1d(F.pad(torch.from_numpy(x), (1, 2)), torch.from_numpy(w))
    assert_close(y, expected.numpy())


@pytest.mark.parametrize("shape,cout,kernel,stride", [
    ((2, 7, 70), 70, 3, 1),     # GEMM tiles with remainders (M 70, N 68, K 21)
    ((2, 8, 1), 3, 1, 1),       # length 1, pointwise: no im2col
    ((1, 8, 9), 5, 1, 3),       # strided pointwise
])
def test_conv1d_sizes(backend, rng, shape, cout, kernel, stride):
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((cout, shape[1], kernel)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    params = params_of(shape[1], cout, kernel, stride, 0, 1, 1, True, "zeros")
    (y,) = run_operator("nn.Conv1d", [x], params=params, weights={"weight": w, "bias": b},
                        backend=backend)
    expected = F.conv1d(*map(torch.from_numpy, (x, w, b)), stride=stride)
    assert_close(y, expected.numpy())


@pytest.mark.parametrize("groups,with_bias,padding", [(1, True, "same"), (3, False, (2,)),
                                                      (9, True, "valid")])
def test_f_conv1d_weight_as_input(backend, rng, groups, with_bias, padding):
    x = rng.standard_normal((3, 9, 14)).astype(np.float32)
    w = rng.standard_normal((9, 9 // groups, 3)).astype(np.float32)
    b = rng.standard_normal(9).astype(np.float32)
    inputs = [x, w, b] if with_bias else [x, w]
    params = {"stride": (1,), "padding": padding, "dilation": (2,), "groups": groups}
    (y,) = run_operator("F.conv1d", inputs, params=params, backend=backend)
    pad = padding if isinstance(padding, str) else padding[0]
    expected = F.conv1d(*map(torch.from_numpy, inputs), padding=pad, dilation=2, groups=groups)
    assert_close(y, expected.numpy())


def test_conv1d_unbatched_input(backend, rng):
    x = rng.standard_normal((13, 8)).astype(np.float32)
    w = rng.standard_normal((4, 13, 3)).astype(np.float32)
    (y,) = run_operator("nn.Conv1d", [x], weights={"weight": w},
                        params=params_of(13, 4, 3, 1, 1, 1, 1, False, "zeros"), backend=backend)
    assert_close(y, F.conv1d(torch.from_numpy(x), torch.from_numpy(w), padding=1).numpy())


@pytest.mark.parametrize("change,message", [
    ({"kernel_size": (5,)}, r"expected \(7, 13, 5\)"),   # weight does not fit kernel_size
    ({"groups": 3}, "divisible by groups=3"),
    ({"padding": (1, 2, 3)}, "should have 1 values"),
])
def test_conv1d_bad_parameters(rng, change, message):
    x = rng.standard_normal((1, 13, 9)).astype(np.float32)
    w = rng.standard_normal((7, 13, 3)).astype(np.float32)
    params = {**params_of(13, 7, 3, 1, 0, 1, 1, False, "zeros"), **change}
    with pytest.raises(kuiper.OperatorError, match=message):
        run_operator("nn.Conv1d", [x], params=params, weights={"weight": w})


def test_conv1d_bad_shapes(rng):
    x = rng.standard_normal((2, 6, 5, 5)).astype(np.float32)
    w = rng.standard_normal((4, 6, 3)).astype(np.float32)
    with pytest.raises(kuiper.ShapeError, match="should be 2-D"):
        run_operator("F.conv1d", [x, w], params={"padding": (1,)})
    x = rng.standard_normal((2, 6, 2)).astype(np.float32)
    with pytest.raises(kuiper.ShapeError, match="circular padding"):
        run_operator("nn.Conv1d", [x], params=params_of(6, 4, 3, 1, 3, 1, 1, False, "circular"),
                     weights={"weight": w})


DEPTHWISE_CASES = [i for i, case in enumerate(CASES) if case[4] == (13, 26, 13)]


@pytest.mark.parametrize("method", ["taps", "columns"])
@pytest.mark.parametrize("index", DEPTHWISE_CASES)
def test_conv1d_depthwise_methods(rng, monkeypatch, method, index):
    """The NumPy backend's two depthwise methods (layers/cpu_helpers/tap_gemm.py), each forced
    on every depthwise combination: a 1-D signal runs as a one-row 2-D plane, and at these
    lengths "auto" would always pick the column matrix."""
    from kuiper.layers.cpu.conv2d import ConvNd

    monkeypatch.setattr(ConvNd, "depthwise_lowering", method)
    stride, padding, mode, dilation, (cin, cout, groups), bias = CASES[index]
    x = rng.standard_normal((1 + 2 * (index % 2), cin, 17)).astype(np.float32)
    w = rng.standard_normal((cout, 1, 4)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32) if bias else None
    weights = {"weight": w} if b is None else {"weight": w, "bias": b}
    params = params_of(cin, cout, 4, stride, padding, dilation, groups, bias, mode)
    (y,) = run_operator("nn.Conv1d", [x], params=params, weights=weights, backend="cpu")
    assert_close(y, torch_conv1d(x, w, b, stride, padding, dilation, groups, mode))
