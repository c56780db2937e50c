"""torch.where / comparisons / masked_fill on OpenCL: one broadcasting elementwise kernel."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import where_compare
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_helpers.buffers import broadcast_strides, keep_alive
from kuiper.layers.opencl_helpers.cl_types import cl_type

CMP = {"torch.gt": "CMP_GT", "torch.lt": "CMP_LT", "torch.ge": "CMP_GE", "torch.le": "CMP_LE",
       "torch.eq": "CMP_EQ", "torch.ne": "CMP_NE"}


@register(backend="opencl")
class WhereCompare(OpenCLLayer, where_compare.WhereCompare):
    def bind(self, inputs, outputs, in_specs, out_specs):
        self.bound_arrays = []   # a rebind (new input shape) releases the previous ones
        out = out_specs[0]
        self.launches = []
        if out.numel == 0:
            return
        # Device arrays and shapes of the slots; constants become one-element buffers.
        arrays, shapes, dtypes = [], [], []
        for slot in self.slots:
            if slot.input is not None:
                arrays.append(inputs[slot.input])
                shapes.append(in_specs[slot.input].shape)
                dtypes.append(in_specs[slot.input].dtype)
            else:
                const = self.upload(np.asarray([slot.value], dtype=self.dtype))
                keep_alive(self, [const])
                arrays.append(const)
                shapes.append(())
                dtypes.append(self.dtype)
        if self.mode == "compare":   # no condition: shift so that a, b are the last two slots
            arrays, shapes, dtypes = [None] + arrays, [()] + shapes, [np.dtype(np.bool_)] + dtypes
        flat = all(s == out.shape for s in shapes[1 if self.mode == "compare" else 0:])
        meta = list(out.shape)
        for shape in shapes:
            meta += broadcast_strides(shape, out.shape)
        meta_dev = self.upload(np.asarray(meta or [0], dtype=np.int32))
        keep_alive(self, [meta_dev])
        options = [f"-DTC={cl_type(dtypes[0], self)}", f"-DTA={cl_type(dtypes[1], self)}",
                   f"-DTB={cl_type(dtypes[2], self)}", f"-DTO={cl_type(out.dtype, self)}",
                   f"-DCT={cl_type(self.dtype, self)}", f"-DWHERE={int(self.mode != 'compare')}",
                   f"-DCMP={CMP.get(self.type, 'CMP_GT')}", f"-DFLAT={int(flat)}"]
        kernel = self.kernel("where_compare", options)
        kernel.set_args(None if arrays[0] is None else arrays[0].data, arrays[1].data,
                        arrays[2].data, outputs[0].data, meta_dev.data,
                        np.int32(len(out.shape)), np.int32(out.numel))
        self.launches = [Launch(kernel, (round_up(out.numel, 64),))]
