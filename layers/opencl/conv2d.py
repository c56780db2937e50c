"""Convolution on OpenCL: the kernel selector picks an algorithm per layer, which binds it.

`bind` describes the convolution once as a `ConvProblem` (lifted to 3-D), gathers what the
algorithms bind to in `ConvOperands` (device buffers, the host weight for bind-time transforms,
the padding tables, the fused epilogue, the workspaces), asks the selector
(layers/opencl_conv/selector.py: forced, tuned by `kuiper tune`, or the cost model's choice) and
lets the chosen algorithm create and bind its kernels. The choice is made first, when the
executor asks what scratch the layer needs (`workspace_shapes`), and kept for the bind. The decision
stays on the layer for `kuiper info`:
`algorithm`, `algorithm_params`, `algorithm_reason`.

The built-in algorithms (im2col + GEMM, GEMM alone for 1x1, direct depthwise) are in
layers/opencl_conv/im2col_gemm.py, their kernels in clkernels/conv2d.cl and gemm.h.
Padding (any mode) is read through small index tables made here (conv_geometry.source_indices).
Conv1d and Conv3d (layers/opencl/conv1d.py, conv3d.py) use the same binding, a 1-D or 2-D
input being a volume with unit leading axes.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.common import conv_geometry
from kuiper.layers.cpu import conv2d
from kuiper.layers.opencl_base import OpenCLLayer
from kuiper.layers.opencl_conv import selector
from kuiper.layers.opencl_conv.algorithms import ConvOperands, ConvProblem
from kuiper.layers.opencl_gemm.launch import WeightBuffers


def lift3(values, fill=1) -> tuple:
    """A 1-D or 2-D geometry as a 3-D one: unit (or `fill`) entries for the missing leading
    axes, so (H, W) becomes (1, H, W)."""
    values = tuple(values)
    return (fill,) * (3 - len(values)) + values


class ConvBind(WeightBuffers, OpenCLLayer):
    """bind() for ConvNd twins (ndim 1, 2 or 3): every call becomes a 3-D one."""

    # every algorithm applies the fused epilogue in its own store (ConvOperands.epilogue)
    epilogue_in_kernel = True
    # the GEMM algorithms compute in the plan's precision (ConvProblem.precision)
    reduced_precision = True
    algorithm: str = ""
    algorithm_params: dict | None = None
    algorithm_reason: str = ""
    computes: str = "fp32"      # what the bound kernels compute in (`kuiper info`)

    def problem(self, in_specs, precision: str = "fp32") -> ConvProblem:
        geo = self.geometry(in_specs[0].shape, self.weight_of(in_specs))
        return ConvProblem(n=geo.n, c=geo.c, cout=geo.cout, groups=self.groups,
                           size=lift3(geo.size), kernel=lift3(geo.kernel), out=lift3(geo.out),
                           stride=lift3(self.stride), dilation=lift3(self.dilation),
                           pads=lift3(geo.pads, fill=(0, 0)), padding_mode=self.padding_mode,
                           precision=precision)

    def choose(self, in_specs, precision: str = "fp32"):
        """(problem, algorithm, params, reason): the selector's decision for these shapes,
        made once and kept from `workspace_shapes` to the `bind` that follows it."""
        problem = self.problem(in_specs, precision)
        chosen = getattr(self, "_chosen", None)
        if chosen is None or chosen[0] != problem:
            chosen = (problem, *selector.select(self, problem, self.runtime.device))
            self._chosen = chosen
        return chosen

    def workspace_shapes(self, in_specs, out_specs, *, precision="fp32"):
        problem, algorithm, params, _ = self.choose(in_specs, precision)
        shapes = algorithm.workspace_shapes(problem, params, self.runtime.device,
                                            weight_is_input=self.weight is None)
        return [(shape, np.float32) for shape in shapes]

    def bind(self, inputs, outputs, in_specs, out_specs, *, epilogue=None, residual=None,
             workspaces=(), precision="fp32"):
        problem, algorithm, params, reason = self.choose(in_specs, precision)
        self._chosen = None  # the next bind (a new size, a tuning candidate) chooses again
        # a weight attribute read by a GEMM algorithm under fp16 is stored as half
        half = (self.weight is not None and problem.precision == "fp16"
                and "fp16" in algorithm.precisions)
        weight, bias = self.weight_buffers(inputs, dtype=np.float16 if half else np.float32)
        # where each padded depth / row / column reads from (layers/common/conv_geometry.py)
        self.src_tables = [self.upload(conv_geometry.source_indices(length, pad,
                                                                    self.padding_mode))
                           for length, pad in zip(problem.size, problem.pads)]
        host = self.weight is not None  # an attribute; F.convNd's weight is an input
        ops = ConvOperands(
            x=inputs[0], y=outputs[0], weight=weight, bias=bias,
            weight_host=np.asarray(self.weight, np.float32) if host else None,
            bias_host=(np.asarray(self.bias, np.float32)
                       if host and self.bias is not None else None),
            tables=[t.data for t in self.src_tables],
            residual=residual.data if residual is not None else None,
            epilogue=epilogue, workspaces=list(workspaces), weight_half=half)
        self.algorithm, self.algorithm_params, self.algorithm_reason = (algorithm.name, params,
                                                                         reason)
        self.computes = algorithm.computes(params, half_weight=half)
        self.conv_problem = problem
        self.launches = algorithm.bind(self, problem, ops, params)


@register(backend="opencl")
class Conv2d(ConvBind, conv2d.Conv2d):
    pass
