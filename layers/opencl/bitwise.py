"""Bitwise and logical operators on OpenCL: one broadcasting elementwise kernel, built per
operator and dtypes (clkernels/bitwise.cl)."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import bitwise
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_helpers.broadcast import broadcast_meta
from kuiper.layers.opencl_helpers.buffers import keep_alive
from kuiper.layers.opencl_helpers.cl_types import cl_type

OPS = {"torch.bitwise_and": "AND", "torch.bitwise_or": "OR", "torch.bitwise_xor": "XOR",
       "torch.bitwise_not": "NOT", "torch.bitwise_left_shift": "SHL",
       "torch.bitwise_right_shift": "SHR", "torch.logical_and": "LAND",
       "torch.logical_or": "LOR", "torch.logical_xor": "LXOR", "torch.logical_not": "LNOT"}


@register(backend="opencl")
class Bitwise(OpenCLLayer, bitwise.Bitwise):
    def bind(self, inputs, outputs, in_specs, out_specs):
        out = out_specs[0]
        self.launches = []
        if out.numel == 0:
            return
        arrays, shapes = list(inputs), [s.shape for s in in_specs]
        dtypes = [s.dtype for s in in_specs]
        if self.other is not None:  # the number pnnx wrote as a parameter: a 1-element buffer
            value = np.asarray([self.other], dtype=None if self.logical else self.dtype)
            const = self.upload(value)
            keep_alive(self, [const])
            arrays, shapes, dtypes = arrays + [const], shapes + [()], dtypes + [value.dtype]
        if self.unary:  # the kernel reads b = a
            arrays, shapes, dtypes = arrays * 2, shapes * 2, dtypes * 2
        flat = all(s == out.shape for s in shapes)
        meta = broadcast_meta(self, out.shape, shapes)
        options = [f"-DTA={cl_type(dtypes[0], self)}", f"-DTB={cl_type(dtypes[1], self)}",
                   f"-DTO={cl_type(out.dtype, self)}", f"-DBITS={out.dtype.itemsize * 8}",
                   f"-DIS_BOOL={int(out.dtype == np.bool_)}", f"-DOP={OPS[self.type]}",
                   f"-DFLAT={int(flat)}"]
        kernel = self.kernel("bitwise", options)
        kernel.set_args(arrays[0].data, arrays[1].data, outputs[0].data, meta.data,
                        np.int32(len(out.shape)), np.int32(out.numel))
        self.launches = [Launch(kernel, (round_up(out.numel, 64),))]
