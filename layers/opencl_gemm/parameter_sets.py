"""The GEMM kernels' parameter sets: which tile sizes exist, which fit a device, their -D options.

Kept apart from the launch code (launch.py) because the cost model (cost.py) ranks these sets
and launch.py asks the cost model for the best one: each imports this file, not the other. The
tensor-core sets (gemm_mma.h) are in mma_sets.py.
"""

from __future__ import annotations

from kuiper.layers.opencl_gemm import mma_sets
from kuiper.opencl.device.runtime import is_cpu
from kuiper.opencl.device.vector_width import wide_vectors

# A *parameter set* is a dict naming the kernel family and its -D sizes (see gemm_tiled.h and
# gemm_blocked.h), e.g. {"kernel": "gemm_tiled", "TILE_M": 128, ...}; plain JSON, so the tuning
# cache stores it as is. "GROUP_N"/"GROUP_M" (gemm_blocked) are the work-group's shape, a launch
# setting rather than a -D option.


def tiled(tm: int, tn: int, tk: int, wm: int, wn: int, vec: int = 4, lds_vec: int = 0) -> dict:
    return {"kernel": "gemm_tiled", "TILE_M": tm, "TILE_N": tn, "TILE_K": tk, "WPT_M": wm,
            "WPT_N": wn, "VEC": vec, "LDS_VEC": lds_vec}


def blocked(block_n: int, block_k: int, group_n: int = 4, group_m: int = 4,
            m_fastest: int = 0, rows: int = 8) -> dict:
    """A gemm_blocked set; `rows` (MR) of C per work-item, named only when not 8, so that
    tuning caches written before MR existed still name the same sets."""
    params = {"kernel": "gemm_blocked", "BLOCK_N": block_n, "BLOCK_K": block_k,
              "GROUP_N": group_n, "GROUP_M": group_m, "M_FASTEST": m_fastest}
    if rows != 8:
        params["MR"] = rows
    return params


def split_k(params: dict, slices: int) -> dict:
    """gemm_tiled's `params` with K cut in `slices` slices (gemm_split_k.h)."""
    return {**params, "SPLIT_K": slices}


def gemv(lanes: int) -> dict:
    """gemv.h: `lanes` work-items per output (1: one work-item each, for CPUs)."""
    return {"kernel": "gemv", "LANES": lanes}


# GPU parameter sets, the default first. Measured on an NVIDIA H100 80GB HBM3 (NVIDIA OpenCL,
# driver 580.159.04; fp32 peak ~67 TFLOP/s), median of 10 kernel times, TFLOP/s. "lds4": the
# work-item's block read from local memory as float4, in runs of 4 that neighbouring
# work-items read side by side (LDS_VEC=1, gemm_tiled.h). ResNet-18's convolutions as GEMMs at
# batch 32 (M x N x K: stem 64 x 401k x 147, stage 4 3x3 512 x 1568 x 4608), A stored M x K:
#                            4096^3, A stored     stem    stage 4
#                            M x K    K x M
#   256x128x8  16x8 v4 lds4  38.4     42.7-42.8   9.5     7.4     (big squares only)
#   128x128x16 8x8  v4 lds4  35.8     38.9-39.0   14.5    14.1
#   128x128x8  8x8  v4 lds4  34.1     40.9-41.1   18.9    12.7
#   64x128x16  8x8  v4 lds4  32.2     34.3-34.5   26.2    21.4
#   128x64x16  8x8  v4 lds4  30.5     34.3-34.5   17.2    21.1
#   64x64x16   4x4  v4 lds4  25.6     28.8        24.7    17.2
# The same 8x8 and 16x8 blocks read as in the first version of LDS_VEC (the whole block side
# by side: float4 reads 8 words apart, two-way bank conflicts) were 8-15% slower: 256x128x8
# 34.0 / 39.3, 128x128x8 28.9 / 36.0.
# Earlier sweeps (A stored M x K, ResNet-18 b1 stage 4 in brackets): 128x128x16 8x8 v4 without
# lds4 32.0 (0.35), 64x64x16 4x4 v1 24.1 (0.78), 32x32x32 4x4 v4 lds4 20.6 (1.41); 64x128x16
# 8x8 without lds4 on stage 4 at batch 32: 11.1.
# Before this work: 64x64x16 4x4 scalar loads, single-buffered, 17.9 at 4096^3. Vector global
# loads matter most for 8x8 blocks (128x128: v1 19.5, v2 31.7, v4 32.0).
# Batch-1 shapes have too few work-groups for any tile size (split-K's and implicit GEMM's job).
# 16x8 blocks (128 results per work-item) win only on big square products: 42.8 TFLOP/s, 64% of
# peak, with A stored K x M (TRANS_A, ConvTranspose's weight: the slab's float4 loads go to
# local memory without a transpose), 38.4 (57%) with A stored M x K (a convolution's weight).
GPU_PARAMETER_SETS = [
    tiled(128, 128, 16, 8, 8, lds_vec=1),   # big problems: 256 work-items, 64 results each
    tiled(256, 128, 8, 16, 8, lds_vec=1),   # the biggest square products only
    tiled(128, 128, 8, 8, 8, lds_vec=1),
    tiled(128, 64, 16, 8, 8, lds_vec=1),    # 128 work-items
    tiled(64, 128, 16, 8, 8, lds_vec=1),
    tiled(64, 64, 32, 8, 8, lds_vec=1),     # 64 work-items, 4x more work-groups: narrow problems
    tiled(64, 64, 16, 8, 8, lds_vec=1),
    tiled(64, 64, 16, 4, 4, 1),  # the textbook kernel of lesson 11 (was the only one)
    tiled(64, 64, 16, 4, 4, lds_vec=1),
    tiled(64, 32, 32, 4, 4, lds_vec=1),
    tiled(32, 32, 32, 4, 4, lds_vec=1),   # small problems (batch 1): the most work-groups
]
# Split-K sets (gemm_split_k.h), for a linear layer on a GPU whose output has too few tiles
# to fill the device while its K is long: a transformer's layers at 128-512 tokens (M x N x K
# 128 x 768 x 3072 gives 24 tiles of 64 x 64 to 132 compute units). Small tiles only: a
# split product is one whose grid is too small, not one that needs the biggest blocks.
SPLIT_TILES = [tiled(64, 64, 16, 4, 4, lds_vec=1), tiled(64, 64, 32, 8, 8, lds_vec=1),
               tiled(32, 32, 32, 4, 4, lds_vec=1), tiled(64, 128, 16, 8, 8, lds_vec=1)]
