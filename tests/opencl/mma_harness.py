"""What the tensor-core tests share: the two roundings, one GEMM launch with any layout and
half weights (`run`, which test_gemm_kernels.py runs every parameter set with too), its
reference, and the error bounds each precision promises.

The roundings and the bound against float32 inputs are the engine's (kuiper/core/precision.py:
round_tf32, round_half, gemm_error_bound, which lesson 17 of the course teaches).

The bounds (u = 2^-24, float32's unit roundoff; K the length of each dot product):

- against the product of the *rounded* inputs (TF32 / half, as the kernel rounds them), only
  the float32 sums differ: |C - A_r @ B_r| <= 4 K u (|A_r| @ |B_r|) elementwise. The classic
  bound is K u; the factor 4 leaves room for the tensor cores' own order of additions (and
  their alignment of the addends, which truncates), so the same assertion runs on the GPU;
- against the float32 inputs, each product also carries the two roundings of its inputs,
  2^-11 each (TF32 rounds to nearest, ties away; half to nearest even; 10 bits of mantissa
  both): |C - A @ B| <= (2 * 2^-11 + 4 K u) (|A| @ |B|), plus an absolute term for values
  below half's normal range (gemm_error_bound).
"""

from __future__ import annotations

import numpy as np
import pytest

from kuiper.core.precision import ROUND, U32, gemm_error_bound, round_half
from kuiper.layers.opencl_gemm import launch as gemm
from kuiper.layers.opencl_gemm import mma_sets
from kuiper.opencl.device.tensor_cores import tensor_cores

# The TF32 register path (slabs through registers, rounded as they are stored: gemm_mma.h, point
# 7) is no parameter set's since cp.async (point 8); one set of it stays under test
TF32_REGISTER_PATH = mma_sets.mma("tf32", 64, 64, 32, 2, 2, 4, True, 2)
ALL_MMA_SETS = (mma_sets.MMA_PARAMETER_SETS["tf32"] + [TF32_REGISTER_PATH]
                + mma_sets.MMA_PARAMETER_SETS["fp16"])


class GemmLayer:
    """Just enough of an OpenCLLayer for weight_gemm_launch: a runtime and the program of one
    kernel file."""

    def __init__(self, runtime, stem: str):
        self.runtime, self.stem = runtime, stem

    def kernel(self, name, options=()):
        return self.runtime.kernel(self.stem, name, options)


def mode_params(params: dict, mode: str, runtime) -> dict:
    """`params` as the test mode runs it: "emulated" anywhere, "ptx" (the tensor cores) only
    where the probe found them, else the test skips saying why."""
    if mode == "emulated":
        return mma_sets.emulated(params)
    precision = mma_sets.precision_of(params)
    if precision not in tensor_cores(runtime.device):
        pytest.skip(f"{runtime.name} has no {precision} tensor cores that Kuiper can reach "
                    "(kuiper/opencl/device/tensor_cores.py probes NVIDIA GPUs only); the "
                    "emulated variant of this test runs the same kernel here")
    return params


def run(runtime, stem: str, trans_a: bool, trans_b: bool, m: int, n: int, k: int, params: dict,
        rng, groups: int = 1, batch: int = 1, bias_mode: int = gemm.BIAS_NONE,
        half_a: bool = False, half_b: bool = False, epilogue=None, residual=None):
    """C[z] = A[z % groups] @ B[z] on the device; returns (C, A, B, bias) with A and B as the
    kernel saw them (rounded to half where stored as half)."""
    z = groups * batch
    a = rng.standard_normal((groups, k, m) if trans_a else (groups, m, k)).astype(np.float32)
    b = rng.standard_normal((z, n, k) if trans_b else (z, k, n)).astype(np.float32)
    bias = rng.standard_normal(groups * m if bias_mode == gemm.BIAS_PER_ROW else n)
    bias = bias.astype(np.float32)
    da = runtime.to_device(a.astype(np.float16) if half_a else a)
    db = runtime.to_device(b.astype(np.float16) if half_b else b)
    dbias = runtime.to_device(bias)
    dc = runtime.empty((z, m, n))
    dres = runtime.to_device(residual) if residual is not None else None
    launch = gemm.weight_gemm_launch(
        GemmLayer(runtime, stem), m, n, k, da.data, m * k, db.data, k * n, dc.data, m * n,
        dbias.data if bias_mode else None, bias_mode, groups=groups, batch=batch,
        params=params, epilogue=epilogue, residual=None if dres is None else dres.data,
        half_a=half_a, half_b=half_b)
    runtime.cl.enqueue_nd_range_kernel(runtime.queue, launch.kernel, launch.global_size,
                                       launch.local_size)
    a = round_half(a) if half_a else a
    b = round_half(b) if half_b else b
    return dc.get(), a, b, bias


