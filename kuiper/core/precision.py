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