SPLITS = (2, 3, 4, 6, 8)
MIN_SLICE = 128   # values of K per slice below which the extra pass cannot pay for itself
# They are gemm_tiled sets: fp32 arithmetic, offered at every precision as the whole-K
# gemm_tiled sets are (under fp16 the product pass reads the half weight, HALF_B); the
# tensor-core sets (mma_sets.py) never split K.
GPU_SPLIT_SETS = [split_k(p, s) for s in SPLITS for p in SPLIT_TILES]

# CPU parameter sets (PoCL 3.0, 2 cores of a Xeon with AVX-512), GFLOP/s, best of noisy runs
# on a shared VM (+-20%):       256^3  1024^3  2048^3
#   8x16 k256 group 2x8           -      210     193
#   8x16 k256 group 8x8 m-first   -      189     185
#   8x16 k64  group 4x4           -      186     167
#   8x8  k256 group 4x4          155     133     115
#   8x16 no K blocking           279     106      53
#   8x8  no K blocking (before)  171      64      50
# NumPy's sgemm (OpenBLAS) does 190-200 at 1024^3 and 2048^3 on the same machine.
# 8x32 blocks (two float16 per row, 2026-11-24): the 8x16 loop does 8 FMAs for 1 vector load,
# 8 broadcast loads and a pointer reload, so on a core that loads 2 values and issues 2 FMAs
# per cycle it waits on loads; 8x32 does 16 FMAs for 11 loads. Same runs, best set of each
# size, 8x16 -> 8x32 (unpacked B; YOLOv5s and ResNet-18 layers as M x N x K):
#   64 x 25600 x 288 129 -> 206, 1024^3 147 -> 191, 64 x 3136 x 576 185 -> 259,
#   512 x 400 x 1024 230 -> 228. A register-only loop of float16 FMAs peaks at ~460 here.
# 6x16 blocks (MR=6, 2026-11-28), for 8-wide SIMD with 16 vector registers (AVX2): 8x16 keeps
# 16 accumulators, which with the two B vectors and a broadcast spill out of 16 registers; 6x16
# keeps 12 (the shape of an AVX2 BLAS micro-kernel). PoCL 3.0 on a 2-core AMD EPYC (Zen 3,
# AVX2) at load average ~10, ViT-S/16's linear layers (M x N x K, W^T stored), 10 interleaved
# rounds of 5 runs, kernel time at the first quartile, ms (onnxruntime's MatMul+Add beside):
#                        197x1152x384  197x384x1536  197x1536x384  197x384x384
#   8x8  k- 4x4                3.24         14.8           5.23          1.15
#   8x16 k- 4x4                4.95          5.74           -             -
#   6x16 k- 4x4                2.56          4.14          3.87          0.79
#   6x16 k256 2x4              3.14          3.64          4.71          0.91
#   onnxruntime                2.21          3.33          3.20          0.50
# On 16-lane hardware 6x16 is 6 accumulators, too few to hide the FMA latency (cost.py).
CPU_PARAMETER_SETS = [
    blocked(32, 256, 2, 8),
    blocked(32, 256, 1, 8),
    blocked(32, 64, 2, 4),
    blocked(32, 0, 2, 4),        # small K: one pass, no barrier
    blocked(16, 256, 2, 8),
    blocked(16, 256, 8, 8, 1),
    blocked(16, 64),
    blocked(8, 256),
    blocked(16, 0),              # small K: one pass, no barrier
    blocked(8, 0),               # the kernel before K blocking (AVX2-sized)
    blocked(16, 0, 4, 4, rows=6),     # AVX2: 12 accumulators (above)
    blocked(16, 256, 2, 4, rows=6),
]

