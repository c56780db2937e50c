"""What a torch.fft.* operator computes, worked out once for both backends.

pnnx writes 18 FFT types (fft, ifft, rfft, irfft, hfft, ihfft, each as a 1-D, a 2-D and an n-D
form). They all reduce to one of three transforms over some dims:

    c2c  complex -> complex, same length (fft: forward, ifft: inverse)
    r2c  real -> complex; along the last transformed dim only the n // 2 + 1 non-redundant
         bins are kept (rfft: the other half is the complex conjugate of these)
    c2r  complex -> real; the inverse of r2c: the last dim holds n // 2 + 1 bins of a
         Hermitian spectrum and the output has n samples there (irfft)

and hfft / ihfft are irfft / rfft of the complex conjugate with the scaling convention swapped
(hfft is a *forward* transform of a Hermitian signal):

    hfftn(x, norm)  = irfftn(conj(x), norm=swap(norm))
    ihfftn(x, norm) = conj(rfftn(x, norm=swap(norm)))      swap: backward <-> forward

Every transform is computed unscaled, and the norm's factor is applied once at the end:
forward transforms multiply by 1 ("backward", the default), 1/N ("forward") or 1/sqrt(N)
("ortho"), inverse ones by 1/N, 1 or 1/sqrt(N); N is the product of the signal lengths.

Before transforming, the input is resized along each transformed dim to the signal length
(`n`, `s`): zero-padded at the end or cut. For c2r the half-spectrum dim is resized to
n // 2 + 1 bins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kuiper.layers.common.complex_types import complex_of, is_complex, real_of
from kuiper.layers.common.datamove import normalize_dims

# type -> (family, form): form "1" takes n and one dim; "2" takes s and dim=(-2,-1); "n" takes
# s and dim (None: the last len(s) dims, or all of them).
FFT_TYPES = {f"torch.fft.{family}{suffix}": (family, form)
             for family in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")
             for suffix, form in (("", "1"), ("2", "2"), ("n", "n"))}

# family -> (kind, inverse, conjugate input and output, swap the norm's meaning)
FAMILIES = {"fft": ("c2c", False, False), "ifft": ("c2c", True, False),
            "rfft": ("r2c", False, False), "irfft": ("c2r", True, False),
            "hfft": ("c2r", True, True), "ihfft": ("r2c", False, True)}
NORMS = ("backward", "forward", "ortho")
SWAPPED = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


@dataclass(frozen=True)
class FFTPlan:
    kind: str                       # "c2c", "r2c" or "c2r"
    inverse: bool                   # exponent sign: e^{-2 pi i ...} forward, e^{+...} inverse
    conjugate: bool                 # hfft / ihfft: conj the input (c2r) or the output (r2c)
    dims: tuple[int, ...]           # transformed dims; for r2c / c2r the last is the half dim
    sizes: tuple[int, ...]          # signal length per dim (c2r: the output length)
    scale: float                    # the norm's factor, applied once
    work_shape: tuple[int, ...]     # the input after resizing (complex), what is transformed
    out_shape: tuple[int, ...]
    out_dtype: np.dtype


class FFTParams:
    """The parameters of one torch.fft.* operator, read from its .param line."""

    def __init__(self, layer, op):
        self.family, self.form = FFT_TYPES[op.type]
        self.kind, self.inverse, self.conjugate = FAMILIES[self.family]
        norm = op.param("norm", None)
        norm = "backward" if norm is None else op.str_param("norm", choices=NORMS)
        # hfft / ihfft name their norm from the point of view of the Hermitian signal
        self.norm = SWAPPED[norm] if self.conjugate else norm
        if self.form == "1":
            n = op.param("n", None)
            self.sizes = None if n is None else [op.int_param("n")]
            self.dims = [op.int_param("dim", -1)]
        else:
            s = op.param("s", None)
            self.sizes = None if s is None else op.ints_param("s")
            default = [-2, -1] if self.form == "2" else None
            dims = op.param("dim", default)
            self.dims = None if dims is None else op.ints_param("dim", default=default)
        self.layer = layer

    def plan(self, shape: tuple[int, ...], dtype: np.dtype) -> FFTPlan:
        layer, rank = self.layer, len(shape)
        if self.kind == "r2c" and is_complex(dtype):
            raise layer.op.error(f"{self.family} takes a real input, got {np.dtype(dtype).name}"
                                 f" (use {self.family.replace('r', '', 1)} for complex inputs)")
        dims, sizes = self.dims, self.sizes
        if dims is None:
            dims = list(range(rank - len(sizes), rank)) if sizes is not None else list(range(rank))
        if sizes is not None and len(sizes) != len(dims):
            raise layer.op.error(f"s={sizes} and dim={dims} must have the same length")
        if rank == 0 or not dims:
            raise layer.shape_error(f"{self.family} needs at least one dim to transform; the "
                                    f"input has shape {shape}")
        if sizes is not None and len(dims) > rank:
            raise layer.shape_error(f"s={sizes} has more sizes than the input {shape} has dims")
        dims = normalize_dims(layer, dims, rank, "dim")
        sizes = [-1] * len(dims) if sizes is None else list(sizes)
        for i, d in enumerate(dims):
            if sizes[i] == -1:  # -1: the input's own length
                half_dim = self.kind == "c2r" and i == len(dims) - 1
                sizes[i] = 2 * (shape[d] - 1) if half_dim else shape[d]
            if sizes[i] < 1:
                raise layer.shape_error(f"signal length {sizes[i]} along dim {d} (input "
                                        f"{shape}): expected at least 1")
        work = list(shape)
        for d, n in zip(dims, sizes):
            work[d] = n
        out = list(work)
        if self.kind == "c2r":
            work[dims[-1]] = sizes[-1] // 2 + 1
        elif self.kind == "r2c":
            out[dims[-1]] = sizes[-1] // 2 + 1
        total = math.prod(sizes)
        forward_scale = {"backward": 1.0, "forward": 1.0 / total, "ortho": total ** -0.5}
        inverse_scale = {"backward": 1.0 / total, "forward": 1.0, "ortho": total ** -0.5}
        scale = (inverse_scale if self.inverse else forward_scale)[self.norm]
        out_dtype = real_of(layer, dtype) if self.kind == "c2r" else complex_of(layer, dtype)
        return FFTPlan(self.kind, self.inverse, self.conjugate, tuple(dims), tuple(sizes), scale,
                       tuple(work), tuple(out), out_dtype)


def numpy_fft(x: np.ndarray, plan: FFTPlan) -> np.ndarray:
    """The plan computed with numpy.fft (the CPU layer, and the reference of the kernels)."""
    if plan.conjugate and plan.kind == "c2r":
        x = np.conj(x)
    axes, s = list(plan.dims), list(plan.sizes)
    if plan.kind == "c2c":  # unscaled both ways: "backward" for fftn, "forward" for ifftn
        y = (np.fft.ifftn(x, s, axes, norm="forward") if plan.inverse
             else np.fft.fftn(x, s, axes, norm="backward"))
    elif plan.kind == "r2c":
        y = np.fft.rfftn(x, s, axes, norm="backward")
    else:
        y = np.fft.irfftn(x, s, axes, norm="forward")
    if plan.scale != 1.0:
        y = y * plan.scale
    if plan.conjugate and plan.kind == "r2c":
        y = np.conj(y)
    return np.ascontiguousarray(y, dtype=plan.out_dtype)
