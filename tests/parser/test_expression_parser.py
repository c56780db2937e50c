"""The expression parser: trees, RPN order, pnnx's malformed parentheses, and error messages."""

import math

import numpy as np
import pytest
import torch

import kuiper  # noqa: F401  (import order: `parser` imports kuiper.core.errors, which needs kuiper)
from kuiper.core.errors import ExpressionError
from kuiper.parser.expression import (
    FUNCTIONS,
    Call,
    Input,
    ListNode,
    Literal,
    evaluate,
    format_rpn,
    parse,
    to_rpn,
    unparse,
)
from kuiper.parser.expression.rpn import Op

# Written by pnnx 20261020 for `torch.log1p(torch.expm1(torch.log10(x + 1) + x) + x) + x`
# (tests/models/export.py, see test_real_pnnx_export_of_expm1_log1p), and a second form of the
# same bug from the format notes: x + log10(x + 1) + expm1(x) + log1p(x).
PNNX_EXPM1_LOG1P = "add(log1p,add(expm1,add(log10(add(@0,1)),@0))),@0,@0"
PNNX_EXPM1_LOG1P_2 = "add(add(add(@0,log10(add(@0,1))),expm1),@0),log1p,@0"


def test_tree_of_nested_calls():
    assert parse("add(@0,mul(@1,2))") == Call("add", (Input(0), Call("mul", (Input(1),
                                                                             Literal(2)))))


def test_literals_keep_their_python_type():
    tree = parse("mul(@0,2.0)")
    assert tree.args[1] == Literal(2.0) and tree.args[1] != Literal(2)
    assert parse("True") == Literal(True) and parse("True") != Literal(1)
    assert parse("nan.0") == Literal(math.nan)


def test_lists_and_size():
    assert parse("[size(@0,0),-1,3]") == ListNode((Call("size", (Input(0), Literal(0))),
                                                   Literal(-1), Literal(3)))
    assert parse("size(@1)") == Call("size", (Input(1),))
    assert parse("[]") == ListNode(())
    assert parse("[@0,@1]") == ListNode((Input(0), Input(1)))


def test_bare_string_is_a_literal():
    assert parse("bilinear") == Literal("bilinear")


def test_columns_locate_nodes():
    tree = parse("add(@0,mul(@1,2))")
    assert (tree.column, tree.args[0].column, tree.args[1].column) == (0, 4, 7)


def test_rpn_is_post_order():
    rpn = to_rpn(parse("add(@0,mul(@1,2))"))
    assert rpn == [Input(0), Input(1), Literal(2), Op("mul", 2), Op("add", 2)]
    assert format_rpn(rpn) == "@0 @1 2 mul add"
    assert format_rpn(to_rpn(parse("[size(@0,0),-1,3]"))) == "@0 0 size/2 -1 3 [3"
    assert format_rpn(to_rpn(parse("sub(1,div(@0,@1))"))) == "1 @0 @1 div sub"


def test_pnnx_malformed_parentheses_follow_the_arity():
    tree = parse(PNNX_EXPM1_LOG1P)
    assert unparse(tree) == "add(log1p(add(expm1(add(log10(add(@0,1)),@0)),@0)),@0)"
    assert format_rpn(to_rpn(tree)) == "@0 1 add log10 @0 add expm1 @0 add log1p @0 add"
    assert unparse(parse(PNNX_EXPM1_LOG1P_2)) == (
        "add(add(add(@0,log10(add(@0,1))),expm1(@0)),log1p(@0))")


def test_malformed_expression_evaluates_like_torch(rng):
    x = rng.uniform(0.1, 1.0, (3, 4)).astype(np.float32)
    t = torch.from_numpy(x)
    got = evaluate(to_rpn(parse(PNNX_EXPM1_LOG1P)), [x])
    np.testing.assert_allclose(got, (torch.log1p(torch.expm1(torch.log10(t + 1) + t) + t)
                                     + t).numpy(), rtol=1e-5)
    got = evaluate(to_rpn(parse(PNNX_EXPM1_LOG1P_2)), [x])
    np.testing.assert_allclose(got, (t + torch.log10(t + 1) + torch.expm1(t)
                                     + torch.log1p(t)).numpy(), rtol=1e-5)


