"""The direct convolution with channels as lanes (layers/opencl_conv/direct.py), forced,
against PyTorch: output channels that do not fill a vector, rows that are not a whole number of
pixel runs, images narrower than a run, stride 2 and 3, dilation, groups, batches, padding wider
than the kernel's reach, 1-D, fused epilogues (with a residual read channel by channel), the
weight as an input (packed on the device), and every parameter set on its own.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch.nn as nn

from kuiper.core.errors import KuiperError
from kuiper.layers.opencl_conv.algorithms import ALGORITHMS, ConvProblem
from kuiper.layers.opencl_conv.direct import (
    GROUP_ITEMS,
    GROUPS_PER_UNIT,
    PARAMETER_SETS,
    default_set,
    group_size,
    pack_weight,
    row_fitted,
)
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

NAME = "direct"

CASES = [
    ConvCase((1, 5, 13, 29), 17, (3, 3), (2, 2), (1, 1)),                # YOLO's stride 2, 17 ch
    ConvCase((2, 3, 19, 23), 40, (7, 7), (2, 2), (3, 3)),                # ResNet's stem, batch 2
    ConvCase((1, 6, 9, 11), 33, (3, 3), (1, 1), (1, 1)),                 # 33: 3 vectors
    ConvCase((1, 4, 5, 3), 16, (3, 3), (1, 1), (1, 1)),                  # narrower than a run
    ConvCase((3, 8, 11, 26), 12, (3, 3), (2, 2), (1, 1), groups=2),      # groups, batch 3
    ConvCase((1, 7, 15, 15), 20, (3, 3), (1, 1), (2, 2), (2, 2)),        # dilation 2
    ConvCase((1, 4, 14, 31), 9, (5, 3), (3, 2), (3, 4), bias=False),     # padding past the taps
    ConvCase((1, 9, 1, 1), 18, (1, 1)),                                  # 1x1 everything
    ConvCase((2, 6, 8, 8), 24, (1, 1), (2, 2)),                          # 1x1 stride 2
    ConvCase((2, 5, 37), 19, (3,), (2,), (1,)),                          # Conv1d
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_direct_forced_matches_torch(rng, case):
    x, w, b = case.tensors(rng)
    y, layer = run_forced(case, x, w, b, NAME)
    assert (layer.algorithm, layer.algorithm_reason) == (NAME, "forced")
    assert_close(y, torch_conv(case, x, w, b))


# the listed sets, and runs of other lengths as row_fitted makes them (1, 5, 7, 13 pixels)
EVERY_SET = PARAMETER_SETS + [{"pix": 7, "nv": 2}, {"pix": 13, "nv": 1}, {"pix": 5, "nv": 2},
                              {"pix": 1, "nv": 1}]


@pytest.mark.parametrize("params", EVERY_SET, ids=lambda p: f"{p['pix']}x{p['nv']}")
@pytest.mark.parametrize("case", [CASES[0], CASES[2], CASES[4]], ids=str)
def test_direct_every_parameter_set(rng, case, params):
    """Each block shape `kuiper tune` may pick: runs of 1-16 pixels and 16 or 32 channels,
    against rows of 15, 11 and 13 pixels and 17, 33 and 6 channels per group."""
    x, w, b = case.tensors(rng)
    y, layer = run_forced(case, x, w, b, NAME, params=params)
    assert layer.algorithm_params == params
    assert_close(y, torch_conv(case, x, w, b), what=f"parameters {params}")


@pytest.mark.parametrize("width,pix,fitted", [(7, 8, 7), (14, 8, 7), (56, 8, 8), (13, 4, 4),
                                              (15, 16, 15), (20, 12, 10), (1, 4, 1)])
def test_runs_are_fitted_to_the_rows(width, pix, fitted):
    """A run as short as covers the row in as many runs: no pixel computed and dropped where
    the row divides evenly, never a longer run (more accumulators) than the set asks for."""
    assert row_fitted(pix, width) == fitted
    runs = -(-width // pix)
    assert -(-width // fitted) == runs and fitted <= pix and runs * fitted - width < runs
    problem = make_problem((1, 8, 9, width), (16, 8, 3, 3), padding=1)
    sets = ALGORITHMS[NAME].parameter_sets(problem, None)
    assert sets[0] == default_set(width)


@pytest.mark.parametrize("width,pix", [(7, 7), (14, 7), (20, 10), (28, 7), (40, 8), (56, 8),
                                       (112, 8), (3, 3)])
def test_the_default_run_is_8_or_10_pixels_whichever_wastes_less(width, pix):
    """8 x 2 fitted to the rows, 10 x 2 only where it leaves fewer pixels unused at the rows'
    ends (20: two runs of 10 rather than three of 7)."""
    assert default_set(width) == {"pix": pix, "nv": 2}


@pytest.mark.parametrize("width,pix", [(7, 4), (14, 5), (20, 5), (28, 6), (56, 6), (112, 6),
                                       (3, 3)])
def test_the_default_on_8_float_simd_is_one_vector_by_at_most_6_pixels(width, pix):
    """With AVX2's 16 registers of 8 floats, 8 x 2 blocks (32 registers of accumulators)
    spill: the default there is 16 channels by runs of up to 6 pixels fitted to the rows, for
    the cost model and for the selector's first set."""
    from tests.opencl.described_devices import fake_two_core_cpu

    assert default_set(width, narrow=True) == {"pix": pix, "nv": 1}
    problem = make_problem((1, 8, 9, width), (16, 8, 3, 3), padding=1)
    avx2, avx512 = fake_two_core_cpu(lanes=8), fake_two_core_cpu(lanes=16)
    assert ALGORITHMS[NAME].parameter_sets(problem, avx2)[0] == {"pix": pix, "nv": 1}
    assert ALGORITHMS[NAME].parameter_sets(problem, avx512)[0] == default_set(width)


