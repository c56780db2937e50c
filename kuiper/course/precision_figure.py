"""Lesson 17's figure: how far a GEMM computed in tf32 / fp16 lands from float32, as K grows.

The products are emulated the way the tensor cores compute them (kuiper/core/precision.py): the
inputs rounded (round_tf32, round_half), each product of the rounded inputs exact in float32
(two 11-bit mantissas make at most 22 bits; the fp32 series multiplies unrounded inputs, whose
products round), the sums in float32 one after the other. The error is measured against
the exact product of the float32 inputs (float64) and divided by |A| @ |B|, the scale every
bound of gemm_error_bound multiplies: the dots are what happened, the lines what is promised.
Seeded NumPy, no device: the same drawing on every machine. kuiper/course/figures.py lists it
with the others.
"""

from __future__ import annotations

import math

import numpy as np

from kuiper.core.precision import ROUND, U32, U_INPUT
from kuiper.course.svg import Svg, _n

KS = (16, 64, 256, 1024, 4096, 16384)   # the lengths of the dot products drawn
SIZE = 8                                # C is SIZE x SIZE per K
COLOURS = {"fp32": "#555555", "tf32": "#3182bd", "fp16": "#e6550d"}


def emulated_gemm(a: np.ndarray, b: np.ndarray, precision: str) -> np.ndarray:
    """a @ b as a tensor core computes it: inputs rounded to `precision`, exact products, float32
    sums in order of k (np.cumsum adds one term after the other)."""
    rounding = ROUND[precision]
    products = rounding(a)[:, :, None] * rounding(b)[None, :, :]   # (M, K, N), float32: exact
    return np.cumsum(products, axis=1, dtype=np.float32)[:, -1, :]


def relative_errors(seed: int = 17) -> dict[str, list[float]]:
    """{precision: [max over C of |C - A @ B| / (|A| @ |B|), one per K of KS]}."""
    rng = np.random.default_rng(seed)
    found: dict[str, list[float]] = {p: [] for p in ("fp32", "tf32", "fp16")}
    for k in KS:
        a = rng.standard_normal((SIZE, k)).astype(np.float32)
        b = rng.standard_normal((k, SIZE)).astype(np.float32)
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        exact = (a64[:, :, None] * b64[None, :, :]).sum(axis=1)    # NumPy's sum, not BLAS
        scale = (np.abs(a64)[:, :, None] * np.abs(b64)[None, :, :]).sum(axis=1)
        for precision in found:
            c = emulated_gemm(a, b, precision).astype(np.float64)
            found[precision].append(float((np.abs(c - exact) / scale).max()))
    return found


def bound(precision: str, k: int) -> float:
    """gemm_error_bound's factor of |A| @ |B| (its absolute terms are far below these values)."""
    return (0.0 if precision == "fp32" else 2 * U_INPUT) + 4 * k * U32


def precision_error() -> str:
    errors = relative_errors()
    width, height, left, top, plot_w, plot_h = 680, 420, 80, 66, 400, 290
    y0, y1 = -8, -2                               # decades of relative error
    x0, x1 = math.log2(KS[0]), math.log2(KS[-1])

    def px(k: float) -> float:
        return left + (math.log2(k) - x0) / (x1 - x0) * plot_w

    def py(value: float) -> float:
        value = min(max(value, 10.0 ** y0), 10.0 ** y1)
        return top + plot_h - (math.log10(value) - y0) / (y1 - y0) * plot_h

    svg = Svg(width, height, "relative error of a GEMM against float32, and its bound, "
              "as K grows")
    svg.text(width / 2, 24, "Error of C = A @ B against the float32 inputs' exact product",
             size=14, weight="bold")
    svg.text(width / 2, 42, f"{SIZE} x K x {SIZE}, standard normal inputs, tensor cores emulated "
             "(kuiper/course/precision_figure.py)", size=10, fill="#555")
    svg.rect(left, top, plot_w, plot_h, fill="#fcfcfc", stroke="#999")
    for power in range(y0, y1 + 1):
        y = py(10.0 ** power)
        svg.parts.append(f'<line x1="{left}" y1="{_n(y)}" x2="{left + plot_w}" y2="{_n(y)}" '
                         'stroke="#e5e5e5" stroke-width="0.8"/>')
        svg.text(left - 6, y + 4, f"1e{power}", size=10, anchor="end", fill="#555")
    for k in KS:
        svg.text(px(k), top + plot_h + 16, k, size=10, fill="#555")
    svg.text(left + plot_w / 2, top + plot_h + 36, "K, the length of each dot product", size=11)
    svg.parts.append(f'<text x="20" y="{_n(top + plot_h / 2)}" font-size="11" '
                     f'transform="rotate(-90 20 {_n(top + plot_h / 2)})" text-anchor="middle" '
                     'font-family="DejaVu Sans, Helvetica, Arial, sans-serif">'
                     'max |C - A @ B| / (|A| @ |B|)</text>')
    for precision, colour in COLOURS.items():
        # the bound: a line (tf32 and fp16 share it: both keep 10 bits), dashed for fp32
        points = " ".join(f"{_n(px(k))},{_n(py(bound(precision, k)))}" for k in KS)
        dash = ' stroke-dasharray="5 3"' if precision == "fp32" else ""
        if precision != "fp16":
            svg.parts.append(f'<polyline points="{points}" fill="none" stroke="{colour}" '
                             f'stroke-width="1.5"{dash}/>')
        shift = {"fp32": 0, "tf32": -4, "fp16": 4}[precision]    # tf32 and fp16 nearly meet
        for k, value in zip(KS, errors[precision]):
            svg.parts.append(f'<circle cx="{_n(px(k) + shift)}" cy="{_n(py(value))}" r="4" '
                             f'fill="{colour}" stroke="white" stroke-width="1"/>')
    legend_x, legend_y = left + plot_w + 20, top + 10
    rows = [("tf32 measured", "tf32", "dot"), ("fp16 measured", "fp16", "dot"),
            ("fp32 measured", "fp32", "dot"), ("bound, tf32 and fp16:", "tf32", "line"),
            ("  (2 u + 4 K u32)", "tf32", "text"), ("bound, fp32: 4 K u32", "fp32", "dash")]
    for i, (label, precision, mark) in enumerate(rows):
        y = legend_y + i * 22
        colour = COLOURS[precision]
        if mark == "dot":
            svg.parts.append(f'<circle cx="{legend_x + 8}" cy="{_n(y - 4)}" r="4" '
                             f'fill="{colour}"/>')
        elif mark in ("line", "dash"):
            dash = ' stroke-dasharray="5 3"' if mark == "dash" else ""
            svg.parts.append(f'<line x1="{legend_x}" y1="{_n(y - 4)}" x2="{legend_x + 16}" '
                             f'y2="{_n(y - 4)}" stroke="{colour}" stroke-width="1.5"{dash}/>')
        svg.text(legend_x + 22, y, label, size=10, anchor="start")
    crossing = int(2 * U_INPUT / (4 * U32))
    notes = ["u = 2^-11 per rounded input,", "u32 = 2^-24 per float32 sum.",
             "tf32 and fp16 dots coincide:", "the same 10 bits of mantissa.",
             "The inputs' rounding dominates", f"the bound until K = {crossing}."]
    for i, line in enumerate(notes):
        svg.text(legend_x, legend_y + 150 + i * 15, line, size=10, anchor="start", fill="#555")
    return svg.render()
