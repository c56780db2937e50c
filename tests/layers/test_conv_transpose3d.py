"""ConvTranspose3d (nn.ConvTranspose3d, F.conv_transpose3d) against torch on both backends:
every valid combination of stride, padding, output_padding, dilation, groups and bias, with odd
channels, a non-cubic kernel and input, batch alternating between 1 and 2."""

import itertools
import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kuiper
from kuiper.testing import assert_close, run_operator

CHANNELS = [(5, 7, 1), (6, 9, 3), (4, 4, 4)]  # plain, grouped, depthwise
KERNEL = (2, 3, 2)


def valid(stride, dilation, output_padding):
    """PyTorch: output_padding must be smaller than the stride or the dilation (per axis)."""
    return all(o < max(s, d) for o, s, d in zip(output_padding, stride, dilation))


CASES = [case for case in itertools.product(
    [(1, 1, 1), (2, 1, 3)],                 # stride
    [(0, 0, 0), (1, 1, 0)],                 # padding
    [(0, 0, 0), (1, 0, 2), (1, 1, 0)],      # output_padding
    [(1, 1, 1), (1, 2, 1)],                 # dilation
    CHANNELS,
    [True, False],                          # bias
) if valid(case[0], case[3], case[2])]

# tests/opencl/test_oclgrind.py may run these tests on the Oclgrind simulator: there only a
# sample runs (a prime step, so that every factor still varies).
OCLGRIND_STEP = 13 if os.environ.get("KUIPER_OCLGRIND") == "1" else 1


def params_of(cin, cout, kernel, stride, padding, output_padding, dilation, groups, bias):
    return {"in_channels": cin, "out_channels": cout, "kernel_size": kernel, "stride": stride,
            "padding": padding, "output_padding": output_padding, "dilation": dilation,
            "groups": groups, "bias": bias}


