"""einsum and mv on OpenCL: one generic kernel walks the explicit equation (up to 4 operands;
more run the CPU layer, listed in graph.fallbacks)."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.common.datamove import contiguous_strides
from kuiper.layers.cpu import einsum
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_helpers.buffers import keep_alive
from kuiper.layers.opencl_helpers.cl_types import cl_type

MAX_OPERANDS = 4


def letter_strides(term: str, shape, sizes: dict[str, int], letters: str) -> list[int]:
    """An operand's stride per letter: the sum over its dims with that letter (a repeated
    letter walks the diagonal), 0 for a dim of size 1 that broadcasts."""
    strides = dict.fromkeys(letters, 0)
    for c, size, stride in zip(term, shape, contiguous_strides(shape)):
        if size == sizes[c]:
            strides[c] += stride
    return [strides[c] for c in letters]


@register(backend="opencl")
class Einsum(OpenCLLayer, einsum.Einsum):
    def bind(self, inputs, outputs, in_specs, out_specs):
        self.launches = []
        out = out_specs[0]
        if len(inputs) > MAX_OPERANDS or any(s.dtype != out.dtype for s in in_specs):
            self.fall_back_to_host(inputs, outputs, in_specs, out_specs,
                                   f"more than {MAX_OPERANDS} operands or mixed dtypes")
            return
        if out.numel == 0:
            return
        eq, letters = self.eq, self.eq.output + self.eq.summed
        meta = [self.sizes[c] for c in letters]
        arrays = []
        for term, spec, array in zip(eq.inputs, in_specs, inputs):
            meta += letter_strides(term, spec.shape, self.sizes, letters)
            arrays.append(array)
        meta_dev = self.upload(np.asarray(meta, dtype=np.int32))
        keep_alive(self, [meta_dev])
        terms = int(np.prod([self.sizes[c] for c in eq.summed], dtype=np.int64))
        kernel = self.kernel("einsum", [f"-DT={cl_type(out.dtype, self)}",
                                        f"-DNOPS={len(arrays)}"])
        data = [a.data for a in arrays] + [arrays[0].data] * (MAX_OPERANDS - len(arrays))
        kernel.set_args(*data, outputs[0].data, meta_dev.data, np.int32(len(eq.output)),
                        np.int32(len(eq.summed)), np.int32(terms), np.int32(out.numel))
        self.launches = [Launch(kernel, (round_up(out.numel, 64),))]


@register(backend="opencl")
class MV(Einsum, einsum.MV):
    pass
