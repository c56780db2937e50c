"""Elementwise activations: one tiny class per PyTorch activation, all on one base class.

Every activation reads at most three float parameters and applies `y = f(x)` to each element,
so the shared machinery lives in `Activation`:

- `params` names the parameters and their PyTorch defaults, in a fixed order; `from_operator`
  reads them (ints are accepted where floats are meant: pnnx writes `max_val=3`), and the
  OpenCL twin passes the same values, in the same order, as the kernel arguments `p0 p1 p2`;
- `compute(x, *values)` is the NumPy formula.

ReLU has its own stem (it is the course's first layer); clamp reuses this base
(layers/cpu/clamp.py).

The formulas are written in the *numerically stable* form, the one PyTorch uses too:
`exp(x)` overflows float32 above x = 88, so no formula here may exponentiate a large positive
number, and `log(1 + tiny)` loses every digit unless written `log1p`.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.base import ElementwiseLayer
from kuiper.layers.common.input_dtypes import COMPLEX, FLOATS, INTEGERS, expect_dtype

# SELU's two constants, from "Self-Normalizing Neural Networks" (Klambauer et al., 2017).
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


class Activation(ElementwiseLayer):
    """y = compute(x, *param_values); subclasses set `params` and write `compute`."""

    fusable_activation = True  # may become a convolution's epilogue (kuiper/passes/)

    params: ClassVar[dict[str, float | None]] = {}  # name -> PyTorch default (None: required)
    # The dtypes PyTorch computes and keeps: floats for all; integers where the output keeps
    # them (relu6, hardtanh, threshold, clamp); complex where PyTorch defines it (sigmoid ...).
    # Others are refused by name (layers/common/input_dtypes.py), on both backends.
    int_inputs: ClassVar[bool] = False
    complex_inputs: ClassVar[bool] = False

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.values = [layer.read_param(name, default) for name, default in cls.params.items()]
        return layer

    def read_param(self, name: str, default: Any) -> float:
        """One parameter as a float; subclasses with non-numeric parameters override this."""
        if default is None:
            return self.op.float_param(name)
        return self.op.float_param(name, default)

    def compute(self, x: np.ndarray, *values: float) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__}.compute")

    def infer(self, inputs):
        specs = super().infer(inputs)
        self.accept_input(inputs[0])
        return specs

    def accept_input(self, spec) -> None:
        """Refuse a dtype this activation does not take; remember the one it gets, for
        `forward` (a constant folded from an expression arrives as a Python number)."""
        expect_dtype(self, spec, FLOATS + INTEGERS * self.int_inputs
                     + COMPLEX * self.complex_inputs)
        self.in_dtype = spec.dtype

    def forward(self, inputs):
        x = np.asarray(inputs[0], getattr(self, "in_dtype", None))
        # a 0-D input is computed as one value of 1-D: NumPy turns a 0-D array into a scalar
        # after one operation, and the formulas write into their temporaries (out=)
        flat = x.reshape(1) if x.ndim == 0 else x
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            y = self.compute(flat, *self.values)
        return [np.asarray(y, dtype=x.dtype).reshape(x.shape)]


def sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)), in place in one buffer: no branch on the sign of x is needed.

    Below x = -88 (float32) exp(-x) overflows to inf, and 1 / (1 + inf) = 0 is the right
    limit, so the overflow is harmless (and silenced). A branch-free form was first written as
    (1 + tanh(x / 2)) / 2, which cannot overflow, but NumPy's float32 tanh costs twice its exp
    on an AVX2 CPU (2.8 against 1.5 ns per value): SiLU over 819,200 values (a YOLOv5s layer's)
    took 3.5-4.5 ms that way, 2.2-2.6 this way. Complex inputs keep the tanh form: exp of a
    complex number overflows into inf + nan*j, where tanh stays finite.
    """
    if np.iscomplexobj(x):
        y = np.multiply(x, x.dtype.type(0.5))
        np.tanh(y, out=y)
        y += x.dtype.type(1)
        y *= x.dtype.type(0.5)
        return y
    y = _one_plus_exp_minus(x)
    return np.reciprocal(y, out=y)


def _one_plus_exp_minus(x: np.ndarray) -> np.ndarray:
    """1 + exp(-x) in a new buffer, the denominator of sigmoid and SiLU: inf below x = -88
    (float32), where both take their right limits from it, so the overflow is silenced."""
    y = np.negative(x)
    with np.errstate(over="ignore"):
        np.exp(y, out=y)
    y += y.dtype.type(1)
    return y


