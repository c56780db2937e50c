"""Compile a pnnx.Expression into the source of ONE OpenCL kernel.

A chain like `add(@0,mul(@1,2))` could run as two kernels (a mul, then an add), writing and
re-reading a whole temporary tensor in between. Generating one kernel per expression instead
keeps every intermediate value in a register: each work-item reads its inputs once, computes
the whole expression and writes one output element. (This is "kernel fusion", which is what
deep-learning compilers spend most of their effort on.)

The generator runs the same RPN program as the NumPy evaluator, with a stack, but what it
pushes is *C code*:

    @0 @1 2 mul add    ->   x0, x1, 2 ... `const float t0 = (x1 * 2.0f);` ... t1

Every dtype decision comes from `kuiper.parser.expression.dtypes.signature`, the function the
NumPy evaluator uses, so both backends agree on PyTorch's promotion rules by construction. Values
known while generating (literals, `size(@0,1)`, inputs whose value is known at build time) are
folded with the NumPy evaluator and appear in the source as constants. Shapes and broadcast
strides are baked in as well, so the program is specific to (expression, input shapes, dtypes),
and the source text says all of it: the runtime caches the built programs by that text
(`OpenCLRuntime.program_from_source`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from string import Template
from typing import Any

import numpy as np

from kuiper.clkernels import KERNEL_DIR
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.opencl_helpers.cl_types import arith_type
from kuiper.parser.expression.ast import Input, Literal
from kuiper.parser.expression.dtypes import (
    BOOL,
    DIMENSIONED,
    ZERO_DIM,
    TypeInfo,
    signature,
    type_of,
)
from kuiper.parser.expression.evaluate import PYTHON_NUMBERS, Symbolic, apply
from kuiper.parser.expression.functions import FUNCTIONS, LIST
from kuiper.parser.expression.rpn import Instruction, Op

KERNEL_NAME = "expression"

# C for each function, by the compute dtype's family. {a}, {b}: operands already converted to
# the compute type T. Plain OpenCL built-ins where their semantics match PyTorch's, helpers from
# clkernels/expression.h where they do not.
_SAME_NAME = ("acos acosh asin asinh atan atanh ceil cos cosh erf exp expm1 floor log log10 "
              "log1p rsqrt sin sinh sqrt tan tanh trunc")
FLOAT_C = {
    **{name: f"{name}({{a}})" for name in _SAME_NAME.split()},
    "abs": "fabs({a})", "neg": "(-{a})", "reciprocal": "(1 / {a})", "round": "rint({a})",
    "sign": "(({T})(({a} > 0) - ({a} < 0)))", "square": "({a} * {a})",
    "add": "({a} + {b})", "sub": "({a} - {b})", "mul": "({a} * {b})", "div": "({a} / {b})",
    "floor_divide": "floor_divide_{T}({a}, {b})", "remainder": "remainder_{T}({a}, {b})",
    "fmod": "fmod({a}, {b})", "pow": "pow({a}, {b})", "atan2": "atan2({a}, {b})",
    "max": "maximum_{T}({a}, {b})", "maximum": "maximum_{T}({a}, {b})",
    "min": "minimum_{T}({a}, {b})", "minimum": "minimum_{T}({a}, {b})",
    "logaddexp": "logaddexp_{T}({a}, {b})",
}
INT_C = {
    "abs": "(({T})abs({a}))",  # OpenCL's abs of a signed int returns the unsigned type
    "neg": "(-{a})", "sign": "(({a} > 0) - ({a} < 0))", "square": "({a} * {a})",
    "ceil": "{a}", "floor": "{a}", "round": "{a}", "trunc": "{a}",
    "add": "({a} + {b})", "sub": "({a} - {b})", "mul": "({a} * {b})",
    "floor_divide": "floor_divide_{T}({a}, {b})", "remainder": "remainder_{T}({a}, {b})",
    "fmod": "fmod_{T}({a}, {b})", "pow": "pow_{T}({a}, {b})",
    "max": "max({a}, {b})", "maximum": "max({a}, {b})",
    "min": "min({a}, {b})", "minimum": "min({a}, {b})",
    "and": "({a} & {b})", "or": "({a} | {b})", "xor": "({a} ^ {b})",
    "lshift": "lshift_{T}({a}, {b})", "rshift": "rshift_{T}({a}, {b})",
}
# Bools are bytes holding 0 or 1; PyTorch's add of bools is "or", mul is "and".
BOOL_C = {"add": "({a} | {b})", "mul": "({a} & {b})", "max": "({a} | {b})",
          "maximum": "({a} | {b})", "min": "({a} & {b})", "minimum": "({a} & {b})",
          "and": "({a} & {b})", "or": "({a} | {b})", "xor": "({a} ^ {b})", "sign": "{a}"}


# What c_literal spells a float NaN or infinity as (the generator makes those opaque).
NON_FINITE = ("NAN", "INFINITY", "(-INFINITY)")


class CodegenError(ValueError):
    """An expression this generator cannot turn into OpenCL (e.g. complex or float16 values)."""


@dataclass(frozen=True)
class Value:
    """A per-work-item value in the kernel: a C expression (a variable name) and its type."""

    code: str
    dtype: np.dtype
    category: int  # ZERO_DIM or DIMENSIONED, for type promotion


@dataclass(frozen=True)
class KernelSource:
    source: str
    inputs: list[int]  # which inputs the kernel reads, in argument order (before `out`)
    n: int             # output elements = work-items


def ctype(dtype: np.dtype) -> str:
    """cl_types.arith_type, failing as a CodegenError (the expression layer reports those)."""
    try:
        return arith_type(dtype)
    except ValueError:
        raise CodegenError(f"dtype {np.dtype(dtype).name} is not supported by the OpenCL "
                           "expression kernel") from None


def generate(expr: str, rpn: Sequence[Instruction], in_specs: Sequence[TensorSpec],
             out_spec: TensorSpec) -> KernelSource:
    """Source of the kernel computing `rpn` for these input specs (output: `out_spec`)."""
    gen = _Generator(expr, in_specs, out_spec.shape)
    result = gen.run(rpn)
    if result.dtype != out_spec.dtype:  # cannot happen: infer used the same rules
        raise CodegenError(f"generated {result.dtype} but inferred {out_spec.dtype}")
    n = out_spec.numel
    index = "int" if n < 2**31 else "long"
    used = sorted(gen.reads)
    params = "".join(f"__global const {ctype(in_specs[k].dtype)} *in{k}, " for k in used)
    shapes = ", ".join(f"@{k} {_shape_text(in_specs[k].shape)} {in_specs[k].dtype.name}"
                       for k in used)
    source = _template().substitute(
        comment=f"// generated for {expr}\n// output {_shape_text(out_spec.shape)} "
                f"{out_spec.dtype.name}; inputs {shapes or 'none'}",
        params=params, out_type=ctype(out_spec.dtype), index=index, n=n,
        coordinates=_coordinates(out_spec.shape, index) if gen.needs_coordinates else "",
        reads="".join(f"    const {ctype(in_specs[k].dtype)} x{k} = in{k}[{gen.reads[k]}];\n"
                      for k in used),
        body="".join(gen.lines), result=result.code)
    return KernelSource(source, used, n)


@functools.cache
def _template() -> Template:
    """clkernels/expression.cl, minus its explanatory comments."""
    text = (KERNEL_DIR / "expression.cl").read_text()
    return Template(text[text.index("${comment}"):])


class _Generator:
    def __init__(self, expr: str, in_specs: Sequence[TensorSpec], out_shape: tuple[int, ...]):
        self.expr, self.in_specs, self.out_shape = expr, in_specs, tuple(out_shape)
        self.reads: dict[int, str] = {}  # input index -> offset expression of its read
        self.needs_coordinates = False
        self.lines: list[str] = []

    def run(self, rpn: Sequence[Instruction]) -> Value:
        # Stack items: Python values (known now), Symbolic (an input not read yet: size() only
        # needs its shape) or Value (C code).
        stack: list[Any] = []
        for ins in rpn:
            if isinstance(ins, Input):
                spec = self.in_specs[ins.index]
                known_number = spec.known and not isinstance(spec.value, np.ndarray)
                stack.append(spec.value if known_number else _InputRef(ins.index, spec))
            elif isinstance(ins, Literal):
                stack.append(ins.value)
            else:
                args = stack[len(stack) - ins.arity:]
                del stack[len(stack) - ins.arity:]
                stack.append(self.op(ins, args))
        return self.value(stack[0], None)

    def op(self, op: Op, args: list[Any]) -> Any:
        if op.name == LIST:
            raise CodegenError("a list is not a tensor: it has no kernel")
        if op.name == "size" or not any(isinstance(a, (_InputRef, Value)) for a in args):
            # Known now: fold it with the NumPy evaluator (size reads only the shape).
            host = [a.symbolic if isinstance(a, _InputRef) else a for a in args]
            return apply(op, host, self.expr)
        operands = [a if isinstance(a, PYTHON_NUMBERS) else self.value(a, None) for a in args]
        types = [type_of(a) if isinstance(a, PYTHON_NUMBERS) else TypeInfo(a.dtype, a.category)
                 for a in operands]
        compute, result = signature(op.name, types)
        codes = [self.value(a, compute).code for a in operands]
        code = self.c_code(op.name, compute, result, codes)
        name = f"t{len(self.lines)}"
        self.lines.append(f"    const {ctype(result)} {name} = {code};\n")
        category = max(t.category for t in types)
        return Value(name, result, max(category, ZERO_DIM))

    def value(self, item: Any, dtype: np.dtype | None) -> Value:
        """`item` as C code, converted to `dtype` (None: keep its own type)."""
        if isinstance(item, _InputRef):
            item = self.read(item)
        if isinstance(item, Value):
            if dtype is None or item.dtype == dtype:
                return item
            code = f"({item.code} != 0)" if dtype == BOOL else f"(({ctype(dtype)}){item.code})"
            return Value(code, dtype, item.category)
        if isinstance(item, PYTHON_NUMBERS):
            target = dtype if dtype is not None else type_of(item).dtype
            code = c_literal(item, target)
            if code in NON_FINITE:
                code = self.opaque(code, target)
            return Value(code, target, ZERO_DIM)
        raise CodegenError(f"{item!r} cannot be computed by a kernel")

    def opaque(self, code: str, dtype: np.dtype) -> str:
        """A NaN or infinity literal as a `volatile` variable the compiler cannot see through.

        Given `exp(x * NAN)`, LLVM folds `x * NAN` to NaN and then inlines the device
        library's exp on a constant NaN, whose range reduction converts it to an integer:
        poison in LLVM, so PoCL computed finite garbage that changed from run to run, where
        a NaN read from a buffer propagates correctly. Loaded from a volatile variable, the
        value is only known at run time, exactly like a NaN in an input."""
        name = f"k{len(self.lines)}"
        self.lines.append(f"    volatile {ctype(dtype)} {name} = {code};\n")
        return name

    def read(self, ref: _InputRef) -> Value:
        """Read input k at this work-item's broadcast offset (once; later uses reuse x<k>)."""
        shape = ref.spec.shape
        if ref.index not in self.reads:
            offset = _offset(shape, self.out_shape)
            self.needs_coordinates |= offset.startswith("c")
            self.reads[ref.index] = offset
        return Value(f"x{ref.index}", ref.spec.dtype, DIMENSIONED if shape else ZERO_DIM)

    @staticmethod
    def c_code(name: str, compute: np.dtype, result: np.dtype, codes: list[str]) -> str:
        a, b = codes[0], codes[1] if len(codes) > 1 else ""
        if FUNCTIONS[name].kind == "cast":
            return f"({a} != 0)" if result == BOOL else f"(({ctype(result)}){a})"
        if compute == BOOL:
            table = BOOL_C
        elif compute.kind == "f":
            table = FLOAT_C
        elif compute.kind in "iu":
            table = INT_C
        else:
            raise CodegenError(f"{name} on {compute.name} is not supported by the OpenCL "
                               "expression kernel")
        template = table.get(name)
        if template is None and table is FLOAT_C:  # a function added by define_function
            template = FUNCTIONS[name].opencl
        if template is None:  # dtypes.signature already refused these
            raise CodegenError(f"{name} is not defined for {compute.name}")
        if name == "pow" and table is FLOAT_C and b in ("2.0f", "2.0"):
            # x ** 2 (YOLO's anchor arithmetic): a product, as PyTorch computes it; PoCL's
            # pow() is a library call, 1.6 ms for YOLOv5s's 38k values
            return f"({a} * {a})"
        return template.format(a=a, b=b, T=ctype(compute))


