"""The expression tokenizer: kinds, values and columns of every token."""

import math

import pytest

import kuiper  # noqa: F401  (import order: `parser` imports kuiper.core.errors, which needs kuiper)
from kuiper.core.errors import ExpressionError
from kuiper.parser.expression.tokenizer import Kind, tokenize


def kinds_texts(expr):
    return [(t.kind, t.text) for t in tokenize(expr)]


def test_separators_are_tokens_with_columns():
    tokens = tokenize("add(@0,mul(@1,2))")
    assert [(t.kind, t.text, t.column) for t in tokens] == [
        (Kind.NAME, "add", 0), (Kind.LPAREN, "(", 3), (Kind.INPUT, "@0", 4),
        (Kind.COMMA, ",", 6), (Kind.NAME, "mul", 7), (Kind.LPAREN, "(", 10),
        (Kind.INPUT, "@1", 11), (Kind.COMMA, ",", 13), (Kind.LITERAL, "2", 14),
        (Kind.RPAREN, ")", 15), (Kind.RPAREN, ")", 16), (Kind.END, "", 17)]


def test_input_values():
    tokens = tokenize("@0,@12")
    assert [t.value for t in tokens if t.kind is Kind.INPUT] == [0, 12]


def test_list_brackets():
    assert kinds_texts("[size(@0,0),-1]") == [
        (Kind.LBRACKET, "["), (Kind.NAME, "size"), (Kind.LPAREN, "("), (Kind.INPUT, "@0"),
        (Kind.COMMA, ","), (Kind.LITERAL, "0"), (Kind.RPAREN, ")"), (Kind.COMMA, ","),
        (Kind.LITERAL, "-1"), (Kind.RBRACKET, "]"), (Kind.END, "")]


@pytest.mark.parametrize("text, value", [
    ("2", 2), ("-1", -1), ("0.7", 0.7), ("1.000000e-30", 1e-30), ("1.23456792e8", 1.23456792e8),
    ("-2.5", -2.5), ("1e5", 1e5), ("inf", math.inf), ("-inf", -math.inf), ("True", True),
    ("False", False), ("None", None), ("2j", 2j), ("1.5+2j", 1.5 + 2j), ("-1-0.5j", -1 - 0.5j),
])
def test_literal_values_and_types(text, value):
    (token, end) = tokenize(text)
    assert token.kind is Kind.LITERAL and end.kind is Kind.END
    assert type(token.value) is type(value) and token.value == value


@pytest.mark.parametrize("text", ["nan", "nan.0", "-nan"])
def test_nan_spellings(text):
    (token, _) = tokenize(text)
    assert token.kind is Kind.LITERAL and math.isnan(token.value)


def test_names_include_dotted_casts_and_bare_strings():
    assert kinds_texts("torch.float(@0)")[0] == (Kind.NAME, "torch.float")
    assert kinds_texts("nearest_exact") == [(Kind.NAME, "nearest_exact"), (Kind.END, "")]


def test_whitespace_separates_and_is_dropped():
    tokens = tokenize("add( @0 , 1 )")
    assert [t.text for t in tokens] == ["add", "(", "@0", ",", "1", ")", ""]
    assert [t.column for t in tokens] == [0, 3, 5, 8, 10, 12, 13]


@pytest.mark.parametrize("expr, column, message", [
    ("add(@x,1)", 4, "'@x' is not an input"),
    ("add(@0,1.2.3)", 7, "'1.2.3' is not a number"),
    ("mul(@0,2x)", 7, "'2x' is not a number"),
    ("add(@0,#)", 7, "unexpected character '#'"),
])
def test_bad_tokens_point_at_their_column(expr, column, message):
    with pytest.raises(ExpressionError) as info:
        tokenize(expr)
    assert info.value.column == column
    assert message in str(info.value)
    assert str(info.value).splitlines()[-1] == "    " + " " * column + "^"
