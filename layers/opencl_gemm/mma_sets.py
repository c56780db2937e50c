"""The tensor-core GEMM's parameter sets (clkernels/gemm_mma.h), and where they may run.

A set is offered to the selector, the cost model and `kuiper tune` (parameter_sets.py) only
for a layer that computes in its precision ("tf32" or "fp16": the plan's decision,
kuiper/passes/plan_precision.py) and only on a device where the probe
(kuiper/opencl/device/tensor_cores.py) built and ran gemm_mma of that precision correctly.
Everywhere else these sets do not exist as far as the selector knows, and the portable
families run in fp32.

Every set also exists *emulated* (`emulated(params)`: -DMMA_EMULATED=1): the same kernel with
each mma replaced by float arithmetic on the same fragments, which any OpenCL device runs. The
tests force those on PoCL and Oclgrind; `emulated_tensor_cores()` lets a whole model take them
(the accuracy tests of tests/models/test_precision.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from kuiper.opencl.device.tensor_cores import tensor_cores

WARP = 32


def mma(precision: str, tm: int, tn: int, tk: int, warps_m: int, warps_n: int,
        vec: int = 4, ldmatrix: bool = False, buffers: int = 2) -> dict:
    """A gemm_mma set: a tm x tn tile of C per work-group of warps_m x warps_n warps, K walked
    tk at a time, global loads of `vec` values, fragments loaded by `ldmatrix` or one word at a
    time, `buffers` local buffers per slab (gemm_mma.h's header says what each does)."""
    return {"kernel": "gemm_mma", "MMA_F16": int(precision == "fp16"), "MMA_TILE_M": tm,
            "MMA_TILE_N": tn, "MMA_TILE_K": tk, "MMA_WARPS_M": warps_m, "MMA_WARPS_N": warps_n,
            "MMA_VEC": vec, "MMA_LDMATRIX": int(ldmatrix), "MMA_BUFFERS": buffers}


def emulated(params: dict) -> dict:
    """The same set built with -DMMA_EMULATED=1: runs on any device (tests)."""
    return {**params, "MMA_EMULATED": 1}


# The sets of each precision, best first: the winners of 22 variants per precision (tiles, one
# or two buffers, ldmatrix or not) timed at 4096^3 on an H200, 2026-11-28 (their rates are in
# cost.py's MMA_EFFICIENCY, the README's "Reduced precision" has the table), then smaller tiles
# for batch-1 layers. All fit the 48 KB of local memory NVIDIA's OpenCL gives a work-group, and
# load their fragments with ldmatrix (TF32 1.1-1.2x faster than one word at a time). The big
# tiles take one local buffer (gemm_mma.h, point 7): a 128 x 128 tile then walks k 32 at a time
# instead of 16, twice the mma between barriers, 1.1-1.4x faster than with two buffers. A warp's
# piece of 64 x 64 (4 x 8 mma tiles, 128 floats of accumulators per work-item) beat 64 x 32 for
# TF32; FP16 is limited by converting the floats it reads to halves, and takes the widest tile.
# `kuiper tune` times them all; tests/benchmarks/gemm_precision.py times 4096^3.
MMA_PARAMETER_SETS = {
    "tf32": [
        # tile m, tile n, tile k, warps m, warps n, vector, ldmatrix, buffers
        mma("tf32", 128, 128, 32, 2, 2, 4, True, 1),
        mma("tf32", 128, 128, 32, 2, 4, 4, True, 1),
        mma("tf32", 256, 128, 16, 4, 2, 4, True, 1),
        mma("tf32", 128, 64, 32, 2, 2, 4, True, 1),
        mma("tf32", 64, 128, 32, 2, 2, 4, True, 1),
        mma("tf32", 64, 64, 32, 2, 2, 4, True, 2),
        mma("tf32", 32, 32, 32, 1, 2, 4, True, 2),
    ],
    "fp16": [
        mma("fp16", 128, 256, 32, 2, 4, 4, True, 1),
        mma("fp16", 128, 128, 64, 2, 4, 4, True, 1),
        mma("fp16", 256, 128, 32, 4, 2, 4, True, 1),
        mma("fp16", 128, 128, 32, 2, 2, 4, True, 2),
        mma("fp16", 64, 128, 64, 2, 2, 4, True, 1),
        mma("fp16", 64, 64, 64, 2, 2, 4, False, 2),   # ldmatrix measured slower here (3.0 / 4.3%)
        mma("fp16", 32, 32, 32, 1, 2, 4, True, 2),
    ],
}

# Tests: offer the emulated sets on every device, as if it had tensor cores (see the docstring)
EMULATE = False


@contextlib.contextmanager
def emulated_tensor_cores() -> Iterator[None]:
    """Inside the block, every device offers the emulated gemm_mma sets (tests only: the
    emulation is exact but slow)."""
    global EMULATE
    old, EMULATE = EMULATE, True
    try:
        yield
    finally:
        EMULATE = old


def mma_sets_for(device, precision: str) -> list[dict]:
    """The gemm_mma sets the selector may offer for a GEMM computed in `precision` on
    `device`: none for fp32, the real ones where the probe passed, the emulated ones under
    `emulated_tensor_cores()`."""
    if precision not in MMA_PARAMETER_SETS:
        return []
    if EMULATE:
        return [emulated(p) for p in MMA_PARAMETER_SETS[precision]]
    if precision in tensor_cores(device):
        return list(MMA_PARAMETER_SETS[precision])
    return []


def precision_of(params: dict) -> str:
    """The precision a parameter set computes in: its mma's, else fp32."""
    if params.get("kernel") != "gemm_mma":
        return "fp32"
    return "fp16" if params["MMA_F16"] else "tf32"


def threads(params: dict) -> int:
    return WARP * params["MMA_WARPS_M"] * params["MMA_WARPS_N"]


def local_bytes(params: dict) -> int:
    """Local memory of one work-group: one or two buffers of each slab (MMA_BUFFERS), k
    contiguous in 32-bit words (a tf32 value or two halves each) with 4 spare words per row, and
    the emulation's scratch."""
    words_per_row = params["MMA_TILE_K"] // (2 if params["MMA_F16"] else 1) + 4
    words = (params.get("MMA_BUFFERS", 2) * (params["MMA_TILE_M"] + params["MMA_TILE_N"])
             * words_per_row)
    if params.get("MMA_EMULATED"):
        words += (16 * 8 + 8 * 8) * params["MMA_WARPS_M"] * params["MMA_WARPS_N"]
    return 4 * words


def why_not(params: dict, device) -> str | None:
    """None when `device` can run this gemm_mma set, else why not."""
    if params.get("MMA_EMULATED"):
        return None
    precision = precision_of(params)
    if precision not in tensor_cores(device):
        return (f"it needs {precision} tensor cores through inline PTX, which the probe did not "
                "find on this device (kuiper/opencl/device/tensor_cores.py; the same set with "
                "MMA_EMULATED=1 runs anywhere)")
    return None


def describe(params: dict) -> str:
    """'mma tf32 128x128x16 w2x4 v4' (+ ' ldm', ' b1', ' emulated')."""
    return (f"mma {precision_of(params)} {params['MMA_TILE_M']}x{params['MMA_TILE_N']}x"
            f"{params['MMA_TILE_K']} w{params['MMA_WARPS_M']}x{params['MMA_WARPS_N']} "
            f"v{params['MMA_VEC']}" + (" ldm" if params.get("MMA_LDMATRIX") else "")
            + (" b1" if params.get("MMA_BUFFERS", 2) == 1 else "")
            + (" emulated" if params.get("MMA_EMULATED") else ""))
