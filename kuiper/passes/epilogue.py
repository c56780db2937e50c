"""A fused epilogue: what a convolution, linear or matmul does to its output as it writes it.

The epilogue-fusion pass (kuiper/passes/fuse_epilogues.py) decides once for the graph, the same
way for both backends, which operators after a producer fold into it: an activation, a residual
add (an operand of the output's shape), in the order they appear in the model. Each backend
carries the decision out:

- NumPy (`Epilogue.apply`): in place on the producer's fresh output array: each absorbed
  operator's own formula (its CPU layer computes it: one formula, not two) and `y += r`, in
  model order;
- OpenCL (`Epilogue.opencl_options`): build options for clkernels/epilogue.h, which the
  producer's kernel calls in its store, or which clkernels/epilogue.cl applies in one extra
  pass when the producer's kernels do not (kuiper/opencl/execution/epilogue_step.py); an activation
  is the expression of its OpenCL twin (layers/opencl/activation.py), an elementwise
  expression its arithmetic (`expression_c`). Their numbers (an activation's parameters, a
  scale, a shift) are not written into the options when the epilogue adds no residual and
  the executor binds them (`numbers_as_data`): they are read as `EPI_K(i)` from the buffer
  bound where the residual would be (`opencl_constants`), so that layers that differ only in
  their numbers share one program.
  PP-OCRv5's detector fuses a different `c1 * hardswish(a * x + b) + c2` into each of its 30
  convolutions: with the numbers as literals that was 30 programs to compile (4 s each for
  PoCL's first launch of a GEMM kernel), with them as data it is a handful.

The absorbed operators never run; their outputs are the producer's (fused) output.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from kuiper.core.errors import KuiperError


@dataclass(frozen=True)
class Step:
    """One elementwise operator folded into an epilogue: `operator` (a RuntimeOperator whose
    layer is an activation, or an elementwise pnnx.Expression) and `constants`, one per input
    of it: None where it reads the producer's value, the known value elsewhere (clamp_min's
    bound, the 2 of `mul(@0,@1)` fed by a folded constant)."""

    operator: Any
    constants: tuple = (None,)

    @property
    def is_activation(self) -> bool:
        return getattr(self.operator.layer, "fusable_activation", False)

    def apply(self, y: np.ndarray) -> None:
        """y = this operator(y), in place (its CPU layer computes it: one formula, not two)."""
        layer = self.operator.layer
        form = layer.in_place_form() if self.is_activation else None
        if form is not None:
            form(y, y)
        else:
            y[...] = layer.forward([y if c is None else c for c in self.constants])[0]

    def opencl(self, literal: Callable[[float], str] | None = None) -> str:
        """This operator as one OpenCL C expression of `x` (no whitespace: a build option);
        `literal` writes each of its numbers (default: as an exact float literal)."""
        literal = literal or _literal
        if self.is_activation:
            return opencl_expression(self.operator.layer, literal)
        return expression_c(self.operator.layer.tree, self.constants, literal)

    def describe(self, value: str) -> str:
        """`nn.ReLU(y)`, `mul(y,2)`: this operator applied to the text `value`."""
        if self.is_activation:
            return f"{self.operator.type}({value})"
        expr = self.operator.layer.expr
        for k, c in enumerate(self.constants):
            shown = value if c is None else f"{np.asarray(c).reshape(-1)[0]:g}"
            expr = re.sub(rf"@{k}\b", shown, expr)
        return expr


@dataclass(frozen=True)
class Epilogue:
    """`before`: the elementwise Steps applied to the producer's result before the residual
    add, in model order; `residual`: the name of the operand added (an operand of the output's
    shape), or None; `after`: the Steps after the add. `absorbed`: the names of the operators
    this epilogue replaces, in model order."""

    before: tuple[Step, ...] = ()
    residual: str | None = None
    after: tuple[Step, ...] = ()
    absorbed: tuple[str, ...] = ()
    # OpenCL: the numbers are read as EPI_K(i) from the buffer bound as `residual`, which the
    # executor then binds (kuiper/opencl/execution/epilogue_step.py, epilogue_operand, makes
    # this copy with the buffer); anyone else binding the epilogue gets literals
    numbers_as_data: bool = False

    def __bool__(self) -> bool:
        return bool(self.before or self.after or self.residual is not None)

    @classmethod
    def around(cls, activation: Any = None, residual: str | None = None,
               residual_first: bool = True, absorbed: tuple[str, ...] = ()) -> Epilogue:
        """The two common shapes, built by hand (tests, lessons): act(y + r) when
        `residual_first`, else act(y) + r; act(y) without a residual. `activation`: a
        RuntimeOperator whose layer is an activation (or None)."""
        steps = (Step(activation),) if activation is not None else ()
        if residual is not None and residual_first:
            return cls(before=(), residual=residual, after=steps, absorbed=absorbed)
        return cls(before=steps, residual=residual, after=(), absorbed=absorbed)

    @property
    def steps(self) -> tuple[Step, ...]:
        return self.before + self.after

    @property
    def activation(self) -> Any:
        """The first fused activation operator, or None."""
        return next((s.operator for s in self.steps if s.is_activation), None)

    @property
    def residual_first(self) -> bool:
        """act(y + r) (ResNet's block end) rather than act(y) + r (YOLO's bottleneck)."""
        return not self.before

    def describe(self) -> str:
        """What the producer now writes, for `kuiper info --passes`: `F.relu(y + '12')`,
        `nn.SiLU(y) + '7'` (y: its own result; '12': the residual operand)."""
        value = "y"
        for step in self.before:
            value = step.describe(value)
        if self.residual is not None:
            value = f"{value} + '{self.residual}'"
        for step in self.after:
            value = step.describe(value)
        return value

    # --- NumPy ----------------------------------------------------------------------------------
    def apply(self, y: np.ndarray, residual: np.ndarray | None = None) -> np.ndarray:
        """Carry the epilogue out on `y`, the producer's fresh output (modified in place)."""
        for step in self.before:
            step.apply(y)
        if self.residual is not None:
            np.add(y, residual, out=y)
        for step in self.after:
            step.apply(y)
        return y

    def writer(self, residual: np.ndarray | None = None
               ) -> Callable[[np.ndarray, np.ndarray], None]:
        """`f(x, out)`: out = epilogue(x), for a producer that copies its result once anyway
        (tap_gemm cuts its output out of a wider grid): a lone in-place-capable activation
        rides on that copy for free; anything else is applied right after it."""
        lone = self.before[0] if len(self.before) == 1 and not self.after else None
        form = lone.operator.layer.in_place_form() if lone and lone.is_activation else None

        def write(x: np.ndarray, out: np.ndarray) -> None:
            if form is not None and self.residual is None:
                form(x, out)
            else:
                np.copyto(out, x)
                self.apply(out, residual)
        return write

    # --- OpenCL ---------------------------------------------------------------------------------
    def opencl_options(self) -> list[str]:
        """Build options for clkernels/epilogue.h (none: the plain store)."""
        return self._opencl()[0]

    def opencl_constants(self) -> list[float] | None:
        """The numbers of the epilogue as its options would read them with numbers_as_data,
        EPI_K(0), EPI_K(1) ..., in order: what the executor binds in place of the residual
        (float32); None when there are none, or it adds a residual (which needs the argument)."""
        if self.residual is not None:
            return None
        _options, constants = replace(self, numbers_as_data=True)._opencl()
        return constants or None

    def _opencl(self) -> tuple[list[str], list[float]]:
        constants: list[float] = []

        def slot(value: float) -> str:  # a number read from the constants buffer
            constants.append(float(np.float32(value)))
            return f"EPI_K({len(constants) - 1})"

        literal = slot if self.numbers_as_data and self.residual is None else _literal
        options = []
        if self.before:
            options.append(f"-DEPI_ACT(x)=({_nested(self.before, literal)})")
        if self.residual is not None:
            options.append("-DEPI_RESIDUAL=1")
        if self.after:
            options.append(f"-DEPI_POST(x)=({_nested(self.after, literal)})")
        return options, constants