def as_products(a, b, trans_a: bool, trans_b: bool, groups: int):
    """(A per product, B per product) as float64 (M x K) and (K x N) matrices."""
    a64 = a.astype(np.float64).transpose(0, 2, 1) if trans_a else a.astype(np.float64)
    b64 = b.astype(np.float64).transpose(0, 2, 1) if trans_b else b.astype(np.float64)
    return [a64[i % groups] for i in range(b64.shape[0])], list(b64)


def check_precision_bounds(c, a, b, trans_a: bool, trans_b: bool, groups: int, precision: str,
                           extra=None, what: str = "") -> None:
    """Both bounds of the module docstring; `extra` (z, m, n) is added to both references
    (bias, epilogue-free)."""
    rounding = ROUND[precision]
    k = a.shape[1] if trans_a else a.shape[2]
    a_list, b_list = as_products(a, b, trans_a, trans_b, groups)
    ra_list = [rounding(x.astype(np.float32)).astype(np.float64) for x in a_list]
    rb_list = [rounding(x.astype(np.float32)).astype(np.float64) for x in b_list]
    rounded = np.stack([x @ y for x, y in zip(ra_list, rb_list)])
    rounded_scale = np.stack([np.abs(x) @ np.abs(y) for x, y in zip(ra_list, rb_list)])
    exact = np.stack([x @ y for x, y in zip(a_list, b_list)])
    scale = np.stack([np.abs(x) @ np.abs(y) for x, y in zip(a_list, b_list)])
    tiny = 1e-30
    if extra is not None:   # one more rounding, of the sum with the bias
        rounded, exact = rounded + extra, exact + extra
        tiny = tiny + 2 * U32 * np.abs(extra)
    sums = 4 * k * U32
    worst = np.abs(c - rounded) - (sums * rounded_scale + tiny)
    assert worst.max() <= 0, (
        f"{what}: against the product of the {precision}-rounded inputs, "
        f"{np.abs(c - rounded).max():.3g} at {np.unravel_index(worst.argmax(), c.shape)}, "
        f"over 4 K u |A||B| (the float32 sums' bound)")
    bound = np.stack([gemm_error_bound(x, y, precision) for x, y in zip(a_list, b_list)])
    worst = np.abs(c - exact) - (bound + tiny)
    assert worst.max() <= 0, (
        f"{what}: against the float32 product, {np.abs(c - exact).max():.3g} at "
        f"{np.unravel_index(worst.argmax(), c.shape)}, over the {precision} bound "
        f"(gemm_error_bound, about {(bound / np.maximum(scale, 1e-30)).max():.3g} |A||B|)")


def awkward_shapes(params: dict) -> list[tuple[int, int, int]]:
    """M, N, K with tails of 1 to 15 past whole tiles of `params` (and smaller than one)."""
    tm, tn, tk = params["MMA_TILE_M"], params["MMA_TILE_N"], params["MMA_TILE_K"]
    return [(1, 1, 1), (tm + 1, tn + 15, tk + 7), (2 * tm + 13, 9, 2 * tk + 1), (15, tn + 3, 5)]


