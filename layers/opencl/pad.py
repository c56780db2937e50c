"""Padding on OpenCL: the CPU layer's source tables, uploaded once, and one gather kernel.

The kernel handles the last four dims of the tensor (a tensor with fewer gets leading dims of
size 1); dims before those are never padded by pnnx's F.pad (2, 4 or 6 values), so they fold
into one `outer` count.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import pad
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_helpers.cl_types import arith_type

KERNEL_DIMS = 4


class OpenCLPad(OpenCLLayer):
    def bind(self, inputs, outputs, in_specs, out_specs):
        in_shape, out_shape = in_specs[0].shape, out_specs[0].shape
        rank, n = len(in_shape), out_specs[0].numel
        self.launches = []
        if n == 0:
            return
        if len(self.tables) > KERNEL_DIMS:
            raise self.op.error(f"the OpenCL pad kernel pads at most {KERNEL_DIMS} dims, "
                                f"pad={tuple(self.pads)} pads {len(self.tables)}")
        tables = dict(self.tables)
        ins, outs, parts = [], [], []
        for axis in range(rank - KERNEL_DIMS, rank):
            size_in = in_shape[axis] if axis >= 0 else 1
            ins.append(size_in)
            outs.append(out_shape[axis] if axis >= 0 else 1)
            parts.append(tables.get(axis, np.arange(size_in)))
        if min(ins) == 0:  # nothing to read: the output is all `value`
            parts = [np.full(o, -1) for o in outs]
            ins = [max(i, 1) for i in ins]
        self.table = self.upload(np.concatenate(parts).astype(np.int32))  # kept alive
        kernel = self.kernel("pad", [f"-DT={arith_type(in_specs[0].dtype)}"])
        kernel.set_args(inputs[0].data, outputs[0].data, self.table.data,
                        *[np.int32(v) for v in outs + ins], np.float32(self.value), np.int32(n))
        self.launches = [Launch(kernel, (round_up(n, 64),))]


@register(backend="opencl")
class Pad(OpenCLPad, pad.Pad):
    pass


def _twin(cpu_class: type) -> type:
    twin = type(cpu_class.__name__, (OpenCLPad, cpu_class), {"__module__": __name__})
    return register(backend="opencl")(twin)


# One twin per nn.*Pad*d module of the CPU stem.
for _name in dir(pad):
    _cls = getattr(pad, _name)
    if isinstance(_cls, type) and issubclass(_cls, pad.ModulePad) and _cls is not pad.ModulePad:
        globals()[_name] = _twin(_cls)
