"""`pnnx.Expression` strings, from text to values, in four small steps:

    tokenizer.py   text -> tokens (with columns, for error messages)
    ast.py         tokens -> tree, tolerant of the parentheses pnnx misplaces
    rpn.py         tree -> reverse Polish notation (a flat program for a stack machine)
    evaluate.py    RPN -> value, on NumPy arrays, Python numbers or symbolic tensors

with `functions.py` (the table of functions and their arity) and `dtypes.py` (PyTorch's type
promotion) shared by all of them and by the OpenCL code generator.

    >>> from kuiper.parser.expression import parse, to_rpn, format_rpn, evaluate
    >>> format_rpn(to_rpn(parse("add(@0,mul(@1,2))")))
    '@0 @1 2 mul add'
"""

from kuiper.parser.expression.ast import Call, Input, ListNode, Literal, Node, parse, unparse
from kuiper.parser.expression.evaluate import BroadcastError, Symbolic, evaluate
from kuiper.parser.expression.functions import FUNCTIONS
from kuiper.parser.expression.rpn import Op, format_rpn, to_rpn
from kuiper.parser.expression.tokenizer import Kind, Token, tokenize

__all__ = [
    "FUNCTIONS",
    "BroadcastError",
    "Call",
    "Input",
    "Kind",
    "ListNode",
    "Literal",
    "Node",
    "Op",
    "Symbolic",
    "Token",
    "evaluate",
    "format_rpn",
    "parse",
    "to_rpn",
    "tokenize",
    "unparse",
]
