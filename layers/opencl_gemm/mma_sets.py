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
        vec: int = 4, ldmatrix: bool = False, buffers: int = 2, stages: int = 0) -> dict:
    """A gemm_mma set: a tm x tn tile of C per work-group of warps_m x warps_n warps, K walked
    tk at a time, global loads of `vec` values, fragments loaded by `ldmatrix` or one word at a
    time, `buffers` local buffers per slab; or, with `stages` (TF32 only), the slabs copied by
    cp.async, that many in flight (gemm_mma.h's header, points 3 to 8, says what each does)."""
    params = {"kernel": "gemm_mma", "MMA_F16": int(precision == "fp16"), "MMA_TILE_M": tm,
              "MMA_TILE_N": tn, "MMA_TILE_K": tk, "MMA_WARPS_M": warps_m,
              "MMA_WARPS_N": warps_n, "MMA_VEC": vec, "MMA_LDMATRIX": int(ldmatrix),
              "MMA_BUFFERS": buffers}
    if stages:   # the keys only where used: tuning caches written before keep matching
        if precision != "tf32":
            raise ValueError("cp.async copies float32 slabs as they lie in memory: tf32 only")
        params.update(MMA_ASYNC=1, MMA_STAGES=stages)
    return params


def emulated(params: dict) -> dict:
    """The same set built with -DMMA_EMULATED=1: runs on any device (tests)."""
    return {**params, "MMA_EMULATED": 1}


# The sets of each precision, best first. TF32: the slabs copied by cp.async, two to four in
# flight (gemm_mma.h, point 8): a sweep of 17 variants at 4096^3 on an H200 (2026-11-29; README,
# "Reduced precision") chose the tiles. The 48 KB of local memory NVIDIA's OpenCL gives a
# work-group is what bounds the ring: 128 x 128 x 16 takes two slabs, 128 x 128 x 8 four (exactly
# 48 KB). With the fragments rounded as they are loaded (cvt.rna, point 8), the final kernel on
# the same H200 (2026-11-29, later): 128 x 128 x 16 on 4 warps 112-118 TFLOP/s in the three
# layouts, on 8 warps 68-74 (105 with A stored K x M): each warp of 8 holds a 64 x 32 piece, so it
# rounds 24 fragment words per 16 mma where a warp of 4 rounds 32 per 32. Left unrounded (the
# tensor cores drop the 13 low bits: truncation), the 8-warp tile ran 125-129, the 4-warp one
# 119-127; but truncation is biased: every product comes out about 2^-10 smaller on average, in
# every layer the same way, an error that adds up through a network where rounding's cancels, so
# the kernel keeps cvt.rna. (Rounding each word once, in local memory, after its copy landed and
# before the barrier, ran 83-92: every warp waits for it.) The 8-warp tile comes first all the
# same: a fused epilogue runs once per output after the last slab, where nothing overlaps it, and
# on 4 warps a work-item has 128 outputs: ViT-S's 6304 x 1536 x 384 layer with its bias took 0.123
# ms on 4 warps, 0.140 on 8 and 0.117 on 64 x 64 bare, 0.194, 0.181 and 0.146 with a GELU. Rated
# by their bare rates (0.233 for 4 warps, 0.166 for 8), ViT-S/16 at batch 32 ran in 9.71 ms, in
# another call than the 9.22 with these ratings (cost.py; TF32, device I/O, one run each): the
# cost model has no epilogue term, `kuiper tune` measures.
# FP16: the winners of 22 variants of the register path (2026-11-28: tiles, one or two buffers,
# ldmatrix or not), whose rates are in cost.py's MMA_EFFICIENCY; they load their fragments with
# ldmatrix, and the big tiles take one local buffer (point 7: a 128 x 128 tile then walks k 32
# at a time, 1.1-1.4x faster than with two). FP16 is limited by converting the floats it reads
# to halves (cp.async cannot convert), and takes the widest tile. `kuiper tune` times them all;
# tests/benchmarks/gemm_precision.py times 4096^3.
MMA_PARAMETER_SETS = {
    "tf32": [
        # tile m, tile n, tile k, warps m, warps n, vector, ldmatrix, buffers, slabs in flight
        mma("tf32", 128, 128, 16, 2, 4, 4, True, 2, 2),
        mma("tf32", 128, 128, 16, 2, 2, 4, True, 2, 2),
        mma("tf32", 128, 128, 8, 2, 2, 4, True, 2, 4),
        mma("tf32", 128, 64, 16, 2, 2, 4, True, 2, 3),
        mma("tf32", 64, 128, 16, 2, 2, 4, True, 2, 3),
        mma("tf32", 64, 64, 32, 2, 2, 4, True, 2, 2),
        mma("tf32", 32, 32, 32, 1, 2, 4, True, 2, 3),
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
    the emulation's scratch. With cp.async, MMA_STAGES buffers, an operand stored along m or n
    kept so with 8 spare words per row of k (gemm_mma.h, point 8): the larger of the two
    layouts, whichever the layer's is."""
    tm, tn, tk = params["MMA_TILE_M"], params["MMA_TILE_N"], params["MMA_TILE_K"]
    words_per_row = tk // (2 if params["MMA_F16"] else 1) + 4
    if params.get("MMA_ASYNC"):
        words = params["MMA_STAGES"] * (max(tm * words_per_row, tk * (tm + 8))
                                        + max(tn * words_per_row, tk * (tn + 8)))
    else:
        words = params.get("MMA_BUFFERS", 2) * (tm + tn) * words_per_row
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
    """'mma tf32 128x128x16 w2x4 v4' (+ ' ldm', ' b1' or ' async2', ' emulated')."""
    return (f"mma {precision_of(params)} {params['MMA_TILE_M']}x{params['MMA_TILE_N']}x"
            f"{params['MMA_TILE_K']} w{params['MMA_WARPS_M']}x{params['MMA_WARPS_N']} "
            f"v{params['MMA_VEC']}" + (" ldm" if params.get("MMA_LDMATRIX") else "")
            + (" b1" if params.get("MMA_BUFFERS", 2) == 1 and not params.get("MMA_ASYNC")
               else "")
            + (f" async{params['MMA_STAGES']}" if params.get("MMA_ASYNC") else "")
            + (" emulated" if params.get("MMA_EMULATED") else ""))
