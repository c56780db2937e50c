"""topk / sort / argsort on OpenCL: rank every element of a row in parallel (clkernels/topk.cl)."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import topk
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_helpers.cl_types import cl_type
from kuiper.layers.opencl_helpers.reduction import work_group_size


@register(backend="opencl")
class TopK(OpenCLLayer, topk.TopK):
    def bind(self, inputs, outputs, in_specs, out_specs):
        x = in_specs[0]
        self.launches = []
        if x.numel == 0 or self.count == 0:
            return
        n = x.shape[self.axis] if x.shape else 1
        inner = int(np.prod(x.shape[self.axis + 1:], dtype=np.int64))
        rows = x.numel // n
        t = cl_type(x.dtype, self)
        wg = work_group_size(n)
        options = [f"-DT={t}", f"-DT_IS_INT={int(t != 'float')}",
                   f"-DDESCENDING={int(self.descending)}", f"-DWG={wg}",
                   f"-DWANT_VALUES={int('values' in self.outputs)}",
                   f"-DWANT_INDICES={int('indices' in self.outputs)}"]
        kernel = self.kernel("topk_rank", options)
        by_name = dict(zip(self.outputs, outputs))
        y, yi = by_name.get("values"), by_name.get("indices")
        kernel.set_args(inputs[0].data, None if y is None else y.data,
                        None if yi is None else yi.data, np.int32(n), np.int32(inner),
                        np.int32(self.count))
        self.launches = [Launch(kernel, (round_up(n, wg), rows), (wg, 1))]


@register(backend="opencl")
class AtenSort(TopK, topk.AtenSort):
    """aten::sort: the same kernel, its dim and order read from the known inputs."""
