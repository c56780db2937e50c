"""The GEMM part of the cost model: how long one gemm.h launch with a parameter set should take.

The selector (conv_select.py) and the OpenCL Linear pick parameter sets with it when the tuning
cache has no measured winner. It is conv_cost.py's roofline (max(arithmetic, memory) + launch
overhead) with the arithmetic rate scaled by three factors, each easy to check by hand:

1. `efficiency`: the fraction of the device's peak this parameter set reaches on a big square
   product (measured, see the tables in gemm_params.py: 0.53 for 128x128 tiles of 8x8 blocks
   on an H100). On a CPU without 16-wide vectors (AVX2) a float16 block costs twice as much.
2. `utilisation`: how busy the device is with this many work-groups (compute units idle
   when there are fewer groups than units, a partly empty last wave; see `utilisation`).
   This is what makes small tiles win on batch-1 layers (ResNet stage 4: M = 512, N = 49).
3. `padding waste`: work-groups compute whole tiles, so M, N, K are rounded up to the tile.

Only the order of the estimates matters; `kuiper tune` measures the real winner.
"""

from __future__ import annotations

from typing import Any

from kuiper.layers.opencl_gemm.parameter_sets import (
    gemm_parameter_sets,
    gemv_parameter_sets,
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


def tile_shape(params: dict) -> tuple[int, int, int]:
    """(rows, columns, K step) of C that one work-group computes at a time."""
    if params["kernel"] == "gemm_tiled":
        return params["TILE_M"], params["TILE_N"], params["TILE_K"]
    block_k = params["BLOCK_K"] or 1
    return (params.get("MR", 8) * params["GROUP_M"], params["BLOCK_N"] * params["GROUP_N"],
            block_k)


def efficiency(params: dict, m: int, n: int, k: int, device: Any,
               packed_b: bool = False) -> float:
    """Fraction of peak on a big problem (factor 1 of the module docstring); C is m x n;
    `packed_b`: B in gemm_blocked's strips (im2col_gemm on a CPU device, PACKED_B)."""
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
    one step of k, the prefetched next slab and ~24 more for addresses)."""
    threads = work_group_size(params)
    prefetch = (params["TILE_M"] + params["TILE_N"]) * params["TILE_K"] // threads
    registers = params["WPT_M"] * params["WPT_N"] + params["WPT_M"] + params["WPT_N"] \
        + prefetch + 24
    return max(1, min(2048 // threads, 32, 65536 // (threads * registers)))


def utilisation(params: dict, groups: int, device: Any) -> float:
    """Busy fraction of the device (factor 2 of the module docstring).

    CPU: `units` work-groups run at once (one per core); the last round is partly empty.
    GPU: a compute unit issues from 4 schedulers, and a work-group's warps (32 work-items)
    keep at most 4 of them busy: a small grid spread over many units beats the same work in
    a few big groups. A big grid runs in waves of `units x resident_groups`, the last partly
    empty."""
    rates = device_rates(device)
    units = max(1, int(device.max_compute_units)) if device is not None else 2
    if rates.is_cpu or params["kernel"] != "gemm_tiled":  # (gemm_blocked forced on a GPU)
        waves = -(-groups // units)
        return groups / (waves * units)
    warps = -(-work_group_size(params) // 32)
    busy = min(units * 4, groups * min(4, warps)) / (units * 4)
    slots = units * resident_groups(params)
    tail = 1.0 if groups <= slots else groups / (-(-groups // slots) * slots)
    return busy * tail


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
    groups = (-(-m // tm)) * (-(-n // tn)) * z
    flops = 2.0 * ceil_to(m, tm) * ceil_to(n, tn) * ceil_to(k, min(tk, k)) * z
    bytes_moved = 4.0 * (m * k + k * n * z + m * n * z) + extra_bytes
    rate = efficiency(params, m, n, k, device, packed_b) * utilisation(params, groups, device)
    return roofline(device, flops, bytes_moved, launches, rate)


def ranked_gemm_params(device: Any, m: int, n: int, k: int, z: int = 1, trans_a: bool = False,
                       trans_b: bool = False, packed_b: bool = False) -> list[dict]:
    """The device's parameter sets, cheapest first for this shape (and layout: gemv.h only
    runs a linear layer's, TRANS_B; `packed_b`: im2col_gemm's column matrix on a CPU device,
    whose gemm_blocked sets read it packed)."""
    sets = gemm_parameter_sets(device) + gemv_parameter_sets(device, m, trans_a, trans_b)
    return sorted(sets, key=lambda p: gemm_seconds(device, p, m, n, k, z, packed_b=packed_b))


def best_gemm_params(device: Any, m: int, n: int, k: int, z: int = 1) -> dict:
    return ranked_gemm_params(device, m, n, k, z)[0]
