"""Strided views for the OpenCL data-movement layers (permute, slice, split, expand, flip).

NumPy never copies for a transpose, a slice, a flip or a broadcast: it changes three numbers
per array — shape, strides, offset — and reads element `(i0, i1, ...)` at
`offset + i0*stride0 + i1*stride1 + ...`. `View` does the same bookkeeping for a device buffer,
in elements rather than bytes. Once an operator has turned the input's view into the output's,
one generic kernel (`strided_copy` in clkernels/strided.h) walks the output in row-major order
and gathers each element from that address. Negative strides (flip) and zero strides
(broadcast) need nothing special.

Before launching, `coalesce` merges dims that are laid out contiguously one after the other, so
a slice of whole rows is a rank-2 copy however many dims the tensor had: fewer divisions per
element in the kernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kuiper.layers.common.datamove import contiguous_strides
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_helpers.cl_types import arith_type, move_type
from kuiper.opencl.device.runtime import is_cpu


@dataclass(frozen=True)
class View:
    """Which element of a contiguous buffer each index of a (virtual) array reads."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0

    @staticmethod
    def of(shape: Sequence[int]) -> View:
        shape = tuple(int(d) for d in shape)
        return View(shape, contiguous_strides(shape), 0)

    def permute(self, perm: Sequence[int]) -> View:
        return View(tuple(self.shape[p] for p in perm), tuple(self.strides[p] for p in perm),
                    self.offset)

    def index(self, items: Sequence[slice | int]) -> View:
        """Basic indexing, as `array[items]`: ints drop their dim, slices may step (even
        backwards: a flip is `slice(None, None, -1)`); missing trailing items mean `:`."""
        shape, strides, offset = [], [], self.offset
        for d, size in enumerate(self.shape):
            item = items[d] if d < len(items) else slice(None)
            if isinstance(item, slice):
                start, stop, step = item.indices(size)
                shape.append(len(range(start, stop, step)))
                strides.append(self.strides[d] * step)
                offset += start * self.strides[d] if shape[-1] else 0
            else:
                offset += int(item) * self.strides[d]
        return View(tuple(shape), tuple(strides), offset)

    def broadcast_to(self, shape: Sequence[int]) -> View:
        """NumPy broadcasting: new leading dims and size-1 dims get stride 0."""
        shape = tuple(int(d) for d in shape)
        lead = len(shape) - len(self.shape)
        strides = [0] * lead
        for d, size in enumerate(self.shape):
            strides.append(0 if size == 1 and shape[lead + d] != 1 else self.strides[d])
        return View(shape, tuple(strides), self.offset)

    def insert(self, dim: int, size: int) -> View:
        """A new dim of `size` at position `dim` that repeats the data (stride 0)."""
        return View(self.shape[:dim] + (int(size),) + self.shape[dim:],
                    self.strides[:dim] + (0,) + self.strides[dim:], self.offset)

    def coalesce(self) -> View:
        """Drop size-1 dims and merge neighbours d, d+1 with stride[d] == stride[d+1]*size[d+1].

        The merged view visits the same addresses in the same row-major order.
        """
        shape, strides = [], []
        for size, stride in zip(self.shape, self.strides):
            if size == 1:
                continue
            if shape and strides[-1] == stride * size:
                shape[-1] *= size
                strides[-1] = stride
            else:
                shape.append(size)
                strides.append(stride)
        return View(tuple(shape), tuple(strides), self.offset)

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


# The copy kernels with a work-item per output row (strided_copy_rows here, cat.cl's cat4_rows
# and split4_rows, upsample.cl's nearest2d_rows) run on CPU devices for rows of MIN_ROW elements
# or more and at least MIN_ROWS of them (a contiguous slice coalesces into one long row, which
# one work-item would copy alone); the kernels with a work-item per element otherwise. True or
# False forces one kind everywhere (tests).
ROWS_PER_WORK_ITEM: bool | None = None
MIN_ROW = 4
MIN_ROWS = 64
ROWS_LOCAL = 16


