"""Lesson 7: to_rpn, the RPN evaluator, and a new function through every step."""

import numpy as np
import pytest

from kuiper.course.lessons import check_array, implementation, require_opencl
from kuiper.parser.expression import Symbolic, format_rpn, parse, tokenize
from kuiper.parser.expression.ast import Input, Literal
from kuiper.parser.expression.rpn import Op
from kuiper.testing import run_operator

REFERENCE = {
    "to_rpn": "kuiper.parser.expression.rpn:to_rpn",
    "evaluate": "kuiper.parser.expression.evaluate:evaluate",
    "define_function": "kuiper.parser.expression.custom:define_function",
}
ex = implementation(__file__, REFERENCE)


@pytest.mark.parametrize("expr, expected", [
    ("@0", "@0"),
    ("add(@0,mul(@1,2))", "@0 @1 2 mul add"),
    ("neg(sub(@0,@1))", "@0 @1 sub neg"),
    ("div(add(@0,1),sub(@1,2.5))", "@0 1 add @1 2.5 sub div"),
    ("[size(@0,0),-1,3]", "@0 0 size/2 -1 3 [3"),
    ("[]", "[0"),
    ("pow(@0,size(@1))", "@0 @1 size/1 pow"),
])
def test_to_rpn(expr, expected):
    rpn = ex.to_rpn(parse(expr))
    assert format_rpn(rpn) == expected, f"to_rpn of {expr}: {format_rpn(rpn)!r}"
    assert all(isinstance(i, (Input, Literal, Op)) for i in rpn)


def test_to_rpn_keeps_columns_for_error_messages():
    rpn = ex.to_rpn(parse("mul(@0,add(@1,2))"))
    assert rpn[-1] == Op("mul", 2) and rpn[-1].column == 0
    assert rpn[-2] == Op("add", 2) and rpn[-2].column == 7


def run(expr, *inputs):
    return ex.evaluate(ex.to_rpn(parse(expr)), list(inputs), expr)


def test_evaluate_arrays():
    rng = np.random.default_rng(7)
    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal((3,)).astype(np.float32)
    check_array(run("add(@0,mul(@1,2))", a, b), a + b * 2, "add(@0,mul(@1,2))")
    check_array(run("sub(@0,@1)", a, b), a - b, "sub(@0,@1): the first argument is deepest")
    check_array(run("div(@1,sqrt(abs(@0)))", a, b), b / np.sqrt(np.abs(a)), "div(...)")


def test_evaluate_follows_pytorch_dtypes():
    i = np.arange(6, dtype=np.int64).reshape(2, 3)
    out = run("div(@0,2)", i)
    check_array(out, (i / 2).astype(np.float32), "div of an int64 tensor", exact=True)
    out = run("mul(@0,2)", i)
    check_array(out, i * 2, "mul of an int64 tensor", exact=True)


def test_evaluate_python_numbers_and_lists():
    x = np.zeros((4, 3, 2), np.float32)
    assert run("[size(@0,0),-1,mul(size(@0,2),3)]", x) == [4, -1, 6]
    assert run("floor_divide(size(@0,1),2)", x) == 1
    assert run("2") == 2


def test_evaluate_symbolic_tensors():
    out = run("add(@0,@1)", Symbolic((2, 1, 5), np.dtype(np.float32)),
              Symbolic((3, 1), np.dtype(np.int64)))
    assert out == Symbolic((2, 3, 5), np.dtype(np.float32))


@pytest.fixture
def tables():
    """Leave the function tables as they were, whatever the exercise did to them."""
    from kuiper.layers.opencl_helpers.expression_codegen import FLOAT_C
    from kuiper.parser.expression.evaluate import NUMPY, PYTHON_BINARY
    from kuiper.parser.expression.functions import FUNCTIONS

    saved = [(t, dict(t)) for t in (FUNCTIONS, NUMPY, PYTHON_BINARY, FLOAT_C)]
    yield
    for table, copy in saved:
        table.clear()
        table.update(copy)


def test_a_new_unary_function_goes_through_every_step(tables):
    from kuiper.parser.expression.functions import FUNCTIONS

    f = ex.define_function("log2", 1, "float_unary", np.log2)
    assert FUNCTIONS["log2"] == f and (f.min_args, f.max_args, f.kind) == (1, 1, "float_unary")
    assert [t.kind.value for t in tokenize("log2(@0)")] == ["name", "(", "input", ")", "end"]
    assert format_rpn(ex.to_rpn(parse("add(log2(@0),1)"))) == "@0 log2 1 add"
    x = np.array([[1, 2, 8]], np.int64)
    check_array(run("log2(@0)", x), np.array([[0, 1, 3]], np.float32),
                "log2 of an int64 tensor (float_unary: the result is float32)", exact=True)
    assert run("log2(8)") == 3.0
    (y,) = run_operator("pnnx.Expression", [x.astype(np.float32)], params={"expr": "log2(@0)"})
    check_array(y, np.log2(x).astype(np.float32), "a model using log2")


def test_a_new_binary_function_goes_through_every_step(tables):
    ex.define_function("hypot", 2, "float_binary", np.hypot)
    a = np.array([3.0, 5.0], np.float32)
    b = np.array([4.0, 12.0], np.float32)
    check_array(run("hypot(@0,@1)", a, b), np.array([5.0, 13.0], np.float32), "hypot")
    assert run("hypot(3,4)") == 5.0


def test_a_new_function_on_opencl(tables):
    require_opencl()
    ex.define_function("log2", 1, "float_unary", np.log2, opencl="log2({a})")
    x = np.array([[1.0, 2.0, 8.0, 0.5]], np.float32)
    (y,) = run_operator("pnnx.Expression", [x], params={"expr": "mul(log2(@0),2)"},
                        backend="opencl")
    check_array(y, np.log2(x) * 2, "mul(log2(@0),2) in a generated OpenCL kernel")


def test_names_the_tokenizer_would_split_are_refused(tables):
    for bad in ("2x", "log(2", "@1", "True"):
        with pytest.raises(ValueError):
            ex.define_function(bad, 1, "float_unary", np.log2)


def test_taken_names_and_unknown_kinds_are_refused(tables):
    with pytest.raises(ValueError):
        ex.define_function("sin", 1, "float_unary", np.sin)
    with pytest.raises(ValueError):
        ex.define_function("log2", 2, "float_unary", np.log2)
    with pytest.raises(ValueError):
        ex.define_function("log2", 1, "bitwise", np.log2)
