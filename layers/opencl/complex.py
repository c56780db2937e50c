"""Complex tensors on OpenCL: the same bytes as NumPy's complex64, read by kernels as float2.

view_as_real / view_as_complex are views of the input buffer (no kernel); torch.complex and
torch.real / torch.imag have small kernels in clkernels/complex.cl. Those kernels are written
for float32 parts: a float64 / complex128 tensor runs the CPU layer (listed in graph.fallbacks).
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.common.complex_types import is_complex
from kuiper.layers.cpu import complex as cpu_complex
from kuiper.layers.opencl_base import FRESH, Launch, OpenCLLayer, round_up, view_of
from kuiper.layers.opencl_helpers.buffers import broadcast_strides, keep_alive

FLOAT32 = np.dtype(np.float32)


@register(backend="opencl")
class Complex(OpenCLLayer, cpu_complex.Complex):
    def bind(self, inputs, outputs, in_specs, out_specs):
        if in_specs[0].dtype != FLOAT32:
            return self.fall_back_to_host(inputs, outputs, in_specs, out_specs,
                                          "complex.cl handles float32 parts only")
        out = out_specs[0]
        metas = [self.upload(np.array(out.shape + tuple(broadcast_strides(s.shape, out.shape)),
                                      np.int32)) for s in in_specs]
        keep_alive(self, metas)
        n = out.numel
        kernel = self.kernel("make_complex")
        kernel.set_args(inputs[0].data, inputs[1].data, outputs[0].data, metas[0].data,
                        metas[1].data, np.int32(len(out.shape)), np.int32(n))
        self.launches = [Launch(kernel, (round_up(n, 64),))] if n else []


class ComplexPart(OpenCLLayer):
    """torch.real / torch.imag: a kernel for complex64, the input itself for a real tensor."""

    def output_kinds(self, in_specs, out_specs):
        # torch.real of a real tensor is that tensor: a view, no kernel
        return [FRESH] if is_complex(in_specs[0].dtype) else [view_of(0)]

    def bind(self, inputs, outputs, in_specs, out_specs):
        self.launches = []
        if not is_complex(in_specs[0].dtype):
            return
        if in_specs[0].dtype != np.complex64:
            return self.fall_back_to_host(inputs, outputs, in_specs, out_specs,
                                          "complex.cl handles complex64 only")
        n = out_specs[0].numel
        kernel = self.kernel("complex_part")
        kernel.set_args(inputs[0].data, outputs[0].data,
                        np.int32(0 if self.part == "real" else 1), np.int32(n))
        self.launches = [Launch(kernel, (round_up(n, 64),))] if n else []


@register(backend="opencl")
class Real(ComplexPart, cpu_complex.Real):
    pass


@register(backend="opencl")
class Imag(ComplexPart, cpu_complex.Imag):
    pass


class ByteView(OpenCLLayer):
    """The output is the input's buffer read with the output's dtype and shape."""

    view_of_input = 0  # the same bytes as another dtype: the executor makes the view

    def bind(self, inputs, outputs, in_specs, out_specs):
        self.launches = []


@register(backend="opencl")
class ViewAsReal(ByteView, cpu_complex.ViewAsReal):
    pass


@register(backend="opencl")
class ViewAsComplex(ByteView, cpu_complex.ViewAsComplex):
    pass