def silu(x: np.ndarray) -> np.ndarray:
    """x * sigmoid(x) = x / (1 + exp(-x)): sigmoid's passes, with the divide doing the product
    (SiLU runs on the largest tensors of a YOLO). x = -inf gives NaN, as in PyTorch."""
    if np.iscomplexobj(x):
        y = sigmoid(x)
        y *= x
        return y
    y = _one_plus_exp_minus(x)
    with np.errstate(invalid="ignore"):   # -inf / inf
        return np.divide(x, y, out=y)


def softplus(x: np.ndarray, beta: float = 1.0, threshold: float = 20.0) -> np.ndarray:
    """log(1 + exp(beta x)) / beta; above `threshold` it equals x to float precision."""
    bx = x * x.dtype.type(beta)
    # The masked-off branch still runs on every element: clip it so it cannot overflow.
    soft = np.log1p(np.exp(np.minimum(bx, threshold))) / x.dtype.type(beta)
    return np.where(bx > threshold, x, soft)


def horner(coefficients: tuple, t: np.ndarray) -> np.ndarray:
    """The polynomial (highest power first) at t, in t's precision, in one new buffer."""
    scalar = t.dtype.type
    value = t * scalar(coefficients[0])
    value += scalar(coefficients[1])
    for coefficient in coefficients[2:]:
        value *= t
        value += scalar(coefficient)
    return value


@register("nn.ReLU6", "F.relu6", backend="cpu")
class ReLU6(Activation):
    int_inputs = True

    def compute(self, x):
        return np.clip(x, 0, 6)  # keeps NaN, as torch does

    def in_place_form(self):
        return relu6_into


def relu6_into(x: np.ndarray, out: np.ndarray) -> None:
    np.clip(x, 0, 6, out=out)


@register("nn.LeakyReLU", "F.leaky_relu", backend="cpu")
class LeakyReLU(Activation):
    params: ClassVar[dict[str, float | None]] = {"negative_slope": 0.01}

    def compute(self, x, slope):
        return np.where(x > 0, x, x * x.dtype.type(slope))


@register("nn.RReLU", "F.rrelu", backend="cpu")
class RReLU(Activation):
    """Randomized leaky ReLU at inference: PyTorch's eval mode draws no random slope but uses
    the middle of the range, (lower + upper) / 2, so it is a LeakyReLU with that slope."""

    params: ClassVar[dict[str, float | None]] = {"lower": 1.0 / 8, "upper": 1.0 / 3}

    def compute(self, x, lower, upper):
        return np.where(x >= 0, x, x * x.dtype.type((lower + upper) / 2))


@register("nn.Sigmoid", "F.sigmoid", "torch.sigmoid", backend="cpu")
class Sigmoid(Activation):
    complex_inputs = True

    def compute(self, x):
        return sigmoid(x)


@register("nn.SiLU", "F.silu", backend="cpu")
class SiLU(Activation):
    complex_inputs = True

    def compute(self, x):
        return silu(x)


@register("nn.Hardswish", "F.hardswish", backend="cpu")
class Hardswish(Activation):
    def compute(self, x):
        return x * np.minimum(np.maximum(x + 3, 0), 6) / 6


@register("nn.Hardsigmoid", "F.hardsigmoid", backend="cpu")
class Hardsigmoid(Activation):
    def compute(self, x):
        return np.minimum(np.maximum(x + 3, 0), 6) / 6


@register("nn.GELU", "F.gelu", backend="cpu")
class GELU(Activation):
    """x * Phi(x). `approximate=tanh` is the tanh fit of the Gaussian CDF (GPT-2's GELU).

    The string parameter becomes the number 0 (exact) or 1 (tanh), so it travels to the OpenCL
    kernel like any other parameter.
    """

    params: ClassVar[dict[str, float | None]] = {"approximate": 0.0}

    def read_param(self, name, default):
        return float(self.op.str_param(name, "none", choices=("none", "tanh")) == "tanh")

    def compute(self, x, use_tanh):
        if use_tanh:
            inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)
            return 0.5 * x * (1 + np.tanh(inner))
        # x^2 overflows to inf beyond 1.8e19 (e^-inf = 0, as it should), -inf gives NaN (as
        # PyTorch's does): both are the formula working, not errors to warn of
        with np.errstate(over="ignore", invalid="ignore"):
            return in_blocks(gelu_exact, x)