def _nested(steps: tuple[Step, ...], literal: Callable[[float], str]) -> str:
    """The steps as one expression of x, the first innermost: `relu(x*2.0f)`."""
    text = "x"
    for step in steps:
        text = re.sub(r"\bx\b", f"({text})", step.opencl(literal))
    return text


# The elementwise expressions an epilogue takes: float arithmetic with literals and constants.
_C_BINARY = {"add": "+", "sub": "-", "mul": "*", "div": "/"}


def expression_c(node: Any, constants: tuple,
                 literal: Callable[[float], str] | None = None) -> str:
    """A pnnx.Expression tree as an OpenCL C expression of `x` (the input where `constants`
    has None), or ValueError for what an epilogue does not take (other functions, integer or
    complex values, tensors). `literal` writes each number (default: an exact literal)."""
    from kuiper.parser.expression.ast import Call, Input, Literal

    literal = literal or _literal
    if isinstance(node, Input):
        c = constants[node.index]
        return "x" if c is None else literal(_scalar(c))
    if isinstance(node, Literal):
        return literal(_scalar(node.value))
    if isinstance(node, Call) and node.name in _C_BINARY and len(node.args) == 2:
        a, b = (expression_c(arg, constants, literal) for arg in node.args)
        return f"({a}{_C_BINARY[node.name]}{b})"
    if isinstance(node, Call) and node.name in ("neg", "square") and len(node.args) == 1:
        a = expression_c(node.args[0], constants, literal)
        return f"(-{a})" if node.name == "neg" else f"({a}*{a})"
    raise ValueError(f"not an epilogue expression: {node}")


def _scalar(value: Any) -> float:
    """A real number (int or float, not bool or complex), else ValueError."""
    a = np.asarray(value)
    if a.size != 1 or a.dtype.kind not in "iuf":
        raise ValueError(f"not a real scalar: {value!r}")
    return float(a.reshape(-1)[0])


def opencl_expression(layer: Any, literal: Callable[[float], str] | None = None) -> str:
    """The activation of `layer` as one OpenCL C expression of `x`, its parameters written by
    `literal` (default: as exact literals).

    Every fusable activation's OpenCL twin says what it computes as `expr`, a C expression of
    `x` and its parameters `p0 p1 p2` (its `values`): layers/opencl/activation.py, and ReLU's
    twin, whose own kernel is relu.cl."""
    expr = getattr(layer, "expr", None)
    if not expr:
        raise KuiperError(f"operator '{layer.name}' ({layer.type}) cannot be fused into an "
                          "OpenCL epilogue: its layer has no OpenCL expression (`expr`)")
    literal = literal or _literal
    values = list(getattr(layer, "values", ()))
    return re.sub(r"\bp([0-2])\b", lambda m: literal(values[int(m.group(1))]), expr)


def _literal(value: float) -> str:
    """A float32 OpenCL literal without whitespace, exact (hexadecimal), inf and NaN included."""
    v = float(np.float32(value))
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "(-INFINITY)"
    return f"({v.hex()}f)"
