"""The built-in convolution algorithms: im2col + GEMM, GEMM alone for 1x1, direct depthwise.

- `im2col_gemm`, any convolution: the `im2col` kernel of clkernels/conv2d.cl copies every
  patch of the input into a column matrix (a workspace), then one gemm.h launch computes all
  images and groups, straight into the NCHW output, bias and epilogue applied as it stores.
  Simple, and as fast as the GEMM, but the column matrix is KD*KH*KW times the input. With
  gemm_blocked (CPU devices) `im2col_packed` writes it in the GEMM's strips (PACKED_B below).
- `gemm_1x1`, 1x1(x1) kernels with stride 1 and no padding: the input already is the column
  matrix (C x H*W per image), so the GEMM reads it in place.
- `depthwise_direct`, one input channel per group: the `depthwise` kernel of conv2d.cl, one
  work-item per output row. A GEMM with K = KH*KW has nothing to tile; this was Kuiper's
  depthwise path before the selector, kept so that every problem has a fair default.

The tunable parameters of the first two are gemm.h's parameter sets (layers/opencl_gemm/);
their costs come from layers/opencl_gemm/cost.py. Both compute in the problem's precision: the
tensor-core sets compete under tf32 / fp16 where the device has them, and fp16 reads the weight
stored as half.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kuiper.layers.opencl_base import Launch
from kuiper.layers.opencl_conv.algorithms import (
    ConvAlgorithm,
    ConvOperands,
    ConvProblem,
    register_algorithm,
)
from kuiper.layers.opencl_gemm.cost import gemm_seconds, ranked_gemm_params
from kuiper.layers.opencl_gemm.launch import BIAS_PER_ROW, weight_gemm_launch
from kuiper.layers.opencl_gemm.parameter_sets import program_options
from kuiper.opencl.device.roofline import device_rates, roofline


def gemm_shape(problem: ConvProblem) -> tuple[int, int, int, int]:
    """(M, N, K, Z) of a convolution's GEMM: Cout/G x pixels x Cin/G*taps, per image and group."""
    return problem.cout_g, problem.pixels, problem.cin_g * problem.taps, problem.n * problem.groups


def bind_gemm(layer: Any, problem: ConvProblem, ops: ConvOperands, cols: Any,
              params: dict, packed: bool = False) -> Launch:
    """The GEMM launch y[n][g] = W[g] @ cols[n][g] (+ bias, + the epilogue); `packed`: cols
    holds B in gemm_blocked's strips (PACKED_B), the pixels padded to whole strips."""
    m, n, k, _ = gemm_shape(problem)
    b_stride = k * (packed_columns(n, params) if packed else n)
    return weight_gemm_launch(layer, m, n, k, ops.weight, m * k, cols, b_stride, ops.y.data,
                              m * n, ops.bias, BIAS_PER_ROW, groups=problem.groups,
                              batch=problem.n, params=params, epilogue=ops.epilogue,
                              residual=ops.residual, options=PACKED_OPTIONS if packed else (),
                              half_a=ops.weight_half)


# im2col writes the column matrix in the layout the GEMM reads best. On CPU devices
# (gemm_blocked) that is strips of BLOCK_N columns, each K rows of BLOCK_N consecutive values
# (PACKED_B, gemm_blocked.h): a work-item's B panel is then one contiguous run instead of K
# rows N values apart, which on PoCL took YOLOv5s's 64 x 25600 x 288 product from 197 to 273
# GFLOP/s (rows 100 KB apart all fall in the same L1 cache set).
PACKED_OPTIONS = ("-DPACKED_B=1",)


def packs_columns(params: dict) -> bool:
    return params.get("kernel") == "gemm_blocked"


