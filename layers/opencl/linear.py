"""Linear on OpenCL: one launch of the GEMM of clkernels/gemm.h.

The input's leading axes are the GEMM's rows, so `x (rows, in) @ W^T` needs no reshaping on the
device; the weight stays in PyTorch's (out, in) layout and the kernel reads it transposed
(clkernels/linear.cl sets TRANS_B). The bias is added as the results are stored.

This module also holds `gemm_launch`, with which the convolutions bind the same GEMM.
"""

from __future__ import annotations

import numpy as np

from kuiper.layers.cpu import linear
from kuiper.opencl.layer import Launch, OpenCLLayer, round_up
from kuiper.registry import register

# Must agree with clkernels/gemm.h. gemm_tiled: a work-group of GEMM_LOCAL x GEMM_LOCAL
# work-items computes a GEMM_TILE x GEMM_TILE tile of C; gemm_blocked: one work-item computes a
# GEMM_BLOCK x GEMM_BLOCK block.
GEMM_TILE = 64
GEMM_LOCAL = 16
GEMM_BLOCK = 8

BIAS_NONE, BIAS_PER_ROW, BIAS_PER_COLUMN = 0, 1, 2

# None: gemm_blocked on CPU devices, gemm_tiled elsewhere (see gemm.h for why). Tests set it
# to run both kernels on whatever device they have.
FORCE_GEMM: str | None = None


def gemm_kernel_name(layer: OpenCLLayer) -> str:
    if FORCE_GEMM is not None:
        return FORCE_GEMM
    is_cpu = layer.runtime.device.type & layer.runtime.cl.device_type.CPU
    return "gemm_blocked" if is_cpu else "gemm_tiled"


def gemm_launch(layer: OpenCLLayer, m: int, n: int, k: int, a, a_group_stride: int, b,
                b_batch_stride: int, c, c_batch_stride: int, bias=None,
                bias_mode: int = BIAS_NONE, groups: int = 1, batch: int = 1) -> Launch:
    """Bind gemm.h for C[z] = A[z % groups] @ B[z], z < batch*groups (arguments are buffers).

    The kernel comes from the layer's own program (its .cl file includes gemm.h and may set
    TRANS_A / TRANS_B)."""
    name = gemm_kernel_name(layer)
    kernel = layer.kernel(name)
    i32 = np.int32
    kernel.set_args(i32(m), i32(n), i32(k), a, i32(a_group_stride), b, i32(b_batch_stride),
                    c, i32(c_batch_stride), bias, i32(bias_mode if bias is not None else 0),
                    i32(groups))
    if name == "gemm_blocked":  # small work-groups of 4 x 4 blocks were fastest under PoCL
        blocks_n, blocks_m = -(-n // GEMM_BLOCK), -(-m // GEMM_BLOCK)
        return Launch(kernel, (round_up(blocks_n, 4), round_up(blocks_m, 4), batch * groups),
                      (4, 4, 1))
    tiles_n, tiles_m = -(-n // GEMM_TILE), -(-m // GEMM_TILE)
    return Launch(kernel, (tiles_n * GEMM_LOCAL, tiles_m * GEMM_LOCAL, batch * groups),
                  (GEMM_LOCAL, GEMM_LOCAL, 1))


class WeightBuffers:
    """Mixin: device buffers for weights that are attributes (uploaded once at bind time) or
    inputs (F.linear / F.convNd: the producer's array). References are kept on the layer so
    the buffers live as long as the kernels bound to them."""

    def weight_buffers(self, inputs) -> tuple:
        if self.weight is not None:
            self._uploaded = [self.upload(np.asarray(self.weight, np.float32))]
            if self.bias is not None:
                self._uploaded.append(self.upload(np.asarray(self.bias, np.float32)))
            return self._uploaded[0].data, (self._uploaded[1].data if self.bias is not None
                                             else None)
        bias = inputs[2].data if len(inputs) > 2 and inputs[2] is not None else None
        return inputs[1].data, bias


@register("nn.Linear", "F.linear", backend="opencl")
class Linear(WeightBuffers, OpenCLLayer, linear.Linear):
    def bind(self, inputs, outputs, in_specs, out_specs):
        n_out, n_in = self.weight_of(in_specs)
        rows = out_specs[0].numel // n_out if n_out else 0
        self.launches = []
        if rows == 0 or n_out == 0:
            return
        w, b = self.weight_buffers(inputs)
        self.launches = [gemm_launch(self, rows, n_out, n_in, inputs[0].data, 0, w, 0,
                                     outputs[0].data, 0, b, BIAS_PER_COLUMN)]