# gemv.h, for a linear layer with at most GEMV_MAX_ROWS rows. On PoCL (2 cores), MobileNetV2's
# classifier (1 x 1280 -> 1000): 0.15-0.17 ms against 1.03 ms for the best gemm_blocked set,
# which computes 8 rows to keep one.
GEMV_MAX_ROWS = 4
CPU_GEMV_SETS = [gemv(1)]
GPU_GEMV_SETS = [gemv(64), gemv(32), gemv(128)]

# None: gemm_blocked on CPU devices, gemm_tiled elsewhere (see gemm.h for why). Tests set it
# to run both kernel families on whatever device they have.
FORCE_GEMM: str | None = None


def weight_gemm_family(device) -> str:
    """Which kernel of gemm.h `weight_gemm_launch` binds on `device`."""
    if FORCE_GEMM is not None:
        return FORCE_GEMM
    return "gemm_blocked" if is_cpu(device) else "gemm_tiled"


def gemm_parameter_sets(device, precision: str = "fp32") -> list[dict]:
    """Every parameter set of the family for `device` that fits it (local memory, work-group
    size); the first is the default before the cost model looks at the shape. For a GEMM that
    may compute in tf32 or fp16, the tensor-core sets come first where the device has them
    (mma_sets.py); the fp32 sets stay candidates (a small product may run faster on them)."""
    family = weight_gemm_family(device)
    sets = GPU_PARAMETER_SETS if family == "gemm_tiled" else CPU_PARAMETER_SETS
    if FORCE_GEMM is None:
        sets = mma_sets.mma_sets_for(device, precision) + sets
    return [p for p in sets if fits(p, device)]