@dataclass(frozen=True)
class _InputRef:
    index: int
    spec: TensorSpec

    @property
    def symbolic(self) -> Symbolic:
        return Symbolic(self.spec.shape, self.spec.dtype)


def c_literal(value: Any, dtype: np.dtype) -> str:
    """A Python number as a C constant of `dtype`, rounded exactly as NumPy converts it."""
    if isinstance(value, complex):
        raise CodegenError("complex numbers are not supported by the OpenCL expression kernel")
    c = ctype(dtype)
    if dtype == BOOL:
        return "1" if value else "0"
    if dtype.kind == "f":
        v = float(value)
        if c == "float":  # round now: 1e39 is finite as a double but inf as a float
            with np.errstate(over="ignore"):
                v = float(np.float32(v))
        if np.isnan(v):
            return "NAN"
        if np.isinf(v):
            return "INFINITY" if v > 0 else "(-INFINITY)"
        text = str(np.float32(v)) if c == "float" else repr(v)  # shortest exact spelling
        if not any(ch in text for ch in ".e"):
            text += ".0"
        return text + ("f" if c == "float" else "")
    v = int(np.asarray(value).astype(dtype))  # wraps like PyTorch: int8 + 1000
    lowest = int(np.iinfo(dtype).min)
    if v == lowest and c in ("int", "long"):  # -2147483648 is `-(2147483648)` in C: too big
        return f"({v + 1}{'L' if c == 'long' else ''} - 1)"
    if c == "long":
        return f"{v}L"
    return str(v) if c == "int" else f"(({c}){v})"


