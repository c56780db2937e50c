"""Winograd convolution F(4x4,3x3) and F(2x2,3x3): 3x3 stride-1 convolutions, fewer multiplies.

The idea (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2015): m outputs
of a 1-D correlation with an r-tap filter, F(m, r), need m*r multiplies done directly, but only
alpha = m + r - 1 with the Toom-Cook trick:

    y = A^T [ (G g) * (B^T d) ]          (* elementwise; d: alpha inputs, g: r taps)

Nesting it gives the 2-D version on an alpha x alpha input tile: Y = A^T [U * V] A with
U = G g G^T (the filter, transformed once) and V = B^T d B (the input tile). For F(4x4,3x3),
a 6x6 tile makes 16 outputs with 36 multiplies instead of 144: 4x fewer. Summed over the input
channels, the 36 elementwise products become 36 independent matrix products
(tiles x Cin) @ (Cin x Cout), which is where the time goes. clkernels/conv_winograd.cl runs:

  1. winograd_input : V[p][c][tile] = (B^T d B)[p] for every 6x6 input tile (padding = zeros);
  2. winograd_gemm  : M[p][tile][o] = (V[p]^T @ U[p]) for the 36 positions p (register-blocked
                      GEMM, output channels contiguous); on GPUs, gemm.h's tiled GEMM instead
                      (a parameter set {"gemm": <gemm_tiled set>}: V[p] is its A stored K x M,
                      the 36 positions its batch), which shares each loaded value among a
                      work-group through local memory; for F(2x2) at precision tf32, a
                      tensor-core set of gemm_mma.h where the device has them (WinogradF2
                      says why F(4x4) stays fp32);
  3. winograd_output: y = A^T M A + bias, then the fused epilogue, stored in NCHW.

U is computed here at bind time, in float64 and rounded once to float32; when the weight is an
input of the operator (F.conv2d) its values are unknown at bind time, and `winograd_filter`
transforms it on the device before each run instead.

Where the matrices come from (`toom_cook`): F(m, r) needs alpha = m + r - 1 interpolation
points: alpha - 1 distinct finite points a_j plus the point at infinity. With
P(x) = prod_j (x - a_j) and N_j = prod_{l != j} (a_j - a_l):
  A^T[i][j] = a_j^i,  G[j][k] = a_j^k / N_j,  B^T[j] = the coefficients of P(x) / (x - a_j),
and for infinity: A^T's last column, G's last row and B^T's last row pick the highest terms
(B^T's last row is P(x) itself). F(4,3) takes 0, +1, -1, +2, -2 (Lavin's choice: the smallest
integers, so that B^T and A^T are exact small integers); F(2,3) takes 0, +1, -1. +-1/2 are the
next candidates: F(6x6,3x3) needs 0, +-1, +-2, +-1/2 and infinity, with entries of B^T near 20
and about 10x the rounding error of F(4x4): it is not offered.

Why Winograd is less accurate than the direct sum: B^T's entries reach 5, A^T's reach 8 and
G's go down to 1/24. The transformed values are large sums of inputs with opposite signs that
the output transform subtracts again: the rounding error of each float32 product is multiplied
by up to |A^T| |B^T| ~ 100x before it reaches the output (F(2x2) only ~4x). The error is bounded
relative to sum |w| |x| over the tile's windows (the sizes of the terms), not to |y|, which may
be near zero by cancellation. Measured so (tests/opencl/test_conv_winograd.py): up to 22 float32
epsilons for F(4x4), 1.6 for F(2x2), 1-3 for the im2col path; on ResNet-18 and the YOLOv5s-style
detector the outputs stay within the model tests' 1e-4 of their scale (3e-6 and 2e-5).
"""

from __future__ import annotations

