"""The GEMM part of the cost model: how long one gemm.h launch with a parameter set should take.

The selector (layers/opencl_conv/selector.py) and the OpenCL Linear pick parameter sets with it
when the tuning cache has no measured winner. It is the roofline of
kuiper/opencl/device/roofline.py (max(arithmetic, memory) + launch overhead) with the arithmetic
rate scaled by three factors, each easy to check by hand:

1. `efficiency`: the fraction of the device's FMA peak this parameter set reaches on a big
   square product (measured, see the tables in parameter_sets.py: 0.53 for 128x128 tiles of 8x8
   blocks on an H100). On a CPU without 16-wide vectors (AVX2) a float16 block costs twice as
   much. The tensor-core sets go above 1: their peak is 7.4x (TF32) and 14.8x (FP16) the FMAs'.
2. `utilisation`: how busy the device is with this many work-groups (compute units idle
   when there are fewer groups than units, a partly empty last wave; see `utilisation`).
   This is what makes small tiles win on batch-1 layers (ResNet stage 4: M = 512, N = 49).
3. `padding waste`: work-groups compute whole tiles, so M, N, K are rounded up to the tile.

Only the order of the estimates matters; `kuiper tune` measures the real winner.
"""

from __future__ import annotations

from typing import Any

from kuiper.layers.opencl_gemm import mma_sets
from kuiper.layers.opencl_gemm.parameter_sets import (
    gemm_parameter_sets,
    gemv_parameter_sets,
    slice_length,
    slices_of,
    split_parameter_sets,
    work_group_size,
)
from kuiper.opencl.device.roofline import device_rates, roofline

# Fraction of peak at full occupancy, by (kernel, block rows x block cols), from the sweeps.
GPU_EFFICIENCY = {128: 0.50, 64: 0.46, 32: 0.40, 16: 0.36}   # by WPT_M * WPT_N
# 16x8 blocks reach 0.57 (0.64 with A stored K x M) only when both sides of C are big (4096^3);
# on ResNet-18's batch-32 convolutions (M 64-512) they ran at 6.8-14.1 TFLOP/s, 0.10-0.21 of
# peak.
BIG_BLOCK_MIN_SIDE, BIG_BLOCK_SMALL_EFFICIENCY = 2048, 0.15
CPU_EFFICIENCY = {32: 1.15, 16: 1.0, 8: 0.7}             # by BLOCK_N (vs. an AVX-512 core)
UNBLOCKED_K = 256            # gemm_blocked without K blocking slows down past this K
# ... unless C has at most this many rows: on ViT-S's 197 x 384 x 1536 linear layer the 6x16 set
# without K blocking was 1.05-1.2x faster than with it (parameter_sets.py's table)
FEW_ROWS = 256
BLOCKED_WITHOUT_GAIN = 0.8   # a K-blocked set where blocking cannot help (efficiency)


