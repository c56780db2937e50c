"""slice_copy / slice_scatter, scatter_add and index_put on OpenCL: a strided copy of x into
y, then one kernel of clkernels/scatter.cl updates y. Constant indices (pnnx folds them) are
grouped by destination on the host, once; index_put with run-time indices runs its CPU layer
(listed in graph.fallbacks)."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.common.datamove import contiguous_strides
from kuiper.layers.cpu import scatter
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_helpers.broadcast import broadcast_meta
from kuiper.layers.opencl_helpers.buffers import keep_alive
from kuiper.layers.opencl_helpers.cl_types import arith_type, cl_type, move_type
from kuiper.layers.opencl_helpers.strided import View, strided_copy


class CopyThenUpdate(OpenCLLayer):
    """y = a copy of x, then the updates (each twin's `update_launches`). The values (src)
    are input 1, or input 2 after an index (`indexed`); a dtype other than x's, which the
    CPU layer casts, makes the operator run its CPU layer."""

    indexed = False

    def bind(self, inputs, outputs, in_specs, out_specs):
        self.keep_alive, self.launches = [], []
        if any(s.dtype != out_specs[0].dtype for s in in_specs[2 if self.indexed else 1:][:1]):
            self.fall_back_to_host(inputs, outputs, in_specs, out_specs,
                                   "the values' dtype differs from the tensor's")
            return
        updates = self.update_launches(inputs, outputs, in_specs, out_specs)
        if self.host_fallback is None:
            self.launches = strided_copy(self, inputs[0], outputs[0],
                                         View.of(in_specs[0].shape), out_specs[0].dtype)
            self.launches += updates

    def upload_ints(self, values):
        buffer = self.upload(np.asarray(values if len(values) else [0], dtype=np.int32))
        keep_alive(self, [buffer])
        return buffer


@register(backend="opencl")
class SliceScatter(CopyThenUpdate, scatter.SliceScatter):
    def update_launches(self, inputs, outputs, in_specs, out_specs):
        region = View.of(in_specs[0].shape).index(self.index)
        n = region.numel
        if n == 0:
            return []
        shape = region.shape
        meta_region = self.upload_ints(list(shape) + list(region.strides))
        meta_src = broadcast_meta(self, shape, [in_specs[1].shape])
        kernel = self.kernel("slice_scatter", [f"-DT={move_type(out_specs[0].dtype)}"])
        kernel.set_args(inputs[1].data, outputs[0].data, meta_region.data,
                        np.int32(region.offset), meta_src.data, np.int32(len(shape)),
                        np.int32(n))
        return [Launch(kernel, (round_up(n, 64),))]


@register(backend="opencl")
class ScatterAdd(CopyThenUpdate, scatter.ScatterAdd):
    indexed = True

    def update_launches(self, inputs, outputs, in_specs, out_specs):
        x, index, src = in_specs
        n = out_specs[0].numel
        if n == 0 or index.numel == 0:
            return []
        meta = self.upload_ints(list(x.shape) + list(index.shape)
                                + list(contiguous_strides(index.shape))
                                + list(contiguous_strides(src.shape)))
        if index.known:  # pnnx folds constant indices: group them by destination, once
            return self.grouped_launches(np.asarray(index.value), inputs, outputs, in_specs)
        kernel = self.kernel("scatter_add", [f"-DT={cl_type(x.dtype, self)}",
                                             f"-DI={arith_type(index.dtype)}"])
        kernel.set_args(inputs[1].data, inputs[2].data, outputs[0].data, meta.data,
                        np.int32(len(x.shape)), np.int32(self.axis), np.int32(n))
        return [Launch(kernel, (round_up(n, 64),))]

    def grouped_launches(self, index, inputs, outputs, in_specs):
        """A constant index: the destination of every index element is known, so group them
        (CSR, as index_put does) and let the index_put kernel add each group in order: work
        in proportion to the index, where the run-time kernel loops over a whole dim for
        every output element."""
        x, src = in_specs[0], in_specs[2]
        size = x.shape[self.axis]
        if index.min() < 0 or index.max() >= size:
            raise self.shape_error(f"index values should be in [0, {size}) for dim {self.dim}")
        coords = list(np.indices(index.shape))
        coords[self.axis] = index
        dest = np.ravel_multi_index(tuple(c.reshape(-1) for c in coords), x.shape)
        order = np.argsort(dest, kind="stable")
        unique, starts = np.unique(dest[order], return_index=True)
        starts = np.append(starts, dest.size)
        # src element of index element e: e's coordinates in src (inner = 1 in the kernel)
        meta = self.upload_ints(list(index.shape) + list(contiguous_strides(src.shape)))
        kernel = self.kernel("index_put", [f"-DT={cl_type(x.dtype, self)}", "-DACCUMULATE=1"])
        kernel.set_args(inputs[2].data, outputs[0].data, self.upload_ints(unique).data,
                        self.upload_ints(starts).data, self.upload_ints(order).data, meta.data,
                        np.int32(len(index.shape)), np.int32(1), np.int32(unique.size))
        return [Launch(kernel, (round_up(unique.size, 64),))]


@register(backend="opencl")
class IndexPut(CopyThenUpdate, scatter.IndexPut):
    indexed = True

    def bind(self, inputs, outputs, in_specs, out_specs):
        if self.known is None or any(isinstance(i, slice) or i.dtype == np.bool_
                                     for i in self.known):
            self.fall_back_to_host(inputs, outputs, in_specs, out_specs,
                                   "index_put with run-time or boolean indices, or a `:`")
            return
        super().bind(inputs, outputs, in_specs, out_specs)

    def update_launches(self, inputs, outputs, in_specs, out_specs):
        x = in_specs[0]
        if self.scalar is not None:  # a `values=` parameter: a one-element buffer, broadcast
            host = self.scalar_values(x.dtype)
            values = TensorSpec(host.shape, host.dtype)
            values_buffer = self.upload(host.reshape(1))
            keep_alive(self, [values_buffer])
        else:
            values, values_buffer = in_specs[2], inputs[2]
        m = len(self.known)
        lead, rest = x.shape[:m], x.shape[m:]
        joint = np.broadcast_arrays(*self.known)
        if joint[0].size == 0 or x.numel == 0:
            return []
        # Destination row of each index entry, then the entries grouped by destination (a
        # stable sort keeps their order: the last one wins, additions follow PyTorch's order).
        rows = np.ravel_multi_index(tuple(np.mod(j.reshape(-1), s) for j, s in zip(joint, lead)),
                                    lead) if m else np.zeros(1, np.int64)
        order = np.argsort(rows, kind="stable")
        unique, starts = np.unique(rows[order], return_index=True)
        starts = np.append(starts, rows.size)
        inner = int(np.prod(rest, dtype=np.int64))
        target = joint[0].shape + rest
        n = unique.size * inner
        meta_v = broadcast_meta(self, target, [values.shape])
        kernel = self.kernel("index_put", [f"-DT={cl_type(x.dtype, self)}",
                                           f"-DACCUMULATE={int(self.accumulate)}"])
        kernel.set_args(values_buffer.data, outputs[0].data, self.upload_ints(unique).data,
                        self.upload_ints(starts).data, self.upload_ints(order).data,
                        meta_v.data, np.int32(len(target)), np.int32(inner), np.int32(n))
        return [Launch(kernel, (round_up(n, 64),))]
