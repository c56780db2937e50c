"""Complex tensors in and out: torch.complex, torch.real, torch.imag, torch.view_as_real,
torch.view_as_complex.

Kuiper stores a complex tensor as a NumPy complex64 (or complex128) array: each element is two
floats, real part first. On OpenCL the buffer holds the same bytes and kernels read it as
`float2` (layers/common/complex_types.py), so `view_as_real` and `view_as_complex` move no data
on either backend: they only reinterpret the bytes with another shape.

    torch.complex(real, imag)   two real tensors (broadcast together) -> complex
    torch.real(z), torch.imag(z)  complex -> one part (torch.real of a real tensor is itself)
    torch.view_as_real(z)       complex (..., ) -> real (..., 2)
    torch.view_as_complex(x)    real (..., 2) -> complex (...)
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer
from kuiper.layers.common.complex_types import (
    COMPLEX_OF,
    REAL_OF,
    is_complex,
    require_complex,
    require_real_float,
)


@register("torch.complex", backend="cpu")
class Complex(Layer):
    """real + 1j * imag, with NumPy broadcasting; both parts must have the same float dtype."""

    def infer(self, inputs):
        self.expect_inputs(inputs, 2)
        real, imag = inputs
        require_real_float(self, real.dtype, "real input")
        require_real_float(self, imag.dtype, "imag input")
        if real.dtype != imag.dtype:
            raise self.op.error(f"the real part is {real.dtype.name} and the imaginary part "
                                f"{imag.dtype.name}: expected the same dtype (as PyTorch does)")
        try:
            shape = tuple(np.broadcast_shapes(real.shape, imag.shape))
        except ValueError:
            raise self.shape_error(f"the real part {real.shape} and the imaginary part "
                                   f"{imag.shape} do not broadcast together") from None
        return [TensorSpec(shape, COMPLEX_OF[real.dtype])]

    def forward(self, inputs):
        real, imag = inputs
        out = np.empty(np.broadcast_shapes(real.shape, imag.shape), COMPLEX_OF[real.dtype])
        out.real, out.imag = real, imag
        return [out]


class ComplexPart(Layer):
    """One part of a complex tensor; `part` is "real" or "imag"."""

    part = ""

    def infer(self, inputs):
        self.expect_inputs(inputs, 1)
        z = inputs[0]
        if self.part == "imag" or is_complex(z.dtype):
            require_complex(self, z.dtype)
            return [TensorSpec(z.shape, REAL_OF[z.dtype])]
        return [TensorSpec(z.shape, z.dtype)]  # torch.real of a real tensor: the tensor itself

    def forward(self, inputs):
        z = inputs[0]
        if not is_complex(z.dtype):
            return [z]
        # a copy of the strided part (np.ascontiguousarray would make a 0-d tensor 1-d)
        return [np.array(z.real if self.part == "real" else z.imag, order="C")]


@register("torch.real", backend="cpu")
class Real(ComplexPart):
    part = "real"


@register("torch.imag", backend="cpu")
class Imag(ComplexPart):
    part = "imag"


@register("torch.view_as_real", backend="cpu")
class ViewAsReal(Layer):
    def infer(self, inputs):
        self.expect_inputs(inputs, 1)
        z = inputs[0]
        require_complex(self, z.dtype)
        return [TensorSpec(z.shape + (2,), REAL_OF[z.dtype])]

    def forward(self, inputs):
        z = np.ascontiguousarray(inputs[0])
        return [z.view(REAL_OF[z.dtype]).reshape(z.shape + (2,))]


@register("torch.view_as_complex", backend="cpu")
class ViewAsComplex(Layer):
    def infer(self, inputs):
        self.expect_inputs(inputs, 1)
        x = inputs[0]
        require_real_float(self, x.dtype)
        if not x.shape or x.shape[-1] != 2:
            raise self.shape_error(f"view_as_complex needs a last dim of size 2 (real, imag); "
                                   f"the input has shape {x.shape}")
        return [TensorSpec(x.shape[:-1], COMPLEX_OF[x.dtype])]

    def forward(self, inputs):
        x = np.ascontiguousarray(inputs[0])
        return [x.view(COMPLEX_OF[x.dtype]).reshape(x.shape[:-1])]
