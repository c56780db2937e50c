"""The blocked depthwise convolution (layers/opencl_conv/depthwise.py), forced, against
PyTorch: channel multipliers, kernel sizes, strides, dilations, every padding mode, images
smaller than a block or not a multiple of it, 1-D and 3-D, fused epilogues, every parameter set.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn as nn

from kuiper.core.errors import KuiperError
from kuiper.layers.opencl_conv.algorithms import ALGORITHMS, forced
from kuiper.layers.opencl_conv.depthwise import LOCAL_CHOICES, POCL_LOCAL
from kuiper.opencl.device.runtime import OpenCLRuntime, compiles_to_native_cpu
from kuiper.testing import assert_close
from tests.conftest import opencl_available
from tests.opencl.conv_forced import ConvCase, run_forced, torch_conv
from tests.opencl.conv_harness import (
    activation_epilogue,
    make_problem,
    run_algorithm,
    torch_reference,
)

pytestmark = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")

NAME = "depthwise"
MODES = ["zeros", "reflect", "replicate", "circular"]

# (x shape, channel multiplier, kernel, stride, padding, dilation, bias, padding mode)
CASES = [
    ((1, 3, 13, 29), 1, (3, 3), (1, 1), (1, 1), (1, 1), True, "zeros"),     # MobileNet s1
    ((2, 5, 29, 13), 1, (3, 3), (2, 2), (1, 1), (1, 1), False, "zeros"),    # MobileNet s2
    ((3, 17, 7, 5), 2, (3, 3), (1, 1), (1, 1), (1, 1), True, "reflect"),    # multiplier 2
    ((1, 5, 1, 1), 1, (3, 3), (1, 1), (1, 1), (1, 1), True, "zeros"),       # a 1x1 image
    ((1, 3, 2, 7), 3, (3, 3), (1, 2), (1, 1), (1, 1), True, "replicate"),
    ((2, 5, 13, 13), 1, (5, 5), (2, 2), (2, 2), (1, 1), True, "circular"),  # EfficientNet 5x5
    ((1, 17, 29, 29), 1, (3, 3), (1, 1), (2, 2), (2, 2), False, "zeros"),   # dilation 2
    ((2, 3, 7, 13), 2, (3, 2), (2, 1), (0, 1), (1, 2), True, "reflect"),    # non-square all
    ((1, 5, 5, 7), 1, (1, 1), (1, 1), (0, 0), (1, 1), True, "zeros"),       # 1x1 taps
    ((1, 3, 13, 5), 1, (7, 7), (1, 1), (3, 3), (1, 1), True, "zeros"),      # 49 taps: small blocks
    ((1, 5, 29, 29), 1, (3, 3), (2, 2), (0, 0), (1, 1), True, "zeros"),     # no padding
]


@pytest.mark.parametrize("shape,mult,kernel,stride,padding,dilation,bias,mode", CASES)
def test_depthwise_forced_matches_torch(rng, shape, mult, kernel, stride, padding, dilation,
                                        bias, mode):
    case = ConvCase(shape, shape[1] * mult, kernel, stride, padding, dilation,
                    groups=shape[1], bias=bias, mode=mode)
    x, w, b = case.tensors(rng)
    y, layer = run_forced(case, x, w, b, NAME)
    assert (layer.algorithm, layer.algorithm_reason) == (NAME, "forced")
    assert_close(y, torch_conv(case, x, w, b))


@pytest.mark.parametrize("case", [
    ConvCase((2, 5, 29), 10, (5,), (2,), (2,), groups=5, mode="reflect"),         # Conv1d
    ConvCase((1, 3, 5, 7, 6), 3, (3, 3, 3), (1, 2, 1), (1, 1, 1), groups=3),      # Conv3d
    ConvCase((2, 4, 6, 5, 9), 8, (2, 3, 3), (2, 1, 2), (0, 1, 2), (2, 1, 1), groups=4,
             mode="circular"),
], ids=["conv1d", "conv3d", "conv3d_strided_circular"])
def test_depthwise_in_1d_and_3d(rng, case):
    x, w, b = case.tensors(rng)
    y, layer = run_forced(case, x, w, b, NAME)
    assert layer.algorithm == NAME
    assert_close(y, torch_conv(case, x, w, b))


@pytest.mark.parametrize("stride", [1, 2])
def test_depthwise_every_parameter_set(rng, stride):
    """The block shapes and work-groups `kuiper tune` may pick compute the same (a sample of
    them, every block shape included: each is a program of its own to build)."""
    case = ConvCase((2, 6, 11, 13), 12, (3, 3), (stride, stride), (1, 1), groups=6,
                    mode="reflect")
    x, w, b = case.tensors(rng)
    expected = torch_conv(case, x, w, b)
    problem = make_problem(x.shape, w.shape, stride=stride, padding=1, groups=6,
                           padding_mode="reflect")
    sets = ALGORITHMS[NAME].parameter_sets(problem, None)
    assert len({str(p) for p in sets}) == len(sets) > 1
    assert json.loads(json.dumps(sets)) == sets   # the tuning cache (JSON) finds them again
    for params in sets[::2] + sets[1::7]:
        y, layer = run_forced(case, x, w, b, NAME, params=params)
        assert layer.algorithm_params == params
        assert_close(y, expected, what=f"parameters {params}")


@pytest.mark.parametrize("op_type,params,act,residual,first", [
    ("nn.ReLU6", {}, nn.functional.relu6, False, True),            # MobileNetV2
    ("nn.SiLU", {}, nn.functional.silu, True, False),
    ("nn.Hardswish", {}, nn.functional.hardswish, True, True),     # MobileNetV3
])
def test_depthwise_fused_epilogue(rng, op_type, params, act, residual, first):
    x = rng.standard_normal((2, 5, 9, 7)).astype(np.float32)
    w = rng.standard_normal((10, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(10).astype(np.float32)
    r = rng.standard_normal((2, 10, 5, 4)).astype(np.float32) if residual else None
    epilogue = activation_epilogue(op_type, residual=residual, residual_first=first, **params)
    y = run_algorithm(NAME, x, w, b, epilogue=epilogue, residual=r, stride=2, padding=1,
                      groups=5)
    expected = torch_reference(x, w, b, stride=2, padding=1, groups=5, activation=act,
                               residual=r, residual_first=first)
    assert_close(y, expected)


def test_depthwise_weight_as_input(rng):
    """F.conv2d: the weight is the producer's device array; nothing is done to it on the host."""
    x = rng.standard_normal((1, 4, 8, 9)).astype(np.float32)
    w = rng.standard_normal((4, 1, 3, 3)).astype(np.float32)
    y = run_algorithm(NAME, x, w, None, weight_on_host=False, padding=1, groups=4)
    assert_close(y, torch_reference(x, w, None, padding=1, groups=4))


