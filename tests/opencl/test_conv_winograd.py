"""Winograd F(4x4,3x3) and F(2x2,3x3) (layers/opencl_conv/winograd.py), forced, against
PyTorch: odd channel counts, images smaller than a tile or not a multiple of it, batches,
paddings 0/1/2, with and without bias, fused epilogues, a weight given as an input.

Tolerance. Winograd adds up transformed values that are large sums of inputs with opposite signs
(B^T's entries reach 5, A^T's 8): the rounding error of each float32 product reaches the output
multiplied by up to ~100 for F(4x4), ~4 for F(2x2). The error is therefore bounded relative to
the sizes of the terms the outputs add up, S = sum |w| |x| (+ |b|), not to |y| (which may be ~0
by cancellation), and per output tile (its outputs come from the same transformed products, so
share one error): |y - y_torch| <= GROWTH * eps32 * max of S over the tile. Measured on these
tests (128 and 256 channels included): at most 22 eps32 for F(4x4), 1.6 for F(2x2), and 1-3 for
the im2col path scaled the same way; GROWTH leaves a 3-5x margin. Every output must also pass
the suite's usual rule (kuiper.testing.assert_close).
"""

from __future__ import annotations

import json
import os
from contextlib import nullcontext

import numpy as np
import pytest
import torch
import torch.nn as nn

from kuiper.core.errors import KuiperError
from kuiper.layers.opencl_conv import winograd as conv_winograd
from kuiper.layers.opencl_conv.algorithms import ALGORITHMS, forced
from kuiper.layers.opencl_gemm import mma_sets
from kuiper.layers.opencl_gemm.parameter_sets import fits
from kuiper.opencl.device.runtime import OpenCLRuntime
from kuiper.testing import assert_close
from tests.conftest import opencl_available
from tests.opencl.conv_forced import ConvCase, run_forced
from tests.opencl.conv_harness import (
    activation_epilogue,
    make_problem,
    run_algorithm,
    term_sizes,
    torch_reference,
)

pytestmark = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")

EPS32 = float(np.finfo(np.float32).eps)
GROWTH = {"winograd_f4x4": 64, "winograd_f2x2": 8}
WINOGRAD = list(GROWTH)


def tile_max(sizes: np.ndarray, m: int) -> np.ndarray:
    """The largest S of each m x m output tile, spread over the tile."""
    pooled = nn.functional.max_pool2d(torch.from_numpy(sizes), m, m, ceil_mode=True)
    spread = pooled.repeat_interleave(m, 2).repeat_interleave(m, 3).numpy()
    return spread[:, :, :sizes.shape[2], :sizes.shape[3]]


def assert_winograd_close(name, y, expected, sizes):
    assert_close(y, expected)
    scale = tile_max(sizes, ALGORITHMS[name].tile)
    worst = float(np.max(np.abs(y.astype(np.float64) - expected) / scale))
    assert worst <= GROWTH[name] * EPS32, (
        f"{name}: error {worst / EPS32:.1f} eps32 x sum|w||x|, allowed {GROWTH[name]}")


# --- the transforms -------------------------------------------------------------------------
@pytest.mark.parametrize("m", [4, 2])
def test_toom_cook_matrices_compute_a_correlation_exactly(m):
    """A^T [(G g) * (B^T d)] == the valid correlation of d with g, in exact arithmetic."""
    at, g, bt = conv_winograd.toom_cook(m, 3, conv_winograd.POINTS[m])
    from fractions import Fraction
    rng = np.random.default_rng(m)
    d = [Fraction(int(v)) for v in rng.integers(-9, 9, m + 2)]
    taps = [Fraction(int(v)) for v in rng.integers(-9, 9, 3)]
    y = at.dot(g.dot(taps) * bt.dot(d))
    assert list(y) == [sum(taps[k] * d[i + k] for k in range(3)) for i in range(m)]


def test_f4_matrices_are_lavins():
    """Points 0, 1, -1, 2, -2 and infinity give the matrices of Lavin & Gray (2015)."""
    at, g, bt = conv_winograd.transform_matrices(4)
    assert bt.tolist() == [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
                           [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]
    assert at.tolist() == [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0],
                           [0, 1, -1, 8, -8, 1]]
    assert np.allclose(g * 24, [[6, 0, 0], [-4, -4, -4], [-4, 4, -4], [1, 2, 4], [1, -2, 4],
                                [0, 0, 24]])


