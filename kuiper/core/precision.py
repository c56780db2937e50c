"""The precisions a graph may compute its matrix products in: `kuiper.load(precision=...)`.

    fp32  float32 everywhere: exact to float32, the default
    tf32  GEMM inputs rounded to TF32 (float's range, 10 bits of mantissa), sums in float32:
          what PyTorch runs with torch.backends.cuda.matmul.allow_tf32 (cuDNN's default for
          convolutions)
    fp16  GEMM inputs converted to half (10 bits, range 6e-5 .. 65504), sums in float32, the
          weights stored as half: what `model.half()` computes its products with

Which operators take it is decided by a graph pass (kuiper/passes/plan_precision.py); how the
tensor cores are reached, by clkernels/gemm_mma.h. Its error bounds: kuiper/DESIGN.md,
"Precision and its accuracy contract".
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kuiper.core.errors import KuiperError

PRECISIONS = ("fp32", "tf32", "fp16")


def checked_precision(precision: Any) -> str:
    """`precision` if it is one Kuiper computes in, else a KuiperError naming them."""
    if not isinstance(precision, str) or precision not in PRECISIONS:
        raise KuiperError(f"precision={precision!r}: expected one of "
                          f"{', '.join(map(repr, PRECISIONS))} ('fp32' is exact float32, "
                          "'tf32' and 'fp16' let GEMMs use tensor cores: "
                          "kuiper/passes/plan_precision.py)")
    return precision


# --- what each precision does to a GEMM's inputs, and the error that leaves ------------------
# (lesson 17 teaches these; tests/opencl/mma_harness.py and the precision tests use them)

U32 = 2.0 ** -24        # float32's unit roundoff: a sum of two floats is off by <= u |sum|
U_INPUT = 2.0 ** -11    # TF32's and half's: 10 bits of mantissa, rounded to nearest
# Half of the smallest subnormal: the absolute error of rounding a value too small for the
# precision's normal range (half: below 2^-14 = 6.1e-5; TF32 has float's range, and float's
# subnormals lose 13 bits of their spacing 2^-149)
ETA = {"fp32": 0.0, "tf32": 2.0 ** -137, "fp16": 2.0 ** -25}
HALF_MAX = 65504.0      # the largest half; from 65520 on, a value rounds to inf


def round_tf32(x: np.ndarray) -> np.ndarray:
    """x (float32) rounded to TF32 as the tensor cores' cvt.rna.tf32.f32 does: the 13 lowest
    mantissa bits dropped, to nearest, ties away from zero (clkernels/gemm_mma.h, mma_tf32).

    In the bits of a float: adding 0x1000 (half the unit of the last bit kept) carries into the
    kept bits exactly when the dropped ones are half a unit or more, then the mask drops them.
    A carry out of the mantissa raises the exponent (1.11..1 -> 10.0), which is right, and from
    the largest exponent reaches inf, which is right too. inf and NaN are left as they are."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32)
    special = (bits & np.uint32(0x7F800000)) == np.uint32(0x7F800000)
    rounded = (bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)
    return np.where(special, bits, rounded).view(np.float32)


def round_half(x: np.ndarray) -> np.ndarray:
    """x (float32) stored as IEEE half and loaded back (vstore_half then vload_half; for every
    number the same as x.astype(np.float16).astype(np.float32), and a NaN comes back a NaN: its
    payload bits are no part of the contract, NumPy's float16 shortens them), written from the
    format:

    a half has 10 bits of mantissa, so between 2^e and 2^(e+1) its values are 2^(e - 10) apart;
    below 2^-14 (the subnormals) they stay 2^-24 apart. Round x / spacing to the nearest integer,
    ties to even (np.rint), and multiply back. Above 65504, the largest half, the next value
    would be 65536: what rounds there (65520 and up) is inf."""
    x = np.asarray(x, np.float32)
    with np.errstate(invalid="ignore"):                # (a signalling NaN's cast warns)
        wide = x.astype(np.float64)                    # every step below is exact in float64
        _, e = np.frexp(np.abs(wide))                  # |x| = m 2^e with m in [0.5, 1)
        spacing = np.ldexp(1.0, np.maximum(e - 1, -14) - 10)
        rounded = np.rint(wide / spacing) * spacing
    rounded = np.where(np.abs(rounded) > HALF_MAX, np.copysign(np.inf, wide), rounded)
    return np.where(np.isfinite(wide), rounded, wide).astype(np.float32)


ROUND = {"tf32": round_tf32, "fp16": round_half, "fp32": lambda x: np.asarray(x, np.float32)}


def gemm_error_bound(a: np.ndarray, b: np.ndarray, precision: str) -> np.ndarray:
    """How far a GEMM computed in `precision` may be from the exact product of the float32
    matrices a (M x K) and b (K x N): an (M, N) float64 array, elementwise.

    The tensor cores' contract (kuiper/DESIGN.md, "Precision and its accuracy contract"): each
    input is rounded (|x - r(x)| <= u |x| + eta), the products of rounded inputs are exact, and
    they are summed in float32 (off by at most 4 K u32 times the sum of their magnitudes; the 4
    leaves room for the tensor cores' own order of additions). To first order, and with the
    second order terms folded in where the constants leave room:

        bound = (2 u + 4 K u32) (|A| @ |B|)                  the two roundings, the sums
                + 2 eta (sum_k |A[i, k]| + sum_k |B[k, j]|)  values too small for the format
                + K (2 eta^2 + 2^-149)                       products below any format's reach

    with u = U_INPUT (0 for fp32), eta = ETA[precision]. Where an input rounds to inf (half
    overflows above 65504) or is not finite, nothing is promised: the bound of its row of C
    (a value of A) or column (of B) is inf."""
    checked_precision(precision)
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise KuiperError(f"gemm_error_bound: a {a.shape} and b {b.shape} should be matrices "
                          "(M x K) and (K x N) with the same K")
    k = a.shape[1]
    u = 0.0 if precision == "fp32" else U_INPUT
    eta = ETA[precision]
    with np.errstate(invalid="ignore", over="ignore"):
        abs_a, abs_b = np.nan_to_num(np.abs(a), posinf=0.0), np.nan_to_num(np.abs(b), posinf=0.0)
        bound = (2 * u + 4 * k * U32) * (abs_a @ abs_b)
        bound += 2 * eta * (abs_a.sum(axis=1)[:, None] + abs_b.sum(axis=0)[None, :])
        bound += k * (2 * eta ** 2 + 2.0 ** -149)
    rounding = ROUND[precision]
    bad_rows = ~np.isfinite(rounding(a.astype(np.float32))).all(axis=1)
    bad_cols = ~np.isfinite(rounding(b.astype(np.float32))).all(axis=0)
    bound[bad_rows, :] = np.inf
    bound[:, bad_cols] = np.inf
    return bound
