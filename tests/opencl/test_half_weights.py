"""Weights stored as half (precision fp16) on every GEMM family, on any OpenCL device.

Under fp16 the weight of a linear layer, a convolution through its GEMM and a transposed
convolution is uploaded as float16 (half the bytes) and read with vload_half, a core OpenCL
function, by whichever kernel runs: gemm_tiled, gemm_blocked, gemv and gemm_mma. The math stays
float, so the result is the float32 product of the half-rounded weight, within float32's
tolerance of it (tests/opencl/mma_harness.py's bound with no input rounding).
"""

from __future__ import annotations

import numpy as np
import pytest

from kuiper.layers.opencl_gemm import launch as gemm
from tests.conftest import opencl_available
from tests.opencl import mma_harness as h

pytestmark = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")

# one set of each family, and the layouts where the weight is A (a convolution, a transposed
# one) or B (a linear layer, stored N x K, or K x N as on CPU devices)
SETS = [gemm.GPU_PARAMETER_SETS[-1], gemm.GPU_PARAMETER_SETS[7], gemm.CPU_PARAMETER_SETS[0],
        gemm.CPU_PARAMETER_SETS[-1]]
WEIGHT_LAYOUTS = [("conv2d", False, False, "a"), ("conv_transpose2d", True, False, "a"),
                  ("linear", False, True, "b"), ("conv2d", False, False, "b")]


@pytest.fixture(scope="module")
def runtime():
    from kuiper.opencl.device.runtime import OpenCLRuntime

    return OpenCLRuntime.shared()


@pytest.mark.parametrize("params", SETS, ids=lambda p: gemm.describe_params(p).replace(" ", "_"))
@pytest.mark.parametrize("layout", WEIGHT_LAYOUTS, ids=lambda t: f"{t[0]}_{t[3]}")
def test_half_weights_on_every_family(runtime, rng, params, layout):
    if not gemm.fits(params, runtime.device):
        pytest.skip(f"{gemm.describe_params(params)} does not fit {runtime.name}: "
                    f"{gemm.why_it_cannot_run(params, runtime.device)}")
    stem, trans_a, trans_b, weight = layout
    for m, n, k in [(1, 1, 1), (7, 63, 65), (65, 17, 300)]:
        c, a, b, _ = h.run(runtime, stem, trans_a, trans_b, m, n, k, params, rng,
                           half_a=weight == "a", half_b=weight == "b")
        h.check_precision_bounds(c, a, b, trans_a, trans_b, 1, "fp32",
                                 what=f"{stem} {gemm.describe_params(params)} half {weight} "
                                 f"M,N,K={m},{n},{k}")


@pytest.mark.parametrize("params", gemm.GPU_GEMV_SETS[:1] + gemm.CPU_GEMV_SETS,
                         ids=lambda p: gemm.describe_params(p).replace(" ", "_"))
def test_half_weights_on_gemv(runtime, rng, params):
    """gemv.h: a classifier at batch 1, its weight (out, in) read transposed as halves."""
    if not gemm.fits(params, runtime.device):
        pytest.skip(f"{gemm.describe_params(params)} does not fit {runtime.name}: "
                    f"{gemm.why_it_cannot_run(params, runtime.device)}")
    for m, n, k in [(1, 1000, 1280), (3, 7, 13)]:
        c, a, b, _ = h.run(runtime, "linear", False, True, m, n, k, params, rng, half_b=True)
        h.check_precision_bounds(c, a, b, False, True, 1, "fp32",
                                 what=f"gemv half weight M,N,K={m},{n},{k}")


@pytest.mark.parametrize("params", [gemm.CPU_PARAMETER_SETS[-1], gemm.GPU_PARAMETER_SETS[-1],
                                    gemm.CPU_GEMV_SETS[0]],
                         ids=lambda p: gemm.describe_params(p).replace(" ", "_"))
def test_every_half_value_converts_exactly(runtime, params):
    """All 65,536 half bit patterns as a weight times 1: each comes out as the float it stands
    for (zeros, subnormals, the largest, infinities, NaN), through the scalar, 8-wide and
    vload_half4 conversions. (A device that flushes float subnormals to zero may give 0 for
    half's subnormals, below 6.1e-5; gemm.h says so.)"""
    if not gemm.fits(params, runtime.device):
        pytest.skip(f"{gemm.describe_params(params)} does not fit {runtime.name}: "
                    f"{gemm.why_it_cannot_run(params, runtime.device)}")
    bits = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    values = bits.view(np.float16)
    one = np.ones((1, 1), np.float32)
    if params["kernel"] == "gemv":   # weight B (N x K): 65,536 outputs of one row
        a, b, half_a, half_b, n, m = one, values.reshape(-1, 1), False, True, 65536, 1
        stem = "linear"
    else:                            # weight A (M x K): 65,536 rows
        a, b, half_a, half_b, n, m = values.reshape(-1, 1), one, True, False, 1, 65536
        stem = "conv2d"
    da, db = runtime.to_device(a), runtime.to_device(b)
    dc = runtime.empty((m, n))
    launch = gemm.weight_gemm_launch(h.GemmLayer(runtime, stem), m, n, 1, da.data, 0, db.data, 0,
                                     dc.data, 0, params=params, half_a=half_a, half_b=half_b)
    runtime.cl.enqueue_nd_range_kernel(runtime.queue, launch.kernel, launch.global_size,
                                       launch.local_size)
    got, want = dc.get().reshape(-1), values.astype(np.float32)
    flushes = not (runtime.device.single_fp_config & runtime.cl.device_fp_config.DENORM)
    if flushes:
        subnormal = (bits & 0x7C00) == 0
        want = np.where(subnormal & (got == 0), 0.0, want).astype(np.float32)
    np.testing.assert_array_equal(got, want)