# --- forced through the real layer ------------------------------------------------------------
# (x shape, cout, padding, bias): odd channels, H/W of 1, 2, 5, 7, 13, 29, batches of 1-3
CASES = [
    ((1, 3, 1, 1), 5, 1, True),       # a 1x1 image: one tile, mostly padding
    ((2, 5, 2, 7), 3, 1, False),
    ((3, 17, 5, 13), 5, 1, True),
    ((1, 5, 7, 7), 17, 0, True),      # no padding: 5x5 output
    ((2, 3, 13, 29), 17, 2, False),   # padding 2: the output grows
    ((1, 17, 29, 5), 3, 2, True),
    ((1, 8, 2, 1), 6, 2, True),
    ((2, 16, 9, 11), 33, 1, True),    # Cout above the GEMM's row block
]


@pytest.mark.parametrize("name", WINOGRAD)
@pytest.mark.parametrize("shape,cout,padding,bias", CASES)
def test_winograd_forced_matches_torch(rng, name, shape, cout, padding, bias):
    case = ConvCase(shape, cout, (3, 3), padding=(padding, padding), bias=bias)
    x, w, b = case.tensors(rng)
    y, layer = run_forced(case, x, w, b, name)
    assert (layer.algorithm, layer.algorithm_reason) == (name, "forced")
    expected = torch_reference(x, w, b, padding=padding)
    sizes = term_sizes(x, w, padding=padding) + (np.abs(b)[:, None, None] if bias else 0)
    assert_winograd_close(name, y, expected, sizes)


@pytest.mark.parametrize("name", WINOGRAD)
def test_winograd_every_parameter_set(rng, name):
    """Every register block and work-group shape `kuiper tune` may pick computes the same."""
    case = ConvCase((2, 7, 11, 6), 21, (3, 3), padding=(1, 1))
    x, w, b = case.tensors(rng)
    expected = torch_reference(x, w, b, padding=1)
    sizes = term_sizes(x, w, padding=1) + np.abs(b)[:, None, None]
    problem = make_problem(x.shape, w.shape, padding=1)
    sets = ALGORITHMS[name].parameter_sets(problem, None)
    assert len(sets) > 1 and len({str(p) for p in sets}) == len(sets)
    assert json.loads(json.dumps(sets)) == sets   # the tuning cache (JSON) finds them again
    for params in sets[::3] + [sets[-1]]:
        y, layer = run_forced(case, x, w, b, name, params=params)
        assert layer.algorithm_params == params
        assert_winograd_close(name, y, expected, sizes)


@pytest.mark.parametrize("name", WINOGRAD)
def test_winograd_on_a_resnet_like_layer(rng, name):
    """128 channels, 14x14: the accuracy holds when thousands of terms are summed."""
    case = ConvCase((1, 128, 14, 14), 128, (3, 3), padding=(1, 1))
    x, w, b = case.tensors(rng)
    y, _ = run_forced(case, x, w, b, name)
    sizes = term_sizes(x, w, padding=1) + np.abs(b)[:, None, None]
    assert_winograd_close(name, y, torch_reference(x, w, b, padding=1), sizes)


# --- the epilogue and the weight as an input (the algorithm bound on its own) -----------------
@pytest.mark.parametrize("name", WINOGRAD)
@pytest.mark.parametrize("op_type,params,act,residual,first", [
    ("nn.ReLU", {}, torch.relu, True, True),                       # ResNet's block end
    ("nn.SiLU", {}, nn.functional.silu, True, False),              # YOLO: act(y) + r
    ("nn.LeakyReLU", {"negative_slope": 0.1}, lambda t: nn.functional.leaky_relu(t, 0.1),
     False, True),
    ("nn.Hardswish", {}, nn.functional.hardswish, False, True),
])
def test_winograd_fused_epilogue(rng, name, op_type, params, act, residual, first):
    x = rng.standard_normal((2, 5, 9, 6)).astype(np.float32)
    w = (rng.standard_normal((7, 5, 3, 3)) / 6).astype(np.float32)
    b = rng.standard_normal(7).astype(np.float32)
    r = rng.standard_normal((2, 7, 9, 6)).astype(np.float32) if residual else None
    epilogue = activation_epilogue(op_type, residual=residual, residual_first=first, **params)
    y = run_algorithm(name, x, w, b, epilogue=epilogue, residual=r, padding=1)
    expected = torch_reference(x, w, b, padding=1, activation=act, residual=r,
                               residual_first=first)
    assert_close(y, expected)


