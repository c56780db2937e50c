"""Every function of the expression language at the edges of floating point, on both backends,
against PyTorch: NaN, infinities, signed zeros, float32's largest and smallest values, and the
same values written as literals in the expression (`nan.0`, `inf`, `-0.0`, `3.402823e+38`).

Issue 31 found both backends wrong here: a NaN *literal* gave finite garbage on OpenCL
(`exp(mul(@0,nan.0))`: the compiler folded the constant into the math library's integer
conversion, which is undefined for NaN), and `remainder(5.0, -5.0)` was -0.0 on the CPU
(NumPy follows Python) where PyTorch gives 0.0, so a following division gave -inf.

The reference is PyTorch's scalar kernels, one element at a time: its vectorized kernels
disagree with its scalar ones at a few extremes (`fmod(3.4e38, 1e-45)` is 0.0 in one and NaN
in the other, depending on the tensor's length), and an answer must not depend on that.
Comparison: `kuiper.testing.edge_mismatch` (NaN, infinities and zero signs exactly).

Each model holds many expressions (one kernel each on OpenCL). The normal run times every
function on a grid of the edge values against each other, plus one literal form per function
on OpenCL (all of them on the CPU); `-m campaign` runs every literal form on OpenCL as well.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import kuiper
from kuiper.parser.expression import FUNCTIONS
from kuiper.testing import (
    EDGE_FLOATS,
    EDGE_INTS,
    EDGE_LITERALS,
    edge_mismatch,
    write_expression_model,
)
from tests.conftest import opencl_available

FLOATS, INTS, LITERALS = EDGE_FLOATS, EDGE_INTS, EDGE_LITERALS  # (kuiper/testing)

TORCH = {
    **{name: getattr(torch, name) for name in (
        "abs acos acosh asin asinh atan atanh ceil cos cosh erf exp expm1 floor log log10 log1p "
        "neg reciprocal round rsqrt sign sin sinh sqrt square tan tanh trunc add sub mul div "
        "floor_divide remainder fmod pow atan2 logaddexp").split()},
    "int": lambda x: x.long(), "torch.long": lambda x: x.long(),
    "torch.float": lambda x: x.float(), "torch.bool": lambda x: x.bool(),
    "max": torch.maximum, "maximum": torch.maximum, "min": torch.minimum,
    "minimum": torch.minimum, "and": torch.bitwise_and, "or": torch.bitwise_or,
    "xor": torch.bitwise_xor, "lshift": torch.bitwise_left_shift,
    "rshift": torch.bitwise_right_shift,
}
NAMES = [name for name in FUNCTIONS if name != "size"]


def test_the_reference_covers_every_function():
    assert sorted(TORCH) == sorted(NAMES), "a function of FUNCTIONS without a torch reference"


def literal(text: str) -> np.float32:
    return np.float32(float(text.replace("nan.0", "nan")))


def torch_scalar(name: str, *args: np.ndarray) -> np.ndarray:
    """`name` applied by PyTorch element by element (its scalar kernels), broadcast."""
    arrays = np.broadcast_arrays(*[np.asarray(a) for a in args])
    values = [TORCH[name](*[torch.tensor(np.asarray(v).reshape(1)) for v in items])[0].numpy()
              for items in zip(*[a.ravel() for a in arrays])]
    return np.array(values).reshape(arrays[0].shape)


def cases(name: str, literals: list[str]) -> list[tuple[list[np.ndarray], list[str], list]]:
    """(inputs, expressions, expected values) for `name`: the grid of edge values, then the
    literal forms asked for."""
    unary = FUNCTIONS[name].min_args == 1
    x = INTS if FUNCTIONS[name].kind in ("bitwise", "shift") else FLOATS
    if unary:
        found = [([x], [f"{name}(@0)"], [torch_scalar(name, x)])]
    else:
        a, b = x.reshape(-1, 1), x.reshape(1, -1)
        found = [([a, b], [f"{name}(@0,@1)"], [torch_scalar(name, a, b)])]
    if x is INTS or not literals:
        return found
    exprs, expected = [], []
    for text in literals:
        value = literal(text)
        if unary:  # the literal reaches the function through an operation on the input
            for inner in ("add", "mul"):
                exprs.append(f"{name}({inner}(@0,{text}))")
                expected.append(torch_scalar(name, torch_scalar(inner, x, value)))
        else:
            exprs += [f"{name}(@0,{text})", f"{name}({text},@0)"]
            expected += [torch_scalar(name, x, value), torch_scalar(name, value, x)]
    return found + [([x], exprs, expected)]


def run_cases(tmp_path, backend: str, name: str, literals: list[str]) -> None:
    failures = []
    for k, (inputs, exprs, expected) in enumerate(cases(name, literals)):
        folder = tmp_path / str(k)
        folder.mkdir()
        graph = kuiper.load(write_expression_model(folder, inputs, exprs), backend=backend)
        assert not graph.fallbacks, f"{name} fell back to the host on {backend}"
        outputs = graph.forward(*inputs)
        for expr, got, want in zip(exprs, outputs, expected):
            why = edge_mismatch(got, want)
            if why is not None:
                failures.append(f"{expr}: {why}")
    assert not failures, f"{backend}, PyTorch disagrees:\n" + "\n".join(failures)


def short_literals(name: str) -> list[str]:
    """One literal form per function for OpenCL's normal run, taking turns so that every
    literal is met; NaN for the functions where issue 31 found the garbage."""
    if name in ("exp", "tanh", "sinh", "logaddexp", "floor_divide"):
        return ["nan.0"]
    return [LITERALS[NAMES.index(name) % len(LITERALS)]]


@pytest.mark.parametrize("name", NAMES)
def test_every_function_at_the_edges(tmp_path, backend, name):
    literals = LITERALS if backend == "cpu" else short_literals(name)
    run_cases(tmp_path, backend, name, literals)


@pytest.mark.campaign  # about 4 minutes under PoCL on 2 cores: python -m pytest -m campaign
@pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
@pytest.mark.parametrize("name", NAMES)
def test_every_function_with_every_literal_on_opencl(tmp_path, name):
    run_cases(tmp_path, "opencl", name, LITERALS)  # (the CPU meets them all in the normal run)


@pytest.mark.parametrize("expr, x, expected", [
    ("exp(mul(@0,nan.0))", 1.0, math.nan), ("tanh(add(@0,nan))", 1.0, math.nan),
    ("logaddexp(@0,nan.0)", 1.0, math.nan), ("sinh(add(@0,nan.0))", 1.0, math.nan),
    ("div(1,remainder(@0,-5.0))", 5.0, math.inf),  # remainder(5, -5) is +0.0
    ("div(1,remainder(@0,5.0))", -5.0, -math.inf),  # and remainder(-5, 5) is -0.0
    ("div(1,max(@0,-0.0))", 0.0, math.inf), ("div(1,min(@0,0.0))", -0.0, -math.inf),
    ("div(1,sign(@0))", -0.0, math.inf),
])
def test_the_cases_of_issue_31(tmp_path, backend, expr, x, expected):
    graph = kuiper.load(write_expression_model(tmp_path, [np.full(8, x, np.float32)], [expr]),
                        backend=backend)
    why = edge_mismatch(graph(np.full(8, x, np.float32)), np.full(8, expected, np.float32))
    assert why is None, f"{expr} at {x}: {why}"
