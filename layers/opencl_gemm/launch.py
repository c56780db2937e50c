"""Every OpenCL matrix product: two GEMM kernels, one launch function for each.

- `weight_gemm_launch`, the fast GEMM of clkernels/gemm.h, for linear and the convolutions:
  `C[z] = A[z % groups] @ B[z]` (+ a bias per row or column, + a fused epilogue) on dense
  row-major matrices, A being the weight (a grouped convolution shares one weight per group
  across the batch). The kernel is compiled into the layer's own program (its .cl file includes
  gemm.h and may set TRANS_A / TRANS_B), and comes in two families, each with tile sizes as -D
  options: register-blocked local-memory tiles for GPUs (gemm_tiled.h), SIMD blocks for CPUs
  (gemm_blocked.h); a linear layer on a few rows may also take gemv.h. The parameter sets of
  gemm_params.py are what the cost model (cost_model.py) and `kuiper tune` choose from.
- `strided_gemm_launch`, `bgemm` of clkernels/matmul.cl, for matmul, attention and the
  recurrent layers, whose operands are broadcast, transposed or cut into heads: each operand is
  read through a `Strided` view, so none of that costs a copy. Simpler and slower than gemm.h,
  but it takes any layout.

Two ideas carry the strided views:

1. *Shapes* follow torch.matmul: the last two dims are the matrix, the leading dims are a batch
   that broadcasts like NumPy (`(2,1,4,5) @ (3,5,6) -> (2,3,4,6)`), and a 1-D operand is a
   row (left) or a column (right) vector whose dim disappears from the result.
2. *Memory* is described, not rearranged. `strided(shape, target)` says where element
   (b, r, c) of a broadcast view lives in the flat buffer: `offsets[b] + r*row + c*col`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kuiper.core.errors import KuiperError
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_gemm.cost import best_gemm_params
from kuiper.layers.opencl_gemm.parameter_sets import (  # noqa: F401 (gemm.X, as before)
    CPU_GEMV_SETS,
    CPU_PARAMETER_SETS,
    GEMV_GROUP,
    GEMV_MAX_ROWS,
    GPU_GEMV_SETS,
    GPU_PARAMETER_SETS,
    describe_params,
    fits,
    gemm_parameter_sets,
    program_options,
    slice_length,
    slices_of,
    why_it_cannot_run,
    work_group_size,
)
from kuiper.layers.opencl_gemm.selection import select_gemm
from kuiper.layers.opencl_helpers.buffers import keep_alive

# --- weight_gemm_launch: clkernels/gemm.h ------------------------------------------------------
# The parameter sets (tile sizes as -D options) are in gemm_params.py; the cost model picks one.

BIAS_NONE, BIAS_PER_ROW, BIAS_PER_COLUMN = 0, 1, 2


def weight_gemm_launch(layer: OpenCLLayer, m: int, n: int, k: int, a, a_group_stride: int, b,
                       b_batch_stride: int, c, c_batch_stride: int, bias=None,
                       bias_mode: int = BIAS_NONE, groups: int = 1, batch: int = 1,
                       params: dict | None = None, epilogue=None, residual=None,
                       options: Sequence[str] = (), stem: str | None = None,
                       half_a: bool = False, half_b: bool = False) -> Launch:
    """Bind gemm.h for C[z] = A[z % groups] @ B[z], z < batch*groups (arguments are buffers).

    The kernel comes from the layer's own program (its .cl file includes gemm.h and may set
    TRANS_A / TRANS_B), built with the parameter set's -D options (None: the cost model's
    choice for this shape, cost.py) and the epilogue's (kuiper/passes/epilogue.py), whose
    residual buffer `residual` the store reads at the flat index of C; `options` are more -D
    options of the layer's program (linear.cl's TRANS_B); `stem`: another clkernels/ file that
    includes gemm.h (Winograd's products), instead of the layer's own. `half_a` / `half_b`: that
    buffer holds halves (a weight stored as float16 under precision fp16), read with
    vload_half by every kernel family."""
    if params is None:
        params = best_gemm_params(layer.runtime.device, m, n, k, batch * groups)
    elif not fits(params, layer.runtime.device):   # a forced or tuned set: a clear error
        raise KuiperError(f"GEMM parameter set {describe_params(params)} cannot run on "
                          f"{layer.runtime.device.name.strip()}: "
                          f"{why_it_cannot_run(params, layer.runtime.device)}")
    if params.get("SPLIT_K", 1) > 1:
        raise KuiperError(f"GEMM parameter set {describe_params(params)} splits K: it needs "
                          "a scratch buffer and a second pass (linear_gemm_launches)")
    options = program_options(params, epilogue) + list(options)
    options += (["-DHALF_A=1"] if half_a else []) + (["-DHALF_B=1"] if half_b else [])
    kernel = (layer.kernel(params["kernel"], options) if stem is None
              else layer.kernel(params["kernel"], options, stem=stem))
    i32 = np.int32
    kernel.set_args(i32(m), i32(n), i32(k), a, i32(a_group_stride), b, i32(b_batch_stride),
                    c, i32(c_batch_stride), bias, i32(bias_mode if bias is not None else 0),
                    i32(groups), residual)
    return Launch(kernel, *launch_sizes(params, m, n, batch * groups))


SPLIT_REDUCE_LOCAL = 256   # work-group size of gemm_split_k_reduce


def split_workspace(params: dict, m: int, n: int, k: int) -> list[tuple[tuple[int, ...], Any]]:
    """The scratch arrays `linear_gemm_launches` needs with `params`: one float per output
    and slice for a split-K set, nothing otherwise (workspace_shapes' format)."""
    slices = slices_of(params, k)
    return [((slices * m * n,), np.float32)] if slices > 1 else []


def linear_gemm_launches(layer: OpenCLLayer, m: int, n: int, k: int, a, b, c, bias,
                         params: dict, epilogue=None, residual=None,
                         options: Sequence[str] = (), stem: str | None = None,
                         workspaces: Sequence[Any] = (), half_b: bool = False) -> list[Launch]:
    """The launches of C (m x n) = A @ B + bias per column (a linear layer's product, Z = 1)
    with any parameter set the selector may pick for it, at any precision: one gemm.h launch
    (gemm_tiled, gemm_blocked, gemv, or a tensor-core gemm_mma set), or for a split-K set
    (gemm_split_k.h) the product into the slices of `workspaces[0]` (split_workspace's array)
    and the pass that adds them, the bias and the epilogue. `half_b`: B holds halves (a weight
    stored as float16 under precision fp16); every family reads it, the split product too
    (it is gemm_tiled: HALF_B), while the sum pass reads only the float partial sums."""
    slices = slices_of(params, k)
    if slices <= 1:   # not a split set, or K too short for more than one slice
        whole = {key: value for key, value in params.items() if key != "SPLIT_K"}
        return [weight_gemm_launch(layer, m, n, k, a, 0, b, 0, c, 0, bias, BIAS_PER_COLUMN,
                                   params=whole, epilogue=epilogue, residual=residual,
                                   options=options, stem=stem, half_b=half_b)]
    if not fits(params, layer.runtime.device):
        raise KuiperError(f"GEMM parameter set {describe_params(params)} cannot run on "
                          f"{layer.runtime.device.name.strip()}: "
                          f"{why_it_cannot_run(params, layer.runtime.device)}")
    if not workspaces:
        raise KuiperError(f"GEMM parameter set {describe_params(params)} splits K: the layer "
                          "must ask for its scratch buffer (split_workspace)")
    partial = workspaces[0].data
    k_slice = slice_length(params, k)
    built = (program_options(params, epilogue) + [f"-DK_SLICE={k_slice}"] + list(options)
             + (["-DHALF_B=1"] if half_b else []))
    stem_kw = {} if stem is None else {"stem": stem}
    product = layer.kernel("gemm_tiled", built, **stem_kw)
    i32 = np.int32
    product.set_args(i32(m), i32(n), i32(k), a, i32(0), b, i32(0), partial, i32(0), None,
                     i32(0), i32(1), None)
    global_size, local_size = launch_sizes(params, m, n, 1)
    reduce = layer.kernel("gemm_split_k_reduce", built, **stem_kw)
    reduce.set_args(partial, i32(slices), i32(m), i32(n), c, bias,
                    i32(BIAS_PER_COLUMN if bias is not None else 0), residual)
    return [Launch(product, global_size[:2] + (slices,), local_size),
            Launch(reduce, (round_up(m * n, SPLIT_REDUCE_LOCAL),), (SPLIT_REDUCE_LOCAL,))]


def weight_stored_transposed(device, rows: int) -> bool:
    """Whether a weight known at bind time, (out, in) as PyTorch keeps it, is uploaded as its
    transpose (in, out): for more than GEMV_MAX_ROWS rows, on every device (gemv.h, for fewer
    rows, reads each output's weights as one contiguous row). layers/opencl/linear.py says what
    the other layout costs on a CPU device and on a GPU. `device` is kept for devices that may
    come to want otherwise."""
    return rows > GEMV_MAX_ROWS


def weight_dtype(precision: str) -> type:
    """How a weight known at bind time is stored on the device for a GEMM computed in
    `precision`: float16 for fp16 (half the bytes; every kernel family reads it with
    vload_half), else float32."""
    return np.float16 if precision == "fp16" else np.float32


def packed_strips(matrix: np.ndarray, block_n: int) -> np.ndarray:
    """A K x N matrix in gemm_blocked's strips (PACKED_B, gemm_blocked.h): strip s holds the K
    rows of columns s*block_n .. s*block_n + block_n - 1 one after the other, the last strip
    padded with zero columns."""
    k, n = matrix.shape
    strips = -(-n // block_n)
    padded = np.zeros((k, strips * block_n), np.float32)
    padded[:, :n] = matrix
    return np.ascontiguousarray(padded.reshape(k, strips, block_n).transpose(1, 0, 2))


def stored_weight(weight: np.ndarray, transposed: bool, params: dict,
                  dtype=np.float32) -> tuple[np.ndarray, list[str]]:
    """(array to upload, gemm.h options) of a weight (out, in) known at bind time: as is and
    read transposed (TRANS_B), or, where `weight_stored_transposed`, W^T, in gemm_blocked's
    strips when that family runs it. A strip is what a work-item reads: K rows of BLOCK_N
    values in one contiguous run, where W^T's rows lie N values apart, each on a page of its
    own at ViT's sizes. PoCL on a 2-core AMD EPYC, ViT-S's 197 x 1536 x 384 layer with the
    caches flushed before each run (as in a model, whose weights do not stay in the caches),
    first quartile of 40 runs: 4.9-6.1 ms unpacked, 3.6-4.0 packed, onnxruntime (which packs
    its weights the same way at load time) 3.5. `dtype`: float32, or float16 for a half
    weight (precision fp16, HALF_B)."""
    if not transposed:
        return np.ascontiguousarray(weight, dtype), ["-DTRANS_B=1"]
    weight_t = np.ascontiguousarray(np.asarray(weight, np.float32).T)
    if params["kernel"] == "gemm_blocked":
        return (packed_strips(weight_t, params["BLOCK_N"]).astype(dtype, copy=False),
                ["-DTRANS_B=0", "-DPACKED_B=1"])
    return weight_t.astype(dtype, copy=False), ["-DTRANS_B=0"]


def projection_launch(layer: OpenCLLayer, rows: int, weight: np.ndarray, bias, x, y,
                      epilogue=None, residual=None, precision: str = "fp32") -> Launch:
    """y (rows x out) = x (rows x in) @ weight^T + bias, for a weight (out, in) known at bind
    time (attention's projections): the GEMM of a linear layer, with its parameter set chosen
    the same way (tuned, else the cost model's; selection.py), and a fused epilogue stored
    through (`residual`: its buffer, or None). `x` and `y` are buffers; the GEMM comes from
    clkernels/linear.cl (which includes gemm.h). `precision`: the plan's for the layer (fp16
    also stores the weight as halves). One launch: split-K sets, which need a workspace, are
    not offered here (select_gemm without `split`; a Linear's tuned split set is skipped)."""
    n_out, n_in = weight.shape
    transposed = weight_stored_transposed(layer.runtime.device, rows)
    params, _ = select_gemm(layer.runtime.device, rows, n_out, n_in, trans_b=not transposed,
                            packed_b=transposed, precision=precision)
    dtype = weight_dtype(precision)
    stored, options = stored_weight(weight, transposed, params, dtype)
    w = layer.upload(stored)
    b = layer.upload(np.ascontiguousarray(bias, np.float32)) if bias is not None else None
    keep_alive(layer, [w] + ([b] if b is not None else []))
    return weight_gemm_launch(layer, rows, n_out, n_in, x, 0, w.data, 0, y, 0,
                              b.data if b is not None else None, BIAS_PER_COLUMN,
                              params=params, epilogue=epilogue, residual=residual,
                              options=options, stem="linear", half_b=dtype == np.float16)


def launch_sizes(params: dict, m: int, n: int, z: int) -> tuple[tuple, tuple]:
    """(global size, local size) of one GEMM launch with `params`."""
    if params["kernel"] == "gemv":
        lanes = params["LANES"]
        if lanes == 1:
            return (round_up(n, GEMV_GROUP), m, z), (GEMV_GROUP, 1, 1)
        return (n * lanes, m, z), (lanes, 1, 1)
    if params["kernel"] == "gemm_blocked":
        gn, gm = params["GROUP_N"], params["GROUP_M"]
        blocks_n, blocks_m = -(-n // params["BLOCK_N"]), -(-m // params.get("MR", 8))
        if params["M_FASTEST"]:
            return (round_up(blocks_m, gn), round_up(blocks_n, gm), z), (gn, gm, 1)
        return (round_up(blocks_n, gn), round_up(blocks_m, gm), z), (gn, gm, 1)
    if params["kernel"] == "gemm_mma":   # one row of warps per work-group
        threads = work_group_size(params)
        tiles_n, tiles_m = -(-n // params["MMA_TILE_N"]), -(-m // params["MMA_TILE_M"])
        return (tiles_n * threads, tiles_m, z), (threads, 1, 1)
    local_n = params["TILE_N"] // params["WPT_N"]
    local_m = params["TILE_M"] // params["WPT_M"]
    tiles_n, tiles_m = -(-n // params["TILE_N"]), -(-m // params["TILE_M"])
    return (tiles_n * local_n, tiles_m * local_m, z), (local_n, local_m, 1)


class WeightBuffers:
    """Mixin: device buffers for weights that are attributes (uploaded once at bind time) or
    inputs (F.linear / F.convNd: the producer's array). References are kept on the layer so
    the buffers live as long as the kernels bound to them."""

    def weight_buffers(self, inputs, weight: np.ndarray | None = None,
                       dtype: type = np.float32) -> tuple:
        """(weight, bias) buffers; `weight`: the attribute's values to upload in its place (a
        linear layer's W^T); `dtype`: how an attribute is stored (weight_dtype: float16 under
        precision fp16). A weight that is an input stays the graph's float32 array."""
        if self.weight is not None:
            self._uploaded = [self.upload(np.ascontiguousarray(
                self.weight if weight is None else weight, dtype))]
            if self.bias is not None:
                self._uploaded.append(self.upload(np.asarray(self.bias, np.float32)))
            return self._uploaded[0].data, (self._uploaded[1].data if self.bias is not None
                                             else None)
        bias = inputs[2].data if len(inputs) > 2 and inputs[2] is not None else None
        return inputs[1].data, bias


# --- strided_gemm_launch: bgemm of clkernels/matmul.cl -----------------------------------------

STRIDED_TILE = 16  # must match TS in clkernels/matmul.cl (passed as -DTS)


@dataclass
class Strided:
    """A batch of matrices inside a flat buffer: element (b, r, c) at offsets[b] + r*row + c*col."""

    array: Any                 # device array, or None (bias absent)
    offsets: np.ndarray        # int32, one per batch entry
    row: int
    col: int


def strided(shape: Sequence[int], target: Sequence[int], array: Any = None) -> Strided:
    """The view of a C-contiguous `shape` tensor broadcast to `target` (batch..., rows, cols).

    Trick: number the elements 0..size-1, broadcast that index array with NumPy, and read the
    offsets and strides straight off the result (broadcast dims get stride 0 for free).
    """
    index = np.arange(int(np.prod(tuple(shape), dtype=np.int64)), dtype=np.int64)
    return strided_index(index.reshape(tuple(shape)), target, array)


def strided_index(index: np.ndarray, target: Sequence[int], array: Any = None) -> Strided:
    """Like `strided`, from an index array that may already be rearranged with NumPy
    (np.repeat of K/V heads for grouped-query attention, a transpose ...)."""
    view = np.broadcast_to(index, tuple(target))
    if view.size == 0:
        return Strided(array, np.zeros(1, np.int32), 0, 0)
    corner = view[(...,) + (0, 0)].reshape(-1)
    # Strides of the last two dims, measured on the data (np.repeat leaves no plain strides).
    rows, cols = view.shape[-2:]
    row = int(view[(0,) * (view.ndim - 2) + (1, 0)] - view.flat[0]) if rows > 1 else 0
    col = int(view[(0,) * (view.ndim - 2) + (0, 1)] - view.flat[0]) if cols > 1 else 0
    return Strided(array, corner.astype(np.int32), row, col)


def explicit(array: Any, offsets: Sequence[int], row: int, col: int) -> Strided:
    """A view given by hand (attention heads, transposed weights)."""
    return Strided(array, np.asarray(offsets, dtype=np.int32).reshape(-1), row, col)


def transposed(view: Strided) -> Strided:
    return Strided(view.array, view.offsets, view.col, view.row)


def strided_gemm_launch(layer, m: int, n: int, k: int, a: Strided, b: Strided, c: Strided,
                        bias: Strided | None = None, alpha: float = 1.0,
                        beta: float = 1.0) -> Launch:
    """Bind one `bgemm` launch: c[b] = alpha * a[b] @ b[b] (+ beta * bias[b]).

    `layer` is the OpenCL layer that owns the launch (its runtime builds the program once and
    uploads the offset tables). Call at bind time only.
    """
    batch = len(c.offsets)
    for view in (a, b) + ((bias,) if bias is not None else ()):
        if len(view.offsets) != batch:
            raise ValueError(f"gemm views disagree on the batch: {len(view.offsets)} vs {batch}")
    options = [f"-DTS={STRIDED_TILE}", f"-DHAS_BIAS={int(bias is not None)}"]
    kernel = layer.kernel("bgemm", options, stem="matmul")
    d = bias if bias is not None else Strided(None, np.zeros(1, np.int32), 0, 0)
    tables = [layer.upload(v.offsets) for v in (a, b, c, d)]
    keep_alive(layer, tables)
    i32, f32 = np.int32, np.float32
    kernel.set_args(i32(m), i32(n), i32(k),
                    a.array.data, tables[0].data, i32(a.row), i32(a.col),
                    b.array.data, tables[1].data, i32(b.row), i32(b.col),
                    c.array.data, tables[2].data, i32(c.row), i32(c.col),
                    None if d.array is None else d.array.data, tables[3].data,
                    i32(d.row), i32(d.col), f32(alpha), f32(beta))
    tile = STRIDED_TILE
    return Launch(kernel, (round_up(max(n, 1), tile), round_up(max(m, 1), tile), max(batch, 1)),
                  (tile, tile, 1))