def ceil_to(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


# The tensor cores (gemm_mma.h). Their peak over the FMA units' peak, which is what device_rates
# reports: an H100 SXM has 495 TFLOP/s of dense TF32 and 989 of FP16 against 67 of FP32 FMAs (an
# A100: 156 and 312 against 19.5, the same ratios within 10%). The fraction of that peak each
# gemm_mma set reaches, keyed by (tile m, tile n, tile k, work-items), as measured on an NVIDIA
# H200 (driver 580.159.04, 4096^3): TF32 with its slabs copied by cp.async 112-118 TFLOP/s on the
# 4-warp 128 x 128 x 16 tile in the three layouts (24% of 495; 2026-11-29, the final kernel; the
# 8-warp 128 x 128 tile rounds 1.5x as many fragment words per mma and ran 68-105, mma_sets.py),
# FP16 up to 80 (8% of 989, linear.cl's layout, 2026-11-28: converting the floats it reads to
# halves costs; the other layouts 0.8-1.0x of it), gemm_tiled 36-38 in fp32. A product too small
# to fill the device with their big tiles stays on a (split-K) gemm_tiled set. The TF32 ratings
# are not all the bare rates: the 4-warp 128 x 128 tiles ran 0.233 and 0.212, the 8-warp one 0.166
# (0.14-0.15 in two layouts), but with 128 outputs per work-item a fused GELU took the 4-warp tile
# 1.58x its bare time on ViT-S's 6304-row layer, the 8-warp one 1.29x (mma_sets.py), and this
# model has no epilogue term. Rated by the bare rates, in another call, one run each, whole models
# were no faster: ViT-S/16 at batch 32 9.71 ms against 9.22 rated so, ResNet-50 8.73 against 8.55,
# BERT-512 4.87 against 4.92 (the README).
TENSOR_PEAK = {"tf32": 7.4, "fp16": 14.8}
MMA_EFFICIENCY = {
    "tf32": {(128, 128, 16, 256): 0.216, (128, 128, 16, 128): 0.21, (128, 128, 8, 128): 0.2,
             (128, 64, 16, 128): 0.186, (64, 128, 16, 128): 0.191, (64, 64, 32, 128): 0.155,
             (32, 32, 32, 64): 0.082},
    "fp16": {(128, 256, 32, 256): 0.08, (128, 128, 64, 256): 0.055, (256, 128, 32, 256): 0.055,
             (128, 128, 32, 128): 0.054, (64, 128, 64, 128): 0.054, (64, 64, 64, 128): 0.043,
             (32, 32, 32, 64): 0.032},
}


def tile_shape(params: dict) -> tuple[int, int, int]:
    """(rows, columns, K step) of C that one work-group computes at a time."""
    if params["kernel"] == "gemm_mma":
        return params["MMA_TILE_M"], params["MMA_TILE_N"], params["MMA_TILE_K"]
    if params["kernel"] == "gemm_tiled":
        return params["TILE_M"], params["TILE_N"], params["TILE_K"]
    block_k = params["BLOCK_K"] or 1
    return (params.get("MR", 8) * params["GROUP_M"], params["BLOCK_N"] * params["GROUP_N"],
            block_k)


def efficiency(params: dict, m: int, n: int, k: int, device: Any,
               packed_b: bool = False) -> float:
    """Fraction of peak on a big problem (factor 1 of the module docstring); C is m x n;
    `packed_b`: B in gemm_blocked's strips (im2col_gemm on a CPU device, PACKED_B)."""
    if params["kernel"] == "gemm_mma":
        precision = mma_sets.precision_of(params)
        key = (*tile_shape(params), work_group_size(params))
        return TENSOR_PEAK[precision] * MMA_EFFICIENCY[precision].get(key, 0.03)
    if params["kernel"] == "gemm_tiled":
        block = params["WPT_M"] * params["WPT_N"]
        if block >= 128 and min(m, n) < BIG_BLOCK_MIN_SIDE:
            return BIG_BLOCK_SMALL_EFFICIENCY
        eff = GPU_EFFICIENCY.get(block, 0.25)
        if params.get("LDS_VEC"):   # float4 local reads: +5..20% on 4x4, +10..30% on 8x8 blocks
            eff *= 1.1
        return eff * (1.0 if params["VEC"] == 4 or params["WPT_M"] < 8 else 0.6)
    eff = CPU_EFFICIENCY.get(params["BLOCK_N"], 0.5)
    lanes = int(getattr(device, "preferred_vector_width_float", 16) or 8) if device else 8
    rows = params.get("MR", 8)
    vectors = -(-params["BLOCK_N"] // lanes)           # SIMD registers per row of the block
    registers = 16 if lanes <= 8 else 32               # AVX2 has 16, AVX-512 32
    if rows * vectors + vectors + 1 > registers:       # accumulators, B's vectors, a broadcast
        eff *= 0.5 if params["BLOCK_N"] <= 16 else 0.25   # 8x32 spills out of 16 registers
    elif rows * vectors < 8:   # too few independent FMAs to hide their latency (2 pipes x 4)
        eff *= rows * vectors / 8
    if params["BLOCK_K"] and packed_b:
        # K blocking buys nothing when a work-item's strip of B is one contiguous run, and its
        # barrier still costs: under PoCL, on ResNet-18's and YOLOv5s's im2col_gemm layers
        # (K = 32 to 4608), the 8x32 set without it was within 10% of the best set on 33 of 40
        # (unpacked, gemm_1x1's B, the sets with K blocking won even where K fits one chunk)
        eff *= BLOCKED_WITHOUT_GAIN
    elif not params["BLOCK_K"] and k > UNBLOCKED_K and not packed_b and m > FEW_ROWS:
        eff *= 0.35   # B's panel (K rows N values apart) falls out of the cache
    return eff


def resident_groups(params: dict) -> int:
    """Work-groups of `params` one GPU compute unit holds at once: limited by its 2048
    work-items and its 65536 registers (a work-item keeps its block of C, the A and B values of
    one step of k, the prefetched next slab and ~24 more for addresses; gemm_mma: its
    accumulators and fragments), and for gemm_mma by the ~228 KB of local memory of an
    H100's multiprocessor."""
    threads = work_group_size(params)
    tm, tn, tk = tile_shape(params)
    prefetch = (tm + tn) * tk // threads
    if params["kernel"] == "gemm_mma":
        frag_m = tm // params["MMA_WARPS_M"] // 16
        frag_n = tn // params["MMA_WARPS_N"] // 8
        registers = frag_m * frag_n * 4 + frag_m * 4 + frag_n * 2 + prefetch + 24
        by_local = (228 << 10) // mma_sets.local_bytes(params)
    else:
        registers = params["WPT_M"] * params["WPT_N"] + params["WPT_M"] + params["WPT_N"] \
            + prefetch + 24
        by_local = 32
    return max(1, min(2048 // threads, 32, by_local, 65536 // (threads * registers)))


def utilisation(params: dict, groups: int, device: Any) -> float:
    """Busy fraction of the device (factor 2 of the module docstring).

    CPU: `units` work-groups run at once (one per core); the last round is partly empty.
    GPU: a compute unit issues from 4 schedulers, and a work-group's warps (32 work-items)
    keep at most 4 of them busy: a small grid spread over many units beats the same work in
    a few big groups. A grid larger than the device holds at once (`units x
    resident_groups`) is not run in lockstep waves: a unit starts a new group as soon as one
    of its groups ends, so what is lost is only the imbalance between units, ceil(groups /
    units) against groups / units. (Counting whole waves of `units x resident_groups` made
    the model pick 64x64x32 tiles for ViT-S/16's batch-32 layers, 6304 rows: 1.20-1.22x the
    best set's time on an H200, where this count picks the best. Over a sweep of every set on
    33 linear and 1x1 shapes no pick got slower; ViT-S/16 at batch 32 ran 0.90x the time,
    ResNet-18 at batch 32, whose Winograd products took other tiles, 1.02x: README, GPU
    section, "The cost model's wave tail".)"""
    rates = device_rates(device)
    units = max(1, int(device.max_compute_units)) if device is not None else 2
    if groups <= 0:   # an empty problem (a batch of 0): nothing runs, nothing is lost
        return 1.0
    balance = groups / (-(-groups // units) * units)   # groups / units over its ceiling
    if rates.is_cpu or params["kernel"] not in ("gemm_tiled", "gemm_mma"):  # (blocked on a GPU)
        return balance
    warps = -(-work_group_size(params) // 32)
    busy = min(units * 4, groups * min(4, warps)) / (units * 4)
    slots = units * resident_groups(params)
    return busy * (1.0 if groups <= slots else balance)


GEMV_EFFICIENCY = 0.25        # gemv.h: one float8 multiply-add per two loads


def gemm_seconds(device: Any, params: dict, m: int, n: int, k: int, z: int = 1,
                 extra_bytes: float = 0.0, launches: int = 1, packed_b: bool = False) -> float:
    """Estimated seconds of C[z] (m x n) = A (m x k) @ B[z] (k x n) with `params`
    (`packed_b`: B in gemm_blocked's strips; the other kernels' sets ignore it)."""
    if params["kernel"] == "gemv":  # every row reads the whole weight again: bound by memory
        flops = 2.0 * m * n * k * z
        bytes_moved = 4.0 * (m * n * k * z + m * k + m * n * z) + extra_bytes
        return roofline(device, flops, bytes_moved, launches, GEMV_EFFICIENCY)
    tm, tn, tk = tile_shape(params)
    slices = slices_of(params, k)
    if slices > 1:   # split-K: S times the work-groups, each over a slice; then the sum pass
        k_padded = slice_length(params, k) * slices
        launches += 1
        extra_bytes += 4.0 * m * n * (2 * slices + 1)   # partials written and read, C written
    else:
        k_padded = ceil_to(k, min(tk, k))
    groups = (-(-m // tm)) * (-(-n // tn)) * z * slices
    flops = 2.0 * ceil_to(m, tm) * ceil_to(n, tn) * k_padded * z
    bytes_moved = 4.0 * (m * k + k * n * z + m * n * z) + extra_bytes
    rate = efficiency(params, m, n, k, device, packed_b) * utilisation(params, groups, device)
    return roofline(device, flops, bytes_moved, launches, rate)


def ranked_gemm_params(device: Any, m: int, n: int, k: int, z: int = 1, trans_a: bool = False,
                       trans_b: bool = False, packed_b: bool = False,
                       precision: str = "fp32", split: bool = False) -> list[dict]:
    """The device's parameter sets, cheapest first for this shape (and layout: gemv.h only
    runs a linear layer's, TRANS_B; `packed_b`: im2col_gemm's column matrix on a CPU device,
    whose gemm_blocked sets read it packed). `precision` "tf32" or "fp16" adds the tensor-core
    sets where the device has them (mma_sets.py). `split`: the caller can run split-K sets,
    which need a scratch buffer and a second launch (`linear_gemm_launches`); they are
    gemm_tiled sets computing in fp32, so they compete at every precision as the whole-K
    gemm_tiled sets do (a tensor-core set never splits K)."""
    sets = (gemm_parameter_sets(device, precision)
            + gemv_parameter_sets(device, m, trans_a, trans_b))
    if split:
        sets += split_parameter_sets(device, k, z)

    def warps_in_flight(params: dict) -> int:
        """Warps the launch starts: equal estimates go to the set with more, which hide
        memory latency better (on an NVIDIA H200, transformer layers at 128-512 rows ran up
        to 1.6x faster with 8 slices of K than with 3, estimated alike: both fill every
        scheduler)."""
        if params["kernel"] not in ("gemm_tiled", "gemm_mma"):
            return 0
        tm, tn, _ = tile_shape(params)
        groups = (-(-m // tm)) * (-(-n // tn)) * z * slices_of(params, k)
        return groups * -(-work_group_size(params) // 32)
    return sorted(sets, key=lambda p: (gemm_seconds(device, p, m, n, k, z, packed_b=packed_b),
                                       -warps_in_flight(p)))


def best_gemm_params(device: Any, m: int, n: int, k: int, z: int = 1,
                     precision: str = "fp32") -> dict:
    return ranked_gemm_params(device, m, n, k, z, precision=precision)[0]
