"""Teach the expression reader a new function, at run time.

pnnx writes only the functions listed in `functions.FUNCTIONS`, and Kuiper knows all of them.
But a hand-edited model, a newer pnnx, or an experiment may call one more, and seeing where a
function has to be known is the best map of the four steps of `parser/expression`.

It lives with the expression language it extends. The OpenCL code generator sits floors
above the parser, so nothing here writes into it: a new function carries its C spelling in its
own entry of FUNCTIONS (`Function.opencl`), where the generator looks when its own table has no
such name.


    step          what it needs for `log2(@0)`                  where
    tokenizer     nothing, if `log2` is a word it calls a NAME   tokenizer.py (_word)
    parser (AST)  the arity, to know how many arguments follow   FUNCTIONS (functions.py)
    RPN           nothing: Op("log2", 1) is generic              rpn.py
    evaluator     the NumPy function, and the dtype rule (kind)  NUMPY, PYTHON_BINARY
                                                                 (evaluate.py), dtypes.py
    OpenCL        a C template for the fused kernel (optional)   Function.opencl (functions.py)

`define_function` fills exactly those tables. A function added for good gets one line in each
table instead (tests/layers/test_expression.py then checks every backend covers it).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kuiper.parser.errors import ExpressionError
from kuiper.parser.expression.evaluate import NUMPY, PYTHON_BINARY
from kuiper.parser.expression.functions import FUNCTIONS, Function
from kuiper.parser.expression.tokenizer import Kind, tokenize

# Kinds a new function may have: their dtype rules in dtypes.py need nothing else. (Casts, bitwise
# ops, shifts and size() have special cases in several places, so they are not offered here.)
KINDS = {"float_unary": 1, "float_binary": 2, "arith": 2}


def define_function(name: str, arity: int, kind: str, numpy_kernel: Callable[..., np.ndarray],
                    opencl: str | None = None) -> Function:
    """Make `name(...)` usable in every `pnnx.Expression`, on the CPU (and on OpenCL if given).

    `kind` is the dtype rule (functions.py): "float_unary" (arity 1; an int tensor becomes
    float32), "float_binary" or "arith" (arity 2; the promoted dtype, made float for
    float_binary). `numpy_kernel` receives arrays already converted to the compute dtype, one per
    argument. `opencl` is a C expression over `{a}` (and `{b}`) in float, e.g. "log2({a})".
    Raises ValueError for a name that is taken or that the tokenizer would not read as one word.
    """
    try:
        tokens = tokenize(name)
    except ExpressionError as e:
        raise ValueError(f"'{name}' is not a function name: {e.message}") from None
    if len(tokens) != 2 or tokens[0].kind is not Kind.NAME or tokens[0].text != name:
        raise ValueError(f"'{name}' is not a function name: the tokenizer reads it as "
                         + (" ".join(t.kind.value for t in tokens[:-1]) or "nothing"))
    if name in FUNCTIONS:
        raise ValueError(f"'{name}' is already a function ({FUNCTIONS[name].kind}, "
                         f"{FUNCTIONS[name].max_args} argument(s))")
    if KINDS.get(kind) != arity:
        raise ValueError(f"kind '{kind}' with {arity} argument(s) is not supported; expected "
                         + ", ".join(f"{k} ({n})" for k, n in KINDS.items()))
    # the parser learns the arity; the OpenCL code generator reads `opencl` from here
    function = Function(name, arity, arity, kind, opencl)
    FUNCTIONS[name] = function
    NUMPY[name] = numpy_kernel                  # the evaluator learns the values
    if arity == 2:                              # ... also on plain Python numbers
        PYTHON_BINARY[name] = lambda a, b: numpy_kernel(np.asarray(a), np.asarray(b)).item()
    return function
