"""Step 3: the tree -> reverse Polish notation (RPN), a flat list a stack machine can run.

A post-order walk (children first, then the node) turns

    add(@0,mul(@1,2))        into        @0 @1 2 mul add

To evaluate, read left to right with a stack: push inputs and literals; an operation pops its
arguments and pushes its result. That is exactly how pnnx evaluates expressions itself, only
mirrored: pnnx reads the *prefix* words right to left, which visits them in the same order as
reading this postfix list left to right. Flattening once at build time means running the
expression is a loop with no recursion, and the same list drives the NumPy evaluator, shape
inference and the OpenCL code generator.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kuiper.parser.expression.ast import Call, Input, ListNode, Literal, Node, unparse
from kuiper.parser.expression.functions import LIST


@dataclass(frozen=True)
class Op:
    """Pop `arity` values, apply `name` (a function, or LIST to build a list), push the result."""

    name: str
    arity: int
    column: int = field(default=-1, compare=False, repr=False)  # for error messages


Instruction = Input | Literal | Op


def to_rpn(node: Node) -> list[Instruction]:
    """Post-order flattening of a tree."""
    out: list[Instruction] = []
    _emit(node, out)
    return out


def _emit(node: Node, out: list[Instruction]) -> None:
    if isinstance(node, (Input, Literal)):
        out.append(node)
    elif isinstance(node, Call):
        for arg in node.args:
            _emit(arg, out)
        out.append(Op(node.name, len(node.args), node.column))
    elif isinstance(node, ListNode):
        for item in node.items:
            _emit(item, out)
        out.append(Op(LIST, len(node.items), node.column))
    else:
        raise TypeError(f"not an expression node: {node!r}")


def format_rpn(rpn: list[Instruction]) -> str:
    """`@0 @1 2 mul add`: an RPN program as text (lists show as `[3` = a list of 3 items)."""
    words = []
    for ins in rpn:
        if isinstance(ins, Input):
            words.append(f"@{ins.index}")
        elif isinstance(ins, Literal):
            words.append(repr(ins.value) if isinstance(ins.value, str) else unparse(ins))
        elif ins.name == LIST:
            words.append(f"[{ins.arity}")
        elif ins.name == "size":
            words.append(f"size/{ins.arity}")  # the one function whose arity varies
        else:
            words.append(ins.name)
    return " ".join(words)
