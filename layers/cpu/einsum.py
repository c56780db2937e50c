"""torch.einsum (any equation) and torch.mv, which is einsum("ij,j->i").

An equation names every dim of every operand with a letter: `bij,bjk->bik` is a batched
matrix product. A letter in the output is a loop over the output; a letter only in the inputs
is summed over; a letter repeated in one operand (`ii`) walks its diagonal. Without `->` the
output is every letter that appears once, in alphabetical order (`ba` is a transpose). `...`
stands for the dims no letter names (broadcast across operands, right-aligned).

`parse_equation` turns all of that into one explicit form with a letter per dim (`...`
becomes upper-case letters), which the CPU layer hands to np.einsum and the OpenCL kernel
walks directly: for each output element, a sum over the summed letters of the product of the
operands' elements (each operand finds its element with one stride per letter).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer

ELLIPSIS_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True)
class Equation:
    inputs: tuple[str, ...]   # one letter per dim of each operand
    output: str               # the output's letters, in order
    summed: str               # letters summed over (in no output)

    def text(self) -> str:
        return ",".join(self.inputs) + "->" + self.output


def parse_equation(layer, equation: str, shapes: list[tuple[int, ...]]) -> Equation:
    """The explicit form of `equation` for operands of `shapes`, or a clear error."""
    text = equation.replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise layer.op.error(f"equation {equation!r} has {len(terms)} operand(s), the operator "
                             f"has {len(shapes)} input(s)")
    n_ell = 0
    for term, shape in zip(terms, shapes):
        named = len(term.replace("...", ""))
        if "..." in term:
            n_ell = max(n_ell, len(shape) - named)
        elif named != len(shape):
            raise layer.shape_error(f"equation {equation!r}: term {term!r} names {named} dims, "
                                    f"the operand has shape {shape}")
    ell = ELLIPSIS_LETTERS[:n_ell]
    inputs = []
    for term, shape in zip(terms, shapes):
        if not all(c.islower() or c == "." for c in term):
            raise layer.op.error(f"equation {equation!r}: use lower-case letters and '...'")
        if "..." in term:
            k = len(shape) - len(term.replace("...", ""))
            term = term.replace("...", ell[n_ell - k:] if k else "")
        inputs.append(term)
    if arrow:
        output = rhs.replace("...", ell)
    else:
        letters = "".join(inputs)
        output = ell + "".join(sorted(c for c in set(letters) if c.islower()
                                      and letters.count(c) == 1))
    for c in output:
        if c not in "".join(inputs):
            raise layer.op.error(f"equation {equation!r}: output letter {c!r} is in no operand")
    summed = "".join(sorted(set("".join(inputs)) - set(output)))
    return Equation(tuple(inputs), output, summed)


def letter_sizes(layer, eq: Equation, shapes) -> dict[str, int]:
    """Each letter's size; dims of size 1 broadcast against the others."""
    sizes: dict[str, int] = {}
    for term, shape in zip(eq.inputs, shapes):
        for c, size in zip(term, shape):
            have = sizes.get(c, 1)
            if have != size and 1 not in (have, size):
                raise layer.shape_error(f"equation {eq.text()!r}: letter {c!r} has sizes {have} "
                                        f"and {size} (operand shapes {list(shapes)})")
            sizes[c] = max(have, size) if c in sizes else size
    return sizes


@register("torch.einsum", backend="cpu")
class Einsum(Layer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.equation = op.str_param("equation")
        return layer

    def infer(self, inputs):
        if not inputs:
            raise self.op.error("torch.einsum needs at least one operand")
        shapes = [s.shape for s in inputs]
        self.eq = parse_equation(self, self.equation, shapes)
        self.sizes = letter_sizes(self, self.eq, shapes)
        dtype = np.result_type(*[s.dtype for s in inputs])
        return [TensorSpec(tuple(self.sizes[c] for c in self.eq.output), dtype)]

    def forward(self, inputs):
        dtype = np.result_type(*[np.asarray(x).dtype for x in inputs])
        y = np.einsum(self.eq.text(), *inputs, optimize=len(inputs) > 2)
        return [np.asarray(y, dtype=dtype)]

    def flops(self, inputs, outputs):
        terms = int(np.prod([self.sizes[c] for c in self.eq.summed], dtype=np.int64))
        return outputs[0].numel * terms * len(inputs)


@register("torch.mv", "Tensor.mv", backend="cpu")
class MV(Einsum):
    """torch.mv(matrix, vector): y_i = sum_j A_ij x_j."""

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.equation = "ij,j->i"
        return layer

    def infer(self, inputs):
        self.expect_inputs(inputs, 2)
        if len(inputs[0].shape) != 2 or len(inputs[1].shape) != 1:
            raise self.shape_error(f"torch.mv takes a matrix and a vector, got shapes "
                                   f"{inputs[0].shape} and {inputs[1].shape}")
        if inputs[0].shape[1] != inputs[1].shape[0]:
            raise self.shape_error(f"matrix {inputs[0].shape} and vector {inputs[1].shape} "
                                   "do not match")
        return super().infer(inputs)
