"""The tensor-core GEMM's parameter sets (layers/opencl_gemm/mma_sets.py) against what
clkernels/gemm_mma.h promises: pure Python, no device needed (the kernels themselves are
tested in tests/opencl/test_gemm_mma.py)."""

from __future__ import annotations

import pytest

from kuiper.layers.opencl_gemm import mma_sets
from tests.opencl.mma_harness import ALL_MMA_SETS


def test_the_parameter_sets_are_what_the_kernel_promises():
    """Warps tile the tile (16 x 8 mma tiles; ldmatrix loads B's fragments in pairs, so 16
    columns), the vector loads divide it, a row of a slab is a whole number of mma steps (words
    per row = 0 mod 8: conflict-free fragments, gemm_mma.h), one or two buffers, cp.async only
    for TF32 with 2 to 4 slabs in flight, and each set fits the 48 KB NVIDIA's OpenCL gives a
    work-group."""
    for p in ALL_MMA_SETS:
        warp_m, warp_n = p["MMA_TILE_M"] // p["MMA_WARPS_M"], p["MMA_TILE_N"] // p["MMA_WARPS_N"]
        assert warp_m % 16 == 0 and warp_n % (16 if p["MMA_LDMATRIX"] else 8) == 0, p
        assert p["MMA_BUFFERS"] in (1, 2), p
        if p.get("MMA_ASYNC"):
            assert mma_sets.precision_of(p) == "tf32" and 2 <= p["MMA_STAGES"] <= 4, p
        assert p["MMA_WARPS_M"] * warp_m == p["MMA_TILE_M"], p
        assert p["MMA_WARPS_N"] * warp_n == p["MMA_TILE_N"], p
        for side in ("MMA_TILE_M", "MMA_TILE_N", "MMA_TILE_K"):
            assert p[side] % p["MMA_VEC"] == 0, p
        words = p["MMA_TILE_K"] // (2 if p["MMA_F16"] else 1)
        assert words % 8 == 0, p
        assert mma_sets.local_bytes(p) <= 48 * 1024, p
    names = [mma_sets.describe(p) for p in ALL_MMA_SETS]
    assert len(set(names)) == len(names)


def test_cp_async_sets_are_tf32_only_and_count_the_larger_layout():
    """cp.async copies float32 as it lies in memory: no conversion to half on the way. Its ring
    holds each operand in the larger of its two layouts (gemm_mma.h, point 8): [row][k] with 4
    spare words a row, or [k][row] with 8; for a 32 x 32 x 64 tile, 2176 and 2560 words."""
    with pytest.raises(ValueError, match="tf32 only"):
        mma_sets.mma("fp16", 64, 64, 32, 2, 2, stages=2)
    params = mma_sets.mma("tf32", 32, 32, 64, 1, 2, stages=3)
    assert mma_sets.describe(params).endswith("async3")
    along_k, along_rows = 32 * (64 + 4), 64 * (32 + 8)
    assert (along_k, along_rows) == (2176, 2560)
    assert mma_sets.local_bytes(params) == 4 * 3 * 2 * along_rows
    assert mma_sets.local_bytes(mma_sets.emulated(params)) > mma_sets.local_bytes(params)