def slice_length(params: dict, k: int) -> int:
    """K_SLICE of a split set: K / SPLIT_K rounded up to whole slabs (TILE_K)."""
    per_slice = -(-k // params["SPLIT_K"])            # ceil(K / SPLIT_K)
    step = params["TILE_K"]
    return -(-per_slice // step) * step               # rounded up to a multiple of TILE_K


def slices_of(params: dict, k: int) -> int:
    """How many slices a split set really runs for this K (1: not a split set); rounding the
    slice up to whole slabs can leave fewer than SPLIT_K."""
    if params.get("SPLIT_K", 1) <= 1:
        return 1
    return -(-k // slice_length(params, k))


def split_parameter_sets(device, k: int, z: int) -> list[dict]:
    """The split-K sets that can run a product with this K on `device`: GPU family only
    (gemm_tiled), one product (Z = 1), at least MIN_SLICE values of K per slice. The same at
    every precision (fp32 arithmetic, like the gemm_tiled sets that stay candidates under
    tf32 / fp16)."""
    if z != 1 or weight_gemm_family(device) != "gemm_tiled":
        return []
    return [p for p in GPU_SPLIT_SETS if k // p["SPLIT_K"] >= MIN_SLICE and fits(p, device)]


def gemv_parameter_sets(device, m: int, trans_a: bool, trans_b: bool) -> list[dict]:
    """gemv.h's parameter sets where it is a candidate: a linear layer's layout (the rows of both
    operands contiguous) with at most GEMV_MAX_ROWS rows, and no GEMM family forced."""
    if FORCE_GEMM is not None or trans_a or not trans_b or m > GEMV_MAX_ROWS:
        return []
    sets = CPU_GEMV_SETS if is_cpu(device) else GPU_GEMV_SETS
    return [p for p in sets if fits(p, device)]


GEMV_GROUP = 16  # gemv with LANES = 1: outputs per work-group


# the kernels a GEMM parameter set names ("kernel"); a convolution algorithm's own sets (implicit
# GEMM's "tiled") are not GEMM sets
GEMM_KERNELS = ("gemm_blocked", "gemm_tiled", "gemm_mma", "gemv")


def work_group_size(params: dict) -> int:
    if params["kernel"] == "gemm_mma":
        return mma_sets.threads(params)
    if params["kernel"] == "gemv":
        return params["LANES"] if params["LANES"] > 1 else GEMV_GROUP
    if params["kernel"] == "gemm_tiled":
        return (params["TILE_M"] // params["WPT_M"]) * (params["TILE_N"] // params["WPT_N"])
    return params["GROUP_N"] * params["GROUP_M"]


def fits(params: dict, device) -> bool:
    """False when the device cannot run `params` (too many work-items, too much local memory,
    16-wide vectors its compiler cannot build, a tensor-core set its probe refused) or must not
    (gemm_blocked's K-blocked and 6- and 4-row sets off CPU devices: the comment below)."""
    if work_group_size(params) > int(device.max_work_group_size):
        return False
    if params["kernel"] == "gemm_blocked" and params["BLOCK_N"] > 8 and not wide_vectors(device):
        return False   # float16 rows: this device's compiler cannot build them (vector_width.py)
    if params["kernel"] == "gemm_blocked" and not is_cpu(device) and (
            params.get("BLOCK_K", 0) > 0 or params.get("MR", 8) != 8):
        # Both are CPU techniques: K blocking walks K in step across the group so that PoCL
        # reads A and B from the cache (gemm_blocked.h, 2.), and 6- and 4-row blocks fit a
        # CPU's 16 SIMD registers. On NVIDIA's OpenCL (driver 580.159.04, an H200) the
        # K-blocked 6x16 and 8x16 sets gave wrong sums on a transposed A, where PoCL and
        # Oclgrind agree with PyTorch (2026-11-28, not understood): CPU devices only.
        return False
    if params["kernel"] == "gemm_tiled":  # two buffers of each slab, one spare column per row
        words = 2 * params["TILE_K"] * (params["TILE_M"] + params["TILE_N"] + 8)
        return words * 4 <= int(device.local_mem_size)
    if params["kernel"] == "gemm_mma":
        return (mma_sets.why_not(params, device) is None
                and mma_sets.local_bytes(params) <= int(device.local_mem_size))
    return True


def why_it_cannot_run(params: dict, device) -> str:
    """Why `fits` said no, for an error message."""
    if params["kernel"] == "gemm_mma" and mma_sets.why_not(params, device):
        return mma_sets.why_not(params, device)
    if params["kernel"] == "gemm_blocked" and not is_cpu(device):
        if params.get("BLOCK_K", 0) > 0:
            return "K-blocked sets run on CPU devices only (`fits` says why)"
        if params.get("MR", 8) != 8:
            return f"{params['MR']}-row blocks run on CPU devices only (`fits` says why)"
    return "work-group size, local memory, or 16-wide vectors its compiler cannot build"


def gemm_options(params: dict) -> list[str]:
    """The -D options of a parameter set (the launch-only keys left out); gemm.h compiles the
    tensor-core kernel (inline PTX) only when a gemm_mma set asks for it."""
    switch = ["-DGEMM_MMA=1"] if params.get("kernel") == "gemm_mma" else []
    return switch + [f"-D{k}={v}" for k, v in params.items() if k not in ("kernel", "GROUP_N",
                                                                           "GROUP_M")]


def program_options(params: dict, epilogue=None) -> list[str]:
    """Build options of a program that includes gemm.h: the parameter set's and the epilogue's.
    Other kernels of the same program (im2col) are built with the same options, so that one
    compilation serves both."""
    return gemm_options(params) + (epilogue.opencl_options() if epilogue else [])


def computes_in(params: dict, half_weight: bool = False) -> str:
    """What a GEMM bound with `params` computes in, for `kuiper info`: 'tf32' / 'fp16' on the
    tensor cores (gemm_mma), else 'fp32', with ', half weight' where the weight is stored as
    half (precision fp16 on a kernel without tensor cores: fp32 math on rounded weights)."""
    return mma_sets.precision_of(params) + (", half weight" if half_weight else "")


def describe_params(params: dict) -> str:
    """Short text for tables: 'tiled 128x128x16 8x8 v4', 'blocked 8x16 k256 4x4 m',
    'mma tf32 128x128x16 w2x4 v4'."""
    if not params:
        return "-"
    if params.get("kernel") == "gemm_mma":
        return mma_sets.describe(params)
    if params.get("kernel") == "gemm_tiled":
        return (f"tiled {params['TILE_M']}x{params['TILE_N']}x{params['TILE_K']} "
                f"{params['WPT_M']}x{params['WPT_N']} v{params['VEC']}"
                + (" lds4" if params.get("LDS_VEC") else "")
                + (f" split {params['SPLIT_K']}" if params.get("SPLIT_K", 1) > 1 else ""))
    if params.get("kernel") == "gemv":
        return f"gemv lanes {params['LANES']}"
    if params.get("kernel") == "gemm_blocked":
        return (f"blocked {params.get('MR', 8)}x{params['BLOCK_N']} "
                f"k{params['BLOCK_K'] or '-'} "
                f"{params['GROUP_N']}x{params['GROUP_M']}{' m' if params['M_FASTEST'] else ''}")
    return ",".join(f"{k}={v}" for k, v in params.items())