def gelu_exact(x: np.ndarray) -> np.ndarray:
    """GELU(x) = x Phi(x) = x (1 + erf(x / sqrt 2)) / 2, with an erf made for it (NumPy has
    none): one formula over all x, no branch, about 24 NumPy passes.

    The OpenCL kernels' kuiper_erf (clkernels/activation.h) has two polynomials, one for
    |x| <= 1 and one beyond; on NumPy both would run on every value and one be thrown away.
    Here, with a = |x| / sqrt 2 and w = e^(-a^2):

        erf(a) = 1 - w R(a)      (R = erfc(a) e^(a^2), smooth, R(0) = 1)
               = (1 - w) + w (1 - R)   and   1 - R = a t S(t),  t = 1 / (1 + a/2)

    and since a t = 2 (1 - t), 1 - R = (1 - t) 2 S(t): no a in it, so a = inf gives t = 0 and
    a finite 1 - R (a t would be inf * 0). Every term is >= 0, so nothing cancels; 1 - w is exact
    in float32 for w >= 1/2 (Sterbenz). Then, erf being odd,

        GELU(x) = x / 2 + |x| erf(a) / 2

    which needs no sign: NumPy's copysign and minimum (a clamp) each cost four of its
    multiplications on AVX2. erf is within 2.6e-7 of math.erf in absolute terms (most of it
    float32's rounding of t, which 1 - t magnifies for small a; the clamped a t form was within
    1.6e-7), which is what GELU needs (it adds 1 to it; test_gelu_erf_accuracy). Its relative
    error near 0 is large (the 6e-8 floor against erf(a) ~ 1.1 a), so it is GELU's only: an
    expression's torch.erf calls math.erf (parser/expression/evaluate.py). Float16 inputs
    compute in float32.
    """
    dtype = np.float64 if x.dtype == np.float64 else np.float32
    one = dtype(1)
    magnitude = np.abs(x, dtype=dtype)
    t = magnitude * dtype(0.5 * math.sqrt(0.5))      # a / 2
    t += one
    np.divide(one, t, out=t)                         # (np.reciprocal is twice as slow)
    erf = horner(GELU_ERF_2S, t)                     # 2 S(t)
    erf *= np.subtract(one, t, out=t)                # 1 - R
    w = np.square(x, dtype=dtype)
    w *= dtype(-0.5)
    np.exp(w, out=w)                                 # e^(-a^2)
    erf *= w
    erf += np.subtract(one, w, out=w)                # (1 - w) + w (1 - R)
    erf *= magnitude
    erf *= dtype(0.5)
    erf += np.multiply(x, dtype(0.5), out=w, dtype=dtype)
    return erf.astype(x.dtype, copy=False)


# The polynomial S(t) of gelu_exact's erf, doubled (2 S: exact in binary), highest power first.
# Fitted for it (float64 NumPy and scipy.special.erfc, 80,001 points of a in (0, 4]): least
# squares of S(t) = (1 - erfc(a) e^(a^2)) / (a t) on t = 1 / (1 + a / 2), each point weighted
# by e^(-a^2) a t (so the error measured is erf's own), then reweighted 80 times toward the
# largest errors (near-minimax). Degree 5 is 8.9e-9 off erf on [0, 12] (float64), far below
# float32's rounding of 1 (6e-8); degree 4 would be 2.6e-7, degree 7 (this code until
# 2026-11-28) 1e-10 for two more passes. Beyond a = 4 the factor w < 1.2e-7 hides the rest.
GELU_ERF_2S = tuple(2 * c for c in (
    0.0514107445, -0.260315249, 0.370773709, 0.0726174881, 0.398251413, 0.495640513))


# Values per block of `in_blocks`: 128 KB of float32, a formula's temporaries stay in L2 cache.
BLOCK = 32768


def in_blocks(f, x: np.ndarray) -> np.ndarray:
    """f(x) for an elementwise formula f, evaluated block by block on large inputs.

    A formula of many NumPy passes (the exact GELU: about 24) makes a fresh temporary per
    pass; over a whole 197 x 1536 ViT activation each one is larger than the L2 cache, and is
    written out and read back. On blocks of BLOCK values the same passes stay in the cache:
    with an erf of two polynomials (about forty passes), the exact GELU of 819,200 values took
    21 ms whole and 10 in blocks (2-core AMD EPYC). Formulas of a few passes gain nothing
    (SiLU, ReLU6, ELU: measured), so only GELU uses this. Every value is computed by the same
    code either way.
    """
    if x.size <= 2 * BLOCK:
        return f(x)
    flat = np.ascontiguousarray(x).reshape(-1)
    first = f(flat[:BLOCK])
    out = np.empty(flat.shape, first.dtype)
    out[:BLOCK] = first
    for start in range(BLOCK, flat.size, BLOCK):
        out[start:start + BLOCK] = f(flat[start:start + BLOCK])
    return out.reshape(x.shape)


