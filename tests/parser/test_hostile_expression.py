"""Hostile `pnnx.Expression` strings (issue 14): constant folding at load time must stay cheap,
and every bad expression must give an `ExpressionError` with the operator, the line and a caret
-- never a minute of big-integer arithmetic, gigabytes of memory, a RecursionError or a bare
TypeRuleError/AttributeError.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import kuiper
from kuiper.core.errors import ExpressionError
from kuiper.parser.expression import evaluate, parse, to_rpn
from kuiper.parser.expression.ast import MAX_DEPTH
from kuiper.testing import write_param


def write_model(tmp_path, expr: str) -> str:
    return write_param(tmp_path, ["pnnx.Input in 0 1 x #x=(2,3)f32",
                                  f"pnnx.Expression e 1 1 x y expr={expr}",
                                  "pnnx.Output out 1 0 y"], counts="3 3", name="e")


def load_error(tmp_path, expr: str, *parts: str) -> str:
    path = write_model(tmp_path, expr)
    start = time.perf_counter()
    with pytest.raises(ExpressionError) as info:
        kuiper.load(path)
    assert time.perf_counter() - start < 5, "folding a constant must stay cheap"
    message = str(info.value)
    for part in ("operator 'e'", "line 4", *parts):
        assert part in message, f"{part!r} not in {message!r}"
    return message


def fold(expr: str):
    return evaluate(to_rpn(parse(expr)), [], expr)


# --- constant folding is bounded ----------------------------------------------------------------

@pytest.mark.parametrize("expr, parts", [
    ("add(@0,pow(10,100000000))", ["pow(10, 100000000) is beyond int64"]),
    ("add(@0,lshift(1,100000000000))", ["lshift(1, 100000000000) is beyond int64"]),
    ("add(@0,pow(-3,1000000000000))", ["beyond int64"]),
    ("add(@0,mul(9223372036854775807,2))", ["integer result", "beyond int64"]),
    ("add(@0,int(1.0e300))", ["beyond int64"]),
    ("add(@0,pow(2,63))", ["beyond int64"]),
])
def test_big_integer_folding_is_refused_fast(tmp_path, expr, parts):
    load_error(tmp_path, expr, *parts)


@pytest.mark.parametrize("expr, expected", [
    ("pow(2,62)", 1 << 62), ("pow(-2,63)", -(1 << 63)), ("lshift(1,62)", 1 << 62),
    ("pow(1,1000000000000)", 1), ("pow(-1,1000000000001)", -1), ("lshift(0,100000000000)", 0),
    ("rshift(5,100000000000)", 0), ("pow(0,100000000000)", 0), ("pow(2,-3)", 0.125),
    ("mul(3037000499,3037000499)", 3037000499 ** 2),
])
def test_integer_folding_within_int64_still_works(expr, expected):
    start = time.perf_counter()
    value = fold(expr)
    assert time.perf_counter() - start < 1
    assert value == expected and type(value) is type(expected)


def test_float_folding_overflow_is_an_expression_error():
    with pytest.raises(ExpressionError, match="pow"):
        fold("pow(10.0,1000000.0)")


# --- literals and nesting ------------------------------------------------------------------------

def test_integer_literal_beyond_int64(tmp_path):
    load_error(tmp_path, "add(@0," + "9" * 5000 + ")", "5000 digits", "beyond int64",
               "at column 7")


def test_nesting_deeper_than_the_bound(tmp_path):
    depth = 500
    message = load_error(tmp_path, "neg(" * depth + "@0" + ")" * depth,
                         f"nested more than {MAX_DEPTH} deep")
    assert len(message) < 600  # the expression is shown around the column, not whole


def test_nesting_up_to_the_bound_is_fine():
    expr = "neg(" * MAX_DEPTH + "@0" + ")" * MAX_DEPTH
    x = np.arange(3.0, dtype=np.float32)
    np.testing.assert_array_equal(evaluate(to_rpn(parse(expr)), [x], expr), x)


def test_a_list_cannot_hold_a_list(tmp_path):
    # size(@0) is already a list: `[size(@0),@0]` was a bare TypeRuleError in shape inference.
    load_error(tmp_path, "[size(@0),@0]", "item 1 of the list is a list of 2")


# --- constant expressions feeding other operators -------------------------------------------------

@pytest.mark.parametrize("constant, expected", [("1e-5", 1e-5), ("erf(0)", 0.0),
                                                ("erf(0.5)", 0.5204998778130465)])
def test_constant_expression_folds(constant, expected):
    assert fold(constant) == pytest.approx(expected)


def test_erf_of_a_zero_dim_array():
    # frompyfunc returns a bare float for a 0-dim input: `erf` was an AttributeError.
    expr = "erf(@0)"
    out = evaluate(to_rpn(parse(expr)), [np.array(0.5, dtype=np.float32)], expr)
    assert isinstance(out, np.ndarray) and out.shape == () and out.dtype == np.float32
    assert out == pytest.approx(0.5204998778130465)


@pytest.mark.parametrize("constant", ["1e-5", "erf(0)"])
def test_constant_expression_feeding_an_expression_loads_and_runs(tmp_path, constant):
    path = tmp_path / "c.pnnx.param"
    path.write_text("7767517\n4 4\npnnx.Input in 0 1 x #x=(2,3)f32\n"
                    f"pnnx.Expression c 0 1 k expr={constant}\n"
                    "pnnx.Expression e 2 1 x k y expr=add(@0,@1)\npnnx.Output out 1 0 y\n")
    x = np.ones((2, 3), np.float32)
    np.testing.assert_allclose(kuiper.load(path)(x), x + fold(constant), rtol=1e-6)
