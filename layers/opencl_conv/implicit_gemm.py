"""Implicit-GEMM convolution: the GEMM gathers its im2col operand itself (conv_implicit_gemm.cl).

The im2col path (layers/opencl/conv2d.py) writes a column matrix of Cin/G * taps * pixels floats
to global memory and reads it back in the GEMM: for a 3x3 convolution that is nine copies of
the input. Here the GEMM's B-tile load computes each column element from the input directly,
through two small tables made once, at bind time:

- `k_table`: for each index k of the K axis (input channel, kernel tap), the part of the input
  address that depends on k alone, so that the kernel never divides k by KW, KH*KW ...;
- the padding source tables of conv_geometry (ops.tables), which cover every padding mode.

Two kernels, chosen by the parameter set: "tiled" (local-memory tiles, for GPUs) and "blocked"
(SIMD blocks without local memory, for CPUs). Their tile sizes are build options (-D), so
`kuiper tune` can time several. conv_split_k.py reuses `bind_implicit_gemm` to compute slices
of the K axis into partial sums.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kuiper.core.errors import OperatorError
from kuiper.layers.opencl_base import Launch, round_up
from kuiper.layers.opencl_conv.algorithms import (
    ConvAlgorithm,
    ConvOperands,
    ConvProblem,
    register_algorithm,
)
from kuiper.layers.opencl_helpers.buffers import keep_alive
from kuiper.opencl.device.roofline import device_rates, roofline
from kuiper.opencl.device.vector_width import wide_vectors

INT_MAX = 2**31 - 1
BLOCKED_LOCAL = (4, 4, 1)   # work-group of the blocked kernel (as gemm.py's gemm_blocked)

# The parameter sets, GPU-sized first. tiled: a work-group of (tile_m/wpt_m) x (tile_n/wpt_n)
# work-items computes a tile_m x tile_n tile of the output, walking K tile_k at a time.
# blocked: a work-item computes block_m channels x vec_n pixels (SIMD vectors of vec_n floats).
TILED_SETS = [
    {"kernel": "tiled", "tile_m": 64, "tile_n": 64, "tile_k": 16, "wpt_m": 4, "wpt_n": 4},
    {"kernel": "tiled", "tile_m": 128, "tile_n": 64, "tile_k": 16, "wpt_m": 8, "wpt_n": 4},
    {"kernel": "tiled", "tile_m": 64, "tile_n": 128, "tile_k": 16, "wpt_m": 4, "wpt_n": 8},
    {"kernel": "tiled", "tile_m": 128, "tile_n": 128, "tile_k": 16, "wpt_m": 8, "wpt_n": 8},
    {"kernel": "tiled", "tile_m": 32, "tile_n": 32, "tile_k": 16, "wpt_m": 4, "wpt_n": 4},
]
BLOCKED_SETS = [
    {"kernel": "blocked", "block_m": 16, "vec_n": 16},
    {"kernel": "blocked", "block_m": 32, "vec_n": 16},
    {"kernel": "blocked", "block_m": 16, "vec_n": 8},
    {"kernel": "blocked", "block_m": 8, "vec_n": 8},
]

# Fraction of the device's peak each kernel reaches. "tiled" on a GPU: cost_model.py's figures
# for gemm_tiled's register blocks (by wpt_m * wpt_n), less a fifth for the gather (a guess:
# not measured on a GPU yet). "blocked" on a CPU (by block_m * vec_n): measured under PoCL on
# ResNet-18's layers at batch 1, 0.35 to 0.7 times the speed of im2col + gemm_blocked (faster
# on 56x56 images only), better with bigger blocks, which share each gathered vector among
# more multiply-adds. Each kernel on the other kind of device: a CPU emulates local memory and
# barriers, a GPU gets scattered, uncoalesced loads.
# Checked on the H100 against `kuiper tune --json`'s times of every candidate of DenseNet-121,
# GoogLeNet, MnasNet and ResNeXt-50 at batch 1 (measured / estimated, the median per set):
# 1.05-1.4 for every tiled set of 64x64 or more, implicit or split-K, but 5.8 for the 32x32
# tiles (64 work-items, half the reuse of 64x64, 1.8-4.6 split in K) and 15 for the blocked
# kernel: the estimates made both look best on small layers (a blocked set was picked for
# GoogLeNet's 1x1 convolutions, 10x slower than gemm_1x1). SMALL_TILE_GPU_FACTOR (0.5) and the
# blocked kernel's GPU figure (/3.5) are partial corrections, the ones that ranked best: the
# cost model's picks for those four models went from 1.61x the tuned kernels' time (in all)
# to 1.29x; dividing the 32x32 sets' figure by 3 or 4 made other estimates (Winograd's) win
# where they should not, 1.55-1.58x.
TILED_GPU_EFFICIENCY = {64: 0.36, 32: 0.30, 16: 0.24}
SMALL_TILE_GPU_FACTOR = 0.5    # tiles of fewer than 64 x 64 outputs
BLOCKED_CPU_EFFICIENCY = {512: 0.45, 256: 0.4, 128: 0.3, 64: 0.2}
OTHER_DEVICE_EFFICIENCY = {"tiled": 0.01, "blocked": 0.0085}


def k_table(problem: ConvProblem) -> np.ndarray:
    """(K, 4) int32: for k = ((c*KD + a)*KH + i)*KW + j, the input offset of channel c and the
    padded-coordinate steps of tap (a, i, j): (c*D*H*W, a*DD, i*DH, j*DW)."""
    d, h, w = problem.size
    c, a, i, j = np.indices((problem.cin_g, *problem.kernel), dtype=np.int64)
    dd, dh, dw = problem.dilation
    table = np.stack([c * (d * h * w), a * dd, i * dh, j * dw], axis=-1)
    return np.ascontiguousarray(table.reshape(-1, 4), dtype=np.int32)


def parameter_error(layer: Any, algorithm: str, params: dict, expected: str) -> OperatorError:
    """The error for a parameter set that cannot be built (a hand-edited tuning cache)."""
    return OperatorError(getattr(layer, "name", "?"), getattr(layer, "type", "convolution"),
                         f"convolution algorithm '{algorithm}': parameter set {params} is "
                         f"invalid: {expected}")


def build_options(layer: Any, algorithm: str, params: dict) -> tuple[str, list[str]]:
    """(kernel name, -D options) of a parameter set, after checking it."""
    kind = params.get("kernel")
    try:
        if kind == "tiled":
            tm, tn, tk = params["tile_m"], params["tile_n"], params["tile_k"]
            wm, wn = params["wpt_m"], params["wpt_n"]
            threads = (tm // wm) * (tn // wn)
            if (min(tm, tn, tk, wm, wn) < 1 or tm % wm or tn % wn or threads % tn
                    or threads > 1024):
                raise ValueError
            return "implicit_gemm_tiled", [f"-DTILE_M={tm}", f"-DTILE_N={tn}",
                                           f"-DTILE_K={tk}", f"-DWPT_M={wm}", f"-DWPT_N={wn}"]
        if kind == "blocked":
            bm, vn = params["block_m"], params["vec_n"]
            if bm < 1 or vn not in (8, 16):
                raise ValueError
            if vn > 8 and not wide_vectors(layer.runtime.device):
                raise parameter_error(layer, algorithm, params, "vec_n 8: this device's "
                                      "compiler cannot build 16-wide vectors "
                                      "(kuiper/opencl/device/vector_width.py)")
            return "implicit_gemm_blocked", [f"-DBLOCK_M={bm}", f"-DVEC_N={vn}"]
    except (KeyError, TypeError, ValueError):
        pass
    raise parameter_error(layer, algorithm, params,
                          "expected kernel 'tiled' with tile_m/tile_n/tile_k/wpt_m/wpt_n "
                          "(wpt dividing the tile, work-items a multiple of tile_n, at most "
                          "1024), or kernel 'blocked' with block_m >= 1 and vec_n 8 or 16")


def program_options(layer: Any, algorithm: str, params: dict, problem: ConvProblem,
                    ops: ConvOperands) -> tuple[str, list[str]]:
    """(kernel name, build options): the parameter set's tiles and the fused epilogue."""
    name, options = build_options(layer, algorithm, params)
    if name == "implicit_gemm_blocked":
        if problem.padding_mode == "zeros":
            options.append("-DZERO_PAD=1")   # edges found by comparisons, not table lookups
        if flat_runs(problem, params):
            options.append("-DFLAT_RUNS=1")
    return name, options + (ops.epilogue.opencl_options() if ops.epilogue else [])


