"""Every parameter set of gemm.h (both families, whatever the device) against NumPy.

The selector and `kuiper tune` may pick any set of GPU_PARAMETER_SETS / CPU_PARAMETER_SETS, so
each is run here on awkward shapes: sizes of 1, sizes just above and below the tiles (63, 65,
129), K not a multiple of any TILE_K or BLOCK_K, a batch of grouped products, the transposed
layouts (TRANS_A: conv_transpose's weight; TRANS_B: linear's), both bias modes, and a fused
epilogue (activation + residual) in the store.
"""

from __future__ import annotations

import numpy as np
import pytest

from kuiper.layers.opencl_gemm import launch as gemm
from kuiper.layers.opencl_gemm import parameter_sets
from kuiper.passes.epilogue import Epilogue
from kuiper.testing import assert_close
from tests.conftest import opencl_available
from tests.opencl.conv_harness import activation_operator
from tests.opencl.mma_harness import GemmLayer
from tests.opencl.mma_harness import run as run_gemm  # C = A @ B on the device, and A, B, bias

pytestmark = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")

# (stem, TRANS_A, TRANS_B): the programs that include gemm.h
LAYOUTS = [("conv2d", False, False), ("conv_transpose2d", True, False), ("linear", False, True)]
ALL_SETS = (gemm.GPU_PARAMETER_SETS + gemm.CPU_PARAMETER_SETS + gemm.GPU_GEMV_SETS
            + gemm.CPU_GEMV_SETS)
SHAPES = [(1, 1, 1), (7, 63, 65), (65, 129, 7), (129, 7, 63), (63, 65, 300)]


@pytest.fixture(scope="module")
def runtime():
    from kuiper.opencl.device.runtime import OpenCLRuntime

    return OpenCLRuntime.shared()


def label(params: dict) -> str:
    return gemm.describe_params(params).replace(" ", "_")


def expected_gemm(a, b, bias, trans_a, trans_b, groups, bias_mode):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if trans_a:
        a64 = a64.transpose(0, 2, 1)
    if trans_b:
        b64 = b64.transpose(0, 2, 1)
    z = b64.shape[0]
    c = np.stack([a64[i % groups] @ b64[i] for i in range(z)])
    m = c.shape[1]
    if bias_mode == gemm.BIAS_PER_ROW:
        c += np.stack([bias[(i % groups) * m:(i % groups + 1) * m, None] for i in range(z)])
    elif bias_mode == gemm.BIAS_PER_COLUMN:
        c += bias
    return c


def fits_here(runtime, params):
    if not gemm.fits(params, runtime.device):
        pytest.skip(f"{gemm.describe_params(params)} does not fit {runtime.name}: "
                    f"{gemm.why_it_cannot_run(params, runtime.device)}")


def test_k_blocked_sets_and_blocks_of_other_than_8_rows_run_on_cpu_devices_only():
    """K blocking and the 6- and 4-row gemm_blocked sets are CPU techniques; a GPU is refused
    them (parameter_sets.fits says what NVIDIA's compiler did with the K-blocked 6x16 and 8x16
    sets on a transposed A), with the reason; the other gemm_blocked sets still fit it."""
    from tests.opencl.described_devices import fake_h100

    h100 = fake_h100()
    blocked = [p for p in gemm.CPU_PARAMETER_SETS if p["kernel"] == "gemm_blocked"]
    refused = [p for p in blocked if p.get("BLOCK_K", 0) > 0 or p.get("MR", 8) != 8]
    assert refused and len(refused) < len(blocked)
    for params in blocked:
        if params in refused:
            assert not gemm.fits(params, h100)
            assert "CPU devices only" in gemm.why_it_cannot_run(params, h100)
        else:
            assert gemm.fits(params, h100), gemm.describe_params(params)


