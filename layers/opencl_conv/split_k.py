"""Split-K convolution (clkernels/conv_split_k.cl): S slices of the K axis in parallel.

A convolution with a small output and a long K axis (ResNet-18's 512-channel 3x3 layers at
batch 1: a 512 x 49 output, K = 4608) is a few GEMM tiles: too few work-groups to fill a GPU,
each walking all of K. Split-K cuts K into S slices computed side by side by the implicit GEMM
(conv_implicit_gemm.py) into S partial-sum arrays (`layer.workspace`), then one small kernel adds
them, the bias and the fused epilogue. S and the tile come from the parameter set.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kuiper.layers.opencl_base import Launch, round_up
from kuiper.layers.opencl_conv.algorithms import (
    ConvAlgorithm,
    ConvOperands,
    ConvProblem,
    register_algorithm,
)
from kuiper.layers.opencl_conv.implicit_gemm import (
    bind_implicit_gemm,
    device_sets,
    estimate,
    k_step,
    parameter_error,
    program_options,
    too_large,
)

SLICES = (2, 4, 8, 16)
MIN_SLICE = 64      # K-indices per slice below which splitting cannot pay for its extra pass
REDUCE_LOCAL = 64   # work-group size of split_k_reduce


def slice_length(k: int, slices: int, params: dict) -> int:
    """K-indices per slice: K / S rounded up to the kernel's K tile (no slice splits a tile)."""
    step = k_step(params)
    return round_up(-(-k // slices), step)


@register_algorithm
class SplitK(ConvAlgorithm):
    name = "split_k"
    good_for = ("small outputs with a long K (ResNet stage 4 at batch 1): K cut in slices "
                "computed in parallel, then summed")

    def unsupported(self, problem: ConvProblem, device: Any) -> str | None:
        if problem.depthwise:
            return "depthwise (one input channel per group): K = taps is too short to split"
        k = problem.cin_g * problem.taps
        if k < 2 * MIN_SLICE:
            return f"K = {k} is too short to split (at least {2 * MIN_SLICE})"
        return too_large(problem, max(SLICES))

    def parameter_sets(self, problem: ConvProblem, device: Any) -> list[dict]:
        """S in SLICES times the implicit GEMM's tiles, cheapest by the cost model first; S
        only where every slice keeps MIN_SLICE K-indices."""
        k = problem.cin_g * problem.taps
        sets = [{"slices": s, **tile} for s in SLICES for tile in device_sets(device)
                if k // s >= MIN_SLICE]
        return sorted(sets, key=lambda p: self.estimate(problem, device, p))

    def estimate(self, problem: ConvProblem, device: Any, params: dict) -> float:
        return estimate(problem, device, params, params["slices"])

    def cost(self, problem: ConvProblem, device: Any) -> float:
        sets = self.parameter_sets(problem, device)
        return self.estimate(problem, device, sets[0]) if sets else float("inf")

    def slicing(self, problem: ConvProblem, params: dict, device: Any) -> tuple[dict, int, int]:
        """(the tile's parameters, K per slice, slices) of a parameter set ({}: the default);
        a ValueError names what is wrong with it."""
        params = params or self.parameter_sets(problem, device)[0]
        tile = {key: value for key, value in params.items() if key != "slices"}
        requested = params.get("slices")
        if not isinstance(requested, int) or requested < 1:
            raise ValueError("expected 'slices', an int >= 1")
        k = problem.cin_g * problem.taps
        k_slice = slice_length(k, requested, tile)
        return tile, k_slice, -(-k // k_slice)   # rounding to the tile may leave fewer slices

    def workspace_shapes(self, problem, params, device, weight_is_input):
        try:
            _, _, slices = self.slicing(problem, params, device)
        except ValueError:
            return []   # bind says what is wrong with the parameters
        return [(slices, problem.n * problem.cout * problem.pixels)]   # the partial sums

    def bind(self, layer: Any, problem: ConvProblem, ops: ConvOperands, params: dict) -> list:
        try:
            tile, k_slice, slices = self.slicing(problem, params, layer.runtime.device)
        except ValueError as e:
            raise parameter_error(layer, self.name, params, str(e)) from None
        total = problem.n * problem.cout * problem.pixels
        (partial,) = ops.workspaces
        gemm = bind_implicit_gemm(layer, problem, ops, tile, self.name, k_slice, partial.data,
                                  stem="conv_split_k")
        # the same options as the slices' kernel: one program holds both
        _, options = program_options(layer, self.name, tile, problem, ops)
        reduce = layer.kernel("split_k_reduce", options, stem="conv_split_k")
        i32 = np.int32
        reduce.set_args(partial.data, i32(slices), i32(total), ops.bias,
                        i32(ops.bias is not None), ops.residual, ops.y.data, i32(problem.pixels),
                        i32(problem.cout))
        layer.split_k_partial = partial      # the workspace lives as long as the kernels
        return [gemm, Launch(reduce, (round_up(total, REDUCE_LOCAL),), (REDUCE_LOCAL,))]

