"""The guard between the graph's declared dtypes and what each OpenCL kernel reads and writes.

A kernel written for `__global const float *x` reads 4 bytes per element. Bound to the buffer of
a uint8 tensor it reads (and, for an output, writes) three bytes past its end for every byte
of the tensor: memory corruption, not an error message. Bound to an int32 tensor it reads the
right number of bytes but the wrong meaning: silently wrong results.

No layer should ever bind such a buffer, but a check written in each layer is a check a future
layer forgets. So the executor checks every layer after `bind`, before anything runs, from two
facts it does not have to take on trust:

- what the kernel reads: OpenCL tells, for a program built with `-cl-kernel-arg-info` (the
  runtime builds every program with it), the type name of each argument (`float*`, `uchar*`);
- what was bound: kernels made by `OpenCLRuntime.kernel_of` (so every `layer.kernel(...)`)
  remember the arguments given to `set_args` / `set_arg`.

An argument bound to the buffer of one of the operator's inputs or outputs must have the
element type of that operand's declared dtype (`float` for float32, `half` for float16, ...),
a vector of it (`float4` loads four float32 elements at once), or the unsigned integer of the
same size (`uint` for float32: kernels that only copy bits, see layers/opencl_helpers/
cl_types.py). A layer whose kernels read a dtype some other way says so in
`OpenCLLayer.element_types`, e.g. complex64 read as interleaved `float` pairs by an FFT.
Anything else makes the operator run its CPU layer (OpenCLLayer.fall_back_to_host), so the
answer is the CPU backend's; `graph.fallbacks` lists it and `layer.fallback_reason` names the
operand, its dtype, the kernel and what the kernel reads. (A driver that ignores
-cl-kernel-arg-info answers no argument types: then nothing can be checked here, and only the
layers' own checks, such as `falls_back_unless`, protect the buffers.)

The kernels also index with 32-bit ints: `oversized` says when a tensor has too many elements
for them (the executor refuses it, naming the operator).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

# The OpenCL type with the same meaning as each dtype (bools are 0/1 bytes).
SAME_MEANING = {"float32": "float", "float64": "double", "float16": "half", "int64": "long",
                "int32": "int", "int16": "short", "int8": "char", "uint8": "uchar",
                "bool": "uchar", "complex64": "float2", "complex128": "double2"}
# The unsigned integer that copies an element of each size bit for bit.
BIT_COPY = {1: "uchar", 2: "ushort", 4: "uint", 8: "ulong"}
SCALAR_SIZES = {"char": 1, "uchar": 1, "short": 2, "ushort": 2, "int": 4, "uint": 4,
                "long": 8, "ulong": 8, "half": 2, "float": 4, "double": 8}
_POINTER = re.compile(r"^(?:const\s+|volatile\s+|restrict\s+)*([a-z]+?)(\d*)\s*\*$")

# Kernels index with `int` (get_global_id cast to int, sizes passed as np.int32): a tensor of
# more elements than this cannot be addressed by them.
INT_MAX = 2**31 - 1


def kernel_class(cl) -> type:
    """cl.Kernel, remembering its arguments (the executor's check reads them after bind)."""
    return _recording_kernel(cl)


@functools.cache
def _recording_kernel(cl) -> type:
    class RecordingKernel(cl.Kernel):
        """A cl.Kernel that remembers what was bound to it (`bound`: index -> argument)."""

        def set_args(self, *args):
            self.bound = dict(enumerate(args))
            return super().set_args(*args)

        def set_arg(self, index, value):
            self.__dict__.setdefault("bound", {})[index] = value
            return super().set_arg(index, value)

    return RecordingKernel


def element_type(type_name: str) -> tuple[str, int] | None:
    """`'const float4*'` -> ('float', 4); None for a non-pointer or an unknown (struct) type."""
    match = _POINTER.match(type_name.strip())
    if match is None or match.group(1) not in SCALAR_SIZES:
        return None
    return match.group(1), int(match.group(2) or 1)


def reads_correctly(type_name: str, dtype: np.dtype, declared: Sequence[str] = ()) -> bool:
    """Does a kernel argument of `type_name` read/write elements of `dtype` correctly?"""
    parsed = element_type(type_name)
    if parsed is None:
        return True  # not a pointer to a scalar or vector type: nothing we can judge
    base, width = parsed
    spelled = base if width == 1 else f"{base}{width}"
    if spelled in declared:
        return True
    same = SAME_MEANING.get(dtype.name)
    if same is None:
        return False
    if spelled == same or (base == same and same in SCALAR_SIZES):  # float4 loads of float32
        return True
    # An unsigned integer of the element's size moves its bits without interpreting them; as a
    # vector it moves several elements (uint4: four float32) or one wide element (uint2: one
    # complex64).
    size = SCALAR_SIZES[base]
    return base == BIT_COPY[size] and dtype.itemsize in (size, size * width)


def misread(layer, arrays: Sequence[tuple[str, Any, np.dtype]]) -> str | None:
    """Why a launch of `layer` would read or write an operand with the wrong element type
    (None: every bound operand buffer matches). `arrays`: (what, device array, declared dtype)
    for the operator's inputs and outputs."""
    by_buffer = {}
    for what, array, dtype in arrays:
        if array is not None and getattr(array, "base_data", None) is not None:
            by_buffer.setdefault(array.base_data.int_ptr, (what, np.dtype(dtype)))
    declared = getattr(layer, "element_types", {})
    for launch in _each_launch(getattr(layer, "launches", ())):
        kernel = launch.kernel
        for index, value in getattr(kernel, "bound", {}).items():
            if not hasattr(value, "int_ptr") or value.int_ptr not in by_buffer:
                continue
            what, dtype = by_buffer[value.int_ptr]
            type_name = _arg_type(kernel, index)
            if type_name is None:
                break  # built without -cl-kernel-arg-info (a driver that ignores it)
            if not reads_correctly(type_name, dtype, declared.get(dtype.name, ())):
                return (f"{what} is {dtype.name}, but argument {index} of the OpenCL kernel "
                        f"'{kernel.function_name}' reads {type_name.rstrip('*')} elements "
                        f"({_takes(type_name)})")
    return None


def _each_launch(launches):
    """Every launch once, those a `Steps` repeats per time step included (layers/opencl_base.py
    sits above this floor: its `each_launch` cannot be imported here, so this reads the same
    shape by duck typing)."""
    for item in launches:
        yield from getattr(item, "launches", None) or [item]


def _takes(type_name: str) -> str:
    parsed = element_type(type_name)
    wanted = [name for name, same in SAME_MEANING.items() if parsed and same == parsed[0]]
    return f"it takes {' or '.join(wanted) or 'another dtype'} there"


def _arg_type(kernel, index: int) -> str | None:
    import pyopencl as cl
    try:
        return kernel.get_arg_info(index, cl.kernel_arg_info.TYPE_NAME)
    except cl.Error:
        return None


def oversized(layer, specs: Sequence[tuple[str, Any]]) -> str | None:
    """Why the tensors are too large for 32-bit indices (None: they are not, or the layer
    indexes with 64 bits: `wide_indices`). `specs`: (what, TensorSpec) of the operands."""
    if getattr(layer, "wide_indices", False):
        return None
    for what, spec in specs:
        if spec is not None and spec.numel > INT_MAX:
            return (f"{what} has {spec.numel} elements ({spec}), more than the 32-bit ints the "
                    f"OpenCL kernels of {type(layer).__name__} index with ({INT_MAX})")
    return None