def sets_on_layouts():
    """Every set on each layout. The normal run takes each set on one of them, in turn (the
    layouts differ only in how A and B are indexed, which test_groups_batch_and_bias and the
    layers' tests also cover); `--full-sweeps` the other two as well."""
    return [pytest.param(params, layout, id=f"{layout[0]}-{label(params)}",
                         marks=() if j == i % len(LAYOUTS) else pytest.mark.full_sweep)
            for i, params in enumerate(ALL_SETS) for j, layout in enumerate(LAYOUTS)]


@pytest.mark.parametrize(("params", "layout"), sets_on_layouts())
def test_every_parameter_set_on_awkward_shapes(runtime, rng, params, layout):
    fits_here(runtime, params)
    stem, trans_a, trans_b = layout
    for m, n, k in SHAPES:
        c, a, b, bias = run_gemm(runtime, stem, trans_a, trans_b, m, n, k, params, rng)
        assert_close(c, expected_gemm(a, b, bias, trans_a, trans_b, 1, gemm.BIAS_NONE),
                     what=f"{stem} {gemm.describe_params(params)} M,N,K={m},{n},{k}")


@pytest.mark.sweep(keep=9)
@pytest.mark.parametrize("params", ALL_SETS, ids=label)
def test_groups_batch_and_bias(runtime, rng, params):
    """z = batch x groups products, A shared per group, bias per row of each group and per
    column: the convolution's and the linear layer's cases. The indexing of groups, batches
    and biases is each family's, not each set's: the normal run takes 9 sets spread over the
    families (up to 16 s each to build on PoCL), --full-sweeps all."""
    fits_here(runtime, params)
    for bias_mode, stem, trans_b in ((gemm.BIAS_PER_ROW, "conv2d", False),
                                     (gemm.BIAS_PER_COLUMN, "linear", True)):
        c, a, b, bias = run_gemm(runtime, stem, False, trans_b, 33, 70, 45, params, rng,
                                 groups=3, batch=2, bias_mode=bias_mode)
        assert_close(c, expected_gemm(a, b, bias, False, trans_b, 3, bias_mode),
                     what=f"{gemm.describe_params(params)} bias mode {bias_mode}")


BLOCKED_SETS = [p for p in gemm.CPU_PARAMETER_SETS if p["kernel"] == "gemm_blocked"]

# (M, N, K): N short of a whole block of columns (one short block: N < BLOCK_N; a 7 x 7 and a
# 14 x 14 image; one past a block), K from a single row (every row of the short block gathered)
# past the K blocks of 64 and 256
PARTIAL_BLOCK_SHAPES = [(13, 5, 40), (7, 49, 3), (9, 196, 33), (6, 17, 300), (8, 1, 20),
                        (13, 31, 1)]


@pytest.mark.parametrize("params", BLOCKED_SETS, ids=label)
def test_each_blocked_set_on_a_partial_last_block_of_columns(runtime, rng, params):
    """gemm_blocked's last block of columns when N is no multiple of BLOCK_N: its rows of B are
    loaded as whole vectors while the vector ends inside B (the lanes past N read the next row
    and are thrown away) and gathered value by value after that. A batch of two, so the first
    product's vectors run into the second's B; B stored as floats and as halves."""
    fits_here(runtime, params)
    for half_b in (False, True):
        for m, n, k in PARTIAL_BLOCK_SHAPES:
            c, a, b, bias = run_gemm(runtime, "conv2d", False, False, m, n, k, params, rng,
                                     batch=2, bias_mode=gemm.BIAS_PER_ROW, half_b=half_b)
            assert_close(c, expected_gemm(a, b, bias, False, False, 1, gemm.BIAS_PER_ROW),
                         what=f"{gemm.describe_params(params)} M,N,K={m},{n},{k} "
                              f"half B {half_b}")


