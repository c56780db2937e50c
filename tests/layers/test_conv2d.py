"""Conv2d (nn.Conv2d, F.conv2d) against torch on both backends.

Every combination of stride, padding (numbers, 'same', 'valid'), padding_mode, dilation, groups
(plain, grouped, depthwise with a channel multiplier) and bias is run on a non-square input with
a non-square kernel and odd channel counts; the batch alternates between 1 and 3.
"""

import itertools
import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kuiper
from kuiper.layers.cpu.conv2d import ConvNd
from kuiper.layers.cpu_helpers import tap_gemm
from kuiper.testing import assert_close, run_operator

# (in_channels, out_channels, groups): plain, grouped, depthwise with channel multiplier 2
CHANNELS = [(13, 7, 1), (15, 9, 3), (13, 26, 13)]
MODES = ["zeros", "reflect", "replicate", "circular"]
CASES = [case for case in itertools.product(
    [1, (2, 1)],                   # stride
    [0, (1, 2), "same", "valid"],  # padding
    MODES,                         # padding_mode
    [1, (2, 1)],                   # dilation
    CHANNELS,
    [True, False],                 # bias
) if not (case[1] == "same" and case[0] != 1)]  # PyTorch: 'same' needs stride 1


# tests/opencl/test_oclgrind.py runs these tests again on the Oclgrind simulator, which checks
# every memory access and is thousands of times slower than a real device: there only a sample
# of the combinations runs (a prime step, so that every factor still varies).
OCLGRIND_STEP = 13 if os.environ.get("KUIPER_OCLGRIND") == "1" else 1


def skip_unless_sampled(backend: str, index: int) -> None:
    if backend == "opencl" and index % OCLGRIND_STEP:
        pytest.skip(f"Oclgrind run: only every {OCLGRIND_STEP}th combination")


def pair(v):
    return tuple(v) if isinstance(v, tuple) else (v, v)


def conv_params(cin, cout, kernel, stride=1, padding=0, dilation=1, groups=1, bias=True,
                padding_mode="zeros"):
    """nn.Conv2d parameters as pnnx writes them (tuples, 'same'/'valid' as strings)."""
    return {"in_channels": cin, "out_channels": cout, "kernel_size": pair(kernel),
            "stride": pair(stride),
            "padding": padding if isinstance(padding, str) else pair(padding),
            "dilation": pair(dilation), "groups": groups, "bias": bias,
            "padding_mode": padding_mode}


def torch_conv(module_cls, x, w, b, **params):
    m = module_cls(params["in_channels"], params["out_channels"], w.shape[2:],
                   stride=params["stride"], padding=params["padding"],
                   dilation=params["dilation"], groups=params["groups"], bias=b is not None,
                   padding_mode=params["padding_mode"])
    with torch.no_grad():
        m.weight.copy_(torch.from_numpy(w))
        if b is not None:
            m.bias.copy_(torch.from_numpy(b))
        return m(torch.from_numpy(x)).numpy()