@pytest.mark.parametrize("channels,groups", [(4, 1), (8, 4)])
def test_depthwise_unsupported_says_why(channels, groups):
    problem = make_problem((1, channels, 9, 9), (8, channels // groups, 3, 3), padding=1,
                           groups=groups)
    why = ALGORITHMS[NAME].unsupported(problem, None)
    assert why is not None and "one input channel" in why


def test_depthwise_accepts_every_depthwise_problem():
    for mode in MODES:
        problem = make_problem((1, 6, 9, 9), (12, 1, 5, 3), stride=(2, 1), padding=(2, 1),
                               dilation=(1, 2), groups=6, padding_mode=mode)
        assert ALGORITHMS[NAME].unsupported(problem, None) is None


def test_depthwise_bad_parameters_are_a_kuiper_error(rng):
    x = rng.standard_normal((1, 3, 5, 5)).astype(np.float32)
    w = rng.standard_normal((3, 1, 3, 3)).astype(np.float32)
    with pytest.raises(KuiperError, match=r"depthwise: block bw=3"):
        run_algorithm(NAME, x, w, params={"bw": 3, "bh": 1}, padding=1, groups=3)


def test_depthwise_first_choice_has_one_work_group_size_on_pocl():
    """PoCL compiles a kernel again for each work-group size: left to choose, it picked one per
    output shape (the OCR capstone's 28 depthwise layers compiled 19 times). The cost model's
    first set fixes one size on PoCL, whatever the shape; elsewhere the driver chooses."""
    device = OpenCLRuntime.shared().device
    shapes = [(1, 32, 112, 112), (1, 96, 56, 56), (2, 960, 7, 7), (1, 8, 3, 250)]
    first = [ALGORITHMS[NAME].parameter_sets(make_problem(s, (s[1], 1, 3, 3), padding=1,
                                                          groups=s[1]), device)[0]
             for s in shapes]
    expected = POCL_LOCAL if compiles_to_native_cpu(device) else None
    assert [p["local"] for p in first] == [expected] * len(shapes)
    assert POCL_LOCAL in LOCAL_CHOICES   # so a tuned choice can name it too
    problem = make_problem((1, 8, 9, 9), (8, 1, 3, 3), padding=1, groups=8)
    assert ALGORITHMS[NAME].parameter_sets(problem, None)[0]["local"] is None


def test_depthwise_cost_model_beats_the_gemm_on_depthwise_layers():
    """The selector's cost model must choose it for a MobileNetV2 depthwise layer."""
    device = OpenCLRuntime.shared().device
    problem = make_problem((1, 144, 56, 56), (144, 1, 3, 3), padding=1, groups=144)
    costs = {name: algo.cost(problem, device) for name, algo in ALGORITHMS.items()
             if algo.unsupported(problem, device) is None}
    assert min(costs, key=costs.get) == NAME, costs


# --- a real export: MobileNetV2's inverted residual block --------------------------------------
class InvertedResidual(nn.Module):
    def __init__(self, channels: int, expand: int):
        super().__init__()
        hidden = channels * expand
        self.block = nn.Sequential(
            nn.Conv2d(channels, hidden, 1), nn.ReLU6(),
            nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden), nn.ReLU6(),
            nn.Conv2d(hidden, channels, 1))

    def forward(self, x):
        return x + self.block(x)


