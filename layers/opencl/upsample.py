"""Resizing on OpenCL: one `resample` launch per spatial dim that changes (one `nearest2d`
launch for a nearest resize of the last two dims; `nearest2d_rows` on CPU devices).

The CPU layer already computed, per dim, the (indices, weights) tables; they are uploaded once
at bind time, so the kernel does no coordinate maths at all and agrees with the CPU path index
for index. Between two passes the partial result lives in a workspace (workspace_shapes).
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import upsample
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_helpers.cl_types import arith_type
from kuiper.layers.opencl_helpers.strided import copies_by_rows, rows_launch


class OpenCLUpsample(OpenCLLayer):
    def one_launch(self, shape) -> bool:
        """Whether the resize is one nearest2d launch (a nearest resize of the last two dims)."""
        axes = sorted(axis for axis, _, _ in self.passes)
        return upsample.TAPS[self.mode] == 1 and axes == [len(shape) - 2, len(shape) - 1]

    def workspace_shapes(self, in_specs, out_specs):
        """The partial results between two passes (every pass's output but the last's)."""
        shape = list(in_specs[0].shape)
        if not self.passes or self.one_launch(shape):
            return []
        shapes = []
        for axis, idx, _ in self.passes[:-1]:
            shape = shape[:axis] + [idx.shape[0]] + shape[axis + 1:]
            shapes.append((tuple(shape), in_specs[0].dtype))
        return shapes

    def bind(self, inputs, outputs, in_specs, out_specs, *, workspaces=()):
        dtype = in_specs[0].dtype
        taps = upsample.TAPS[self.mode]
        if taps > 1 and dtype != np.float32:
            raise self.op.error(f"mode={self.mode} on OpenCL computes in float32, got a "
                                f"{dtype} input")
        self.launches, self.keep_alive = [], []
        shape = list(in_specs[0].shape)
        src = inputs[0]
        if not self.passes:  # nothing changes: a plain copy
            n = out_specs[0].numel
            if n:
                idx = np.arange(shape[-1]).reshape(-1, 1)
                self.launches.append(self.resample(src, outputs[0], shape, len(shape) - 1,
                                                   idx, np.ones_like(idx, np.float32), dtype))
            return
        if self.one_launch(shape):  # nearest 2-D: one launch
            axes = sorted(axis for axis, _, _ in self.passes)
            tables = {axis: idx for axis, idx, _ in self.passes}
            self.launches.append(self.nearest2d(src, outputs[0], shape, tables[axes[0]],
                                                tables[axes[1]], dtype))
            return
        between = list(workspaces) or self.own_workspaces(in_specs, out_specs)
        for k, (axis, idx, w) in enumerate(self.passes):
            out_shape = shape[:axis] + [idx.shape[0]] + shape[axis + 1:]
            last = k == len(self.passes) - 1
            dst = outputs[0] if last else between[k]
            self.keep_alive.append(dst)
            self.launches.append(self.resample(src, dst, shape, axis, idx, w, dtype))
            src, shape = dst, out_shape

    def nearest2d(self, src, dst, shape, iy, ix, dtype) -> Launch:
        h, w = shape[-2:]
        oh, ow = iy.shape[0], ix.shape[0]
        n = int(np.prod(shape[:-2], dtype=np.int64)) * oh * ow
        tables = [self.upload(t[:, 0].astype(np.int32)) for t in (iy, ix)]
        self.keep_alive += tables  # set_args does not keep buffers alive
        rows = n // max(ow, 1)
        # nearest2d_rows (a work-item per output row) by strided.py's rule, or one per value
        by_rows = copies_by_rows(self.runtime.device, ow, rows)
        name = "nearest2d_rows" if by_rows else "nearest2d"
        kernel = self.kernel(name, ["-DTAPS=1", f"-DT={arith_type(dtype)}"])
        kernel.set_args(src.data, dst.data, tables[0].data, tables[1].data,
                        *(np.int32(v) for v in (h, w, oh, ow, rows if by_rows else n)))
        return rows_launch(kernel, rows) if by_rows else Launch(kernel, (round_up(n, 64),))

    def resample(self, src, dst, shape, axis, idx, w, dtype) -> Launch:
        n_in, n_out = shape[axis], idx.shape[0]
        inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
        n = int(np.prod(shape, dtype=np.int64)) // max(n_in, 1) * n_out
        idx_buf = self.upload(idx.astype(np.int32))
        w_buf = self.upload(w.astype(np.float32))
        self.keep_alive += [idx_buf, w_buf]  # set_args does not keep buffers alive
        kernel = self.kernel("resample", [f"-DTAPS={idx.shape[1]}", f"-DT={arith_type(dtype)}"])
        kernel.set_args(src.data, dst.data, idx_buf.data, w_buf.data, np.int32(n_in),
                        np.int32(n_out), np.int32(inner), np.int32(n))
        return Launch(kernel, (round_up(n, 64),))


@register(backend="opencl")
class Upsample(OpenCLUpsample, upsample.Upsample):
    pass


@register(backend="opencl")
class UpsampleNearest(OpenCLUpsample, upsample.UpsampleNearest):
    pass


@register(backend="opencl")
class UpsampleBilinear(OpenCLUpsample, upsample.UpsampleBilinear):
    pass