@pytest.mark.parametrize("index", range(len(CASES)))
def test_conv2d_all_parameter_combinations(backend, rng, index):
    skip_unless_sampled(backend, index)
    stride, padding, mode, dilation, (cin, cout, groups), bias = CASES[index]
    batch = 1 + 2 * (index % 2)
    x = rng.standard_normal((batch, cin, 9, 11)).astype(np.float32)
    w = rng.standard_normal((cout, cin // groups, 3, 2)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32) if bias else None
    params = conv_params(cin, cout, (3, 2), stride, padding, dilation, groups, bias, mode)
    weights = {"weight": w} if b is None else {"weight": w, "bias": b}
    (y,) = run_operator("nn.Conv2d", [x], params=params, weights=weights, backend=backend)
    assert_close(y, torch_conv(torch.nn.Conv2d, x, w, b, **params))


needs_taps = pytest.mark.skipif(
    not tap_gemm.available(),
    reason="the tap lowering needs NumPy's BLAS through cpu_helpers.blas, not found here")


@needs_taps
@pytest.mark.parametrize("index", range(len(CASES)))
def test_conv2d_tap_lowering_all_parameter_combinations(rng, monkeypatch, index):
    """The CPU's second lowering (one GEMM per kernel tap) on every combination above.

    Small channel counts never choose it by themselves, so it is forced here (the depthwise
    combinations keep their own path)."""
    monkeypatch.setattr(ConvNd, "lowering", "taps")
    stride, padding, mode, dilation, (cin, cout, groups), bias = CASES[index]
    x = rng.standard_normal((1 + 2 * (index % 2), cin, 9, 11)).astype(np.float32)
    w = rng.standard_normal((cout, cin // groups, 3, 2)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32) if bias else None
    params = conv_params(cin, cout, (3, 2), stride, padding, dilation, groups, bias, mode)
    weights = {"weight": w} if b is None else {"weight": w, "bias": b}
    (y,) = run_operator("nn.Conv2d", [x], params=params, weights=weights, backend="cpu")
    assert_close(y, torch_conv(torch.nn.Conv2d, x, w, b, **params))


DEPTHWISE_CASES = [i for i, case in enumerate(CASES) if case[4][2] > 1 and case[4][0] == case[4][2]]


@pytest.mark.parametrize("method", ["taps", "columns"])
@pytest.mark.parametrize("index", DEPTHWISE_CASES)
def test_conv2d_depthwise_methods_all_parameter_combinations(rng, monkeypatch, method, index):
    """Both ways the NumPy backend runs a depthwise convolution, each forced on every
    depthwise combination above (the "auto" choice by grid length is the default run's)."""
    monkeypatch.setattr(ConvNd, "depthwise_lowering", method)
    stride, padding, mode, dilation, (cin, cout, groups), bias = CASES[index]
    x = rng.standard_normal((1 + 2 * (index % 2), cin, 9, 11)).astype(np.float32)
    w = rng.standard_normal((cout, 1, 3, 2)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32) if bias else None
    params = conv_params(cin, cout, (3, 2), stride, padding, dilation, groups, bias, mode)
    weights = {"weight": w} if b is None else {"weight": w, "bias": b}
    (y,) = run_operator("nn.Conv2d", [x], params=params, weights=weights, backend="cpu")
    assert_close(y, torch_conv(torch.nn.Conv2d, x, w, b, **params))


@pytest.mark.parametrize("shape,stride", [
    ((2, 37, 61, 45), 1),   # 60 rows of 47 + 45 grid positions per channel, two images
    ((1, 24, 97, 91), 2),   # stride 2: phases of 47 columns, 49 rows
    ((1, 24, 57, 63), 2),
    ((3, 40, 5, 3), 1),
])
@pytest.mark.parametrize("blocks", ["default", "one channel each", "a shorter last block"])
@pytest.mark.parametrize("multiplier", [1, 2])
def test_depthwise_auto_in_blocks_of_channels(rng, monkeypatch, shape, stride, blocks,
                                              multiplier):
    """The default ("auto": columns) with the channels in blocks of tap_gemm.COLUMN_BLOCK_BYTES:
    as set, one channel per block, and blocks that leave a shorter last one; one output
    channel per input channel, and two (a channel multiplier)."""
    n, c = shape[:2]
    ho, wo = (shape[2] - 1) // stride + 1, (shape[3] - 1) // stride + 1
    length = (ho - 1) * -(-(shape[3] + 2) // stride) + wo  # tap_gemm.wide_grid's
    per_channel = 4 * 9 * length                            # bytes of one channel's columns
    if blocks == "one channel each":
        monkeypatch.setattr(tap_gemm, "COLUMN_BLOCK_BYTES", per_channel)
    elif blocks == "a shorter last block":
        size = next(k for k in range(2, c) if c % k)
        monkeypatch.setattr(tap_gemm, "COLUMN_BLOCK_BYTES", size * per_channel)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((c * multiplier, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(c * multiplier).astype(np.float32)
    params = conv_params(c, c * multiplier, 3, stride, 1, 1, c)
    (y,) = run_operator("nn.Conv2d", [x], params=params, weights={"weight": w, "bias": b})
    assert_close(y, torch_conv(torch.nn.Conv2d, x, w, b, **params))


@needs_taps
@pytest.mark.parametrize("lowering", ["im2col", "taps", "auto"])
@pytest.mark.parametrize("shape,cout,kernel,stride,dilation,groups", [
    ((1, 64, 29, 31), 48, 3, 1, 1, 1),   # a ResNet-like stage, odd sizes: auto picks taps
    ((2, 40, 23, 27), 33, 3, 2, 1, 1),   # stride 2: four phases
    ((1, 36, 25, 22), 20, 3, (3, 2), (2, 3), 1),  # stride 3x2 with dilation 2x3
    ((2, 64, 21, 24), 30, 5, 1, 1, 2),   # two groups of 32 channels
    ((1, 96, 7, 9), 128, 3, 1, 1, 1),    # a thin late stage: auto picks im2col
])
def test_conv2d_lowerings_on_many_channels(rng, monkeypatch, lowering, shape, cout, kernel,
                                           stride, dilation, groups):
    monkeypatch.setattr(ConvNd, "lowering", lowering)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((cout, shape[1] // groups, kernel, kernel)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    params = conv_params(shape[1], cout, kernel, stride, kernel // 2, dilation, groups)
    (y,) = run_operator("nn.Conv2d", [x], params=params, weights={"weight": w, "bias": b})
    assert_close(y, torch_conv(torch.nn.Conv2d, x, w, b, **params))


@pytest.mark.parametrize("kernel,stride,padding", [
    (1, 1, 0),         # the input is the column matrix: no im2col
    (1, 2, 0),         # strided 1x1 (ResNet downsample)
    (1, (1, 3), 1),    # 1x1 with padding
    (7, 2, 3),         # ResNet stem
    ((1, 5), 1, (0, 2)),
])
def test_conv2d_kernel_shapes(backend, rng, kernel, stride, padding):
    x = rng.standard_normal((2, 5, 17, 12)).astype(np.float32)
    w = rng.standard_normal((6, 5, *pair(kernel))).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    params = conv_params(5, 6, kernel, stride, padding)
    (y,) = run_operator("nn.Conv2d", [x], params=params, weights={"weight": w, "bias": b},
                        backend=backend)
    assert_close(y, torch_conv(torch.nn.Conv2d, x, w, b, **params))


@pytest.mark.parametrize("gemm", ["gemm_tiled", "gemm_blocked"])
@pytest.mark.parametrize("shape,cout,groups", [
    ((1, 3, 9, 9), 70, 1),     # GEMM tiles with remainders on every side (M 70, N 81, K 27)
    ((3, 1, 1, 1), 2, 1),      # sizes 1 everywhere
    ((2, 16, 8, 8), 64, 1),    # exact multiples of the tile sizes (M 64, N 64, K 144)
    ((2, 21, 9, 7), 15, 3),    # groups: one GEMM per (image, group)
])
def test_conv2d_gemm_edges(backend, rng, monkeypatch, gemm, shape, cout, groups):
    """Both GEMM kernels of gemm.h (the device picks one; here we force each in turn)."""
    monkeypatch.setattr("kuiper.layers.opencl_gemm.parameter_sets.FORCE_GEMM", gemm)
    k = 3 if shape[2] > 1 else 1
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((cout, shape[1] // groups, k, k)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    params = conv_params(shape[1], cout, k, padding=k // 2, groups=groups)
    (y,) = run_operator("nn.Conv2d", [x], params=params, weights={"weight": w, "bias": b},
                        backend=backend)
    expected = F.conv2d(*map(torch.from_numpy, (x, w, b)), padding=k // 2, groups=groups)
    assert_close(y, expected.numpy())


def test_conv2d_unbatched_input(backend, rng):
    x = rng.standard_normal((13, 6, 5)).astype(np.float32)
    w = rng.standard_normal((4, 13, 3, 3)).astype(np.float32)
    (y,) = run_operator("nn.Conv2d", [x], params=conv_params(13, 4, 3, padding=1, bias=False),
                        weights={"weight": w}, backend=backend)
    assert_close(y, F.conv2d(torch.from_numpy(x), torch.from_numpy(w), padding=1).numpy())


@pytest.mark.parametrize("groups,with_bias,stride,padding", [
    (1, True, 1, "same"), (1, False, (2, 1), (1, 0)), (3, True, 2, "valid"),
    (15, False, 1, 1), (15, True, (1, 2), (2, 1)),
])
def test_f_conv2d_weight_as_input(backend, rng, groups, with_bias, stride, padding):
    x = rng.standard_normal((2, 15, 10, 7)).astype(np.float32)
    w = rng.standard_normal((15, 15 // groups, 3, 3)).astype(np.float32)
    b = rng.standard_normal(15).astype(np.float32)
    inputs = [x, w, b] if with_bias else [x, w]
    params = {"stride": pair(stride), "padding": padding if isinstance(padding, str)
              else pair(padding), "dilation": (1, 1), "groups": groups}
    if not with_bias:
        params["bias"] = None  # what pnnx writes when F.conv2d gets bias=None
    (y,) = run_operator("F.conv2d", inputs, params=params, backend=backend)
    expected = F.conv2d(*map(torch.from_numpy, inputs), stride=stride, padding=padding,
                        groups=groups)
    assert_close(y, expected.numpy())


def test_f_conv2d_weight_as_attribute(backend, rng):
    x = rng.standard_normal((1, 4, 6, 9)).astype(np.float32)
    w = rng.standard_normal((5, 4, 2, 2)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    (y,) = run_operator("F.conv2d", [x], params={"stride": (1, 1), "padding": (1, 1)},
                        weights={"weight": w, "bias": b}, backend=backend)
    assert_close(y, F.conv2d(*map(torch.from_numpy, (x, w, b)), padding=1).numpy())


@pytest.mark.parametrize("change,message", [
    ({"in_channels": 12}, "weight '@weight' has shape"),   # weight does not fit in_channels
    ({"groups": 2}, "divisible by groups=2"),               # 13 channels into 2 groups
    ({"stride": (2, 2), "padding": "same"}, "needs stride 1"),
    ({"padding_mode": "mirror"}, "expected one of"),
    ({"dilation": (0, 1)}, "must all be >= 1"),
    ({"padding": "(,)"}, "should have 2 values"),   # fuzz seed 4417, case 718: min() of []
])
def test_conv2d_bad_parameters(rng, change, message):
    x = rng.standard_normal((1, 13, 5, 5)).astype(np.float32)
    w = rng.standard_normal((7, 13, 3, 3)).astype(np.float32)
    params = {**conv_params(13, 7, 3, bias=False), **change}
    with pytest.raises(kuiper.OperatorError, match=message):
        run_operator("nn.Conv2d", [x], params=params, weights={"weight": w})


def test_conv2d_bad_shapes(rng):
    w = rng.standard_normal((7, 4, 3, 3)).astype(np.float32)
    x = rng.standard_normal((1, 5, 6, 6)).astype(np.float32)
    with pytest.raises(kuiper.ShapeError, match="input has 5 channels"):
        run_operator("F.conv2d", [x, w], params={"padding": (1, 1)})
    x = rng.standard_normal((1, 4, 2, 2)).astype(np.float32)
    with pytest.raises(kuiper.ShapeError, match="too small"):
        run_operator("F.conv2d", [x, w], params={"padding": (0, 0)})
    with pytest.raises(kuiper.ShapeError, match="reflect padding"):
        run_operator("nn.Conv2d", [x], params=conv_params(4, 7, 3, padding=2, bias=False,
                                                          padding_mode="reflect"),
                     weights={"weight": w})


@pytest.mark.slow
def test_conv2d_from_a_pnnx_export(backend, export_model):
    """A real export. 'same' stays a string, except where pnnx fuses a BatchNorm into the conv:
    then an even kernel's padding becomes F.pad-style (left,right,top,bottom). F.conv2d takes
    its weight as an input."""

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Conv2d(3, 6, (4, 3), padding="same", padding_mode="reflect")
            self.bn = torch.nn.BatchNorm2d(6)
            self.b = torch.nn.Conv2d(6, 6, 3, stride=2, groups=6, bias=False)
            self.c = torch.nn.Conv2d(6, 6, (2, 3), padding="same")
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)

        def forward(self, x, w):
            return F.conv2d(self.c(self.b(self.bn(self.a(x)))), w, padding=1)

    torch.manual_seed(0)
    net = Net().eval()
    x, w = torch.randn(2, 3, 12, 10), torch.randn(5, 6, 3, 3)
    path = export_model("conv2d_net", net, (x, w))
    text = path.read_text()
    assert "padding=same" in text and "padding=(1,1,1,2)" in text and "F.conv2d" in text
    (y,) = kuiper.load(path, backend=backend).forward(x.numpy(), w.numpy())
    with torch.no_grad():
        assert_close(y, net(x, w).numpy())


@pytest.mark.parametrize("op_type, groups, kernel", [
    ("nn.Conv2d", 1, 1), ("nn.Conv2d", 2, 3), ("nn.Conv2d", 2, 1), ("nn.Conv2d", 1, 3),
    ("nn.ConvTranspose2d", 1, 3), ("nn.ConvTranspose2d", 2, 3),
])
def test_an_empty_batch_gives_an_empty_output(backend, rng, op_type, groups, kernel):
    # fuzz seed 90210, case 1196: a batch of 0 images reached reshape(..., -1), which cannot
    # infer a size from no values (pointwise, depthwise and transposed convolutions)
    x = np.zeros((0, 4, 6, 7), np.float32)
    transposed = op_type == "nn.ConvTranspose2d"
    cout = 6   # the weight: (Cout, Cin/G, k, k), transposed (Cin, Cout/G, k, k)
    w = rng.standard_normal((4, cout // groups, kernel, kernel) if transposed
                            else (cout, 4 // groups, kernel, kernel)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    params = {**conv_params(4, cout, kernel, padding=kernel // 2, groups=groups)}
    if transposed:
        del params["padding_mode"]
        params["output_padding"] = (0, 0)
    (y,) = run_operator(op_type, [x], params=params, weights={"weight": w, "bias": b},
                        backend=backend)
    f = F.conv_transpose2d if transposed else F.conv2d
    want = f(*map(torch.from_numpy, (x, w, b)), padding=kernel // 2, groups=groups)
    assert y.shape == tuple(want.shape)


@pytest.mark.parametrize("op_type", ["nn.Conv2d", "nn.ConvTranspose2d"])
def test_an_input_without_channels_is_refused(backend, op_type):
    # a weight (4, 0, 3, 3): nothing to sum (PyTorch answers with 0 output channels); the
    # transposed convolution's weight (0, 4, 3, 3) failed to reshape with a bare ValueError
    w = np.zeros((4, 0, 3, 3) if op_type == "nn.Conv2d" else (0, 4, 3, 3), np.float32)
    params = conv_params(0, 4, 3, bias=False)
    if op_type == "nn.ConvTranspose2d":
        del params["padding_mode"]
        params["output_padding"] = (0, 0)
    with pytest.raises(kuiper.OperatorError, match="in_channels=0 and out_channels=4 must"):
        run_operator(op_type, [np.zeros((1, 0, 5, 5), np.float32)], params=params,
                     weights={"weight": w}, backend=backend)


def test_f_conv2d_of_an_input_without_channels_is_refused(backend):
    x, w = np.zeros((1, 0, 5, 5), np.float32), np.zeros((4, 0, 3, 3), np.float32)
    with pytest.raises(kuiper.ShapeError, match="has no channels"):
        run_operator("F.conv2d", [x, w], backend=backend)


@pytest.mark.parametrize("op_type, w_shape, bias, message", [
    # fuzz seed 5551212, case 3800: a folded weight with 4 output channels and a bias of 2
    # failed to concatenate with a bare ValueError
    ("F.conv2d", (4, 2, 2, 2), 2, r"@bias \(2,\) should hold one value per output channel"),
    ("F.conv2d", (4, 2, 2), 4, r"@weight \(4, 2, 2\) should be 4-D"),
    ("F.conv2d", (3, 2, 2, 2), 3, "its first axis divisible by groups=2"),
    # transposed: (Cin, Cout/G, k, k), so 2 x 3 = 6 output channels
    ("F.conv_transpose2d", (4, 3, 2, 2), 4, r"@bias \(4,\) should hold one value per output "
                                            r"channel of @weight \(4, 3, 2, 2\): \(6,\)"),
])
def test_folded_weights_that_do_not_fit_each_other_are_refused(backend, rng, op_type, w_shape,
                                                               bias, message):
    weights = {"weight": rng.standard_normal(w_shape).astype(np.float32),
               "bias": rng.standard_normal(bias).astype(np.float32)}
    groups = 2 if w_shape[0] == 3 or op_type == "F.conv_transpose2d" else 1
    with pytest.raises(kuiper.OperatorError, match=message):
        run_operator(op_type, [rng.standard_normal((1, 4, 6, 6)).astype(np.float32)],
                     params={"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1),
                             "groups": groups}, weights=weights, backend=backend)


def test_a_folded_transposed_weight_with_its_bias_runs(backend, rng):
    # the bias of F.conv_transpose2d counts Cout = weight.shape[1] * groups, not shape[0]
    x = rng.standard_normal((1, 4, 5, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, 2, 2)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    (y,) = run_operator("F.conv_transpose2d", [x],
                        params={"stride": (2, 2), "padding": (0, 0), "dilation": (1, 1),
                                "groups": 2, "output_padding": (0, 0)},
                        weights={"weight": w, "bias": b}, backend=backend)
    want = F.conv_transpose2d(*map(torch.from_numpy, (x, w, b)), stride=2, groups=2)
    assert_close(y, want.numpy())
