"""Lesson 7 exercises: RPN, the stack machine, and a new function in the expression language.

Fill in the functions, then run `kuiper course check 7`. The answers are the engine's own,
in parser/expression/rpn.py, evaluate.py (right above `apply`) and custom.py: the helpers you
need are imported below, so try first and open those files after.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kuiper.parser.expression.ast import Call, Input, ListNode, Literal, Node  # noqa: F401
from kuiper.parser.expression.evaluate import apply  # noqa: F401 - applies ONE Op to its arguments
from kuiper.parser.expression.functions import LIST, Function  # noqa: F401
from kuiper.parser.expression.rpn import Instruction, Op  # noqa: F401


def to_rpn(node: Node) -> list[Instruction]:
    """Flatten a tree into reverse Polish notation by a post-order walk.

    Input and Literal nodes are emitted as they are; a Call emits its arguments (in order),
    then Op(call.name, number of arguments, call.column); a ListNode emits its items, then
    Op(LIST, number of items, node.column).

        to_rpn(parse("add(@0,mul(@1,2))"))  ->  [Input(0), Input(1), Literal(2), Op("mul", 2),
                                                 Op("add", 2)]
    """
    raise NotImplementedError("lesson 7: write to_rpn")


def evaluate(rpn: Sequence[Instruction], inputs: Sequence[Any], expr: str = "") -> Any:
    """Run an RPN program with a stack and return the one value left on it.

    Input(k) pushes inputs[k]; a Literal pushes its value; an Op pops its `arity` arguments
    (the first argument is the deepest) and pushes `apply(op, args, expr)`, which knows every
    function, the dtype rules and lists. `inputs` may hold arrays, Python numbers or Symbolic
    tensors: the stack machine does not care.
    """
    raise NotImplementedError("lesson 7: write evaluate")


def define_function(name: str, arity: int, kind: str, numpy_kernel: Callable[..., np.ndarray],
                    opencl: str | None = None) -> Function:
    """Make `name(...)` usable in every pnnx.Expression: the tokenizer, the parser, the RPN
    and the evaluator must all accept it (and the OpenCL code generator, if `opencl` is given).

    Import each table from the module that owns it, by its full name, e.g.

        from kuiper.parser.expression.tokenizer import Kind, tokenize
        from kuiper.parser.expression.functions import FUNCTIONS
        from kuiper.parser.expression.evaluate import NUMPY, PYTHON_BINARY

    (careful: `from kuiper.parser.expression import evaluate` gives the FUNCTION evaluate, which
    the package re-exports, not the MODULE kuiper.parser.expression.evaluate with the tables).

    1. tokenizer (parser/expression/tokenizer.py): `name` must come out of `tokenize(name)` as
       one NAME token (Kind.NAME); otherwise raise ValueError (also when tokenize raises
       ExpressionError).
    2. parser (ast.py) finds a function's arity in FUNCTIONS (functions.py): add
       Function(name, arity, arity, kind, opencl) there, unless the name is taken (raise
       ValueError).
       Accept kind "float_unary" with arity 1, "float_binary" or "arith" with arity 2; anything
       else is a ValueError.
    3. RPN (rpn.py): nothing to do, Op(name, arity) works for any name. Check it!
    4. evaluator (the module kuiper.parser.expression.evaluate): add numpy_kernel to NUMPY; for
       arity 2 also teach PYTHON_BINARY how to apply it to two plain Python numbers (call
       numpy_kernel on np.asarray(a), np.asarray(b) and return `.item()` of the result).
    5. OpenCL: nothing more. The code generator (layers/opencl_helpers/expression_codegen.py)
       sits floors above the parser, so the parser's table carries the C spelling (`opencl`,
       a C expression over {a} and {b}, e.g. "log2({a})") and the generator reads it there
       for a name its own table FLOAT_C lacks.

    Return the Function you added.
    """
    raise NotImplementedError("lesson 7: write define_function")