@pytest.mark.slow
def test_depthwise_on_an_exported_inverted_residual_block(export_model):
    import kuiper

    torch.manual_seed(0)
    net = InvertedResidual(6, 3).eval()
    x = torch.randn(2, 6, 13, 11)
    with torch.no_grad():
        expected = net(x).numpy()
    path = export_model("depthwise_inverted_residual", net, (x,))
    with forced(NAME):
        graph = kuiper.load(path, backend="opencl")
        y = graph(x.numpy())
    depthwise = [op.layer for op in graph.operators
                 if op.type == "nn.Conv2d" and op.layer.groups > 1]
    assert len(depthwise) == 1 and depthwise[0].algorithm == NAME
    assert_close(y, expected)


@pytest.mark.slow
def test_depthwise_on_mobilenet_v2(export_model, rng):
    """All 17 depthwise convolutions of MobileNetV2 by this algorithm (ReLU6 fused into most of
    them by the epilogue pass), within the model tests' rule (tests/models/common.py)."""
    import kuiper
    from tests.models import zoo
    from tests.models.common import check_model

    example = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    module = zoo.make(zoo.MobileNetV2, example)
    path = export_model("depthwise_mobilenet_v2", module, example)
    with forced(NAME):
        check_model(path, module, [rng.standard_normal((2, 3, 64, 64), np.float32)], "opencl")
        graph = kuiper.load(path, backend="opencl")
    algorithms = [op.layer.algorithm for op in graph.operators
                  if op.type == "nn.Conv2d" and op.layer.groups > 1]
    assert algorithms == [NAME] * 17