@register("nn.Tanh", "F.tanh", "torch.tanh", backend="cpu")
class Tanh(Activation):
    complex_inputs = True

    def compute(self, x):
        return np.tanh(x)


@register("nn.ELU", "F.elu", backend="cpu")
class ELU(Activation):
    params: ClassVar[dict[str, float | None]] = {"alpha": 1.0}

    def compute(self, x, alpha):
        # expm1, not exp(x) - 1: near 0 the subtraction would cancel every significant digit.
        return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


@register("nn.CELU", "F.celu", backend="cpu")
class CELU(Activation):
    params: ClassVar[dict[str, float | None]] = {"alpha": 1.0}

    def read_param(self, name, default):
        alpha = super().read_param(name, default)
        if alpha == 0:
            raise self.op.error("alpha=0 is not allowed: CELU divides by alpha")
        return alpha

    def compute(self, x, alpha):
        return np.maximum(x, 0) + np.minimum(0, alpha * np.expm1(np.minimum(x, 0) / alpha))


@register("nn.SELU", "F.selu", backend="cpu")
class SELU(Activation):
    def compute(self, x):
        return SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(np.minimum(x, 0)))


@register("nn.Mish", "F.mish", backend="cpu")
class Mish(Activation):
    def compute(self, x):
        return x * np.tanh(softplus(x))


@register("nn.Softplus", "F.softplus", backend="cpu")
class Softplus(Activation):
    params: ClassVar[dict[str, float | None]] = {"beta": 1.0, "threshold": 20.0}

    def compute(self, x, beta, threshold):
        return softplus(x, beta, threshold)


@register("nn.Hardtanh", "F.hardtanh", backend="cpu")
class Hardtanh(Activation):
    int_inputs = True
    params: ClassVar[dict[str, float | None]] = {"min_val": -1.0, "max_val": 1.0}

    def compute(self, x, low, high):
        return np.minimum(np.maximum(x, low), high)


@register("nn.Softsign", "F.softsign", backend="cpu")
class Softsign(Activation):
    complex_inputs = True

    def compute(self, x):
        return x / (1 + np.abs(x))


@register("nn.LogSigmoid", "F.logsigmoid", backend="cpu")
class LogSigmoid(Activation):
    def compute(self, x):
        # log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)): exp of a non-positive number only.
        return np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x)))


@register("nn.Threshold", "F.threshold", backend="cpu")
class Threshold(Activation):
    int_inputs = True
    params: ClassVar[dict[str, float | None]] = {"threshold": None, "value": None}

    def infer(self, inputs):
        specs = super().infer(inputs)
        dtype, value = inputs[0].dtype, self.values[1]
        if dtype.kind in "iu" and not np.iinfo(dtype).min <= value <= np.iinfo(dtype).max:
            raise self.op.error(f"value={value:g} does not fit the {dtype.name} input 0 "
                                "(PyTorch refuses it too)")
        return specs

    def compute(self, x, threshold, value):
        # x <= threshold, not x > threshold: a comparison with NaN is false, and NaN stays NaN
        return np.where(x <= threshold, x.dtype.type(value), x)


@register("nn.Tanhshrink", "F.tanhshrink", backend="cpu")
class Tanhshrink(Activation):
    complex_inputs = True

    def compute(self, x):
        return x - np.tanh(x)


@register("nn.Hardshrink", "F.hardshrink", backend="cpu")
class Hardshrink(Activation):
    params: ClassVar[dict[str, float | None]] = {"lambd": 0.5}

    def compute(self, x, lambd):
        return np.where((x >= -lambd) & (x <= lambd), 0, x)  # NaN is in no interval: kept


@register("nn.Softshrink", "F.softshrink", backend="cpu")
class Softshrink(Activation):
    params: ClassVar[dict[str, float | None]] = {"lambd": 0.5}

    def read_param(self, name, default):
        lambd = super().read_param(name, default)
        if lambd < 0:
            raise self.op.error(f"lambd={lambd} should be >= 0 (a negative threshold makes "
                                "the two branches overlap)")
        return lambd

    def compute(self, x, lambd):
        lambd = x.dtype.type(lambd)
        shrunk = np.where(x > lambd, x - lambd, x + lambd)  # NaN + lambd: NaN stays NaN
        return np.where((x >= -lambd) & (x <= lambd), 0, shrunk)