@pytest.mark.parametrize("index", range(len(CASES)))
def test_conv_transpose3d_all_parameter_combinations(backend, rng, index):
    if backend == "opencl" and index % OCLGRIND_STEP:
        pytest.skip(f"Oclgrind run: only every {OCLGRIND_STEP}th combination")
    stride, padding, output_padding, dilation, (cin, cout, groups), bias = CASES[index]
    x = rng.standard_normal((1 + index % 2, cin, 3, 4, 5)).astype(np.float32)
    w = rng.standard_normal((cin, cout // groups, *KERNEL)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32) if bias else None
    weights = {"weight": w} if b is None else {"weight": w, "bias": b}
    params = params_of(cin, cout, KERNEL, stride, padding, output_padding, dilation, groups,
                       bias)
    (y,) = run_operator("nn.ConvTranspose3d", [x], params=params, weights=weights,
                        backend=backend)
    expected = F.conv_transpose3d(torch.from_numpy(x), torch.from_numpy(w),
                                  None if b is None else torch.from_numpy(b), stride, padding,
                                  output_padding, groups, dilation)
    assert_close(y, expected.numpy())


@pytest.mark.parametrize("shape,cout,kernel,stride", [
    ((1, 17, 3, 5, 4), 8, (2, 2, 3), (2, 2, 1)),  # GEMM tiles with remainders (M 96, K 17)
    ((1, 4, 1, 1, 1), 3, (1, 1, 1), (1, 1, 1)),   # sizes 1
    ((2, 5, 2, 4, 3), 2, (2, 2, 2), (2, 2, 2)),   # patches that do not overlap (3-D U-Net)
])
def test_conv_transpose3d_sizes(backend, rng, shape, cout, kernel, stride):
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((shape[1], cout, *kernel)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    params = params_of(shape[1], cout, kernel, stride, (0, 0, 0), (0, 0, 0), (1, 1, 1), 1, True)
    (y,) = run_operator("nn.ConvTranspose3d", [x], params=params,
                        weights={"weight": w, "bias": b}, backend=backend)
    expected = F.conv_transpose3d(*map(torch.from_numpy, (x, w, b)), stride=stride)
    assert_close(y, expected.numpy())


@pytest.mark.parametrize("groups,with_bias", [(1, True), (3, False), (6, True)])
def test_f_conv_transpose3d_weight_as_input(backend, rng, groups, with_bias):
    x = rng.standard_normal((2, 6, 3, 4, 3)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 2, 3)).astype(np.float32)
    b = rng.standard_normal(2 * groups).astype(np.float32)
    inputs = [x, w, b] if with_bias else [x, w]
    params = {"stride": (2, 1, 2), "padding": (1, 0, 1), "output_padding": (1, 0, 0),
              "dilation": (1, 1, 1), "groups": groups}
    (y,) = run_operator("F.conv_transpose3d", inputs, params=params, backend=backend)
    expected = F.conv_transpose3d(*map(torch.from_numpy, inputs), stride=(2, 1, 2),
                                  padding=(1, 0, 1), output_padding=(1, 0, 0), groups=groups)
    assert_close(y, expected.numpy())


def test_conv_transpose3d_unbatched_input(backend, rng):
    x = rng.standard_normal((3, 2, 4, 3)).astype(np.float32)
    w = rng.standard_normal((3, 5, 2, 2, 2)).astype(np.float32)
    params = params_of(3, 5, (2, 2, 2), (2, 2, 2), (0, 0, 0), (0, 0, 0), (1, 1, 1), 1, False)
    (y,) = run_operator("nn.ConvTranspose3d", [x], params=params, weights={"weight": w},
                        backend=backend)
    expected = F.conv_transpose3d(torch.from_numpy(x), torch.from_numpy(w), stride=2)
    assert_close(y, expected.numpy())


@pytest.mark.parametrize("change,message", [
    ({"out_channels": 8}, r"expected \(5, 8, 2, 3, 2\)"),  # weight does not fit out_channels
    ({"groups": 2}, "divisible by groups=2"),
    ({"output_padding": (0, 0, 2)}, "output_padding"),     # not below stride 2 / dilation 1
    ({"padding": "same"}, "list of integers"),
    ({"padding_mode": "reflect"}, "padding_mode"),
])
def test_conv_transpose3d_bad_parameters(rng, change, message):
    x = rng.standard_normal((1, 5, 3, 3, 3)).astype(np.float32)
    w = rng.standard_normal((5, 7, *KERNEL)).astype(np.float32)
    params = {**params_of(5, 7, KERNEL, (2, 2, 2), (0, 0, 0), (0, 0, 0), (1, 1, 1), 1, False),
              **change}
    with pytest.raises(kuiper.OperatorError, match=message):
        run_operator("nn.ConvTranspose3d", [x], params=params, weights={"weight": w})


def test_conv_transpose3d_bad_shapes(rng):
    x = rng.standard_normal((1, 5, 2, 2, 2)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 3, 3)).astype(np.float32)
    with pytest.raises(kuiper.ShapeError, match="input has 5 channels"):
        run_operator("F.conv_transpose3d", [x, w], params={"stride": (1, 1, 1)})
    x = rng.standard_normal((1, 6, 1, 1, 1)).astype(np.float32)
    with pytest.raises(kuiper.ShapeError, match="empty output"):
        run_operator("F.conv_transpose3d", [x, w], params={"padding": (2, 2, 2)})


@pytest.mark.slow
def test_conv_transpose3d_from_a_pnnx_export(backend, export_model):
    """A real export: a 3-D U-Net-style upsampling, a ReLU after it (fused on the CPU), and
    F.conv_transpose3d with its weight as an input."""

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up = torch.nn.ConvTranspose3d(4, 6, (2, 3, 3), stride=(2, 1, 2),
                                               padding=(0, 1, 1), output_padding=(1, 0, 1),
                                               groups=2, dilation=(1, 2, 1))

        def forward(self, x, w):
            return F.conv_transpose3d(torch.relu(self.up(x)), w, stride=2, groups=3)

    torch.manual_seed(0)
    net = Net().eval()
    x, w = torch.randn(1, 4, 3, 5, 4), torch.randn(6, 1, 2, 2, 2)
    path = export_model("conv_transpose3d_net", net, (x, w))
    text = path.read_text()
    assert "nn.ConvTranspose3d" in text and "F.conv_transpose3d" in text
    (y,) = kuiper.load(path, backend=backend).forward(x.numpy(), w.numpy())
    with torch.no_grad():
        assert_close(y, net(x, w).numpy())
