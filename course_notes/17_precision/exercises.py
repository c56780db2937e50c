"""Lesson 17 exercises: what TF32 and half do to a float, and how far that may move a GEMM.

Fill in the functions, then run `kuiper course check 17`. NumPy only: no OpenCL device needed
for them (the tests also run your bound against the engine's OpenCL layers where there is a
device). The answers are the engine's own functions of the same names, in
kuiper/core/precision.py (the precision tests and the tensor-core tests use them): try first,
read that file after.
"""

from __future__ import annotations

import numpy as np

U32 = 2.0 ** -24        # float32's unit roundoff
U_INPUT = 2.0 ** -11    # TF32's and half's: 10 bits of mantissa, rounded to nearest
ETA = {"fp32": 0.0, "tf32": 2.0 ** -137, "fp16": 2.0 ** -25}   # half the smallest subnormal


def round_tf32(x: np.ndarray) -> np.ndarray:
    """x (float32) rounded to TF32 as the tensor cores' `cvt.rna.tf32.f32` does; float32 out.

    TF32 keeps float32's sign and 8 exponent bits and the 10 highest of its 23 mantissa bits.
    Work on the bits: `np.ascontiguousarray(x, np.float32).view(np.uint32)`. Round to nearest,
    ties AWAY from zero ("rna"): add half a unit of the last kept bit (0x1000) and clear the 13
    dropped bits (mask 0xFFFFE000). A carry that runs out of the mantissa raises the exponent,
    which is exactly right (and from the largest float gives inf). inf and NaN (exponent bits
    all ones, 0x7F800000) must come back unchanged. Return `.view(np.float32)` of the bits.
    """
    raise NotImplementedError("lesson 17: write round_tf32")


def round_half(x: np.ndarray) -> np.ndarray:
    """x (float32) stored as IEEE half and loaded back (vstore_half, vload_half); float32 out.

    Write it from the format, not with np.float16 (the tests compare with np.float16 bit for
    bit). A half has 10 bits of mantissa: between 2^e and 2^(e+1) its values are 2^(e-10)
    apart, and below 2^-14 (the subnormals) they stay 2^-24 apart. So: find e (np.frexp gives
    |x| = m 2^E with m in [0.5, 1), so e = E - 1), the spacing 2^(max(e, -14) - 10), round
    x / spacing to the nearest integer with ties to EVEN (np.rint), multiply back; work in
    float64, where all of this is exact. 65504 is the largest half: whatever rounds above it
    (65520 and up) is inf, with x's sign. inf comes back unchanged, NaN as a NaN; -0.0 stays -0.0.
    """
    raise NotImplementedError("lesson 17: write round_half")


def gemm_error_bound(a: np.ndarray, b: np.ndarray, precision: str) -> np.ndarray:
    """How far C = a @ b computed in `precision` may be from the exact product of the float32
    inputs a (M x K) and b (K x N): an (M, N) float64 array, elementwise.

    The contract (kuiper/DESIGN.md, "Precision and its accuracy contract"): each input is
    rounded (|x - r(x)| <= u |x| + eta), the products of rounded inputs are exact, and their
    sum in float32 is off by at most 4 K u32 times the sum of their magnitudes. So, in float64
    (u32 = U32, and K = a.shape[1], the length of each sum):

        bound = (2 u + 4 K u32) (|A| @ |B|)
                + 2 eta (sum over k of |A[i, k]|  +  sum over k of |B[k, j]|)
                + K (2 eta^2 + 2^-149)

    with u = U_INPUT for "tf32" and "fp16", 0 for "fp32"; eta = ETA[precision]. The first line
    is a matrix product of the absolute values; the second adds row i's sum of |A| and column
    j's sum of |B| to element (i, j).
    Then the cases where nothing can be promised: if a value of row i of A rounds to inf or
    NaN in that precision (half overflows above 65504; an input may also be inf or NaN), the
    whole row i of the bound is inf; the same for column j of B. (Take |A| and |B| with
    non-finite values set to 0 before the products, so that no NaN appears; the rounding
    functions above tell which values do not survive: round_tf32, round_half, or none for
    fp32.)
    """
    raise NotImplementedError("lesson 17: write gemm_error_bound")
