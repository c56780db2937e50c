"""Splitting on OpenCL. Split, chunk, unbind and most tensor_splits cut one axis into
neighbouring pieces, in order from 0: neighbouring blocks of the input's rows, copied out four
per launch by split4, the reverse of cat (clkernels/cat.cl). Pieces that are not (tensor_split
with indices out of order, [3, 1, 9], overlaps) take one strided copy each.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import split
from kuiper.layers.opencl_helpers.blocks import blocks_launches
from kuiper.layers.opencl_helpers.strided import StridedCopyLayer, View


class DeviceSplit(StridedCopyLayer):
    def output_views(self, in_specs, out_specs):
        whole = View.of(in_specs[0].shape)
        # Only the pieces the model has operands for; extra pieces are never materialised.
        return [whole.index(self.index(item)) for item in self.items[:len(out_specs)]]

    def bind(self, inputs, outputs, in_specs, out_specs):
        shape = in_specs[0].shape
        spans = self.neighbouring_spans(len(out_specs), shape[self.axis])
        if spans is None:
            super().bind(inputs, outputs, in_specs, out_specs)
            return
        rows = int(np.prod(shape[:self.axis], dtype=np.int64))
        inner = int(np.prod(shape[self.axis + 1:], dtype=np.int64))
        self.keep_alive = []  # (the strided copies' index tables of an earlier binding)
        self.launches = (blocks_launches(self, "split4", inputs[0], outputs,
                                         [n * inner for n in spans], shape[self.axis] * inner,
                                         rows, in_specs[0].dtype) if rows and inner else [])

    def neighbouring_spans(self, count: int, size: int) -> list[int] | None:
        """The lengths along the axis (of `size`) of the first `count` pieces, when each
        starts where the one before it ends, the first at 0; else None."""
        spans, at = [], 0
        for item in self.items[:count]:
            if isinstance(item, slice):
                start, stop, _ = item.indices(size)  # (the pieces' steps are 1)
                length = max(stop - start, 0)
            else:  # unbind's index
                start, length = int(item), 1
            if length and start != at:
                return None
            spans.append(length)
            at += length
        return spans


@register(backend="opencl")
class Split(DeviceSplit, split.Split):
    pass


@register(backend="opencl")
class Chunk(DeviceSplit, split.Chunk):
    pass


@register(backend="opencl")
class TensorSplit(DeviceSplit, split.TensorSplit):
    pass


@register(backend="opencl")
class Unbind(DeviceSplit, split.Unbind):
    pass