@pytest.mark.parametrize("name", WINOGRAD)
def test_winograd_weight_as_input_is_transformed_on_the_device(rng, name):
    """F.conv2d: the weight is not known at bind time; winograd_filter transforms it."""
    x = rng.standard_normal((2, 5, 7, 10)).astype(np.float32)
    w = (rng.standard_normal((9, 5, 3, 3)) / 6).astype(np.float32)
    y = run_algorithm(name, x, w, None, weight_on_host=False, padding=(1, 2))
    expected = torch_reference(x, w, None, padding=(1, 2))
    assert_winograd_close(name, y, expected, term_sizes(x, w, padding=(1, 2)))


# --- what it refuses, and why ------------------------------------------------------------------
@pytest.mark.parametrize("name", WINOGRAD)
@pytest.mark.parametrize("geometry,words", [
    ({"stride": 2}, "stride"),
    ({"dilation": 2}, "dilation"),
    ({"groups": 2}, "groups"),
    ({"padding_mode": "reflect"}, "reflect"),
    ({"kernel": (5, 5)}, "3x3"),
    ({"kernel": (3, 1)}, "3x3"),
])
def test_winograd_unsupported_says_why(name, geometry, words):
    geometry = dict(geometry)   # shared by the parametrisations: not to be changed
    kernel = geometry.pop("kernel", (3, 3))
    groups = geometry.get("groups", 1)
    problem = make_problem((1, 4, 9, 9), (6, 4 // groups, *kernel), padding=1, **geometry)
    why = ALGORITHMS[name].unsupported(problem, None)
    assert why is not None and words in why


def test_winograd_refuses_a_3d_kernel_and_accepts_the_plain_case():
    problem = make_problem((1, 4, 9, 9), (6, 4, 3, 3), padding=1)
    assert ALGORITHMS["winograd_f4x4"].unsupported(problem, None) is None
    deep = type(problem)(**{**problem.__dict__, "kernel": (3, 3, 3)})
    assert "3x3" in ALGORITHMS["winograd_f4x4"].unsupported(deep, None)


def test_winograd_bad_parameters_are_a_kuiper_error(rng):
    x = rng.standard_normal((1, 3, 5, 5)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    with pytest.raises(KuiperError, match=r"winograd_f4x4: tile parameters bm=3"):
        run_algorithm("winograd_f4x4", x, w, params={"bm": 3, "bn": 4}, padding=1)


def test_winograd_cost_model_prefers_f4_on_big_images():
    """The cost model's order: F(4x4) beats F(2x2) where its tiles fit (56x56)."""
    big = make_problem((1, 64, 56, 56), (64, 64, 3, 3), padding=1)
    f4, f2 = ALGORITHMS["winograd_f4x4"], ALGORITHMS["winograd_f2x2"]
    assert f4.cost(big, None) < f2.cost(big, None)
    assert f4.cost(big, None) > 0


# --- a real export: a ResNet basic block, every 3x3 convolution by Winograd ------------------
class BasicBlock(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)

    def forward(self, x):
        return torch.relu(self.conv2(torch.relu(self.conv1(x))) + x)


@pytest.mark.slow
@pytest.mark.parametrize("name", WINOGRAD)
def test_winograd_on_an_exported_resnet_block(export_model, name):
    import kuiper

    torch.manual_seed(0)
    net = BasicBlock(12).eval()
    x = torch.randn(2, 12, 13, 10)
    with torch.no_grad():
        expected = net(x).numpy()
    path = export_model("winograd_basic_block", net, (x,))
    with forced(name):
        graph = kuiper.load(path, backend="opencl")
        y = graph(x.numpy())
    convs = [op.layer for op in graph.operators if op.type == "nn.Conv2d"]
    assert len(convs) == 2 and all(layer.algorithm == name for layer in convs)
    assert_close(y, expected)


# --- the accuracy target: whole networks with every 3x3 stride-1 conv by Winograd -----
@pytest.mark.slow
@pytest.mark.parametrize("name", WINOGRAD)
@pytest.mark.parametrize("model,shape", [("ResNet18", (1, 3, 64, 64)),
                                         ("YoloV5Small", (1, 3, 320, 320))])
def test_winograd_networks_stay_within_the_model_tolerance(export_model, rng, name, model,
                                                           shape):
    """ResNet-18 (13 of its 20 convolutions) and the YOLOv5s-style detector (10 of 56) meet
    the model tests' rule (tests/models/common.py) with Winograd forced: measured max error
    3e-6 (ResNet-18) and 2e-5 (YOLO, the same as without Winograd) of the outputs' scale,
    against 1e-4 allowed."""
    from tests.models import zoo
    from tests.models.common import check_model

    example = torch.rand(*shape, generator=torch.Generator().manual_seed(0))
    module = zoo.make(getattr(zoo, model), example)
    path = export_model(f"winograd_{model}", module, example)
    with forced(name):
        check_model(path, module, [rng.random(shape, dtype=np.float32)], "opencl")
        import kuiper
        graph = kuiper.load(path, backend="opencl")
    assert sum(getattr(op.layer, "algorithm", "") == name for op in graph.operators) >= 10


@pytest.mark.parametrize("name", WINOGRAD)
def test_winograd_every_parameter_set_of_the_tiled_products(rng, name):
    """GPUs run the 36 (16) products through gemm.h's tiled GEMM: every gemm_tiled set that
    fits the device, forced here on whatever device the suite has, computes the same (F(4x4)
    the even sets, F(2x2) the odd ones: the same GEMM kernel, so each set runs once; Oclgrind:
    two). Odd tiles and channels: the padding to float4s and the GEMM's edges both matter."""
    from kuiper.layers.opencl_gemm.parameter_sets import GPU_PARAMETER_SETS, fits
    from kuiper.opencl.device.runtime import OpenCLRuntime

    device = OpenCLRuntime.shared().device
    case = ConvCase((2, 19, 13, 10), 37, (3, 3), padding=(1, 1))
    x, w, b = case.tensors(rng)
    expected = torch_reference(x, w, b, padding=1)
    sizes = term_sizes(x, w, padding=1) + np.abs(b)[:, None, None]
    sets = [{"gemm": p} for p in GPU_PARAMETER_SETS if fits(p, device)]
    assert len(sets) >= 3
    sets = sets[::2] if name == "winograd_f4x4" else sets[1::2]
    if os.environ.get("KUIPER_OCLGRIND") == "1":   # the simulator: the first and last sets
        sets = [sets[0], sets[-1]]                 # (test_gemm_kernels checks every set there)
    for params in sets:
        y, layer = run_forced(case, x, w, b, name, params=params)
        assert layer.algorithm_params == params
        assert_winograd_close(name, y, expected, sizes)


def test_winograd_gpu_parameter_sets_put_the_tiled_products_first():
    """On a GPU the cost model's gemm set comes first, then the register blocks, all JSON."""
    class FakeGPU:
        name, vendor, version, driver_version = "Fake GPU", "NVIDIA Corporation", "3.0", "1"
        max_compute_units, max_clock_frequency = 132, 1755
        max_work_group_size, local_mem_size = 1024, 49152
        preferred_vector_width_float = 1
        type = 4   # CL_DEVICE_TYPE_GPU

    problem = make_problem((32, 64, 56, 56), (64, 64, 3, 3), padding=1)
    sets = ALGORITHMS["winograd_f4x4"].parameter_sets(problem, FakeGPU())
    assert "gemm" in sets[0] and sets[0]["gemm"]["kernel"] == "gemm_tiled"
    assert any("bm" in p for p in sets)
    assert json.loads(json.dumps(sets)) == sets


@pytest.mark.parametrize("name", ["winograd_f4x4", "winograd_f2x2"])
def test_winograd_first_block_on_8_float_registers_is_16_channels_by_4_tiles(name):
    """With AVX2's 16 registers of 8 floats, 32 channels x 8 tiles (32 registers of
    accumulators) spill: the first set there is 16 x 4; AVX-512 keeps 32 x 8 (and a layer with
    fewer channels or tiles than the block takes the smaller of the two), and the smaller block
    is among the sets either way, so `kuiper tune` times both."""
    from tests.opencl.described_devices import fake_two_core_cpu

    big = make_problem((1, 64, 56, 56), (64, 64, 3, 3), padding=1)
    avx2, avx512 = fake_two_core_cpu(lanes=8), fake_two_core_cpu(lanes=16)
    assert ALGORITHMS[name].parameter_sets(big, avx2)[0] == {"bm": 16, "bn": 4, "local": [1, 4, 1]}
    wide = ALGORITHMS[name].parameter_sets(big, avx512)
    assert wide[0] == {"bm": 32, "bn": 8, "local": [1, 4, 1]}
    assert {"bm": 16, "bn": 4, "local": [1, 4, 1]} in wide
    few = make_problem((1, 8, 6, 6), (4, 8, 3, 3), padding=1)   # 4 channels: bm 4
    assert ALGORITHMS[name].parameter_sets(few, avx2)[0]["bm"] == 4


# --- F(2x2)'s products on the tensor cores (precision="tf32") --------------------------------
# TF32 rounds V and U to 10 bits of mantissa (2^-11 each); the transforms of F(2x2) (entries 0
# and +-1) add up to 16 of those products per output tile. Measured on these cases and 128
# channels at 8 x 8 (Oclgrind, emulated, the one set that fits its local memory): at most 0.71
# units of 2^-11 x the tile's sum |w||x| (3e-4 to 6e-4 of the largest output); the bound leaves
# a 5x margin for the tensor cores' own order of additions.
TF32_GROWTH = 4
U_TF32 = 2.0 ** -11


@pytest.mark.parametrize("mode", ["emulated", "ptx"])
@pytest.mark.parametrize("shape,cout,padding,bias", [
    ((1, 7, 9, 11), 5, 1, True),      # fewer channels and tiles than any tile of the GEMM
    ((2, 19, 13, 10), 37, 0, False),  # odd everything, no padding
    ((1, 64, 14, 14), 48, 1, True),   # a ResNet-like layer: K = 64 along the products
])
def test_f2_products_run_on_the_tensor_cores_in_tf32(rng, mode, shape, cout, padding, bias):
    """Every TF32 tensor-core set as the products' GEMM (forced), emulated anywhere and on the
    tensor cores where the probe found them: within TF32's bound of the float64 result, and
    visibly not float32 (the rounding shows)."""
    from tests.opencl.mma_harness import mode_params

    runtime = OpenCLRuntime.shared()
    case = ConvCase(shape, cout, (3, 3), padding=(padding, padding), bias=bias)
    x, w, b = case.tensors(rng)
    expected = torch_reference(x, w, b, padding=padding)
    sizes = term_sizes(x, w, padding=padding) + (np.abs(b)[:, None, None] if bias else 0)
    scale = tile_max(sizes, 2)
    # the sets this device can hold (Oclgrind's local memory takes the smaller tiles only)
    sets = [p for p in mma_sets.MMA_PARAMETER_SETS["tf32"]
            if fits(mma_sets.emulated(p), runtime.device)]
    if not sets:
        pytest.skip(f"no TF32 tensor-core set fits {runtime.name}")
    if os.environ.get("KUIPER_OCLGRIND") == "1":   # the simulator: the first and the last set
        sets = [sets[0], sets[-1]]
    for params in sets:
        gemm = mode_params(params, mode, runtime)
        with mma_sets.emulated_tensor_cores() if mode == "emulated" else nullcontext():
            y, layer = run_forced(case, x, w, b, "winograd_f2x2", params={"gemm": gemm},
                                  precision="tf32")
        assert layer.algorithm_params == {"gemm": gemm} and layer.computes == "tf32"
        worst = float(np.max(np.abs(y - expected) / scale))
        assert worst <= TF32_GROWTH * U_TF32, (
            f"{mma_sets.describe(params)}: error {worst / U_TF32:.2f} x 2^-11 x sum|w||x|")
        assert worst > 0.05 * U_TF32, "float32 in disguise: no TF32 rounding shows"


def test_f2_offers_the_tensor_cores_at_tf32_only_and_f4_never(rng):
    """The products' sets: the tensor cores' first where the cost model rates them cheaper,
    at tf32 only (fp16 would store U as half), and never for F(4x4), whose transforms would
    grow TF32's rounding to the contract's bound."""
    from tests.opencl.described_devices import fake_h100

    tf32 = make_problem((32, 64, 56, 56), (64, 64, 3, 3), padding=1, precision="tf32")
    with mma_sets.emulated_tensor_cores():
        f2 = ALGORITHMS["winograd_f2x2"].parameter_sets(tf32, fake_h100())
        f4 = ALGORITHMS["winograd_f4x4"].parameter_sets(tf32, fake_h100())
        fp16 = ALGORITHMS["winograd_f2x2"].parameter_sets(
            make_problem((32, 64, 56, 56), (64, 64, 3, 3), padding=1, precision="fp16"),
            fake_h100())
    def kernels(sets):
        return {p["gemm"]["kernel"] for p in sets if "gemm" in p}
    assert "gemm_mma" in kernels(f2) and f2[0]["gemm"]["kernel"] == "gemm_mma"
    assert kernels(f4) == kernels(fp16) == {"gemm_tiled"}
    assert ALGORITHMS["winograd_f2x2"].computes(f2[0]) == "tf32"
    assert json.loads(json.dumps(f2)) == f2