def test_real_pnnx_export_of_expm1_log1p(tmp_path):
    """pnnx still writes the malformed form; read the expression straight from an export."""
    from tests.models.export import export_with_pnnx

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.log1p(torch.expm1(torch.log10(x + 1) + x) + x) + x

    param = export_with_pnnx(tmp_path, M(), torch.rand(2, 3))
    exprs = [tok.split("=", 1)[1] for line in param.read_text().splitlines()
             for tok in line.split() if tok.startswith("expr=")]
    assert exprs == [PNNX_EXPM1_LOG1P]


def test_unparse_round_trips():
    for expr in ["add(@0,mul(@1,2))", "[size(@0,0),-1,3]", "torch.float(@0)", "mul(@0,1e-30)",
                 "add(@0,1.5+2j)", "size(@0)", "pow(@0,-inf)"]:
        assert unparse(parse(expr)) == expr
        assert parse(unparse(parse(expr))) == parse(expr)


def test_every_function_parses_with_its_arity():
    for name, f in FUNCTIONS.items():
        args = ",".join(["@0", "1"][:f.max_args])
        assert parse(f"{name}({args})") == Call(name, tuple(parse(a) for a in args.split(",")))


@pytest.mark.parametrize("expr, column, message", [
    ("add(@0)", 6, "expected ',' after argument 1 of add (it takes 2 arguments), got ')'"),
    ("add(@0", 6, "expected ',' after argument 1 of add (it takes 2 arguments), got the end"),
    ("add(@0 @1)", 7, "expected ',' after argument 1 of add"),
    ("add(@0,,@1)", 7, "expected argument 2 of add, got ','"),
    ("add(@0,@1,@2)", 9, "unexpected ',' after the end of the expression (too many arguments?)"),
    ("add(@0,@1))", 10, "unexpected ')' after the end of the expression"),
    ("add(@0)),@1", 7, "')' without a matching '('"),
    ("add(@0,@1", 3, "this '(' is never closed"),
    ("ad(@0,1)", 0, "unknown function 'ad' (did you mean"),
    ("add(@0,abc)", 7, "'abc' is not a number, an input @k or a known function"),
    ("add(@0,@2)", 7, "@2 is beyond the operator's 2 input(s) (valid: @0..@1)"),
    ("", 0, "empty expression"),
    ("add(@0,[1,2])", 7, "a list '[...]' can only be the whole expression"),
    ("[1,2", 4, "expected ',' or ']' after item 2 of the list, got the end"),
    ("size(2,0)", 5, "size() measures an input"),
    ("neg(@0", 3, "this '(' is never closed"),
    ("add(@0,1)@1", 9, "unexpected '@1' after the end of the expression"),
    ("neg(@0(1))", 6, "expected ')' to close neg(...), got '('"),
    ("exp", 3, "expected '(' after exp, got the end of the expression"),
])
def test_bad_expressions_report_the_column(expr, column, message):
    with pytest.raises(ExpressionError) as info:
        parse(expr, n_inputs=2)
    error = info.value
    assert error.column == column and message in error.message
    lines = str(error).splitlines()
    assert lines[0].endswith(f" at column {column}")
    assert lines[1] == "    " + expr
    assert lines[2] == "    " + " " * column + "^"


def test_result_type_matches_torch():
    """dtypes.result_type against torch.result_type for every pair of operand kinds."""
    from kuiper.parser.expression.dtypes import result_type, type_of

    dtypes = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
              torch.float16, torch.float32, torch.float64, torch.complex64]
    operands = ([torch.zeros(2, dtype=d) for d in dtypes] + [torch.zeros((), dtype=d)
                                                              for d in dtypes]
                + [True, 2, 2.5, 1j])
    for a in operands:
        for b in operands:
            if not (isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor)):
                continue  # two Python numbers follow Python, not torch.result_type
            if torch.result_type(a, b) == torch.complex32:
                continue  # float16 with complex: NumPy has no complex32
            expected = torch.zeros(0, dtype=torch.result_type(a, b)).numpy().dtype
            ours = result_type([type_of(v.numpy() if isinstance(v, torch.Tensor) else v)
                                for v in (a, b)])
            assert ours == expected, f"{a!r} with {b!r}: {ours}, torch says {expected}"
