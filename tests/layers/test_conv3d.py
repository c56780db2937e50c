"""Conv3d (nn.Conv3d, F.conv3d) against torch on both backends: every combination of stride,
padding (numbers, 'same', 'valid'), padding_mode, dilation, groups and bias, odd channel
counts, a kernel with an even axis, a non-cubic input, batch alternating between 1 and 2."""

import itertools
import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kuiper
from kuiper.testing import assert_close, run_operator

CHANNELS = [(5, 7, 1), (6, 9, 3), (4, 8, 4)]  # plain, grouped, depthwise (multiplier 2)
KERNEL = (3, 2, 3)
CASES = [case for case in itertools.product(
    [(1, 1, 1), (2, 1, 3)],                        # stride
    [(0, 0, 0), (1, 0, 2), "same", "valid"],       # padding
    ["zeros", "reflect", "replicate", "circular"],  # padding_mode
    [(1, 1, 1), (1, 2, 2)],                        # dilation
    CHANNELS,
    [True, False],                                 # bias
) if not (case[1] == "same" and case[0] != (1, 1, 1))]

# tests/opencl/test_oclgrind.py may run these tests on the Oclgrind simulator, thousands of
# times slower than a real device: there only a sample runs (a prime step, so every factor
# still varies).
OCLGRIND_STEP = 13 if os.environ.get("KUIPER_OCLGRIND") == "1" else 1


def skip_unless_sampled(backend: str, index: int) -> None:
    if backend == "opencl" and index % OCLGRIND_STEP:
        pytest.skip(f"Oclgrind run: only every {OCLGRIND_STEP}th combination")


def params_of(cin, cout, kernel, stride, padding, dilation, groups, bias, mode):
    return {"in_channels": cin, "out_channels": cout, "kernel_size": kernel, "stride": stride,
            "padding": padding, "dilation": dilation, "groups": groups, "bias": bias,
            "padding_mode": mode}


