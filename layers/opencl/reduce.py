"""Reductions on OpenCL: one work-group per output element (clkernels/reduce.cl)."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import reduce
from kuiper.layers.opencl_base import Launch, OpenCLLayer
from kuiper.layers.opencl_helpers.buffers import keep_alive
from kuiper.layers.opencl_helpers.cl_types import cl_type
from kuiper.layers.opencl_helpers.reduction import reduction_tables, work_group_size

MODES = {"sum": "MODE_SUM", "mean": "MODE_MEAN", "prod": "MODE_PROD", "amax": "MODE_MAX",
         "max": "MODE_MAX", "argmax": "MODE_MAX", "amin": "MODE_MIN", "min": "MODE_MIN",
         "argmin": "MODE_MIN", "logsumexp": "MODE_LOGSUMEXP", "var": "MODE_VAR",
         "std": "MODE_STD", "norm": "MODE_NORM"}
P_KINDS = {2.0: "P_TWO", 1.0: "P_ONE", np.inf: "P_INF", -np.inf: "P_NINF", 0.0: "P_ZERO"}


@register(backend="opencl")
class Reduce(OpenCLLayer, reduce.Reduce):
    def bind(self, inputs, outputs, in_specs, out_specs):
        self.bound_arrays = []   # a rebind (new input shape) releases the previous ones
        x = in_specs[0]
        base, inner, contiguous = reduction_tables(x.shape, self.axes)
        n_out, n = len(base), len(inner)
        self.launches = []
        if n_out == 0:
            return
        t = cl_type(x.dtype, self)
        values = out_specs[self.outputs.index("values")] if "values" in self.outputs else None
        out_t = cl_type(values.dtype, self) if values is not None else t
        # Sums and products of integers accumulate in 64 bits, as torch's int64 results do.
        acc = "long" if t != "float" and self.kind in ("sum", "prod") else t
        wg = work_group_size(n)
        options = [f"-DMODE={MODES[self.kind]}", f"-DT={t}", f"-DACC={acc}", f"-DOUT={out_t}",
                   f"-DWG={wg}", f"-DACC_IS_INT={int(acc != 'float')}",
                   f"-DCONTIG={int(contiguous)}",
                   f"-DPKIND={P_KINDS.get(self.p, 'P_ANY')}",
                   f"-DWANT_VALUES={int('values' in self.outputs)}",
                   f"-DWANT_INDICES={int('indices' in self.outputs)}"]
        kernel = self.kernel("reduce", options)
        tables = [self.upload(base), self.upload(inner if n else np.zeros(1, np.int32))]
        keep_alive(self, tables)
        by_name = dict(zip(self.outputs, outputs))
        y = by_name.get("values")
        yi = by_name.get("indices")
        divisor = max(n - self.correction, 0.0)
        kernel.set_args(inputs[0].data, tables[0].data, tables[1].data, np.int32(n),
                        None if y is None else y.data, None if yi is None else yi.data,
                        np.float32(self.p), np.float32(divisor))
        self.launches = [Launch(kernel, (n_out * wg,), (wg,))]


@register(backend="opencl")
class OnnxReduce(Reduce, reduce.OnnxReduce):
    """ONNX ReduceMax / ReduceMin: the CPU layer's parameters, Reduce's kernel."""