def packed_columns(n: int, params: dict) -> int:
    """Columns of the packed B: n rounded up to whole strips."""
    return -(-n // params["BLOCK_N"]) * params["BLOCK_N"]


def geometry_args(problem: ConvProblem) -> list:
    i32 = np.int32
    return [i32(v) for v in (*problem.kernel, *problem.out, *problem.stride, *problem.dilation)]


class GemmAlgorithm(ConvAlgorithm):
    """Shared by the two GEMM algorithms: parameter sets ranked by the cost model, the
    tensor-core sets among them where the problem's precision and the device allow."""

    precisions = ("fp32", "tf32", "fp16")

    packs_b = False   # whether its gemm_blocked sets read B packed (im2col_gemm's; the cost
    #                   model's packed_b applies to those sets only)

    def im2col_bytes(self, problem: ConvProblem) -> float:
        return 0.0

    def cost(self, problem: ConvProblem, device: Any) -> float:
        m, n, k, z = gemm_shape(problem)
        best = self.parameter_sets(problem, device)[0]
        extra = self.im2col_bytes(problem)
        return gemm_seconds(device, best, m, n, k, z, extra_bytes=extra,
                            launches=1 + (extra > 0), packed_b=self.packs_b)

    def parameter_sets(self, problem: ConvProblem, device: Any) -> list[dict]:
        m, n, k, z = gemm_shape(problem)
        return ranked_gemm_params(device, m, n, k, z, packed_b=self.packs_b,
                                  precision=problem.precision)


@register_algorithm
class Im2colGemm(GemmAlgorithm):
    name = "im2col_gemm"
    good_for = "any convolution: patches copied to a column matrix, then one GEMM"
    packs_b = True

    def im2col_bytes(self, problem: ConvProblem) -> float:
        cols = problem.n * problem.c * problem.taps * problem.pixels
        return 4.0 * 2 * cols  # written by im2col, read again by the GEMM

    def workspace_shapes(self, problem, params, device, weight_is_input):
        p = problem
        pixels = packed_columns(p.pixels, params) if packs_columns(params) else p.pixels
        return [(p.n * p.c * p.taps * pixels,)]   # the column matrix

    def bind(self, layer, problem, ops, params):
        p = problem
        packed = packs_columns(params)
        (cols,) = ops.workspaces
        options = program_options(params, ops.epilogue) + list(PACKED_OPTIONS if packed else ())
        kernel = layer.kernel("im2col_packed" if packed else "im2col", options)
        i32 = np.int32
        args = [ops.x.data, cols.data, *ops.tables, *(i32(v) for v in p.size),
                *geometry_args(p), i32(p.n * p.c)]
        od, oh, _ = p.out
        if packed:
            kernel.set_args(*args, i32(p.cin_g * p.taps))
            size = (p.n * p.c * p.taps, od * oh)
        else:
            kernel.set_args(*args)
            size = (od * oh, p.n * p.c * p.taps)
        layer.cols = cols  # keeps the workspace alive as long as the kernels bound to it
        return [Launch(kernel, size), bind_gemm(layer, p, ops, cols.data, params, packed)]


@register_algorithm
class Gemm1x1(GemmAlgorithm):
    name = "gemm_1x1"
    good_for = "1x1 kernels, stride 1, no padding: the input is the GEMM's B as it is"

    def unsupported(self, problem, device):
        if problem.taps != 1 or set(problem.stride) != {1}:
            return "needs a 1x1 kernel with stride 1"
        if any(lo or hi for lo, hi in problem.pads):
            return "needs no padding"
        return None

    def bind(self, layer, problem, ops, params):
        return [bind_gemm(layer, problem, ops, ops.x.data, params)]


@register_algorithm
class DepthwiseDirect(ConvAlgorithm):
    name = "depthwise_direct"
    good_for = "depthwise convolutions: one work-item per output row, no GEMM"

    def unsupported(self, problem, device):
        return None if problem.depthwise else "needs one input channel per group"

    def cost(self, problem, device):
        # ~2 loads per multiply-add through the caches: a few percent of the peak. On a GPU a
        # third of that: its rows are uncoalesced (measured / estimated on the H100: 6.2, the
        # blocked depthwise kernel 2.0; MnasNet's 48-channel stride-2 layer was 8.9x slower)
        efficiency = 0.03 if device_rates(device).is_cpu else 0.01
        bytes_moved = 4.0 * (problem.n * problem.c * int(np.prod(problem.size))
                             + problem.n * problem.cout * problem.pixels)
        return roofline(device, 2.0 * problem.macs, bytes_moved, 1, efficiency)

    def bind(self, layer, problem, ops, params):
        p = problem
        i32 = np.int32
        kernel = layer.kernel("depthwise", ops.epilogue.opencl_options() if ops.epilogue
                              else ())
        kernel.set_args(ops.x.data, ops.weight, ops.bias, i32(ops.bias is not None), ops.y.data,
                        *ops.tables, i32(p.c), *(i32(v) for v in p.size), i32(p.cout),
                        i32(p.cout // p.groups), *geometry_args(p), i32(p.n * p.cout),
                        ops.residual)
        od, oh, _ = p.out
        return [Launch(kernel, (od * oh, p.n * p.cout))]
