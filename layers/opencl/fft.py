"""The torch.fft.* operators on OpenCL: the plan of layers/common/fft_plan.py, run as kernels
of clkernels/fft.cl (a Stockham FFT; its opening comment explains the algorithm).

One operator is a short chain of launches, all prepared at bind time:

    load      input -> complex work buffer, resized to the signal lengths (conj for hfft)
    passes    a 1-D FFT along each transformed dim (layers/opencl_helpers/stockham.py)
    [c2r]     the last dim's n/2 + 1 bins -> the full Hermitian spectrum, then its inverse FFT
    store     work -> output: scaled, conjugated (ihfft), cut to n/2 + 1 bins (r2c), or the
              real part (c2r)

r2c transforms (rfft, ihfft) simply run a complex FFT on the real input and keep half of it:
twice the work of a dedicated real FFT, and much less code. The kernels are float32: a float64
or complex128 FFT runs the CPU layer (listed in graph.fallbacks).
"""

from __future__ import annotations

import math

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.common.datamove import contiguous_strides
from kuiper.layers.cpu import fft as cpu_fft
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_helpers.buffers import keep_alive
from kuiper.layers.opencl_helpers.stockham import WorkBuffers, transform_dim

DEVICE_DTYPES = (np.dtype(np.float32), np.dtype(np.complex64))


def int_meta(layer, *rows) -> object:
    """Shapes and strides as one int32 device buffer, kept alive with the layer."""
    meta = layer.upload(np.array([v for row in rows for v in row] or [0], np.int32))
    keep_alive(layer, [meta])
    return meta


@register(backend="opencl")
class FFT(OpenCLLayer, cpu_fft.FFT):
    def bind(self, inputs, outputs, in_specs, out_specs):
        x, plan = in_specs[0], self.plan
        if x.dtype not in DEVICE_DTYPES:
            return self.fall_back_to_host(inputs, outputs, in_specs, out_specs,
                                          f"fft.cl reads float32 or complex64, not {x.dtype}")
        self.launches = []
        if out_specs[0].numel == 0:
            return
        if x.numel == 0:  # zero padding all the way: no buffer to read from
            return self.fall_back_to_host(inputs, outputs, in_specs, out_specs,
                                          "an empty input has no device buffer")
        work = plan.work_shape
        full = list(work)  # c2r: the last dim grows from n/2 + 1 bins to n
        full[plan.dims[-1]] = plan.sizes[-1]
        buffers = WorkBuffers(self, max(math.prod(work), math.prod(full)))
        launches = [self.load(inputs[0], x, buffers, work)]
        half_dims = plan.dims[-1:] if plan.kind == "c2r" else ()
        for d in plan.dims:
            if d not in half_dims:
                launches += transform_dim(self, buffers, work, d, plan.inverse)
        shape = work
        if plan.kind == "c2r":
            launches.append(self.hermitian_extend(buffers, full, plan.dims[-1]))
            shape = tuple(full)
            launches += transform_dim(self, buffers, shape, plan.dims[-1], True)
        launches.append(self.store(buffers.src, outputs[0], shape, out_specs[0]))
        self.launches = launches

    def load(self, x, spec, buffers, work):
        """Input -> buffers.src, resized to `work` (every element of the work array written)."""
        n = math.prod(work)
        meta = int_meta(self, work, spec.shape, contiguous_strides(spec.shape))
        rank = np.int32(len(work))
        if spec.dtype.kind == "c":
            kernel = self.kernel("fft_load_complex")
            conj = np.int32(self.plan.conjugate and self.plan.kind == "c2r")
            kernel.set_args(x.data, buffers.src.data, meta.data, rank, conj, np.int32(n))
        else:
            kernel = self.kernel("fft_load_real")
            kernel.set_args(x.data, buffers.src.data, meta.data, rank, np.int32(n))
        return Launch(kernel, (round_up(n, 64),))

    def hermitian_extend(self, buffers, full, dim):
        total = math.prod(full)
        kernel = self.kernel("fft_hermitian_extend")
        kernel.set_args(buffers.src.data, buffers.dst.data, np.int32(full[dim]),
                        np.int32(math.prod(full[dim + 1:])), np.int32(total))
        buffers.swap()
        return Launch(kernel, (round_up(total, 64),))

    def store(self, work, y, shape, out):
        n = out.numel
        meta = int_meta(self, out.shape, contiguous_strides(shape))
        rank, scale = np.int32(len(out.shape)), np.float32(self.plan.scale)
        if out.dtype.kind == "c":
            kernel = self.kernel("fft_store_complex")
            conj = np.int32(self.plan.conjugate and self.plan.kind == "r2c")
            kernel.set_args(work.data, y.data, meta.data, rank, scale, conj, np.int32(n))
        else:
            kernel = self.kernel("fft_store_real")
            kernel.set_args(work.data, y.data, meta.data, rank, scale, np.int32(n))
        return Launch(kernel, (round_up(n, 64),))
