"""Depthwise convolution on OpenCL: a block of outputs per work-item (clkernels/conv_depthwise.cl).

A depthwise convolution (one input channel per group, MobileNet's 3x3 layers) does KH*KW
multiply-adds per output: too few to tile as a GEMM, so the time goes into reading the input.
The kernel therefore reuses every loaded input value as often as it can: a work-item computes
`bh` output rows x `bw` output columns of one channel, loading each input row segment once,
with the kernel's taps in registers and the kernel size, stride and dilation compiled in (one
program per distinct shape: a MobileNetV2 has four).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kuiper.core.errors import ShapeError
from kuiper.layers.common import conv_geometry
from kuiper.layers.opencl_conv.algorithms import (
    ConvAlgorithm,
    ConvOperands,
    ConvProblem,
    register_algorithm,
)
from kuiper.layers.opencl_conv.launch import buffer_of, grouped_launch
from kuiper.layers.opencl_helpers.buffers import keep_alive
from kuiper.opencl.device.roofline import device_rates, roofline
from kuiper.opencl.device.runtime import compiles_to_native_cpu

KERNEL_FILE = "conv_depthwise"
BW_CHOICES = (1, 2, 4, 8)    # output columns per work-item
BH_CHOICES = (1, 2, 4)       # output rows per work-item
LOCAL_CHOICES = (None, [8, 1, 1], [16, 1, 1], [4, 2, 1])   # lists: JSON keeps them
# PoCL compiles a kernel again for each work-group size it is launched with (about a second for
# this one), and left to choose (None) it picks a different size for each output shape: the
# OCR capstone's 28 depthwise layers compiled 19 times, half of its cold first run. One fixed
# size on PoCL means one compile per program; it ran MobileNetV2 no slower (2-core VM).
POCL_LOCAL = [8, 1, 1]
BIG_KERNEL = 25              # taps: above this, small blocks keep the unrolled code small


def reach(outputs: int, kernel: int, stride: int, dilation: int) -> int:
    """How many entries of a padded axis `outputs` outputs read."""
    return (outputs - 1) * stride + (kernel - 1) * dilation + 1


def extended_table(length: int, pad: tuple[int, int], mode: str, needed: int) -> np.ndarray:
    """conv_geometry's source table of a padded axis, extended with -1 (a zero) up to `needed`
    entries: the blocks at the output's edge read that far without a bounds test."""
    table = conv_geometry.source_indices(length, pad, mode)
    return np.pad(table, (0, max(0, needed - len(table))), constant_values=-1).astype(np.int32)


@register_algorithm
class Depthwise(ConvAlgorithm):
    name = "depthwise"
    good_for = ("depthwise convolutions (MobileNet, EfficientNet): blocks of outputs per "
                "work-item, taps in registers")

    def unsupported(self, problem: ConvProblem, device: Any) -> str | None:
        if not problem.depthwise:
            return (f"{problem.cin_g} input channels per group: this kernel convolves each "
                    "output channel with one input channel (groups = channels)")
        return None

    def cost(self, problem: ConvProblem, device: Any) -> float:
        flops = 2.0 * problem.macs
        words = (problem.n * (problem.c * int(np.prod(problem.size))
                              + problem.cout * problem.pixels) + problem.cout * problem.taps)
        efficiency = 0.1 if device_rates(device).is_cpu else 0.05
        return roofline(device, flops, 4.0 * words, 1, efficiency)

    def parameter_sets(self, problem: ConvProblem, device: Any) -> list[dict]:
        """`bw` x `bh`: the output block of a work-item; `local`: the work-group shape."""
        _, _, ow = problem.out
        group = POCL_LOCAL if compiles_to_native_cpu(device) else None   # the work-group
        if problem.kernel[1] * problem.kernel[2] > BIG_KERNEL:
            first = {"bw": 4, "bh": 1, "local": group}
        else:   # 8 x 4 blocks were fastest on every MobileNetV2 layer under PoCL (2 cores),
            # 28x28 and 14x14 included, where 8 wastes columns; narrower for tiny images
            first = {"bw": 8 if ow > 4 else 4, "bh": 4, "local": group}
        others = [{"bw": bw, "bh": bh, "local": local} for bw in BW_CHOICES
                  for bh in BH_CHOICES for local in LOCAL_CHOICES]
        return [first] + [p for p in others if p != first]

    def bind(self, layer, problem: ConvProblem, ops: ConvOperands, params: dict) -> list:
        why = self.unsupported(problem, None)
        if why is not None:
            raise ShapeError(layer.name, layer.type, f"{self.name}: {why}")
        bw, bh = int(params.get("bw", 4)), int(params.get("bh", 1))
        if bw not in BW_CHOICES or bh not in BH_CHOICES:
            raise ShapeError(layer.name, layer.type, f"{self.name}: block bw={bw}, bh={bh}; "
                             f"expected bw in {BW_CHOICES}, bh in {BH_CHOICES}")
        _, kh, kw = problem.kernel
        _, sh, sw = problem.stride
        _, dh, dw = problem.dilation
        od, oh, ow = problem.out
        blocks_w, blocks_h = -(-ow // bw), -(-oh // bh)
        needed = (reach(od, problem.kernel[0], problem.stride[0], problem.dilation[0]),
                  reach(blocks_h * bh, kh, sh, dh), reach(blocks_w * bw, kw, sw, dw))
        tables = [layer.upload(extended_table(length, pad, problem.padding_mode, need))
                  for length, pad, need in zip(problem.size, problem.pads, needed)]
        keep_alive(layer, tables)

        options = [f"-D{name}={value}" for name, value in
                   (("KH", kh), ("KW", kw), ("SH", sh), ("SW", sw), ("DH", dh), ("DW", dw),
                    ("BW", bw), ("BH", bh))]
        options += ops.epilogue.opencl_options() if ops.epilogue else []
        kernel = layer.kernel("depthwise_block", options, stem=KERNEL_FILE)
        i32 = np.int32
        d, h, w = problem.size
        kernel.set_args(buffer_of(ops.x), buffer_of(ops.weight), buffer_of(ops.bias),
                        i32(ops.bias is not None), buffer_of(ops.y), buffer_of(ops.residual),
                        *(t.data for t in tables), i32(problem.c), i32(d), i32(h), i32(w),
                        i32(problem.cout), i32(problem.cout // problem.groups),
                        i32(problem.kernel[0]), i32(problem.stride[0]), i32(problem.dilation[0]),
                        i32(od), i32(oh), i32(ow))
        local = params.get("local")
        if local is not None and int(local[2]) != 1:
            raise ShapeError(layer.name, layer.type, f"{self.name}: work-group {local}: its "
                             "third size must be 1 (one work-item per output plane)")
        return [grouped_launch(kernel, (blocks_w, blocks_h, problem.n * problem.cout * od),
                               local)]
