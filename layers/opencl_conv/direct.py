"""Direct convolution for CPU devices, output channels as SIMD lanes (clkernels/conv_direct.cl).

im2col_gemm copies KH*KW shifted versions of the input into a column matrix before its GEMM;
for YOLOv5s's stride-2 3x3 layers under PoCL the copy took a third of the layer's time, and
implicit_gemm's blocked kernel, which avoids the copy, needs a shuffle or a gather to build
its vectors of pixels at stride 2. This kernel turns the product around: its vectors run along
the output channels (16 per float16, read from a weight packed once at bind time), and each
input value is broadcast, one scalar load wherever it lies. A work-item keeps `pix` pixels x
16*`nv` channels in registers: `pix` * `nv` vector multiply-adds per `pix` + `nv` loads.

Its parameter sets are those block shapes; the kernel size, stride and dilation are compiled
in, so every distinct geometry is a program of its own (a network has a handful).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kuiper.core.errors import ShapeError
from kuiper.layers.opencl_base import Launch, round_up
from kuiper.layers.opencl_conv.algorithms import (
    ConvAlgorithm,
    ConvOperands,
    ConvProblem,
    register_algorithm,
)
from kuiper.layers.opencl_conv.launch import buffer_of, prefetch_options
from kuiper.layers.opencl_helpers.buffers import keep_alive
from kuiper.opencl.device.roofline import device_rates, roofline
from kuiper.opencl.device.vector_width import narrow_registers, wide_vectors

KERNEL_FILE = "conv_direct"
VECTOR = 16                    # channels per float16
# (pix, nv): pixels x vectors of 16 channels per work-item. The pix here is a longest run:
# parameter_sets fits it to the output's rows (row_fitted), so a 7-pixel row is one run of 7,
# not a run of 8 with one pixel thrown away (ResNet-18's 512-channel layers: 10% faster).
# 8 x 2 keeps 16 of the 32 AVX-512 registers, 10 x 2 20, 12 x 2 24. The default (default_set)
# is 8 x 2, or 10 x 2 where that wastes fewer pixels at the rows' ends: under PoCL, with the
# weights prefetched and whole blocks stored at once, the longer runs load the weights less
# often per multiply-add, and 8 x 2 was the fastest or within 10% of it on 31 of the 40
# layers of ResNet-18 and YOLOv5s; on 20-pixel rows (3 runs of 7) 10 x 2 was 1.35-1.8x faster.
# With 8-float SIMD registers (AVX2 has 16 of them) a float16 of channels takes two, and 8 x 2
# keeps 32 accumulators: they spill. There the default is one vector of 16 channels and runs
# of up to NARROW_PIX pixels (12 registers, gemm_blocked.h's 6x16 block). PoCL 3.0 on a 2-core
# AMD EPYC (Zen 3, AVX2), one convolution pinned, interleaved medians of 20 runs: ResNet-18's
# 7x7 stride-2 stem 5.2 ms (8 x 2) -> 3.2 (6 x 1), 3.1 (4 x 1); its 64 -> 128 stride-2 3x3 2.2
# -> 1.8; 256 channels at 14 x 14 3.8 -> 2.9 (runs of 5 x 1).
PARAMETER_SETS = [{"pix": 8, "nv": 2}, {"pix": 10, "nv": 2}, {"pix": 4, "nv": 2},
                  {"pix": 8, "nv": 1}, {"pix": 16, "nv": 1}, {"pix": 12, "nv": 2},
                  {"pix": 6, "nv": 1}, {"pix": 4, "nv": 1}]
NARROW_PIX = 6
MAX_PIX = 16                   # the kernel's longest run (its PIX_16 list)
# The cost model's efficiency (conv_cost.py's CPU peak counts one FMA unit: the blocked GEMM's
# 8x32 sets are at 1.15). Fitted to `kuiper tune` times under PoCL (2 cores) on ResNet-18's and
# YOLOv5s's layers, for the default set: within 25% of the measured time on their stride-2
# 3x3 layers and ResNet's 7x7 stem (faster than im2col_gemm there); stride-1 3x3 layers came
# out 1.1-2.2x faster than that estimate, and STRIDE_1_FACTOR keeps them just behind Winograd
# F(4x4) on 56 x 56 images (0.82 ms against 0.70) but ahead of im2col_gemm on ResNet's 7 x 7
# stage-4 images (0.94 against 1.20). On 1x1 kernels it ran 1.1-1.5x slower than gemm_1x1,
# which ONE_TAP_FACTOR keeps in front (a padded copy is not needed, but K is short).
CPU_EFFICIENCY = 1.5
STRIDE_1_FACTOR, ONE_TAP_FACTOR = 0.8, 0.25
# On a GPU the channel-major stores and broadcast loads are uncoalesced and a work-item's 16
# accumulators are 256 registers: the cost model never picks it there (a low efficiency was not
# enough: on small layers the launch overhead dominates every estimate), though tests and
# `kuiper tune` can still run it.
GPU_SECONDS = 1.0
# Below SHORT_K steps of k (input channels x taps) the scalar stores of the outputs and the
# padded copy weigh more than the multiply-adds: VGG's first layer (K = 27) took 6.3 ms against
# im2col_gemm's 3.5.
SHORT_K = 128
# Work-items per work-group at most: a group is whole output rows of one block of channels, so
# that the block's weights, read by every run, stay in the core's cache while its runs use them.
# (PoCL's own choice of group put some layers' blocks on one core: ResNet-18's 14 x 14 layers
# took 1.6 ms instead of 0.8.)
GROUP_ITEMS = 256
# ... and at least this many groups per compute unit, so that no core idles on small layers.
GROUPS_PER_UNIT = 2


def lanes(params: dict) -> int:
    return VECTOR * int(params["nv"])


def pack_weight(weight: np.ndarray, groups: int, params: dict) -> np.ndarray:
    """(COUT, C/G, KH, KW) -> wp[g][block][k][lanes]: each step k's weights of one block of
    channels side by side, channels past COUT/G zero (what direct_pack computes on the device)."""
    cout, k = weight.shape[0], int(np.prod(weight.shape[1:]))
    m, width = cout // groups, lanes(params)
    blocks = -(-m // width)
    w = np.zeros((groups, blocks * width, k), np.float32)
    w[:, :m] = weight.reshape(groups, m, k)
    return np.ascontiguousarray(w.reshape(groups, blocks, width, k).transpose(0, 1, 3, 2))


def covered_width(pix: int, width: int) -> int:
    """Pixels the runs of `pix` compute along a row of `width` (the last run may pass its end:
    those pixels are computed and not stored)."""
    return -(-width // pix) * pix


def row_fitted(pix: int, width: int) -> int:
    """The shortest run that covers a row of `width` pixels in as many runs as `pix` does: the
    row's pixels shared out evenly (a row of 14 in runs of up to 8: two runs of 7)."""
    if width <= 0:   # an empty output: nothing to fit
        return pix
    return -(-width // -(-width // pix))


def default_set(width: int, narrow: bool = False) -> dict:
    """8 x 2 fitted to rows of `width` pixels, or 10 x 2 where that wastes fewer pixels;
    `narrow` (8-float registers, vector_width.narrow_registers): NARROW_PIX x 1 fitted."""
    if narrow:
        return {"pix": row_fitted(NARROW_PIX, width), "nv": 1}

    def waste(pix: int) -> int:
        return covered_width(row_fitted(pix, width), width) - width
    pix = 10 if waste(10) < waste(8) else 8
    return {"pix": row_fitted(pix, width), "nv": 2}


def runs_per_row(problem: ConvProblem, params: dict) -> int:
    """Runs of `pix` pixels per output row (the last one may be short)."""
    return -(-problem.out[2] // int(params["pix"]))


def input_size(problem: ConvProblem, params: dict) -> tuple[int, int]:
    """(rows, columns) of each input channel as the kernel reads it: the input's own (H, W), or
    (HP, WP) of the padded copy when there are zeros to add or the rows are too short for the
    last run of each row (it computes `pix` pixels even where fewer are left)."""
    _, h, w = problem.size
    _, oh, _ = problem.out
    _, kh, kw = problem.kernel
    hp = (oh - 1) * problem.stride[1] + (kh - 1) * problem.dilation[1] + 1
    wp = ((covered_width(int(params["pix"]), problem.out[2]) - 1) * problem.stride[2]
          + (kw - 1) * problem.dilation[2] + 1)
    if any(lo or hi for lo, hi in problem.pads[1:]) or hp > h or wp > w:
        return hp, wp
    return h, w


def group_size(rows: int, runs: int, others: int, units: int, limit: int = GROUP_ITEMS) -> int:
    """Work-items per group along the (row, run) axis: whole rows, at most `limit` items
    (GROUP_ITEMS, or less where the kernel allows less), and rows split further while fewer
    than GROUPS_PER_UNIT groups per compute unit would run (`others`: the blocks x images x
    groups that make groups of their own). A row of more than `limit` runs is cut anywhere:
    the kernel finds its run from the global index."""
    if runs > limit:
        return limit
    others = max(1, others)
    per_group = max(1, min(rows, limit // runs))
    wanted = GROUPS_PER_UNIT * units
    if -(-rows // per_group) * others < wanted:
        per_group = max(1, -(-rows // -(-wanted // others)))
    return per_group * runs


def tap_table(problem: ConvProblem, height: int, width: int) -> np.ndarray:
    """ktab[k] for k = (c*KH + i)*KW + j: the tap's offset from its window's corner in an input
    of `height` x `width` per channel, (c*height + i*DH)*width + j*DW, int32."""
    _, kh, kw = problem.kernel
    c, i, j = np.meshgrid(np.arange(problem.cin_g), np.arange(kh) * problem.dilation[1],
                          np.arange(kw) * problem.dilation[2], indexing="ij")
    return ((c * height + i) * width + j).reshape(-1).astype(np.int32)


@register_algorithm
class Direct(ConvAlgorithm):
    name = "direct"
    good_for = ("CPU devices, 2-D zero-padded convolutions with 16+ output channels: channels "
                "as SIMD lanes, no column matrix, any stride")

    def unsupported(self, problem: ConvProblem, device: Any) -> str | None:
        if problem.kernel[0] != 1 or problem.size[0] != 1 or problem.out[0] != 1:
            return "2-D and 1-D convolutions only (one input and one output depth plane)"
        if problem.padding_mode != "zeros":
            return f"zero padding only (this one pads with {problem.padding_mode!r})"
        if problem.depthwise:
            return "depthwise: one input channel per group leaves nothing to broadcast"
        if device is not None and not wide_vectors(device):
            return ("its channels are float16 vectors, which this device's compiler cannot "
                    "build (kuiper/opencl/device/vector_width.py)")
        return None

    def cost(self, problem: ConvProblem, device: Any) -> float:
        if not device_rates(device).is_cpu:
            return GPU_SECONDS
        params = self.parameter_sets(problem, device)[0]
        width, pix, ow = lanes(params), int(params["pix"]), problem.out[2]
        # the lanes past COUT/G and the pixels past a row's end are computed and dropped
        lanes_used = problem.cout_g / (-(-problem.cout_g // width) * width)
        pixels_used = ow / covered_width(pix, ow)
        rate = CPU_EFFICIENCY
        if problem.taps == 1:
            rate *= ONE_TAP_FACTOR
        rate *= min(1.0, problem.cin_g * problem.taps / SHORT_K)
        if set(problem.stride) == {1}:
            rate *= STRIDE_1_FACTOR
        words = problem.n * (problem.c * int(np.prod(problem.size)) + problem.cout * problem.pixels)
        launches = 1
        hp, wp = input_size(problem, params)
        if (hp, wp) != tuple(problem.size[1:]):   # the padded copy, written and read again
            words += 2 * problem.n * problem.c * hp * wp
            launches = 2
        return roofline(device, 2.0 * problem.macs, 4.0 * words, launches,
                        rate * lanes_used * pixels_used)

    def parameter_sets(self, problem: ConvProblem, device: Any) -> list[dict]:
        # a GPU gets the default only: the kernel is not made for it, and `kuiper tune` would
        # spend its time on six more slow variants per layer
        width = problem.out[2]
        sets = [default_set(width, narrow_registers(device))]
        if device_rates(device).is_cpu:
            sets += [{"pix": row_fitted(p["pix"], width), "nv": p["nv"]} for p in PARAMETER_SETS]
        return [p for i, p in enumerate(sets) if p not in sets[:i]]

    def workspace_shapes(self, problem, params, device, weight_is_input):
        if self.bad_params(params):
            return []   # bind says why
        p = problem
        width = lanes(params)
        blocks, k = -(-p.cout_g // width), p.cin_g * p.taps
        shapes = [(p.groups * blocks * k * width,)] if weight_is_input else []  # packed weight
        hp, wp = input_size(p, params)
        if (hp, wp) != tuple(p.size[1:]):
            shapes.append((p.n * p.c * hp * wp,))   # the padded input
        return shapes

    @staticmethod
    def bad_params(params: dict) -> bool:
        pix, nv = params.get("pix"), params.get("nv")
        return (set(params) != {"pix", "nv"} or nv not in (1, 2) or not isinstance(pix, int)
                or pix not in range(1, MAX_PIX + 1))

    def bind(self, layer, problem: ConvProblem, ops: ConvOperands, params: dict) -> list:
        why = self.unsupported(problem, layer.runtime.device)
        if why is not None:
            raise ShapeError(layer.name, layer.type, f"{self.name}: {why}")
        if self.bad_params(params):
            raise ShapeError(layer.name, layer.type, f"{self.name}: block {params}; expected "
                             f"pix from 1 to {MAX_PIX} pixels and nv 1 or 2 vectors")
        p = problem
        m, width = p.cout_g, lanes(params)
        blocks, k = -(-m // width), p.cin_g * p.taps
        _, kh, kw = p.kernel
        options = [f"-D{name}={value}" for name, value in
                   (("KH", kh), ("KW", kw), ("SH", p.stride[1]), ("SW", p.stride[2]),
                    ("DH", p.dilation[1]), ("DW", p.dilation[2]), ("PIX", params["pix"]),
                    ("NV", params["nv"]))]
        options += ops.epilogue.opencl_options() if ops.epilogue else []
        device = layer.runtime.device
        options += prefetch_options(device)   # the weights, ahead (conv_launch.py says why)
        i32 = np.int32
        launches = []
        scratch = list(ops.workspaces)   # in workspace_shapes' order
        if ops.weight_host is not None:
            packed = layer.upload(pack_weight(ops.weight_host, p.groups, params))
        else:   # F.conv2d: the weight is computed by the graph, packed on the device each run
            packed = scratch.pop(0)
            pack = layer.kernel("direct_pack", options, stem=KERNEL_FILE)
            pack.set_args(buffer_of(ops.weight), packed.data, i32(m), i32(k), i32(blocks))
            launches.append(Launch(pack, (width, k, p.groups * blocks)))
        _, h, w = p.size
        _, oh, ow = p.out
        hp, wp = input_size(p, params)
        x = buffer_of(ops.x)
        if (hp, wp) != (h, w):
            padded = scratch.pop(0)
            pad = layer.kernel("direct_pad", options, stem=KERNEL_FILE)
            pad.set_args(x, padded.data, i32(h), i32(w), i32(hp), i32(wp), i32(p.pads[1][0]),
                         i32(p.pads[2][0]), i32(p.n * p.c))
            launches.append(Launch(pad, (hp, p.n * p.c)))
            keep_alive(layer, [padded])
            x = padded.data
        table = layer.upload(tap_table(p, hp, wp))
        keep_alive(layer, [packed, table])
        runs = runs_per_row(p, params)
        kernel = layer.kernel("conv_direct", options, stem=KERNEL_FILE)
        kernel.set_args(x, packed.data, table.data, buffer_of(ops.bias),
                        i32(ops.bias is not None), buffer_of(ops.residual), buffer_of(ops.y),
                        i32(p.c), i32(hp), i32(wp), i32(p.cout), i32(m), i32(k), i32(oh),
                        i32(ow), i32(p.groups), i32(runs), i32(blocks))
        limit = min(GROUP_ITEMS, layer.group_limit(kernel))
        local = group_size(oh, runs, blocks * p.n * p.groups, device.max_compute_units, limit)
        launches.append(Launch(kernel, (round_up(oh * runs, local), blocks, p.n * p.groups),
                               (local, 1, 1)))
        return launches
