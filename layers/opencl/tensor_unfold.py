"""Tensor.unfold on OpenCL: the windows are a view of the input (the dim's stride times `step`
between windows, the dim's own stride inside one), copied by `strided_copy`."""

from __future__ import annotations

from kuiper.core.registry import register
from kuiper.layers.cpu import tensor_unfold
from kuiper.layers.opencl_helpers.strided import StridedCopyLayer, View


@register(backend="opencl")
class TensorUnfold(StridedCopyLayer, tensor_unfold.TensorUnfold):
    def output_views(self, in_specs, out_specs):
        source = View.of(in_specs[0].shape or (1,))   # a 0-D input is one value
        d, windows = self.dim, self.infer_shape(source.shape)[self.dim]
        shape = (*source.shape[:d], windows, *source.shape[d + 1:], self.size)
        strides = (*source.strides[:d], source.strides[d] * self.step, *source.strides[d + 1:],
                   source.strides[d])
        return [View(shape, strides, 0)]
