"""The functions a `pnnx.Expression` may call, with their arity and their typing *kind*.

This one table is shared by every stage, so adding a function means one line here plus its
implementation in each backend (`evaluate.py` for NumPy,
`layers/opencl_helpers/expression_codegen.py` for OpenCL); tests check that every backend covers
every name.

- The **parser** needs the arity: pnnx's own reader ignores parentheses and takes the number of
  arguments from the function name (see `ast.py`), and so must we.
- The **type rules** (`dtypes.py`) need the kind: `div` of two int tensors is float32 while `mul`
  of two int tensors stays int64, `and` refuses floats, `torch.long` casts.

Kinds:

    float_unary   computes in floating point: an int or bool tensor becomes float32 (exp, sqrt)
    keep_unary    keeps the input dtype (abs, neg, floor: floor of an int is the int itself)
    cast          converts to a fixed dtype (torch.float, torch.long, torch.bool, int)
    arith         binary, result = the promoted dtype of the operands (add, pow, remainder)
    float_binary  binary, promoted, then int/bool become float32 (div, atan2, logaddexp)
    bitwise       binary on int or bool only (and, or, xor)
    shift         binary on ints only (lshift, rshift)
    size          size(@k) -> list of dims, size(@k,dim) -> one dim, both plain Python ints
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Function:
    name: str
    min_args: int
    max_args: int
    kind: str
    # A function added at run time (custom.py) may carry its C spelling over `{a}` and `{b}`,
    # for the OpenCL code generator; Kuiper's own are in the generator's tables.
    opencl: str | None = None


def _table(kind: str, arity: int, names: str) -> dict[str, Function]:
    return {n: Function(n, arity, arity, kind) for n in names.split()}


FUNCTIONS: dict[str, Function] = {
    **_table("float_unary", 1, "acos acosh asin asinh atan atanh cos cosh erf exp expm1 log "
                               "log10 log1p reciprocal rsqrt sin sinh sqrt tan tanh"),
    **_table("keep_unary", 1, "abs ceil floor neg round sign square trunc"),
    **_table("cast", 1, "int torch.float torch.long torch.bool"),
    **_table("arith", 2, "add sub mul floor_divide remainder fmod max min maximum minimum pow"),
    **_table("float_binary", 2, "div atan2 logaddexp"),
    **_table("bitwise", 2, "and or xor"),
    **_table("shift", 2, "lshift rshift"),
    # size(@k) or size(@k, dim): the only function whose arity is not fixed.
    "size": Function("size", 1, 2, "size"),
}

# `[` opens a list; it is not a function (it takes every item up to the matching `]`), so the
# parser handles it itself and the RPN names its instruction LIST.
LIST = "["