@pytest.mark.parametrize("params", BLOCKED_SETS, ids=label)
def test_each_blocked_set_on_a_linear_layer_with_packed_weights(runtime, rng, params, tmp_path):
    """A linear layer with its weight W^T in gemm_blocked's strips (PACKED_B, as bind stores it
    for more than GEMV_MAX_ROWS rows when a gemm_blocked set runs it), each set pinned: rows,
    outputs and inputs that leave a partial block of rows (MR), a partial strip and a K of no
    block size."""
    import torch
    import torch.nn.functional as F

    import kuiper
    from kuiper.layers.opencl_gemm.selection import pinned
    from kuiper.testing import write_operator_model

    fits_here(runtime, params)
    x = rng.standard_normal((67, 45)).astype(np.float32)
    w = rng.standard_normal((37, 45)).astype(np.float32)
    b = rng.standard_normal(37).astype(np.float32)
    path = write_operator_model(tmp_path, "nn.Linear", [x], params={
        "in_features": 45, "out_features": 37, "bias": True}, weights={"weight": w, "bias": b})
    with pinned("gemm", params):
        graph = kuiper.load(path, backend="opencl")
        y = graph(x)
    assert graph.order[1].layer.launches[0].kernel.function_name == "gemm_blocked"
    assert_close(y, F.linear(*map(torch.from_numpy, (x, w, b))).numpy(),
                 what=gemm.describe_params(params))


@pytest.fixture(scope="module")
def silu_operator():
    """A real SiLU operator with its OpenCL layer: its expression is what fuses."""
    return activation_operator("nn.SiLU")


def silu(x):
    return x / (1.0 + np.exp(-x))


@pytest.mark.parametrize("params", [gemm.GPU_PARAMETER_SETS[0], gemm.GPU_PARAMETER_SETS[-1],
                                    gemm.CPU_PARAMETER_SETS[0], gemm.CPU_PARAMETER_SETS[-1]],
                         ids=label)
@pytest.mark.parametrize("residual_first", [True, False])
def test_epilogue_in_the_store(runtime, rng, silu_operator, params, residual_first):
    """act(C + bias + r) or act(C + bias) + r, r read at the flat output index (z, row, col)."""
    fits_here(runtime, params)
    m, n, k, groups, batch = 19, 37, 23, 2, 2
    residual = rng.standard_normal((groups * batch, m, n)).astype(np.float32)
    epilogue = Epilogue.around(activation=silu_operator, residual="r",
                               residual_first=residual_first)
    c, a, b, bias = run_gemm(runtime, "conv2d", False, False, m, n, k, params, rng,
                             groups=groups, batch=batch, bias_mode=gemm.BIAS_PER_ROW,
                             epilogue=epilogue, residual=residual)
    plain = expected_gemm(a, b, bias, False, False, groups, gemm.BIAS_PER_ROW)
    expected = silu(plain + residual) if residual_first else silu(plain) + residual
    assert_close(c, expected)


def test_parameter_sets_are_what_the_families_promise():
    """Each GPU set divides into whole work-items, whole vector loads and (LDS_VEC) whole
    float4 runs; each CPU set uses a block width gemm_blocked.h has (8, 16 or 32: two float16)."""
    for p in gemm.GPU_PARAMETER_SETS:
        assert p["TILE_M"] % p["WPT_M"] == 0 and p["TILE_N"] % p["WPT_N"] == 0, p
        assert p["TILE_K"] % p["VEC"] == 0 and p["TILE_M"] % p["VEC"] == 0, p
        assert p["TILE_N"] % p["VEC"] == 0, p
        if p["LDS_VEC"]:   # float4 runs from local memory: whole runs of 4 in a block
            assert p["WPT_M"] % 4 == 0 and p["WPT_N"] % 4 == 0, p
    for p in gemm.CPU_PARAMETER_SETS:
        assert p["BLOCK_N"] in (8, 16, 32) and p["BLOCK_K"] >= 0, p
    assert len({gemm.describe_params(p) for p in ALL_SETS}) == len(ALL_SETS)