@pytest.mark.parametrize("rows,runs,others,units,limit", [
    (7, 1, 16, 2, GROUP_ITEMS),        # ResNet-18's stage 4: a group per block, all 7 rows
    (14, 2, 8, 2, GROUP_ITEMS),        # stage 3
    (112, 7, 2, 2, GROUP_ITEMS),       # the stem: 256 items at most, whole rows
    (56, 7, 1, 2, GROUP_ITEMS),        # one block: rows split so that each core gets groups
    (1, 1, 1, 64, GROUP_ITEMS),        # nothing to split
    (30, 7, 4, 132, 64),               # a kernel that allows 64 work-items per group
])
def test_work_groups_are_whole_rows_and_keep_every_core_busy(rows, runs, others, units, limit):
    local = group_size(rows, runs, others, units, limit)
    assert local % runs == 0 and local // runs <= rows and local <= limit
    groups = -(-rows // (local // runs)) * others
    assert groups >= min(GROUPS_PER_UNIT * units, rows * others)


def test_rows_longer_than_a_group_are_cut_anywhere(rng):
    """A Conv1d of 9000 outputs in runs of 4: 2250 runs in its one row, more than a group
    holds (and more than a GPU allows): groups of GROUP_ITEMS runs, the last one partial."""
    assert group_size(1, 2250, 1, 2) == GROUP_ITEMS == group_size(3, 300, 4, 2)
    assert group_size(1, 2250, 1, 2, limit=64) == 64
    case = ConvCase((1, 3, 9000), 16, (3,), (1,), (1,))
    x, w, b = case.tensors(rng)
    y, layer = run_forced(case, x, w, b, NAME, params={"pix": 4, "nv": 2})
    launch = layer.launches[-1]
    assert launch.local_size[0] == min(GROUP_ITEMS, layer.group_limit(launch.kernel))
    assert launch.global_size[0] % launch.local_size[0] == 0
    assert launch.global_size[0] >= 2250 > launch.local_size[0]   # groups cut the row
    assert_close(y, torch_conv(case, x, w, b))


def test_direct_parameter_sets_survive_the_tuning_cache():
    problem = make_problem((1, 8, 9, 9), (16, 8, 3, 3), padding=1)
    sets = ALGORITHMS[NAME].parameter_sets(problem, None)
    assert len({str(p) for p in sets}) == len(sets) > 1
    assert json.loads(json.dumps(sets)) == sets


@pytest.mark.parametrize("op_type,act,residual,first", [
    ("nn.SiLU", nn.functional.silu, False, True),        # YOLO's convolutions
    ("nn.SiLU", nn.functional.silu, True, False),        # silu(conv) + r: a bottleneck's end
    ("nn.ReLU", nn.functional.relu, True, True),         # relu(conv + r): ResNet's block end
])
@pytest.mark.parametrize("cout,params", [
    (21, None),                        # a part block: the pixel-by-pixel store
    (64, {"pix": 7, "nv": 2}),         # whole blocks (store_block), 32 channels each
    (48, {"pix": 4, "nv": 1}),         # whole blocks of 16, and rows of 7 = 4 + a part run
])
def test_direct_fused_epilogue(rng, op_type, act, residual, first, cout, params):
    x = rng.standard_normal((2, 5, 9, 14)).astype(np.float32)
    w = rng.standard_normal((cout, 5, 3, 3)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    r = rng.standard_normal((2, cout, 5, 7)).astype(np.float32) if residual else None
    epilogue = activation_epilogue(op_type, residual=residual, residual_first=first)
    y = run_algorithm(NAME, x, w, b, epilogue=epilogue, residual=r, stride=2, padding=1,
                      params=params)
    expected = torch_reference(x, w, b, stride=2, padding=1, activation=act, residual=r,
                               residual_first=first)
    assert_close(y, expected)


@pytest.mark.parametrize("params", [PARAMETER_SETS[0], PARAMETER_SETS[-1]],
                         ids=lambda p: f"{p['pix']}x{p['nv']}")
def test_direct_weight_as_input(rng, params):
    """F.conv2d: the weight is the producer's device array, packed by direct_pack each run."""
    x = rng.standard_normal((1, 6, 8, 19)).astype(np.float32)
    w = rng.standard_normal((34, 3, 3, 3)).astype(np.float32)
    y = run_algorithm(NAME, x, w, None, weight_on_host=False, padding=1, groups=2,
                      params=params)
    assert_close(y, torch_reference(x, w, None, padding=1, groups=2))


def test_pack_weight_layout():
    """wp[g][block][k][lane] = w[g*M + block*lanes + lane][k], zeros past M (by hand)."""
    w = np.arange(2 * 20 * 3 * 1 * 2, dtype=np.float32).reshape(40, 3, 1, 2)
    packed = pack_weight(w, groups=2, params={"pix": 8, "nv": 1})
    assert packed.shape == (2, 2, 6, 16)
    assert packed[1, 0, 4, 3] == w[20 + 3].reshape(-1)[4]
    assert packed[0, 1, 5, 3] == w[16 + 3].reshape(-1)[5]
    assert not packed[0, 1, :, 4:].any() and not packed[1, 1, :, 4:].any()


@pytest.mark.parametrize("shape,kernel,groups,mode,why", [
    ((1, 6, 9, 9), (6, 1, 3, 3), 6, "zeros", "depthwise"),
    ((1, 4, 9, 9), (8, 4, 3, 3), 1, "reflect", "zero padding only"),
])
def test_direct_unsupported_says_why(shape, kernel, groups, mode, why):
    problem = make_problem(shape, kernel, padding=1, groups=groups, padding_mode=mode)
    reason = ALGORITHMS[NAME].unsupported(problem, None)
    assert reason is not None and why in reason


def test_direct_refuses_more_than_one_depth_plane(rng):
    """A Conv3d with a kernel depth of 1 on an input of depth 1 still has 3 output planes when
    its depth is padded: the kernel writes one plane, so the selector must not offer it (the
    convolution then runs another algorithm, correctly)."""
    case = ConvCase((1, 4, 1, 6, 6), 16, (1, 3, 3), (1, 1, 1), (1, 1, 1))
    problem = ConvProblem(n=1, c=4, cout=16, groups=1, size=(1, 6, 6), kernel=(1, 3, 3),
                          out=(3, 6, 6), stride=(1, 1, 1), dilation=(1, 1, 1),
                          pads=((1, 1), (1, 1), (1, 1)))
    assert "depth plane" in ALGORITHMS[NAME].unsupported(problem, None)
    x, w, b = case.tensors(rng)
    y, layer = run_forced(case, x, w, b, NAME)
    assert layer.algorithm != NAME
    assert_close(y, torch_conv(case, x, w, b))


def test_direct_bad_parameters_are_a_kuiper_error(rng):
    x = rng.standard_normal((1, 3, 5, 5)).astype(np.float32)
    w = rng.standard_normal((16, 3, 3, 3)).astype(np.float32)
    with pytest.raises(KuiperError, match=r"direct: block"):
        run_algorithm(NAME, x, w, params={"pix": 5, "nv": 3}, padding=1)


@pytest.mark.parametrize("x_shape,w_shape,stride,padding,expected", [
    ((1, 32, 320, 320), (64, 32, 3, 3), 2, 1, "direct"),     # YOLOv5s's first stride-2 layer
    ((1, 3, 224, 224), (64, 3, 7, 7), 2, 3, "direct"),       # ResNet's stem
    ((1, 64, 80, 80), (64, 64, 1, 1), 1, 0, "gemm_1x1"),      # a 1x1: K too short
    ((1, 64, 56, 56), (64, 64, 3, 3), 1, 1, "winograd_f4x4"),  # stride 1: Winograd's
])
def test_the_cost_model_picks_direct_where_it_was_measured_fastest(x_shape, w_shape, stride,
                                                                    padding, expected):
    """On the described 2-core CPU the cost model ranks `direct` as `kuiper tune` measured it
    under PoCL (conv_direct.py's comment): first on the stride-2 and 7x7 layers above, behind
    gemm_1x1 and Winograd elsewhere; on the described H100 it is not first here (the sweep
    below checks the GPU more widely)."""
    from kuiper.layers.opencl_conv import selector as conv_select
    from tests.opencl.described_devices import fake_h100, fake_two_core_cpu

    problem = make_problem(x_shape, w_shape, stride=stride, padding=padding)
    assert conv_select.by_cost(problem, fake_two_core_cpu())[0][1].name == expected
    assert conv_select.by_cost(problem, fake_h100())[0][1].name != NAME


@pytest.mark.parametrize("x_shape,w_shape,expected", [
    ((1, 12, 160, 160), (32, 12, 3, 3), "direct"),          # YOLOv5s's first 3x3: 12 channels
    ((1, 32, 80, 80), (32, 32, 3, 3), "direct"),
    ((1, 64, 56, 56), (64, 64, 3, 3), "winograd_f4x4"),     # ResNet-18's stage 1
    ((1, 256, 14, 14), (256, 256, 3, 3), "winograd_f4x4"),  # stage 3
    ((1, 256, 10, 10), (256, 256, 3, 3), "winograd_f2x2"),  # YOLOv5s's 256 channels
])
def test_on_8_float_registers_winograd_pays_its_transforms(x_shape, w_shape, expected):
    """On the described 2-core AVX2 CPU the cost model counts Winograd's transform arithmetic
    (winograd.py's TRANSFORM_EFFICIENCY): with few channels it outweighs the saved products
    and `direct` goes first, as measured under PoCL on the AMD EPYC; with many, Winograd."""
    from kuiper.layers.opencl_conv import selector as conv_select
    from tests.opencl.described_devices import fake_two_core_cpu

    problem = make_problem(x_shape, w_shape, padding=1)
    assert conv_select.by_cost(problem, fake_two_core_cpu(lanes=8))[0][1].name == expected


def test_the_cost_model_never_picks_direct_on_a_gpu():
    """Small layers included (LeNet's 5x5, CIFAR's 8x8, 7x7 kernels on 7-14 pixels), where the
    launch overhead dominates every estimate and a low efficiency alone let it win."""
    from kuiper.layers.opencl_conv import selector as conv_select
    from tests.opencl.described_devices import fake_h100

    device = fake_h100()
    for n in (1, 4):
        for c, cout, size, k, stride in [(6, 16, 14, 5, 1), (64, 128, 8, 3, 2), (3, 64, 7, 7, 2),
                                         (32, 32, 14, 7, 1), (16, 16, 28, 3, 1),
                                         (256, 512, 56, 3, 2)]:
            problem = make_problem((n, c, size, size), (cout, c, k, k), stride=stride,
                                   padding=k // 2)
            assert conv_select.by_cost(problem, device)[0][1].name != NAME, problem.key
