"""Embedding on OpenCL: a guarded gather, one work-item per output element."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import embedding
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up

INDEX_TYPES = {np.dtype(np.int64): "long", np.dtype(np.int32): "int"}


@register(backend="opencl")
class Embedding(OpenCLLayer, embedding.Embedding):
    def bind(self, inputs, outputs, in_specs, out_specs):
        index_type = INDEX_TYPES.get(in_specs[0].dtype)
        if index_type is None:
            raise self.shape_error(f"indices of dtype {in_specs[0].dtype} are not supported on "
                                   "OpenCL; use int64 or int32")
        if out_specs[0].dtype != np.float32:
            raise self.shape_error(f"a {out_specs[0].dtype} table is not supported on OpenCL; "
                                   "use float32")
        table = self.upload(self.table) if self.table is not None else inputs[1]
        self._table = table  # keep the device buffer alive with the layer
        rows, dim = self.table.shape if self.table is not None else in_specs[1].shape
        n = out_specs[0].numel
        kernel = self.kernel("embedding", [f"-DINDEX_T={index_type}"])
        kernel.set_args(inputs[0].data, table.data, outputs[0].data, np.int32(n),
                        np.int32(dim), np.int32(rows))
        self.launches = [Launch(kernel, (round_up(n, 64),))] if n else []
