"""split_k (layers/opencl_conv/split_k.py), forced, against PyTorch.

Through the real OpenCL layer (tests/opencl/conv_forced.py): awkward shapes with K long enough
to split (odd channels, 1x1 and 3x3 outputs, batch > 1, groups, stride 2, dilation 2, every
padding mode, 1-D and 3-D), each parameter set (slices x tile) on its own, slice counts that
the tile rounds down, the fused epilogue in the reduce kernel, the refusals, and the cost
model's reason to exist: ResNet-18's stage 4 at batch 1 on a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch.nn as nn

from kuiper.core.errors import OperatorError
from kuiper.layers.opencl_conv import implicit_gemm as conv_implicit_gemm
from kuiper.layers.opencl_conv import split_k as conv_split_k
from kuiper.layers.opencl_conv.algorithms import ALGORITHMS, ConvProblem
from kuiper.testing import assert_close
from tests.conftest import opencl_available
from tests.opencl.conv_forced import ConvCase, problem_of, run_forced, torch_conv
from tests.opencl.described_devices import fake_h100

pytestmark = pytest.mark.skipif(not opencl_available(), reason="needs an OpenCL device")

NAME = "split_k"
TILES = conv_implicit_gemm.TILED_SETS + conv_implicit_gemm.BLOCKED_SETS

CASES = {
    "stage-4 like, 7x7, K=576": ConvCase((1, 64, 7, 7), 24, (3, 3), padding=(1, 1)),
    "1x1 output, batch 2, K=1152": ConvCase((2, 128, 3, 3), 20, (3, 3)),
    "groups 2 stride 2 reflect": ConvCase((1, 32, 9, 8), 10, (3, 3), stride=(2, 2),
                                          padding=(1, 1), groups=2, mode="reflect"),
    "groups 3 dilation 2 circular, no bias": ConvCase(
        (2, 45, 7, 6), 9, (3, 3), padding=(2, 2), dilation=(2, 2), groups=3, bias=False,
        mode="circular"),
    "1d replicate, K=205": ConvCase((3, 41, 12), 11, (5,), padding=(2,), mode="replicate"),
    "3d, K=216": ConvCase((1, 8, 4, 5, 6), 7, (3, 3, 3), padding=(1, 1, 1), stride=(1, 2, 1)),
}
# K = 1152: every slice count of SLICES keeps at least MIN_SLICE indices per slice
EVERY_SET_CASE = CASES["1x1 output, batch 2, K=1152"]


def check(case: ConvCase, params: dict | None, rng):
    x, w, b = case.tensors(rng)
    y, layer = run_forced(case, x, w, b, NAME, params)
    assert (layer.algorithm, layer.algorithm_reason) == (NAME, "forced"), (
        f"the selector bound {layer.algorithm} ({layer.algorithm_reason})")
    assert_close(y, torch_conv(case, x, w, b))
    return layer


@pytest.mark.parametrize("case", list(CASES))
def test_forced_matches_torch(case, rng):
    check(CASES[case], None, rng)


@pytest.mark.parametrize("tile", TILES, ids=lambda p: "-".join(map(str, p.values())))
@pytest.mark.parametrize("slices", conv_split_k.SLICES)
def test_every_parameter_set(slices, tile, rng):
    params = {"slices": slices, **tile}
    problem_sets = ALGORITHMS[NAME].parameter_sets(problem_of(EVERY_SET_CASE), None)
    assert params in problem_sets, "the case must offer every (slices, tile) pair"
    layer = check(EVERY_SET_CASE, params, rng)
    # the partial sums live in the layer's workspace: one output-sized slab per slice (the
    # tile's K depth may round the slices down: 1152 / 16 = 72 -> 80 indices, 15 slices)
    used = -(-1152 // conv_split_k.slice_length(1152, slices, tile))
    assert slices - 1 <= used <= slices
    assert layer.split_k_partial.shape == (used, 2 * 20 * 1 * 1)


def test_tile_rounding_leaves_fewer_slices(rng):
    """K = 144 in 8 slices of a 16-deep tile: 32 indices a slice, so 5 slices, not 8."""
    case = ConvCase((1, 16, 6, 6), 12, (3, 3), padding=(1, 1))
    params = {"slices": 8, **conv_implicit_gemm.TILED_SETS[-1]}
    layer = check(case, params, rng)
    assert layer.split_k_partial.shape[0] == 5


@pytest.mark.parametrize("params", [{"slices": 4, **conv_implicit_gemm.TILED_SETS[0]},
                                    {"slices": 4, **conv_implicit_gemm.BLOCKED_SETS[0]}],
                         ids=lambda p: p["kernel"])
def test_fused_epilogue_in_the_reduce(params, rng):
    """Bias, residual and activation are added once, after the slices are summed."""
    from tests.opencl.conv_harness import activation_epilogue, run_algorithm, torch_reference

    x = rng.standard_normal((2, 40, 5, 6)).astype(np.float32)
    w = (rng.standard_normal((9, 40, 3, 3)) / 19).astype(np.float32)
    b = rng.standard_normal(9).astype(np.float32)
    residual = rng.standard_normal((2, 9, 5, 6)).astype(np.float32)
    epilogue = activation_epilogue("nn.LeakyReLU", True, True, negative_slope=0.2)
    y = run_algorithm(NAME, x, w, b, params=params, epilogue=epilogue, residual=residual,
                      padding=1)
    expected = torch_reference(x, w, b, padding=1, activation=nn.LeakyReLU(0.2),
                               residual=residual, residual_first=True)
    assert_close(y, expected)


def test_refuses_short_k_and_depthwise():
    short = problem_of(ConvCase((1, 3, 8, 8), 8, (3, 3)))          # K = 27
    assert "too short to split" in ALGORITHMS[NAME].unsupported(short, None)
    depthwise = problem_of(ConvCase((1, 64, 8, 8), 64, (3, 3), groups=64))
    assert "depthwise" in ALGORITHMS[NAME].unsupported(depthwise, None)


@pytest.mark.parametrize("slices", [0, "4", None])
def test_bad_slices_is_a_clear_error(slices, rng):
    case = CASES["stage-4 like, 7x7, K=576"]
    x, w, b = case.tensors(rng)
    params = {"slices": slices, **conv_implicit_gemm.BLOCKED_SETS[0]}
    with pytest.raises(OperatorError, match=r"'split_k'.*invalid.*'slices'"):
        run_forced(case, x, w, b, NAME, params)


def test_cost_model_splits_resnet_stage4_on_a_gpu():
    """512 -> 512 channels, 7x7, batch 1: 8 output tiles for 132 compute units, so split-K
    wins, with many slices; at 56x56 (stage 1) there are enough tiles and it does not."""
    gpu = fake_h100()
    stage4 = problem_of(ConvCase((1, 512, 7, 7), 512, (3, 3), padding=(1, 1)))
    split, plain = ALGORITHMS[NAME], ALGORITHMS["implicit_gemm"]
    assert split.cost(stage4, gpu) < plain.cost(stage4, gpu) / 2
    assert split.parameter_sets(stage4, gpu)[0]["slices"] >= 8
    stage1 = problem_of(ConvCase((8, 64, 56, 56), 64, (3, 3), padding=(1, 1)))
    assert split.cost(stage1, gpu) >= plain.cost(stage1, gpu)


@pytest.mark.parametrize("problem,measured_best", [
    # GoogLeNet's 480 -> 64 1x1 at 14x14: implicit_gemm's blocked (CPU) kernel was the pick,
    # measured 249 us on the H100 against 24 us for gemm_1x1's tiles
    (problem_of(ConvCase((1, 480, 14, 14), 64, (1, 1))), "gemm_1x1"),
    # MnasNet's depthwise 3x3 stride 2 at 112x112: depthwise_direct was the pick, 8.9x slower
    (ConvProblem(n=1, c=48, cout=48, groups=48, size=(1, 112, 112), kernel=(1, 3, 3),
                 out=(1, 56, 56), stride=(1, 2, 2), dilation=(1, 1, 1),
                 pads=((0, 0), (1, 1), (1, 1))), "depthwise"),
], ids=["googlenet-1x1", "mnasnet-depthwise-s2"])
def test_gpu_cost_model_calibration(problem, measured_best):
    """The GPU figures that `kuiper tune --json` on the H100 corrected (conv_implicit_gemm.py):
    no blocked (CPU) kernel, no 32x32 tile and no depthwise_direct is the pick where the H100
    measured them several times slower than the best candidate."""
    from kuiper.layers.opencl_conv import selector as conv_select

    gpu = fake_h100()
    algo = conv_select.by_cost(problem, gpu)[0][1]
    assert algo.name == measured_best   # the algorithm of the H100's fastest candidate


@pytest.mark.parametrize("family", ["gemm_tiled", "gemm_blocked"])
def test_the_gemm_cost_model_ranks_either_family_on_a_gpu(monkeypatch, family):
    """Tests force the CPU family on a GPU (FORCE_GEMM): the cost model must rank it too (it
    read the GPU-only tile keys of gemm_blocked's parameter sets, a KeyError on the H100)."""
    from kuiper.layers.opencl_gemm import cost as cost_model
    from kuiper.layers.opencl_gemm import parameter_sets as gemm_params

    monkeypatch.setattr(gemm_params, "FORCE_GEMM", family)
    ranked = cost_model.ranked_gemm_params(fake_h100(), 70, 33, 130)
    assert ranked and all(p["kernel"] == family for p in ranked)