def _shape_text(shape: Sequence[int]) -> str:
    return "x".join(str(d) for d in shape) or "scalar"


def _coordinates(shape: Sequence[int], index: str) -> str:
    """C lines turning the flat output index `i` into coordinates c0..c{rank-1}."""
    if not shape:
        return ""
    lines = [f"    {index} r = i;\n"]
    for d in range(len(shape) - 1, 0, -1):
        lines.append(f"    const {index} c{d} = r % {shape[d]}; r /= {shape[d]};\n")
    lines.append(f"    const {index} c0 = r;\n")
    return "".join(lines)


def _offset(in_shape: Sequence[int], out_shape: Sequence[int]) -> str:
    """Where output element (c0, c1, ...) reads an input of `in_shape` under broadcasting.

    Input dims align with the output's last dims; a dim of size 1 is broadcast (stride 0), so
    it drops out of the sum. Same shape: the flat index itself; one element: offset 0.
    """
    if int(np.prod(in_shape, dtype=np.int64)) == 1:
        return "0"
    if tuple(in_shape) == tuple(out_shape):
        return "i"
    lead = len(out_shape) - len(in_shape)
    strides = np.cumprod((list(in_shape[1:]) + [1])[::-1])[::-1]  # C-contiguous, in elements
    terms = [f"c{lead + d} * {int(s)}" if s != 1 else f"c{lead + d}"
             for d, (size, s) in enumerate(zip(in_shape, strides)) if size != 1]
    return " + ".join(terms)
