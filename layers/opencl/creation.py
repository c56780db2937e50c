"""Tensor.fill and torch.arange on OpenCL.

fill reads its value from a one-element buffer (the model's own tensor, or the parameter
uploaded once). A folded arange (known start, end, step) never runs; one with run-time
arguments has a data-dependent length, so it reads its 1 to 3 numbers back from the device,
allocates its output and launches then (kuiper/opencl/execution/dynamic.py): a host wait, the price
of a size that only the data knows.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import creation
from kuiper.layers.opencl_base import HOST_ONLY, Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_helpers.buffers import keep_alive
from kuiper.layers.opencl_helpers.cl_types import cl_type


@register(backend="opencl")
class Fill(OpenCLLayer, creation.Fill):
    def bind(self, inputs, outputs, in_specs, out_specs):
        out = out_specs[0]
        self.launches = []
        if out.numel == 0:
            return
        if self.value is not None:
            value = self.upload(np.asarray([self.value], dtype=out.dtype))
            keep_alive(self, [value])
            value_dtype = out.dtype
        else:
            value, value_dtype = inputs[1], in_specs[1].dtype
        kernel = self.kernel("fill", [f"-DT={cl_type(out.dtype, self)}",
                                      f"-DTV={cl_type(value_dtype, self)}", "-DTS=float"])
        kernel.set_args(value.data, outputs[0].data, np.int32(out.numel))
        self.launches = [Launch(kernel, (round_up(out.numel, 64),))]


@register(backend="opencl")
class Arange(OpenCLLayer, creation.Arange):
    def output_kinds(self, in_specs, out_specs):
        return [HOST_ONLY]  # the length is known only when the model runs (enqueue allocates)

    def bind(self, inputs, outputs, in_specs, out_specs):
        self.inputs, self.in_specs, self.launches = inputs, in_specs, []
        self.integer = self.out_dtype.kind in "iu"
        self.kernel_ = self.kernel("arange", [f"-DT={cl_type(self.out_dtype, self)}",
                                              "-DTV=float",
                                              f"-DTS={'long' if self.integer else 'float'}"])

    def enqueue(self, queue, wait_for):
        cl = self.runtime.cl
        if wait_for:
            cl.wait_for_events(list(wait_for))
        values = [spec.value if spec.known else array.get(queue)
                  for array, spec in zip(self.inputs, self.in_specs)]
        start, end, step = self.arguments(values)
        n = creation.arange_length(self, start, end, step)
        self.out = self.runtime.empty((n,), self.out_dtype)
        self.events = []
        if n:
            scalar = np.int64 if self.integer else np.float32
            self.kernel_.set_args(self.out.data, scalar(start), scalar(step), np.int32(n))
            self.events = [cl.enqueue_nd_range_kernel(queue, self.kernel_, (round_up(n, 64),),
                                                      None)]
        return list(self.events)

    def dynamic_outputs(self, queue):
        return [self.out]