def flat_runs(problem: ConvProblem, params: dict) -> bool:
    """Whether the blocked kernel's runs of pixels cross output rows: when a row is shorter than
    a run (7 pixels in runs of 16 would leave 9 lanes idle)."""
    return problem.out[2] < params["vec_n"]


def runs_of(problem: ConvProblem, params: dict) -> int:
    """How many runs of vec_n pixels the blocked kernel computes (its global size 0)."""
    vec = params["vec_n"]
    if flat_runs(problem, params):
        return problem.n * -(-problem.pixels // vec)
    return problem.n * problem.pixels // problem.out[2] * -(-problem.out[2] // vec)


def k_step(params: dict) -> int:
    """The K granularity of a parameter set: a split-K slice is a multiple of it."""
    return params.get("tile_k", 1) if params.get("kernel") == "tiled" else 1


def bind_implicit_gemm(layer: Any, problem: ConvProblem, ops: ConvOperands, params: dict,
                       algorithm: str = "implicit_gemm", k_slice: int | None = None,
                       partial: Any = None, stem: str = "conv_implicit_gemm") -> Launch:
    """The one launch of the implicit GEMM, into ops.y (bias and epilogue in the store), or,
    with `partial` (split-K), slices of `k_slice` K-indices into partial[slice] (raw sums)."""
    name, options = program_options(layer, algorithm, params, problem, ops)
    kernel = layer.kernel(name, options, stem=stem)
    table = layer.upload(k_table(problem))
    keep_alive(layer, [table])
    k = problem.cin_g * problem.taps
    k_slice = k if k_slice is None else k_slice
    slices = -(-k // k_slice)
    cols = problem.n * problem.pixels
    i32 = np.int32
    kernel.set_args(ops.x.data, ops.weight, ops.bias, i32(ops.bias is not None), ops.residual,
                    ops.y.data if partial is None else partial, table.data, *ops.tables,
                    *(i32(v) for v in (problem.c, *problem.size, problem.cout,
                                       problem.cout_g, k, k_slice, *problem.out,
                                       *problem.stride, *(lo for lo, _ in problem.pads), cols,
                                       problem.groups)))
    z = slices * problem.groups
    if name == "implicit_gemm_tiled":
        local = (params["tile_n"] // params["wpt_n"], params["tile_m"] // params["wpt_m"], 1)
        tiles = (-(-cols // params["tile_n"]), -(-problem.cout_g // params["tile_m"]))
        return Launch(kernel, (tiles[0] * local[0], tiles[1] * local[1], z), local)
    runs = runs_of(problem, params)
    blocks_m = -(-problem.cout_g // params["block_m"])
    return Launch(kernel, (round_up(runs, BLOCKED_LOCAL[0]), round_up(blocks_m, BLOCKED_LOCAL[1]),
                           z), BLOCKED_LOCAL)


def too_large(problem: ConvProblem, slices: int = 1) -> str | None:
    """Why int32 indexing cannot address this problem, or None."""
    d, h, w = problem.size
    sizes = {"input": problem.n * problem.c * d * h * w,
             "output": slices * problem.n * problem.cout * problem.pixels,
             "weight": problem.cout * problem.cin_g * problem.taps}
    big = [what for what, size in sizes.items() if size > INT_MAX]
    return f"its {big[0]} has more than 2**31 - 1 elements" if big else None


def tile_shape(params: dict) -> tuple[int, int]:
    """(rows, columns) of the output one work-group (tiled) or work-item (blocked) computes."""
    if params["kernel"] == "tiled":
        return params["tile_m"], params["tile_n"]
    return params["block_m"], params["vec_n"]


def kernel_efficiency(params: dict, is_cpu: bool) -> float:
    """Fraction of the device's peak the parameter set reaches on a big problem."""
    if params["kernel"] == "tiled" and not is_cpu:
        small = params["tile_m"] * params["tile_n"] < 64 * 64
        return (TILED_GPU_EFFICIENCY.get(params["wpt_m"] * params["wpt_n"], 0.2)
                * (SMALL_TILE_GPU_FACTOR if small else 1.0))
    if params["kernel"] == "blocked" and is_cpu:
        return BLOCKED_CPU_EFFICIENCY.get(params["block_m"] * params["vec_n"], 0.2)
    return OTHER_DEVICE_EFFICIENCY[params["kernel"]]


def estimate(problem: ConvProblem, device: Any, params: dict, slices: int = 1) -> float:
    """Seconds by the roofline: the FLOPs of the padded tiles at the kernel's efficiency, slowed
    down when there are too few tiles to fill the device, against the input, weight and output
    traffic (no column matrix). Split in `slices`, the GEMM writes `slices` partial outputs and
    a second launch, bound by memory, reads them back and writes the output."""
    rates = device_rates(device)
    rows, cols = tile_shape(params)
    m, n = problem.cout_g, problem.n * problem.pixels
    tiles_m, tiles_n = -(-m // rows), -(-n // cols)
    if params["kernel"] == "blocked":
        tiles_n = runs_of(problem, params)
    padded = tiles_m * rows * tiles_n * cols / (m * n)
    # parallel pieces: work-groups on a GPU's compute units, work-items on a CPU's cores
    pieces = tiles_m * tiles_n * problem.groups * slices
    units = device.max_compute_units if device is not None else 2
    wanted = units * (8 if rates.is_cpu else 2)
    fill = min(1.0, pieces / wanted)
    efficiency = kernel_efficiency(params, rates.is_cpu) * fill
    d, h, w = problem.size
    out = problem.n * problem.cout * problem.pixels
    words = (problem.n * problem.c * d * h * w + problem.cout * problem.cin_g * problem.taps
             + out * slices)
    seconds = roofline(device, 2.0 * problem.macs * padded, 4.0 * words, 1, efficiency)
    if slices > 1:   # the reduce: read every slice, write the output
        seconds += roofline(device, out * slices, 4.0 * out * (slices + 1), 1, 1.0)
    return seconds


def fits(params: dict, device: Any) -> bool:
    """Whether the device can run a parameter set: its work-groups (size, local memory), its
    vectors (16-wide ones only where the compiler builds them)."""
    if device is None:
        return True
    if params["kernel"] != "tiled":   # vectors of vec_n floats (vector_width.py)
        return params["vec_n"] <= 8 or wide_vectors(device)
    threads = params["tile_m"] // params["wpt_m"] * (params["tile_n"] // params["wpt_n"])
    local_bytes = 4 * params["tile_k"] * (params["tile_m"] + params["tile_n"])
    return threads <= device.max_work_group_size and local_bytes <= device.local_mem_size


def device_sets(device: Any) -> list[dict]:
    """Every parameter set the device can run, those made for its kind first."""
    is_cpu = device_rates(device).is_cpu
    ordered = BLOCKED_SETS + TILED_SETS if is_cpu else TILED_SETS + BLOCKED_SETS
    return [dict(p) for p in ordered if fits(p, device)]


@register_algorithm
class ImplicitGemm(ConvAlgorithm):
    name = "implicit_gemm"
    good_for = ("any non-depthwise convolution; im2col inside the GEMM's tile loads, no "
                "column matrix in memory")

    def unsupported(self, problem: ConvProblem, device: Any) -> str | None:
        if problem.depthwise:
            return "depthwise (one input channel per group): K = taps is too short for a GEMM"
        return too_large(problem)

    def parameter_sets(self, problem: ConvProblem, device: Any) -> list[dict]:
        """The device's parameter sets, cheapest by the cost model first (the default)."""
        return sorted(device_sets(device), key=lambda p: estimate(problem, device, p))

    def cost(self, problem: ConvProblem, device: Any) -> float:
        return estimate(problem, device, self.parameter_sets(problem, device)[0])

    def bind(self, layer: Any, problem: ConvProblem, ops: ConvOperands, params: dict) -> list:
        return [bind_implicit_gemm(layer, problem, ops, params or
                                   self.parameter_sets(problem, layer.runtime.device)[0])]