def copies_by_rows(device, row: int, rows: int) -> bool:
    """Whether a copy of `rows` rows of `row` elements (or vector units) takes a work-item per
    row on `device` (the rule above; strided.h says why a CPU wants it, while a GPU's
    neighbouring work-items store side by side)."""
    if ROWS_PER_WORK_ITEM is not None:
        return ROWS_PER_WORK_ITEM
    return is_cpu(device) and row >= MIN_ROW and rows >= MIN_ROWS


def rows_launch(kernel, rows: int) -> Launch:
    """The launch of a kernel with a work-item per row, in work-groups of ROWS_LOCAL rows."""
    return Launch(kernel, (round_up(rows, ROWS_LOCAL),), (ROWS_LOCAL,))


def strided_copy(layer, src, dst, view: View, dtype) -> list[Launch]:
    """Bind `clkernels/strided.h:strided_copy` (from the layer's own program) so that it
    writes `view` of `src` into the contiguous `dst`. An empty view launches nothing."""
    view = view.coalesce()
    n = view.numel
    if n == 0:
        return []
    # One small int buffer per launch: [shape..., strides...], uploaded once at bind time.
    meta = layer.upload(np.array(list(view.shape) + list(view.strides) or [0], dtype=np.int32))
    layer.keep_alive.append(meta)  # set_args does not keep the buffer alive
    cols = view.shape[-1] if view.shape else 1
    if view.shape and copies_by_rows(layer.runtime.device, cols, n // cols):
        kernel = layer.kernel("strided_copy_rows", [f"-DT={move_type(dtype)}"])
        kernel.set_args(src.data, dst.data, meta.data, np.int32(len(view.shape)),
                        np.int32(view.offset), np.int32(n // cols))
        return [rows_launch(kernel, n // cols)]
    kernel = layer.kernel("strided_copy", [f"-DT={move_type(dtype)}"])
    kernel.set_args(src.data, dst.data, meta.data, np.int32(len(view.shape)),
                    np.int32(view.offset), np.int32(n))
    return [Launch(kernel, (round_up(n, 64),))]


def index_select(layer, src, index, dst, shape: Sequence[int], axis: int, n_index: int,
                 index_dtype, dtype) -> list[Launch]:
    """Bind `clkernels/strided.h:index_select`: `dst` = rows `index` of `src` (of `shape`)
    along `axis`; the index (a device array of `n_index` elements) may have any shape."""
    n = int(np.prod(shape[:axis], dtype=np.int64)) * n_index * int(
        np.prod(shape[axis + 1:], dtype=np.int64))
    if n == 0:
        return []
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    kernel = layer.kernel("index_select", [f"-DT={move_type(dtype)}",
                                           f"-DI={arith_type(index_dtype)}"])
    kernel.set_args(src.data, index.data, dst.data, np.int32(inner), np.int32(shape[axis]),
                    np.int32(n_index), np.int32(n))
    return [Launch(kernel, (round_up(n, 64),))]


class StridedCopyLayer(OpenCLLayer):
    """Mixin for OpenCL twins whose every output is a strided view of input 0.

    The twin only says which view each output is (`output_views`, from the parameters the CPU
    layer parsed and the shapes it inferred); binding is the same for all of them. A view may
    have more dims than its output (repeat's (r0, s0, r1, s1) for an (r0*s0, r1*s1) output):
    the copy is row-major on both sides, so only the element counts must agree.
    """

    def output_views(self, in_specs, out_specs) -> list[View]:
        raise NotImplementedError(f"{type(self).__name__}.output_views")

    def bind(self, inputs, outputs, in_specs, out_specs):
        self.launches, self.keep_alive = [], []
        views = self.output_views(in_specs, out_specs)
        for out, spec, view in zip(outputs, out_specs, views):
            assert view.numel == spec.numel, (view.shape, spec.shape)
            self.launches += strided_copy(self, inputs[0], out, view, spec.dtype)