@pytest.mark.parametrize("index", range(len(CASES)))
def test_conv3d_all_parameter_combinations(backend, rng, index):
    skip_unless_sampled(backend, index)
    stride, padding, mode, dilation, (cin, cout, groups), bias = CASES[index]
    x = rng.standard_normal((1 + index % 2, cin, 5, 6, 7)).astype(np.float32)
    w = rng.standard_normal((cout, cin // groups, *KERNEL)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32) if bias else None
    weights = {"weight": w} if b is None else {"weight": w, "bias": b}
    params = params_of(cin, cout, KERNEL, stride, padding, dilation, groups, bias, mode)
    (y,) = run_operator("nn.Conv3d", [x], params=params, weights=weights, backend=backend)
    m = torch.nn.Conv3d(cin, cout, KERNEL, stride, padding, dilation, groups, bias, mode)
    with torch.no_grad():
        m.weight.copy_(torch.from_numpy(w))
        if bias:
            m.bias.copy_(torch.from_numpy(b))
        assert_close(y, m(torch.from_numpy(x)).numpy())


def test_conv3d_padding_in_f_pad_order(backend, rng):
    """With a padding_mode other than zeros pnnx writes PyTorch's
    `_reversed_padding_repeated_twice`: six values, last axis first."""
    x = rng.standard_normal((2, 3, 5, 6, 7)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3, 3)).astype(np.float32)
    params = params_of(3, 4, (3, 3, 3), (1, 1, 1), (2, 2, 0, 0, 1, 1), (1, 1, 1), 1, False,
                       "circular")
    (y,) = run_operator("nn.Conv3d", [x], params=params, weights={"weight": w}, backend=backend)
    padded = F.pad(torch.from_numpy(x), (2, 2, 0, 0, 1, 1), mode="circular")
    assert_close(y, F.conv3d(padded, torch.from_numpy(w)).numpy())


@pytest.mark.parametrize("shape,cout,kernel,stride", [
    ((2, 7, 3, 5, 9), 33, (2, 3, 3), (1, 1, 1)),  # GEMM tiles with remainders (M 33, K 126)
    ((2, 8, 1, 1, 1), 3, (1, 1, 1), (1, 1, 1)),   # sizes 1, pointwise: no im2col
    ((1, 8, 4, 5, 9), 5, (1, 1, 1), (2, 3, 2)),   # strided pointwise
])
def test_conv3d_sizes(backend, rng, shape, cout, kernel, stride):
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((cout, shape[1], *kernel)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    params = params_of(shape[1], cout, kernel, stride, (0, 0, 0), (1, 1, 1), 1, True, "zeros")
    (y,) = run_operator("nn.Conv3d", [x], params=params, weights={"weight": w, "bias": b},
                        backend=backend)
    expected = F.conv3d(*map(torch.from_numpy, (x, w, b)), stride=stride)
    assert_close(y, expected.numpy())


@pytest.mark.parametrize("groups,with_bias,padding", [(1, True, "same"), (3, False, (2, 0, 1)),
                                                      (6, True, "valid")])
def test_f_conv3d_weight_as_input(backend, rng, groups, with_bias, padding):
    x = rng.standard_normal((2, 6, 4, 7, 5)).astype(np.float32)
    w = rng.standard_normal((6, 6 // groups, 3, 2, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    inputs = [x, w, b] if with_bias else [x, w]
    params = {"stride": (1, 1, 1), "padding": padding, "dilation": (1, 2, 1), "groups": groups}
    (y,) = run_operator("F.conv3d", inputs, params=params, backend=backend)
    expected = F.conv3d(*map(torch.from_numpy, inputs), padding=padding, dilation=(1, 2, 1),
                        groups=groups)
    assert_close(y, expected.numpy())


def test_conv3d_unbatched_input(backend, rng):
    x = rng.standard_normal((5, 4, 6, 3)).astype(np.float32)
    w = rng.standard_normal((4, 5, 3, 3, 2)).astype(np.float32)
    params = params_of(5, 4, (3, 3, 2), (1, 1, 1), (1, 1, 0), (1, 1, 1), 1, False, "zeros")
    (y,) = run_operator("nn.Conv3d", [x], weights={"weight": w}, params=params, backend=backend)
    expected = F.conv3d(torch.from_numpy(x), torch.from_numpy(w), padding=(1, 1, 0))
    assert_close(y, expected.numpy())


@pytest.mark.parametrize("change,message", [
    ({"kernel_size": (3, 3, 3)}, r"expected \(7, 13, 3, 3, 3\)"),  # weight does not fit
    ({"groups": 3}, "divisible by groups=3"),
    ({"padding": (1, 2)}, "should have 3 values"),
    ({"padding": "same", "stride": (1, 2, 1)}, "'same' needs stride 1"),
])
def test_conv3d_bad_parameters(rng, change, message):
    x = rng.standard_normal((1, 13, 5, 5, 5)).astype(np.float32)
    w = rng.standard_normal((7, 13, 3, 2, 3)).astype(np.float32)
    params = {**params_of(13, 7, (3, 2, 3), (1, 1, 1), (0, 0, 0), (1, 1, 1), 1, False, "zeros"),
              **change}
    with pytest.raises(kuiper.OperatorError, match=message):
        run_operator("nn.Conv3d", [x], params=params, weights={"weight": w})


def test_conv3d_bad_shapes(rng):
    x = rng.standard_normal((2, 6, 5, 5, 5)).astype(np.float32)
    w = rng.standard_normal((4, 6, 3, 3, 3)).astype(np.float32)
    with pytest.raises(kuiper.ShapeError, match=r"4-D \(C, L...\) or 5-D"):
        run_operator("F.conv3d", [x[None], w], params={"padding": (1, 1, 1)})
    with pytest.raises(kuiper.ShapeError, match="input has 5 channels"):
        run_operator("F.conv3d", [x[:, :5], w], params={"padding": (1, 1, 1)})
    with pytest.raises(kuiper.ShapeError, match="too small"):
        run_operator("F.conv3d", [x[:, :, :2], w], params={"padding": (0, 0, 0)})


@pytest.mark.slow
def test_conv3d_from_a_pnnx_export(backend, export_model):
    """A real export: reflect padding comes in F.pad order, 'same' stays a string, a ReLU
    follows (fused on the CPU), and F.conv3d takes its weight as an input."""

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Conv3d(3, 6, (3, 2, 3), padding=(1, 0, 2), padding_mode="reflect")
            self.b = torch.nn.Conv3d(6, 6, 3, stride=(1, 2, 1), groups=3, bias=False)
            self.c = torch.nn.Conv3d(6, 4, (2, 3, 3), padding="same")

        def forward(self, x, w):
            y = self.c(torch.relu(self.b(self.a(x))))
            return F.conv3d(y, w, None, 1, "valid", (1, 2, 1))

    torch.manual_seed(0)
    net = Net().eval()
    x, w = torch.randn(1, 3, 6, 9, 7), torch.randn(5, 4, 2, 2, 2)
    path = export_model("conv3d_net", net, (x, w))
    text = path.read_text()
    assert "nn.Conv3d" in text and "padding=same" in text and "F.conv3d" in text
    assert "padding=(2,2,0,0,1,1)" in text
    (y,) = kuiper.load(path, backend=backend).forward(x.numpy(), w.numpy())
    with torch.no_grad():
        assert_close(y, net(x, w).numpy())
