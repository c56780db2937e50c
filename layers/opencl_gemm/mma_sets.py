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
        vec: int = 4) -> dict:
    """A gemm_mma set: a tm x tn tile of C per work-group of warps_m x warps_n warps, K walked
    tk at a time, global loads of `vec` values (gemm_mma.h's header says what each does)."""
    return {"kernel": "gemm_mma", "MMA_F16": int(precision == "fp16"), "MMA_TILE_M": tm,
            "MMA_TILE_N": tn, "MMA_TILE_K": tk, "MMA_WARPS_M": warps_m, "MMA_WARPS_N": warps_n,
            "MMA_VEC": vec}


def emulated(params: dict) -> dict:
    """The same set built with -DMMA_EMULATED=1: runs on any device (tests)."""
    return {**params, "MMA_EMULATED": 1}


# Checked and timed on an H200 (README, "Reduced precision"; 45.5 TFLOP/s TF32 at 4096^3 from
# the big-problem set), not tuned set by set there: tiles that fit the 48 KB of
# local memory NVIDIA's OpenCL gives a work-group, two buffers of each slab (gemm_mma.h), from
# the big-problem set (8 warps, a 64 x 32 piece of C each: 16 mma per step of k, 64 floats of
# accumulators per work-item) down to small ones for batch-1 layers. `kuiper tune` times them
# all; tests/benchmarks/gemm_precision.py times 4096^3. Both precisions take the same tiles of
# C and warps; fp16 packs two values into each 32-bit word of local memory, so most of its
# tiles walk twice the k of tf32's in the same space.
MMA_TILES = [
    # tile m, tile n, warps m, warps n, {precision: tile k}
    (128, 128, 2, 4, {"tf32": 16, "fp16": 32}),
    (128, 64, 2, 2, {"tf32": 16, "fp16": 32}),
    (64, 128, 2, 2, {"tf32": 16, "fp16": 32}),
    (64, 64, 2, 2, {"tf32": 32, "fp16": 64}),
    (64, 64, 2, 2, {"tf32": 16, "fp16": 32}),
    (32, 32, 1, 2, {"tf32": 32, "fp16": 32}),
]

# The sets of each precision, in MMA_TILES' order
MMA_PARAMETER_SETS = {
    precision: [mma(precision, tm, tn, tk[precision], warps_m, warps_n)
                for tm, tn, warps_m, warps_n, tk in MMA_TILES]
    for precision in ("tf32", "fp16")
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
    """Local memory of one work-group: two buffers of each slab, k contiguous in 32-bit words
    (a tf32 value or two halves each) with 4 spare words per row, and the emulation's scratch."""
    words_per_row = params["MMA_TILE_K"] // (2 if params["MMA_F16"] else 1) + 4
    words = 2 * (params["MMA_TILE_M"] + params["MMA_TILE_N"]) * words_per_row
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
    """'mma tf32 128x128x16 w2x4 v4' (+ ' emulated')."""
    return (f"mma {precision_of(params)} {params['MMA_TILE_M']}x{params['MMA_TILE_N']}x"
            f"{params['MMA_TILE_K']} w{params['MMA_WARPS_M']}x{params['MMA_WARPS_N']} "
            f"v{params['MMA_VEC']}" + (" emulated" if params.get("MMA_EMULATED") else ""))