from fractions import Fraction
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
from kuiper.layers.opencl_conv.launch import buffer_of, grouped_launch, prefetch_options
from kuiper.layers.opencl_gemm import mma_sets
from kuiper.layers.opencl_gemm.cost import gemm_seconds
from kuiper.layers.opencl_gemm.launch import weight_gemm_launch
from kuiper.layers.opencl_gemm.parameter_sets import GPU_PARAMETER_SETS, computes_in, fits
from kuiper.layers.opencl_helpers.buffers import keep_alive
from kuiper.opencl.device.roofline import device_rates, roofline
from kuiper.opencl.device.vector_width import narrow_registers, wide_vectors

KERNEL_FILE = "conv_winograd"
BM_CHOICES = (4, 8, 16, 32)   # output channels per GEMM work-item (32: two float16)
BN_CHOICES = (2, 4, 8)     # tiles per GEMM work-item
# On a CPU with 8-float registers (AVX2, vector_width.narrow_registers) the first choice is 16
# channels x 4 tiles (8 registers of accumulators) rather than 32 x 8 (32: they spill). PoCL 3.0
# on a 2-core AMD EPYC (Zen 3), F(4x4), one convolution pinned, interleaved medians of 20 runs:
# ResNet-18's 64 channels at 56 x 56 3.16 ms -> 2.22, 128 at 28 x 28 3.21 -> 2.02, 256 at
# 14 x 14 2.96 -> 2.21.
NARROW_BM, NARROW_BN = 16, 4
# The transforms' arithmetic on a CPU with 8-float registers, as a fraction of the FMA peak
# (`cost`): with few channels the transforms outweigh the products. PoCL on the 2-core AMD
# EPYC, one convolution pinned: YOLOv5s's first 3x3 convolution (12 -> 32 channels at
# 160 x 160) took 6.8 ms as F(4x4) and 3.3 ms as `direct` (estimated 2.0 and 2.3 without this
# term), its 32-channel one at 80 x 80 2.4 and 1.9; with the term both go to `direct`, and
# Winograd stays first where it was measured faster: ResNet-18's 64-256 channel layers,
# YOLOv5s's 256 channels at 10 x 10 (F(2x2) 1.33 ms, `direct` 1.52). Not counted with AVX-512:
# there direct's STRIDE_1_FACTOR was fitted against Winograd's estimate without this term
# (layers/opencl_conv/direct.py).
TRANSFORM_EFFICIENCY = 0.5
TRANSFORM_LOCAL = (64,)   # transforms: work-groups of 64 (PoCL pays ~1 us per work-group)
POINTS = {4: (0, 1, -1, 2, -2), 2: (0, 1, -1)}   # finite interpolation points of F(m, 3)
# GPUs: the register-block sets `kuiper tune` also times beside the tiled GEMM's (the driver
# chooses the work-group: fixed shapes never won there)
GPU_BLOCKS = [{"bm": m, "bn": n, "local": None} for m in (4, 8, 16) for n in (2, 4, 8)]
PAD_TILED = 4   # the tiled products pad tiles and channels to whole float4s (aligned loads)


def toom_cook(m: int, r: int, points) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A^T, G, B^T) of F(m, r), exact (Fractions), from alpha - 1 finite points + infinity."""
    alpha = m + r - 1
    points = [Fraction(p) for p in points]
    assert len(points) == alpha - 1 and len(set(points)) == len(points)
    at = [[Fraction(0)] * alpha for _ in range(m)]
    g = [[Fraction(0)] * r for _ in range(alpha)]
    bt = [[Fraction(0)] * alpha for _ in range(alpha)]
    full = _poly_from_roots(points)                      # M(x), degree alpha - 1
    for j, a in enumerate(points):
        norm = np.prod([a - b for b in points if b != a], dtype=object)
        for i in range(m):
            at[i][j] = a ** i
        for k in range(r):
            g[j][k] = a ** k / norm
        bt[j][:alpha - 1] = _poly_from_roots([b for b in points if b != a])
    at[m - 1][alpha - 1] = Fraction(1)                   # the point at infinity
    g[alpha - 1][r - 1] = Fraction(1)
    bt[alpha - 1] = full
    return (np.array(at, dtype=object), np.array(g, dtype=object), np.array(bt, dtype=object))


def _poly_from_roots(roots) -> list[Fraction]:
    """Coefficients (lowest power first) of prod (x - root)."""
    coeffs = [Fraction(1)]
    for root in roots:
        shifted = [Fraction(0)] + coeffs                  # x * p(x)
        coeffs = [s - root * c for s, c in zip(shifted, coeffs + [Fraction(0)])]
    return coeffs


def transform_matrices(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A^T, G, B^T of F(m, 3) as float64 arrays."""
    return tuple(np.array(t, dtype=np.float64) for t in toom_cook(m, 3, POINTS[m]))


