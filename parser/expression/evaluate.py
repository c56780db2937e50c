"""Step 4: run an RPN program with a stack, on NumPy arrays, Python numbers or symbolic tensors.

Values on the stack are what PyTorch had when the model was traced:

    np.ndarray             a tensor (0-dim arrays included: they are 0-dim tensors)
    int float bool complex a Python number, "weakly" typed (see dtypes.py); `size()` makes them
    list                   only from `[...]`, the whole expression (a shape for a reshape, say)
    Symbolic(shape, dtype) a tensor whose values are not known yet

`Symbolic` is what makes one evaluator serve two purposes. At build time, shape inference runs
the program with `Symbolic` for every input whose values are unknown: operations on them give
`Symbolic` results with the broadcast shape and the promoted dtype, while `size(@0,0)` reads the
shape and gives a plain int. So `[size(@0,0),-1,3]` comes out as a concrete list at build time
(and backends fold it), `mul(@0,2)` as `Symbolic((2,3), float32)`. At run time the same program
runs on arrays.

When every operand of a function is a Python number the function follows Python (`7 // 2` is 3,
`div(7,2)` 3.5, `sqrt(4)` 2.0): that is size arithmetic, which PyTorch also did in Python.
Python's integers have no size limit, so a tiny file could ask for `pow(10,100000000)` (a minute
of work) or `lshift(1,100000000000)` (gigabytes) while the model loads. TorchScript's integers
are int64, so no real model needs more: integer results beyond int64 are refused, and `pow` and
`lshift` are refused *before* computing when their result could not fit (`_bounded_int`).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kuiper.parser.errors import ExpressionError
from kuiper.parser.expression.ast import Input, Literal
from kuiper.parser.expression.dtypes import TypeRuleError, signature, type_of
from kuiper.parser.expression.functions import FUNCTIONS, LIST
from kuiper.parser.expression.rpn import Instruction, Op

PYTHON_NUMBERS = (bool, int, float, complex)


@dataclass(frozen=True)
class Symbolic:
    """A tensor whose shape and dtype are known but whose values are not (yet)."""

    shape: tuple[int, ...]
    dtype: np.dtype


class BroadcastError(ExpressionError):
    """Operand shapes that do not broadcast; layers report it as a ShapeError."""


def evaluate(rpn: Sequence[Instruction], inputs: Sequence[Any], expr: str = "") -> Any:
    """Run `rpn` on `inputs` (the values of @0, @1, ...). `expr` is used in error messages."""
    stack: list[Any] = []
    for ins in rpn:
        if isinstance(ins, Input):
            if ins.index >= len(inputs):
                raise ExpressionError(expr, ins.column, f"@{ins.index} is beyond the "
                                                        f"{len(inputs)} input(s)")
            value = inputs[ins.index]
            stack.append(np.asarray(value) if isinstance(value, np.generic) else value)
        elif isinstance(ins, Literal):
            stack.append(ins.value)
        else:
            args = stack[len(stack) - ins.arity:]
            del stack[len(stack) - ins.arity:]
            stack.append(apply(ins, args, expr))
    if len(stack) != 1:  # cannot happen for an RPN made by to_rpn
        raise ExpressionError(expr, 0, f"malformed program leaves {len(stack)} values")
    return stack[0]


def apply(op: Op, args: list[Any], expr: str = "") -> Any:
    """Apply one RPN operation to its (already evaluated) arguments."""
    if op.name == LIST:
        for i, a in enumerate(args):
            if isinstance(a, list):  # `[size(@0),1]`: a shape is flat
                raise ExpressionError(expr, op.column, f"item {i + 1} of the list is a list "
                                                       f"of {len(a)}, expected a number or a "
                                                       "tensor (lists do not nest)")
            if isinstance(a, str):   # a bare name (`[1,abc]`): only functions take those
                raise ExpressionError(expr, op.column, f"item {i + 1} of the list is the name "
                                                       f"'{a}', expected a number or a tensor")
        return list(args)
    try:
        if op.name == "size":
            return _size(args)
        for i, a in enumerate(args):
            if not isinstance(a, (*PYTHON_NUMBERS, np.ndarray, Symbolic)):
                raise TypeRuleError(f"argument {i + 1} is {a!r}, expected a number or a tensor")
        if all(isinstance(a, PYTHON_NUMBERS) for a in args):
            return _python(op.name, args)
        compute, result = signature(op.name, [type_of(a) for a in args])
        shapes = [np.shape(a) if not isinstance(a, Symbolic) else a.shape for a in args]
        try:
            shape = np.broadcast_shapes(*shapes)
        except ValueError:
            raise BroadcastError(expr, op.column, f"{op.name} cannot broadcast shapes "
                                                  f"{' and '.join(map(str, shapes))}") from None
        if any(isinstance(a, Symbolic) for a in args):
            return Symbolic(tuple(shape), result)
        arrays = [np.asarray(a).astype(compute, copy=False) for a in args]
        with np.errstate(all="ignore"):  # log(0), 0/0 ... give inf/nan, as in PyTorch
            out = NUMPY[op.name](*arrays)
        return np.asarray(out).astype(result, copy=False)
    except (TypeRuleError, TypeError, ValueError, ArithmeticError) as e:
        raise ExpressionError(expr, op.column, f"{op.name}: {e}") from None


def _size(args: list[Any]) -> int | list[int]:
    tensor = args[0]
    if not isinstance(tensor, (np.ndarray, Symbolic)):
        raise TypeRuleError(f"size() needs a tensor, got {tensor!r}")
    shape = [int(d) for d in tensor.shape]
    if len(args) == 1:
        return shape
    dim = args[1]
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeRuleError(f"the dim of size() must be an int, got {dim!r}")
    if not -len(shape) <= dim < len(shape):
        raise TypeRuleError(f"dim {dim} is out of range for a {len(shape)}-D tensor")
    return shape[dim]


# --- Python numbers: Python's own semantics -----------------------------------------------------
def _fmod(a, b):
    if isinstance(a, int) and isinstance(b, int):  # C-style: the sign follows the dividend
        r = abs(a) % abs(b)
        return -r if a < 0 else r
    return math.fmod(a, b)


def _logaddexp(a, b):
    return float(np.logaddexp(np.float64(a), np.float64(b)))


PYTHON_BINARY: dict[str, Callable] = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
    "floor_divide": operator.floordiv, "remainder": operator.mod, "fmod": _fmod,
    "and": operator.and_, "or": operator.or_, "xor": operator.xor,
    "lshift": operator.lshift, "rshift": operator.rshift, "pow": operator.pow,
    "max": max, "maximum": max, "min": min, "minimum": min,
    "atan2": math.atan2, "logaddexp": _logaddexp,
}


INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def _bounded_int(name: str, args: list[Any]) -> None:
    """Refuse pow/lshift of Python ints whose result cannot fit int64, before computing it."""
    if not all(isinstance(a, int) for a in args):
        return
    a, b = args
    too_big = ((name == "pow" and abs(a) > 1 and b >= 64)
               or (name == "lshift" and a != 0 and b >= 64))
    if too_big:
        raise OverflowError(f"{name}({_digits(a)}, {_digits(b)}) is beyond int64 (TorchScript "
                            "integers are 64-bit; a damaged or hostile file?)")


def _digits(n: int) -> str:
    """An integer for a message: in full if short, else by its size."""
    return str(n) if n.bit_length() <= 64 else f"<a {n.bit_length()}-bit integer>"


def _python(name: str, args: list[Any]) -> Any:
    result = _python_unbounded(name, args)
    if isinstance(result, int) and not isinstance(result, bool) and not (
            INT64_MIN <= result <= INT64_MAX):
        raise OverflowError(f"the integer result {_digits(result)} is beyond int64 "
                            "(TorchScript integers are 64-bit)")
    return result


def _python_unbounded(name: str, args: list[Any]) -> Any:
    if name in PYTHON_BINARY:
        _bounded_int(name, args)
        return PYTHON_BINARY[name](*args)
    (a,) = args
    kind = FUNCTIONS[name].kind
    if kind == "cast":
        return {"int": int, "torch.long": int, "torch.float": float, "torch.bool": bool}[name](a)
    if kind == "keep_unary":
        if name == "sign":
            return type(a)((a > 0) - (a < 0))
        if name in ("abs", "neg", "square"):
            return abs(a) if name == "abs" else -a if name == "neg" else a * a
        if not isinstance(a, float):
            return a  # ceil/floor/round/trunc of an int: the int itself
    # float functions (and ceil/floor/round/trunc of a float, which stay floats): compute in
    # float64 through NumPy, which gives inf/nan where `math` would raise.
    with np.errstate(all="ignore"):
        x = np.complex128(a) if isinstance(a, complex) else np.float64(a)
        out = NUMPY[name](np.asarray(x))
    return complex(out) if isinstance(a, complex) else float(out)


# --- NumPy kernels (operands already converted to the compute dtype) ------------------------------
def _keep_ints(f: Callable) -> Callable:
    """ceil/floor/round/trunc: the identity on integers (NumPy would return floats)."""
    return lambda x: x if x.dtype.kind in "biu" else f(x)


def _sign(x: np.ndarray) -> np.ndarray:
    if x.dtype == np.bool_:
        return x
    return np.where(np.isnan(x), 0, np.sign(x)) if x.dtype.kind == "f" else np.sign(x)


def _erf(x: np.ndarray) -> np.ndarray:
    # NumPy has no erf; math.erf per element is exact and fast enough for a reference layer.
    # (frompyfunc returns a bare Python float for a 0-dim input: asarray makes it an array.)
    return np.asarray(np.frompyfunc(math.erf, 1, 1)(x.astype(np.float64))).astype(x.dtype)


def _pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind not in "iu":
        return np.power(a, b)
    # Integer powers: NumPy refuses negative exponents; PyTorch gives 1 for 1**-n, +-1 for
    # (-1)**-n and 0 otherwise (the integer part of the true result).
    negative = b < 0
    out = np.power(a, np.where(negative, 0, b))
    if np.any(negative):
        odd = (b % 2) != 0
        small = np.where(a == 1, 1, np.where(a == -1, np.where(odd, -1, 1), 0))
        out = np.where(negative, small, out)
    return out


def _remainder(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """PyTorch's remainder: fmod, moved by b when the signs differ. NumPy's follows Python,
    whose result takes the divisor's sign even at zero: 5.0 % -5.0 is -0.0 in NumPy, 0.0 in
    PyTorch, and a following division then gives -inf instead of inf."""
    if a.dtype.kind not in "fc":
        return np.remainder(a, b)
    r = np.fmod(a, b)
    return np.where((r != 0) & ((b < 0) != (r < 0)), r + b, r)


def _maximum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """NaN if either is, else the larger, and `a` on a tie (PyTorch: max(0.0, -0.0) is 0.0,
    max(-0.0, 0.0) is -0.0; NumPy returns either)."""
    if a.dtype.kind != "f":
        return np.maximum(a, b)
    return np.where(np.isnan(a), a, np.where(np.isnan(b), b, np.where(a < b, b, a)))


def _minimum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """NaN if either is, else the smaller, and `a` on a tie (as `_maximum`)."""
    if a.dtype.kind != "f":
        return np.minimum(a, b)
    return np.where(np.isnan(a), a, np.where(np.isnan(b), b, np.where(b < a, b, a)))


def _identity(x: np.ndarray) -> np.ndarray:
    return x  # a cast: the conversion to the result dtype does the work


NUMPY: dict[str, Callable[..., Any]] = {
    # float_unary
    "acos": np.arccos, "acosh": np.arccosh, "asin": np.arcsin, "asinh": np.arcsinh,
    "atan": np.arctan, "atanh": np.arctanh, "cos": np.cos, "cosh": np.cosh, "erf": _erf,
    "exp": np.exp, "expm1": np.expm1, "log": np.log, "log10": np.log10, "log1p": np.log1p,
    "reciprocal": np.reciprocal, "rsqrt": lambda x: 1 / np.sqrt(x), "sin": np.sin,
    "sinh": np.sinh, "sqrt": np.sqrt, "tan": np.tan, "tanh": np.tanh,
    # keep_unary
    "abs": np.abs, "ceil": _keep_ints(np.ceil), "floor": _keep_ints(np.floor),
    "neg": np.negative, "round": _keep_ints(np.round),  # np.round: half to even, like torch
    "sign": _sign, "square": np.square, "trunc": _keep_ints(np.trunc),
    # cast
    "int": _identity, "torch.float": _identity, "torch.long": _identity,
    "torch.bool": _identity,
    # binary (floor_divide and remainder follow Python's signs, fmod C's, as in PyTorch)
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
    "floor_divide": np.floor_divide, "remainder": _remainder, "fmod": np.fmod,
    "max": _maximum, "min": _minimum, "maximum": _maximum, "minimum": _minimum,
    "pow": _pow, "atan2": np.arctan2, "logaddexp": np.logaddexp,
    "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
    "lshift": np.left_shift, "rshift": np.right_shift,  # shifts past the width give 0 / -1
}