@pytest.mark.parametrize("device", ["h100", "two-core cpu"])
def test_the_cost_model_picks_gemv_for_a_classifier_at_batch_1(device):
    """A linear layer on one row (MobileNetV2's classifier, 1280 -> 1000) goes to gemv.h, which
    reads the weight once; at 64 rows, or in a convolution's layout, the GEMM families do."""
    from kuiper.layers.opencl_gemm.cost import ranked_gemm_params
    from tests.opencl.described_devices import fake_h100, fake_two_core_cpu

    dev = fake_h100() if device == "h100" else fake_two_core_cpu()
    assert ranked_gemm_params(dev, 1, 1000, 1280, trans_b=True)[0]["kernel"] == "gemv"
    assert ranked_gemm_params(dev, 64, 1000, 1280, trans_b=True)[0]["kernel"] != "gemv"
    assert all(p["kernel"] != "gemv" for p in ranked_gemm_params(dev, 1, 1000, 1280))


def test_the_cost_model_keeps_16x8_blocks_for_big_square_products():
    """256x128 tiles of 16x8 blocks are the fastest at 4096^3 on the H100 and slower than the
    8x8 sets on every convolution shape measured (gemm_params.py): the cost model agrees."""
    from kuiper.layers.opencl_gemm.cost import ranked_gemm_params
    from tests.opencl.described_devices import fake_h100

    def blocks(m, n, k, z=1):
        best = ranked_gemm_params(fake_h100(), m, n, k, z)[0]
        return best["WPT_M"] * best["WPT_N"]

    assert blocks(4096, 4096, 4096) == 128
    assert blocks(256, 25600, 1152) < 128         # a YOLOv5s-sized convolution
    assert blocks(64, 3136, 576, 32) < 128        # ResNet-18 stage 1 at batch 32


def run_linear_gemm(runtime, m, n, k, params, rng, trans_b=True, with_bias=True,
                    epilogue=None, residual=None, half_b=False):
    """x (m x k) @ W^T (+ bias per column, + epilogue) through linear_gemm_launches, whose
    split-K sets take a scratch buffer and a second launch; returns (C, expected before the
    epilogue). `half_b`: the weight stored as float16 (precision fp16), the expected result
    that of the half-rounded weight."""
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float16 if half_b
                                                                   else np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    dx, dw, dbias = (runtime.to_device(v) for v in (x, w, bias))
    dc = runtime.empty((m, n))
    workspaces = [runtime.empty(shape, dtype)
                  for shape, dtype in gemm.split_workspace(params, m, n, k)]
    dres = runtime.to_device(residual) if residual is not None else None
    launches = gemm.linear_gemm_launches(
        GemmLayer(runtime, "linear"), m, n, k, dx.data, dw.data, dc.data,
        dbias.data if with_bias else None, params, epilogue=epilogue,
        residual=None if dres is None else dres.data,
        options=[f"-DTRANS_B={int(trans_b)}"], workspaces=workspaces, half_b=half_b)
    for launch in launches:
        runtime.cl.enqueue_nd_range_kernel(runtime.queue, launch.kernel, launch.global_size,
                                           launch.local_size)
    w64 = w.astype(np.float64)
    expected = x.astype(np.float64) @ (w64.T if trans_b else w64)
    return dc.get(), expected + (bias if with_bias else 0.0), len(launches)


def check_linear_gemm(runtime, rng, params, m, n, k, trans_b=True, half_b=False):
    c, expected, launches = run_linear_gemm(runtime, m, n, k, params, rng, trans_b=trans_b,
                                            with_bias=trans_b, half_b=half_b)
    what = (f"{gemm.describe_params(params)} M,N,K={m},{n},{k} trans_b={trans_b}"
            + (" half weight" if half_b else ""))
    assert launches == (2 if gemm.slices_of(params, k) > 1 else 1), what
    assert_close(c, expected, what=what)