def transform_filter(weight: np.ndarray, m: int, cout_pad: int) -> np.ndarray:
    """U = G g G^T for every (cout, cin) filter, laid out (alpha^2, Cin, Cout_pad) float32.

    Computed in float64 and rounded once; Cout is padded with zero filters to a multiple of
    the GEMM's row block, so the GEMM kernel never tests its row bounds."""
    _, g, _ = transform_matrices(m)
    w = np.asarray(weight, dtype=np.float64)
    cout, cin = w.shape[:2]
    w = w.reshape(cout, cin, 3, 3)
    u = np.einsum("ik,ockl,jl->ijco", g, w, g).reshape(len(g) ** 2, cin, cout)
    out = np.zeros((len(g) ** 2, cin, cout_pad), np.float32)
    out[:, :, :cout] = u
    return out


class Winograd(ConvAlgorithm):
    """F(m x m, 3 x 3); the subclasses set m (`tile`)."""

    tile = 4

    def unsupported(self, problem: ConvProblem, device: Any) -> str | None:
        if problem.kernel != (1, 3, 3):
            return (f"kernel {'x'.join(map(str, problem.kernel))}: the transforms are derived "
                    "for a 2-D 3x3 kernel")
        if problem.size[0] != 1 or problem.out[0] != 1:
            # a Conv3d with a 1x3x3 kernel: the tiles cover one plane (it read past the
            # input's first plane and wrote only the output's first)
            return (f"{problem.size[0]} input and {problem.out[0]} output depth planes: the "
                    "tiles cover one plane (2-D and 1-D convolutions only)")
        if problem.stride != (1, 1, 1):
            return ("stride > 1: neighbouring output tiles would not share their input tiles, "
                    "the Winograd identity is for unit stride")
        if problem.dilation != (1, 1, 1):
            return "dilation > 1: the identity needs taps on consecutive inputs"
        if problem.groups != 1:
            return ("groups > 1: one GEMM per position serves one group (grouped and "
                    "depthwise layers have too few channels per group to pay the transforms)")
        if problem.padding_mode != "zeros":
            return (f"padding_mode '{problem.padding_mode}': the input transform reads "
                    "outside the image as zeros only")
        *_, tiles = self.geometry(problem)
        scratch = (self.tile + 2) ** 2 * max(problem.c, problem.cout + 16) * (tiles + 16)
        if scratch >= 2 ** 31:
            return (f"its scratch arrays would hold {scratch} values: the kernels index "
                    "with 32-bit ints")
        return None

    def geometry(self, problem: ConvProblem) -> tuple[int, int, int]:
        """(tiles along H, tiles along W, tiles in the whole batch)."""
        _, oh, ow = problem.out
        th, tw = -(-oh // self.tile), -(-ow // self.tile)
        return th, tw, problem.n * th * tw

    def cost(self, problem: ConvProblem, device: Any) -> float:
        """The batched GEMM's arithmetic, plus the memory traffic the GEMM cannot hide: its
        transformed weight U (alpha^2 / 9 times the weight: 4x for F4, read once, so a batch-1
        7x7 layer that uses each U value for 4 tiles only is memory-bound), and the transforms,
        which do little arithmetic on a lot of data (x read, V written then read, M written
        then read, y written). Measured under PoCL (2 cores) the two add up rather than
        overlap, and the GEMM of 32 x 8 blocks reaches ~0.8 of `device_rates`' peak: the
        estimates came out within 10-40% of the measured times for ResNet-18's 3x3 layers."""
        alpha2 = (self.tile + 2) ** 2
        *_, tiles = self.geometry(problem)
        c, cout = problem.c, problem.cout
        weight_words = alpha2 * c * cout
        transform_words = (2 * alpha2 * tiles * (c + cout)
                           + problem.n * (c * int(np.prod(problem.size)) + cout * problem.pixels))
        transforms = roofline(device, 0.0, 4.0 * (weight_words + transform_words), 2, 1.0)
        if not device_rates(device).is_cpu:   # the tiled GEMM's own estimate (cost_model.py)
            gemm = self._gemm_sets(problem, device)[0]
            return transforms + gemm_seconds(device, gemm, *self._gemm_shape(problem, tiles))
        # ... and on a CPU with 8-float registers the transforms' own arithmetic: every value
        # of a tile goes through a 1-D transform of its row and one of its column, about
        # 2 * alpha flops each, for every input and every output channel (TRANSFORM_EFFICIENCY)
        if narrow_registers(device):
            transform_flops = 2.0 * 2 * (self.tile + 2) * alpha2 * tiles * (c + cout)
            transforms += roofline(device, transform_flops, 0.0, 0, TRANSFORM_EFFICIENCY)
        # alpha^2 multiplies per tile and channel pair: 4x fewer than direct for F4, 2.25x for
        # F2 (less where the last tiles stick out of the output)
        gemm_flops = 2.0 * alpha2 * tiles * c * cout
        return roofline(device, gemm_flops, 0.0, 1, 0.8) + transforms

    def _gemm_shape(self, problem: ConvProblem, tiles: int) -> tuple[int, int, int, int]:
        """(M, N, K, batch) of the tiled products: tiles x Cout x Cin, one per position."""
        return (round_up(tiles, PAD_TILED), round_up(problem.cout, PAD_TILED), problem.c,
                (self.tile + 2) ** 2)

    def _product_sets(self, problem: ConvProblem, device: Any) -> list[dict]:
        """Every gemm.h set the products may run on: gemm_tiled's, and the tensor-core sets
        of the problem's precision where the algorithm computes in it (`precisions`) and the
        device has them (mma_sets.py)."""
        precision = problem.precision if problem.precision in self.precisions else "fp32"
        tensor = mma_sets.mma_sets_for(device, precision) if device is not None else []
        return [p for p in tensor + GPU_PARAMETER_SETS if device is None or fits(p, device)]

    def _gemm_sets(self, problem: ConvProblem, device: Any) -> list[dict]:
        """gemm.h's parameter sets for the products, cheapest first by the cost model."""
        *_, tiles = self.geometry(problem)
        shape = self._gemm_shape(problem, tiles)
        return sorted(self._product_sets(problem, device),
                      key=lambda p: gemm_seconds(device, p, *shape))

    def computes(self, params: dict, half_weight: bool = False) -> str:
        return computes_in(params.get("gemm", {}))   # the products' set; U is never half

    def parameter_sets(self, problem: ConvProblem, device: Any) -> list[dict]:
        """CPUs: winograd_gemm's register blocks, `bm` output channels (one or two float
        vectors of up to 16) x `bn` tiles per work-item, and `local`, the work-group's shape
        (None: the driver's choice). GPUs: {"gemm": a gemm.h set} for the tiled products, the
        cost model's order, then a few register blocks."""
        *_, tiles = self.geometry(problem)
        if not device_rates(device).is_cpu:
            return [{"gemm": p} for p in self._gemm_sets(problem, device)] + GPU_BLOCKS
        # bm > 8: float16 vectors, where the device's compiler builds them (vector_width.py)
        choices = [b for b in BM_CHOICES if b <= 8 or device is None or wide_vectors(device)]
        bm = max(b for b in choices if b <= max(4, problem.cout))
        # PoCL runs a work-group as one task: (1, 4, 1) makes tasks big enough that scheduling
        # them costs little, and lets neighbouring work-items share the U vector they load
        # (lists, not tuples: the tuning cache stores them as JSON and compares them again)
        bn = 8 if tiles >= 8 else 4
        if narrow_registers(device):
            bm, bn = min(bm, NARROW_BM), min(bn, NARROW_BN)
        first = {"bm": bm, "bn": bn, "local": [1, 4, 1]}
        others = [{"bm": m, "bn": n, "local": local} for m in choices for n in BN_CHOICES
                  for local in ([1, 4, 1], [4, 1, 1], None)]
        return [first] + [p for p in others if p != first]

    def padded_sizes(self, problem: ConvProblem, params: dict, device: Any) -> tuple[int, int]:
        """(tiles, output channels), each padded to whole blocks of the products' kernel; a
        ValueError says why the parameter set cannot run (a hand-edited tuning cache)."""
        why = self.unsupported(problem, None)
        if why is not None:
            raise ValueError(why)
        *_, tiles = self.geometry(problem)
        gemm = params.get("gemm")
        if gemm is not None:
            if gemm not in self._product_sets(problem, device):
                raise ValueError(f"{gemm} is not one of the parameter sets of "
                                 "layers/opencl_gemm/ the products may run on here (gemm_tiled, "
                                 f"or the tensor cores' at precision {problem.precision} where "
                                 "the algorithm and the device have them)")
            nt_pad, cout_pad, *_ = self._gemm_shape(problem, tiles)
            return nt_pad, cout_pad
        bm, bn = int(params.get("bm", 8)), int(params.get("bn", 4))
        if bm not in BM_CHOICES or bn not in BN_CHOICES:
            raise ValueError(f"tile parameters bm={bm}, bn={bn}; expected bm in {BM_CHOICES}, "
                             f"bn in {BN_CHOICES}, or a gemm set")
        if bm > 8 and not wide_vectors(device):
            raise ValueError(f"bm={bm} needs float16 vectors, which this device's compiler "
                             "cannot build (kuiper/opencl/device/vector_width.py): bm 4 or 8")
        return round_up(tiles, bn), round_up(problem.cout, bm)

    def workspace_shapes(self, problem, params, device, weight_is_input):
        try:
            nt_pad, cout_pad = self.padded_sizes(problem, params, device)
        except ValueError:
            return []   # bind says why
        alpha2, c = (self.tile + 2) ** 2, problem.c
        # the transformed input V and the products, padded to whole register blocks (their
        # extra columns hold garbage that no output reads: GEMM columns are independent), and
        # for F.conv2d the filter U, transformed on the device at each run
        shapes = [(alpha2, c, nt_pad), (alpha2, nt_pad, cout_pad)]
        return shapes + ([(alpha2, c, cout_pad)] if weight_is_input else [])

    def bind(self, layer, problem: ConvProblem, ops: ConvOperands, params: dict) -> list:
        try:
            nt_pad, cout_pad = self.padded_sizes(problem, params, layer.runtime.device)
        except ValueError as e:
            raise ShapeError(layer.name, layer.type, f"{self.name}: {e}") from None
        m, alpha2 = self.tile, (self.tile + 2) ** 2
        tiles_h, tiles_w, tiles = self.geometry(problem)
        gemm = params.get("gemm")
        bm, bn = int(params.get("bm", 8)), int(params.get("bn", 4))
        c, cout = problem.c, problem.cout
        _, h, w = problem.size
        _, oh, ow = problem.out
        pad_top, pad_left = problem.pads[1][0], problem.pads[2][0]
        i32 = np.int32
        common = [f"-DTILE_OUT={m}"]
        v, products, *filter_u = ops.workspaces   # workspace_shapes says what each is
        keep_alive(layer, [v, products])
        launches = []

        if ops.weight_host is not None:
            u = layer.upload(transform_filter(ops.weight_host, m, cout_pad))
            keep_alive(layer, [u])
            u_buf = u.data
        else:   # F.conv2d: the weight is computed by the graph, transform it on the device
            (u,) = filter_u
            g = layer.upload(transform_matrices(m)[1].astype(np.float32))
            keep_alive(layer, [u, g])
            kernel = layer.kernel("winograd_filter", common, stem=KERNEL_FILE)
            kernel.set_args(buffer_of(ops.weight), g.data, u.data, i32(c), i32(cout),
                            i32(cout_pad))
            launches.append(Launch(kernel, (cout_pad, c)))
            u_buf = u.data

        kernel = layer.kernel("winograd_input", common, stem=KERNEL_FILE)
        kernel.set_args(buffer_of(ops.x), v.data, i32(c), i32(h), i32(w), i32(pad_top),
                        i32(pad_left), i32(tiles_h), i32(tiles_w), i32(tiles), i32(nt_pad))
        launches.append(grouped_launch(kernel, (c * tiles,), TRANSFORM_LOCAL))

        if gemm is not None:    # M[p] (tiles x Cout) = V[p]^T (A, stored Cin x tiles) @ U[p]
            launches.append(weight_gemm_launch(
                layer, nt_pad, cout_pad, c, v.data, c * nt_pad, u_buf, c * cout_pad,
                products.data, nt_pad * cout_pad, groups=alpha2, params=gemm,
                options=common + ["-DTILED_PRODUCTS=1"], stem=KERNEL_FILE))
        else:
            options = (common + prefetch_options(layer.runtime.device)
                       + [f"-DBM={bm}", f"-DBN={bn}"])
            kernel = layer.kernel("winograd_gemm", options, stem=KERNEL_FILE)
            kernel.set_args(u_buf, v.data, products.data, i32(cout_pad), i32(c), i32(nt_pad))
            launches.append(grouped_launch(kernel, (cout_pad // bm, nt_pad // bn, alpha2),
                                           params.get("local")))

        epilogue = ops.epilogue.opencl_options() if ops.epilogue else []
        kernel = layer.kernel("winograd_output", common + epilogue, stem=KERNEL_FILE)
        kernel.set_args(products.data, buffer_of(ops.bias), i32(ops.bias is not None),
                        buffer_of(ops.y), buffer_of(ops.residual), i32(cout), i32(cout_pad),
                        i32(oh), i32(ow), i32(tiles_h), i32(tiles_w), i32(tiles), i32(nt_pad))
        launches.append(grouped_launch(kernel, (cout * tiles,), TRANSFORM_LOCAL))
        return launches


@register_algorithm
class WinogradF4(Winograd):
    name = "winograd_f4x4"
    good_for = "3x3 stride-1 convolutions with many channels: 4x fewer multiplies"
    tile = 4


@register_algorithm
class WinogradF2(Winograd):
    name = "winograd_f2x2"
    good_for = ("3x3 stride-1 convolutions on small images (7x7, 14x14), where F(4x4)'s tiles "
                "stick out: 2.25x fewer multiplies, more accurate")
    tile = 2
    # Its products may run on the tensor cores in TF32 (GPUs whose probe passed): TF32 rounds
    # V and U to 10 bits of mantissa (2^-11 each), and F(2x2)'s transforms (entries 0 and +-1)
    # grow that by a few times only, well inside the contract's 5e-2 of the output's scale
    # (kuiper/DESIGN.md, section 7; tests/opencl/test_conv_winograd.py measures it). F(4x4)'s
    # grow it up to ~100x, to the bound itself: F(4x4) stays in fp32. Not fp16: U would have
    # to be stored as half, and half's range is narrower than the transformed sums need.
    precisions = ("fp32", "tf32")
