"""Which dtypes a layer takes, and the error for the others: one message for both backends.

PyTorch refuses many operator/dtype pairs (`relu` of bools, `hardswish` of integers) and
promotes others (`sigmoid` of an int8 tensor is float32). A layer that meets a dtype it was not
written for must say so by name, not fail inside NumPy or, on OpenCL, run a float kernel on a
byte buffer. Layers call `expect_dtype` from `infer`, so both backends refuse the same inputs
with the same message before anything runs.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

FLOATS = tuple(np.dtype(d) for d in (np.float16, np.float32, np.float64))
INTEGERS = tuple(np.dtype(d) for d in (np.uint8, np.int8, np.int16, np.int32, np.int64))
COMPLEX = tuple(np.dtype(d) for d in (np.complex64, np.complex128))


def expect_dtype(layer, spec, accepted: Iterable[np.dtype], index: int = 0) -> None:
    """Refuse input `index` (described by `spec`) unless its dtype is among `accepted`."""
    accepted = tuple(accepted)
    if spec.dtype in accepted:
        return
    name = layer.op.inputs[index].name if index < len(layer.op.inputs) else str(index)
    hint = ("cast it to float32 first (x.float() in PyTorch)" if any(d.kind == "f"
                                                                     for d in accepted)
            else "cast it first")
    raise layer.op.error(f"input {index} ('{name}') is {spec.dtype.name}, but {layer.type} "
                         f"takes {', '.join(d.name for d in accepted)}: {hint}")


def expect_floats(layer, specs) -> None:
    """Refuse any input of `layer` that is not floating-point: a layer whose weights may come
    as inputs (F.conv2d, F.linear, F.layer_norm ...) computes in float, and a `pnnx.Attribute`
    re-declared `i32` (the same size as `f32`, so the .bin accepts it) would otherwise feed it
    float bytes read as integers, outputs near 1e10 and no error. PyTorch refuses these too."""
    for index, spec in enumerate(specs):
        expect_dtype(layer, spec, FLOATS, index)
