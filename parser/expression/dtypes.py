"""PyTorch's type promotion, so an expression gives the dtype PyTorch gave when it was traced.

NumPy and PyTorch disagree on mixed dtypes: NumPy says int64 + float32 = float64, PyTorch says
float32. And PyTorch treats values by *category*, in decreasing priority:

    DIMENSIONED   tensors with at least one dimension
    ZERO_DIM      0-dim tensors, e.g. torch.tensor(2.5)
    SCALAR        Python numbers ("weak" types: they adapt to the tensors around them)

The result dtype comes from the highest category present, *unless* a lower category holds a
higher kind of number (bool < integer < floating < complex); then the result is promoted just
enough to hold that kind. So

    int64 tensor   + 2.5 (Python)            -> float32  (a Python float means the default float)
    float32 tensor * 2   (Python)            -> float32  (a Python int never widens a float)
    int32 tensor   + torch.tensor(7)         -> int32    (0-dim int64 does not widen dims int32)
    int32 tensor   + torch.tensor(2.5, f64)  -> float64  (but a higher kind does, at its width)
    int8 tensor    + 1000                    -> int8     (and wraps, as PyTorch does)

`signature(name, types)` then applies what each function does on top of that (`div` of ints
is float32, `and` refuses floats, casts convert): it returns the dtype the operands are converted
to before computing and the dtype of the result. The NumPy evaluator, shape inference and the
OpenCL code generator all call it, so all three agree by construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kuiper.parser.expression.functions import FUNCTIONS

SCALAR, ZERO_DIM, DIMENSIONED = 0, 1, 2

BOOL = np.dtype(np.bool_)
INT64 = np.dtype(np.int64)
FLOAT32 = np.dtype(np.float32)  # PyTorch's default dtype: what a Python float turns into
COMPLEX64 = np.dtype(np.complex64)

_KIND_ORDER = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}
_COMPLEX_OF = {np.dtype(np.float16): COMPLEX64, FLOAT32: COMPLEX64,
               np.dtype(np.float64): np.dtype(np.complex128)}
CAST_TARGETS = {"int": INT64, "torch.long": INT64, "torch.float": FLOAT32, "torch.bool": BOOL}
# PyTorch has no bool kernel for these (and NumPy agrees for most of them).
_NOT_FOR_BOOL = {"sub", "floor_divide", "remainder", "fmod", "pow", "abs", "neg", "ceil",
                 "floor", "round", "trunc"}


class TypeRuleError(ValueError):
    """An operation PyTorch refuses for these dtypes (e.g. `and` of float tensors)."""


@dataclass(frozen=True)
class TypeInfo:
    """What type promotion needs to know about one operand."""

    dtype: np.dtype
    category: int  # SCALAR, ZERO_DIM or DIMENSIONED


def type_of(value: Any) -> TypeInfo:
    """TypeInfo of a Python number, an ndarray / NumPy scalar, or anything with shape + dtype."""
    if hasattr(value, "dtype") and hasattr(value, "shape"):  # checked first: np.float64 is a float
        return TypeInfo(np.dtype(value.dtype), DIMENSIONED if len(value.shape) else ZERO_DIM)
    if isinstance(value, bool):
        return TypeInfo(BOOL, SCALAR)
    if isinstance(value, int):
        return TypeInfo(INT64, SCALAR)
    if isinstance(value, float):
        return TypeInfo(FLOAT32, SCALAR)
    if isinstance(value, complex):
        return TypeInfo(COMPLEX64, SCALAR)
    raise TypeRuleError(f"{type(value).__name__} {value!r} is not a number or a tensor")


def promote_types(a: np.dtype, b: np.dtype) -> np.dtype:
    """torch.promote_types: like NumPy's, except that an integer meeting a float keeps the
    float's width (int64 + float32 = float32)."""
    a, b = np.dtype(a), np.dtype(b)
    if a == b:
        return a
    if a == BOOL:
        return b
    if b == BOOL:
        return a
    high, low = (a, b) if _KIND_ORDER[a.kind] >= _KIND_ORDER[b.kind] else (b, a)
    if _KIND_ORDER[high.kind] > _KIND_ORDER[low.kind] and not (high.kind == "c"
                                                               and low.kind == "f"):
        return high
    return np.promote_types(a, b)  # same kind (or complex + float): the wider one


def _combine(higher: np.dtype | None, lower: np.dtype | None) -> np.dtype | None:
    """Merge the dtype of a higher category with a lower one (PyTorch's combine_categories)."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher.kind == "c":
        return higher
    if lower.kind == "c":
        return _COMPLEX_OF.get(higher, lower) if higher.kind == "f" else lower
    if higher.kind == "f":
        return higher
    if higher == BOOL or lower.kind == "f":
        return promote_types(higher, lower)
    return higher


def result_type(types: Sequence[TypeInfo]) -> np.dtype:
    """torch.result_type of operands described by `types`."""
    per_category: list[np.dtype | None] = [None, None, None]
    for t in types:
        current = per_category[t.category]
        per_category[t.category] = t.dtype if current is None else promote_types(current,
                                                                                 t.dtype)
    result = _combine(per_category[DIMENSIONED],
                      _combine(per_category[ZERO_DIM], per_category[SCALAR]))
    if result is None:
        raise TypeRuleError("no operands")
    return result


def signature(name: str, types: Sequence[TypeInfo]) -> tuple[np.dtype, np.dtype]:
    """(compute dtype, result dtype) of function `name` applied to operands of `types`.

    Operands are converted to the compute dtype first; the result has the result dtype (they
    differ only for casts and for `square` of bools). Raises TypeRuleError where PyTorch would
    refuse the operation.
    """
    kind = FUNCTIONS[name].kind
    if kind == "cast":
        return types[0].dtype, CAST_TARGETS[name]
    common = result_type(types)
    if kind in ("float_unary", "float_binary"):
        if common.kind in "biu":  # sqrt of an int tensor, div of two ints: the default float
            common = FLOAT32
        return common, common
    if common == BOOL:
        if name == "square":
            return INT64, INT64  # torch.square(bool tensor) is int64
        if name in _NOT_FOR_BOOL:
            raise TypeRuleError(f"{name} is not defined for bool tensors")
    if kind == "bitwise" and common.kind not in "biu":
        raise TypeRuleError(f"{name} needs integer or bool operands, got {common.name}")
    if kind == "shift" and common.kind not in "iu":
        raise TypeRuleError(f"{name} needs integer operands, got {common.name}")
    return common, common
