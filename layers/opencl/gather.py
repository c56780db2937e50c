"""Gathers on OpenCL: index_select, ONNX Gather and single-tensor Tensor.index share the
`index_select` kernel of clkernels/strided.h, gather has its own (clkernels/gather.cl). Constant
indices are uploaded once at bind time."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.common.datamove import contiguous_strides
from kuiper.layers.cpu import gather
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_helpers.buffers import broadcast_strides
from kuiper.layers.opencl_helpers.cl_types import arith_type, move_type
from kuiper.layers.opencl_helpers.strided import View, index_select, strided_copy

MAX_INDEX_TENSORS = 4  # pointers of the advanced_index kernel; more run on the host


class DeviceGather(OpenCLLayer):
    def options(self, x_dtype, index_dtype) -> list[str]:
        return [f"-DT={move_type(x_dtype)}", f"-DI={arith_type(index_dtype)}"]

    def index_buffer(self, array, spec):
        """The device index: the executor's array, or an upload when the value is constant."""
        if spec.known or array is None:
            buffer = self.upload(np.ascontiguousarray(spec.value))
            self.keep_alive.append(buffer)
            return buffer
        return array


@register(backend="opencl")
class IndexSelect(DeviceGather, gather.IndexSelect):
    def bind(self, inputs, outputs, in_specs, out_specs):
        self.keep_alive = []
        index = self.index_buffer(inputs[1], in_specs[1])
        self.launches = index_select(self, inputs[0], index, outputs[0],
                                     in_specs[0].shape or (1,), self.axis,
                                     in_specs[1].numel, in_specs[1].dtype,
                                     out_specs[0].dtype)


@register(backend="opencl")
class OnnxGather(DeviceGather, gather.OnnxGather):
    """np.take along `axis` is index_select with the index flattened: the kernel reads the
    index as n_index rows, and the output's row-major layout is the same."""

    def bind(self, inputs, outputs, in_specs, out_specs):
        self.keep_alive = []
        index = self.index_buffer(inputs[1], in_specs[1])
        self.launches = index_select(self, inputs[0], index, outputs[0], in_specs[0].shape,
                                     self.axis, in_specs[1].numel, in_specs[1].dtype,
                                     out_specs[0].dtype)


@register(backend="opencl")
class Gather(DeviceGather, gather.Gather):
    def bind(self, inputs, outputs, in_specs, out_specs):
        self.keep_alive, self.launches = [], []
        x, index_spec, n = in_specs[0], in_specs[1], out_specs[0].numel
        if n == 0:
            return
        strides = list(contiguous_strides(x.shape))
        dim_stride, strides[self.axis] = strides[self.axis], 0
        meta = self.upload(np.array(list(index_spec.shape) + strides or [0], dtype=np.int32))
        self.keep_alive.append(meta)
        index = self.index_buffer(inputs[1], index_spec)
        kernel = self.kernel("gather", self.options(x.dtype, index_spec.dtype))
        kernel.set_args(inputs[0].data, index.data, outputs[0].data, meta.data,
                        np.int32(len(x.shape)), np.int32(dim_stride),
                        np.int32(x.shape[self.axis] if x.shape else 1), np.int32(n))
        self.launches = [Launch(kernel, (round_up(n, 64),))]


@register(backend="opencl")
class Index(DeviceGather, gather.Index):
    """One index tensor at position p is an index_select on dim p with the index's full shape;
    several (x[i, j]) use the `advanced_index` kernel, which follows NumPy's and PyTorch's
    layout rules (adjacent index tensors put the joint dims in their place, separated ones
    put them first)."""

    def bind(self, inputs, outputs, in_specs, out_specs):
        self.keep_alive, self.launches = [], []
        positions = [p for p, e in enumerate(self.resolved) if e is not None]
        if not positions:  # x[:, :]: nothing to gather, a plain copy
            self.launches = strided_copy(self, inputs[0], outputs[0],
                                         View.of(in_specs[0].shape), out_specs[0].dtype)
            return
        if len(positions) > 1:
            self.bind_several(inputs, outputs, in_specs, out_specs, positions)
            return
        spec, source = self.resolved[positions[0]]
        index = self.index_buffer(None if source is None else inputs[source], spec)
        self.launches = index_select(self, inputs[0], index, outputs[0], in_specs[0].shape,
                                     positions[0], spec.numel, spec.dtype,
                                     out_specs[0].dtype)

    def bind_several(self, inputs, outputs, in_specs, out_specs, positions):
        x, out = in_specs[0], out_specs[0]
        entries = [self.resolved[p] for p in positions]
        dtypes = {spec.dtype for spec, _ in entries}
        if len(positions) > MAX_INDEX_TENSORS or len(dtypes) > 1:
            self.fall_back_to_host(inputs, outputs, in_specs, out_specs,
                                   f"more than {MAX_INDEX_TENSORS} index tensors or index "
                                   "tensors of different dtypes")
            return
        if out.numel == 0:
            return
        joint = tuple(np.broadcast_shapes(*[spec.shape for spec, _ in entries]))
        x_strides = contiguous_strides(x.shape)
        rest = [d for d in range(len(x.shape)) if d not in positions]
        adjacent = positions == list(range(positions[0], positions[-1] + 1))
        # Which x dim each output dim walks (None: a joint dim), in the output's order
        if adjacent:
            walk = list(range(positions[0])) + [None] * len(joint) + list(
                range(positions[-1] + 1, len(x.shape)))
        else:
            walk = [None] * len(joint) + rest
        first_joint = (positions[0] if adjacent else 0) if not joint else walk.index(None)
        meta = list(out.shape) + [0 if d is None else x_strides[d] for d in walk]
        for spec, _ in entries:
            strides = broadcast_strides(spec.shape, joint)
            meta += [0] * first_joint + strides + [0] * (len(walk) - first_joint - len(joint))
        for p in positions:
            meta += [x.shape[p], x_strides[p]]
        meta_dev = self.upload(np.asarray(meta, dtype=np.int32))
        self.keep_alive.append(meta_dev)
        indices = [self.index_buffer(None if source is None else inputs[source], spec)
                   for spec, source in entries]
        data = [i.data for i in indices] + [indices[0].data] * (MAX_INDEX_TENSORS - len(indices))
        kernel = self.kernel("advanced_index", self.options(x.dtype, dtypes.pop()))
        kernel.set_args(inputs[0].data, *data, outputs[0].data, meta_dev.data,
                        np.int32(len(walk)), np.int32(len(indices)), np.int32(out.numel))
        self.launches = [Launch(kernel, (round_up(out.numel, 64),))]