@pytest.mark.sweep(keep=8)
@pytest.mark.parametrize("params", parameter_sets.GPU_SPLIT_SETS, ids=label)
def test_every_split_k_set(runtime, rng, params):
    """Every split-K set (gemm_split_k.h) once: K not a multiple of the slice, the slab or the
    split (slices rounded up to whole slabs leave fewer, shorter slices), M and N off the
    tile. (One shape each: every K is another K_SLICE, another program to build.) The normal
    run takes 8 of the 20, every tile and every split among them (GPUs run these sets, a CPU
    device never picks them; about 10 s each to build on PoCL); --full-sweeps all."""
    fits_here(runtime, params)
    check_linear_gemm(runtime, rng, params, 65, 70, 1000)


@pytest.mark.parametrize("params", [parameter_sets.split_k(tile, 3)
                                    for tile in parameter_sets.SPLIT_TILES],
                         ids=label)
def test_split_k_layouts_and_edges(runtime, rng, params):
    """Each tile of the split sets: the weight stored (in, out) without a bias, K whose last
    slice is short, and K too short to split, which runs as one unsplit launch."""
    fits_here(runtime, params)
    check_linear_gemm(runtime, rng, params, 5, 33, 1000, trans_b=False)
    check_linear_gemm(runtime, rng, params, 3, 5, 7)


@pytest.mark.parametrize("params", [parameter_sets.split_k(parameter_sets.SPLIT_TILES[0], 3),
                                    parameter_sets.split_k(parameter_sets.SPLIT_TILES[-1], 8)],
                         ids=label)
def test_half_weights_on_split_k_sets(runtime, rng, params):
    """Split sets compete at every precision (they are gemm_tiled's, computing in fp32), so
    under fp16 a linear layer's half weight reaches them: the product pass reads it as
    halves (HALF_B), in both stored layouts, and the sum pass adds float slices; the result is
    the float32 product of the half-rounded weight. K too short to split runs one launch,
    still reading halves."""
    fits_here(runtime, params)
    check_linear_gemm(runtime, rng, params, 33, 70, 1000, half_b=True)
    check_linear_gemm(runtime, rng, params, 9, 40, 700, trans_b=False, half_b=True)
    check_linear_gemm(runtime, rng, params, 3, 5, 7, half_b=True)


@pytest.mark.parametrize("residual_first", [True, False])
def test_split_k_epilogue_in_the_sum(runtime, rng, silu_operator, residual_first):
    """The fused epilogue is applied once, by the pass that adds the slices, not per slice."""
    params = parameter_sets.GPU_SPLIT_SETS[-1]
    fits_here(runtime, params)
    m, n, k = 19, 37, 700
    residual = rng.standard_normal((m, n)).astype(np.float32)
    epilogue = Epilogue.around(activation=silu_operator, residual="r",
                               residual_first=residual_first)
    c, plain, launches = run_linear_gemm(runtime, m, n, k, params, rng, epilogue=epilogue,
                                         residual=residual)
    assert launches == 2
    expected = silu(plain + residual) if residual_first else silu(plain) + residual
    assert_close(c, expected)


def test_a_split_set_needs_its_pass(runtime, rng):
    """weight_gemm_launch refuses a split-K set (it would store raw slices), and
    linear_gemm_launches one without its scratch buffer: clear errors, not wrong values."""
    from kuiper.core.errors import KuiperError

    params = parameter_sets.GPU_SPLIT_SETS[0]
    fits_here(runtime, params)
    d = runtime.empty((64, 64))
    with pytest.raises(KuiperError, match="splits K"):
        gemm.weight_gemm_launch(GemmLayer(runtime, "linear"), 64, 64, 1024, d.data, 0, d.data,
                                0, d.data, 0, params=params)
    with pytest.raises(KuiperError, match="scratch buffer"):
        gemm.linear_gemm_launches(GemmLayer(runtime, "linear"), 64, 64, 1024, d.data, d.data,
                                  d.data, None, params)
