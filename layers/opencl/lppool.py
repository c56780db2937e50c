"""LP pooling on OpenCL: one work-item per output, same plane view as the CPU layer."""

from __future__ import annotations

import math

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.common.pooling import check_pool_input
from kuiper.layers.cpu import lppool
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_helpers.pooling_args import window_params


def power_kind(p: float) -> str:
    """How lppool.cl computes x^p: P_ONE, P_TWO, P_INT or P_ANY (see the kernel)."""
    if p in (1.0, 2.0):
        return "P_ONE" if p == 1.0 else "P_TWO"
    return "P_INT" if float(p).is_integer() else "P_ANY"


@register(backend="opencl")
class LPPool(OpenCLLayer, lppool.LPPool):
    def bind(self, inputs, outputs, in_specs, out_specs):
        _, size = check_pool_input(self, in_specs[0].shape, self.rank)
        _, out = check_pool_input(self, out_specs[0].shape, self.rank)
        n = out_specs[0].numel
        # mode 0: the p-norm; +1 / -1: the largest / smallest |x| (norm_type = +-inf)
        mode = int(math.copysign(1, self.p)) if math.isinf(self.p) else 0
        p = 1.0 if mode else self.p
        kernel = self.kernel("lppool", [f"-DPOWER_KIND={power_kind(p)}"])
        # LP pooling has neither padding nor dilation: only the kernel sizes and strides.
        kernel.set_args(inputs[0].data, outputs[0].data, np.int32(n),
                        *(np.int32(v) for v in (*size, *out)),
                        *window_params(self.windows)[:6],
                        np.float32(p), np.float32(1.0 / p), np.int32(mode))
        self.launches = [Launch(kernel, (round_up(n, 64),))] if n else []
