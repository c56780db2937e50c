"""ConvTranspose1d (nn.ConvTranspose1d, F.conv_transpose1d) against torch on both backends:
every valid combination of stride, padding, output_padding, dilation, groups and bias, with odd
channels and lengths, batch alternating between 1 and 3."""

import itertools
import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kuiper
from kuiper.testing import assert_close, run_operator

CHANNELS = [(13, 7, 1), (15, 9, 3), (13, 13, 13)]  # plain, grouped, depthwise
CASES = [case for case in itertools.product(
    [1, 2, 3],          # stride
    [0, 1, 2],          # padding
    [0, 1, 2],          # output_padding
    [1, 3],             # dilation
    CHANNELS,
    [True, False],      # bias
) if case[2] < max(case[0], case[3])]  # PyTorch: output_padding < stride or dilation

# tests/opencl/test_oclgrind.py may run these tests on the Oclgrind simulator: there only a
# sample runs (a prime step, so that every factor still varies).
OCLGRIND_STEP = 13 if os.environ.get("KUIPER_OCLGRIND") == "1" else 1


def params_of(cin, cout, kernel, stride, padding, output_padding, dilation, groups, bias):
    return {"in_channels": cin, "out_channels": cout, "kernel_size": (kernel,),
            "stride": (stride,), "padding": (padding,), "output_padding": (output_padding,),
            "dilation": (dilation,), "groups": groups, "bias": bias}


@pytest.mark.parametrize("index", range(len(CASES)))
def test_conv_transpose1d_all_parameter_combinations(backend, rng, index):
    if backend == "opencl" and index % OCLGRIND_STEP:
        pytest.skip(f"Oclgrind run: only every {OCLGRIND_STEP}th combination")
    stride, padding, output_padding, dilation, (cin, cout, groups), bias = CASES[index]
    x = rng.standard_normal((1 + 2 * (index % 2), cin, 11)).astype(np.float32)
    w = rng.standard_normal((cin, cout // groups, 4)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32) if bias else None
    weights = {"weight": w} if b is None else {"weight": w, "bias": b}
    params = params_of(cin, cout, 4, stride, padding, output_padding, dilation, groups, bias)
    (y,) = run_operator("nn.ConvTranspose1d", [x], params=params, weights=weights,
                        backend=backend)
    expected = F.conv_transpose1d(torch.from_numpy(x), torch.from_numpy(w),
                                  None if b is None else torch.from_numpy(b), stride, padding,
                                  output_padding, groups, dilation)
    assert_close(y, expected.numpy())


@pytest.mark.parametrize("shape,cout,kernel,stride", [
    ((2, 17, 70), 9, 3, 2),    # GEMM tiles with remainders (M 27, N 70, K 17)
    ((1, 4, 1), 3, 1, 1),      # length 1
    ((3, 5, 8), 2, 2, 2),      # patches that do not overlap (upsampling by 2)
])
def test_conv_transpose1d_sizes(backend, rng, shape, cout, kernel, stride):
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((shape[1], cout, kernel)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    params = params_of(shape[1], cout, kernel, stride, 0, 0, 1, 1, True)
    (y,) = run_operator("nn.ConvTranspose1d", [x], params=params,
                        weights={"weight": w, "bias": b}, backend=backend)
    expected = F.conv_transpose1d(*map(torch.from_numpy, (x, w, b)), stride=stride)
    assert_close(y, expected.numpy())


@pytest.mark.parametrize("groups,with_bias", [(1, True), (3, False), (6, True)])
def test_f_conv_transpose1d_weight_as_input(backend, rng, groups, with_bias):
    x = rng.standard_normal((2, 6, 9)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3)).astype(np.float32)
    b = rng.standard_normal(2 * groups).astype(np.float32)
    inputs = [x, w, b] if with_bias else [x, w]
    params = {"stride": (2,), "padding": (1,), "output_padding": (1,), "dilation": (2,),
              "groups": groups}
    (y,) = run_operator("F.conv_transpose1d", inputs, params=params, backend=backend)
    expected = F.conv_transpose1d(*map(torch.from_numpy, inputs), stride=2, padding=1,
                                  output_padding=1, groups=groups, dilation=2)
    assert_close(y, expected.numpy())


def test_conv_transpose1d_unbatched_input(backend, rng):
    x = rng.standard_normal((3, 6)).astype(np.float32)
    w = rng.standard_normal((3, 5, 2)).astype(np.float32)
    params = params_of(3, 5, 2, 2, 0, 0, 1, 1, False)
    (y,) = run_operator("nn.ConvTranspose1d", [x], params=params, weights={"weight": w},
                        backend=backend)
    expected = F.conv_transpose1d(torch.from_numpy(x), torch.from_numpy(w), stride=2)
    assert_close(y, expected.numpy())


@pytest.mark.parametrize("change,message", [
    ({"out_channels": 8}, r"expected \(13, 8, 4\)"),  # weight does not fit out_channels
    ({"groups": 2}, "divisible by groups=2"),
    ({"output_padding": (2,)}, "output_padding"),     # not below stride 2 / dilation 1
    ({"padding": "valid"}, "list of integers"),
])
def test_conv_transpose1d_bad_parameters(rng, change, message):
    x = rng.standard_normal((1, 13, 5)).astype(np.float32)
    w = rng.standard_normal((13, 7, 4)).astype(np.float32)
    params = {**params_of(13, 7, 4, 2, 0, 0, 1, 1, False), **change}
    with pytest.raises(kuiper.OperatorError, match=message):
        run_operator("nn.ConvTranspose1d", [x], params=params, weights={"weight": w})


def test_conv_transpose1d_bad_shapes(rng):
    w = rng.standard_normal((6, 2, 3)).astype(np.float32)
    x = rng.standard_normal((1, 6, 4, 4)).astype(np.float32)
    with pytest.raises(kuiper.ShapeError, match=r"2-D \(C, L...\) or 3-D"):
        run_operator("F.conv_transpose1d", [x, w], params={"stride": (1,)})
    x = rng.standard_normal((1, 6, 1)).astype(np.float32)
    with pytest.raises(kuiper.ShapeError, match="empty output"):
        run_operator("F.conv_transpose1d", [x, w], params={"padding": (2,)})


@pytest.mark.slow
def test_conv_transpose1d_from_a_pnnx_export(backend, export_model):
    """A real export: pnnx writes F.conv_transpose1d with a constant weight as
    nn.ConvTranspose1d too (with @weight); a ReLU after it is fused on the CPU."""

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up = torch.nn.ConvTranspose1d(4, 6, 3, stride=2, output_padding=1, groups=2)
            self.register_buffer("w", torch.randn(6, 2, 3))

        def forward(self, x):
            y = torch.relu(self.up(x))
            return F.conv_transpose1d(y, self.w, stride=3, padding=1, output_padding=2,
                                      groups=3, dilation=2)

    torch.manual_seed(0)
    net = Net().eval()
    x = torch.randn(2, 4, 9)
    path = export_model("conv_transpose1d_net", net, (x,))
    assert path.read_text().count("nn.ConvTranspose1d") == 2
    (y,) = kuiper.load(path, backend=backend).forward(x.numpy())
    with torch.no_grad():
        assert_close(y, net(x).numpy())
