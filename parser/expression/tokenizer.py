"""Step 1 of reading a `pnnx.Expression`: split the text into tokens.

    add(@0,mul(@1,2.5))  ->  add ( @0 , mul ( @1 , 2.5 ) ) <end>

pnnx's own reader splits on `(`, `)`, `,` and `]` and *throws them away*; it keeps `[` (a list)
and accumulates everything else into words. We split the same way but keep the separators as
tokens, each with its column, so that the parser can point at the exact character where an
expression goes wrong (and so that it can tolerate the places where pnnx misplaces them).

Words are classified here, once:

    @3                      INPUT    value 3 (the operator's fourth input)
    2  -1                   LITERAL  int
    0.7  1.000000e-30       LITERAL  float      (also inf, -inf, nan, nan.0)
    1.5j  1+2j              LITERAL  complex    (pnnx writes complex constants ending in j)
    True False None         LITERAL  bool / None
    add  torch.float  abc   NAME     a function or a bare string: the parser decides
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass
from typing import Any

from kuiper.parser.errors import ExpressionError


class Kind(enum.Enum):
    NAME = "name"
    INPUT = "input"
    LITERAL = "literal"
    LPAREN = "("
    RPAREN = ")"
    COMMA = ","
    LBRACKET = "["
    RBRACKET = "]"
    END = "end"


@dataclass(frozen=True)
class Token:
    kind: Kind
    text: str
    column: int        # 0-based offset of the token's first character in the expression
    value: Any = None  # INPUT: the index; LITERAL: the Python value

    def describe(self) -> str:
        """How error messages name this token."""
        return "the end of the expression" if self.kind is Kind.END else f"'{self.text}'"


_SEPARATORS = {"(": Kind.LPAREN, ")": Kind.RPAREN, ",": Kind.COMMA, "[": Kind.LBRACKET,
               "]": Kind.RBRACKET}
_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")
# inf and nan as pnnx writes them: it prints floats with C's %e/%g, and adds ".0" to nan.
_SPECIAL = re.compile(r"([+-]?)(inf|nan)(\.0)?")
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
_KEYWORDS = {"True": True, "False": False, "None": None}


def tokenize(expr: str) -> list[Token]:
    """The tokens of `expr`, always ending with one END token. Raises ExpressionError."""
    tokens: list[Token] = []
    start = None  # column where the word being accumulated began
    for column, ch in enumerate(expr + " "):  # the extra space flushes the last word
        if ch in _SEPARATORS or ch.isspace():
            if start is not None:
                tokens.append(_word(expr, expr[start:column], start))
                start = None
            if ch in _SEPARATORS:
                tokens.append(Token(_SEPARATORS[ch], ch, column))
        elif start is None:
            start = column
    tokens.append(Token(Kind.END, "", len(expr)))
    return tokens


def _word(expr: str, text: str, column: int) -> Token:
    """Classify one accumulated word as an input, a literal or a name."""
    if text.startswith("@"):
        digits = text[1:]
        if not (digits.isascii() and digits.isdigit()):   # (isdigit alone takes '²')
            raise ExpressionError(expr, column, f"'{text}' is not an input: expected '@' "
                                                "followed by an input number, like @0")
        if len(digits.lstrip("0")) > 9:   # no operator has a billion inputs (and int()
            shown = text if len(text) <= 12 else text[:12] + "..."   # refuses 4,300 digits)
            raise ExpressionError(expr, column, f"input number {shown} is too large")
        return Token(Kind.INPUT, text, column, int(digits))
    if text in _KEYWORDS:
        return Token(Kind.LITERAL, text, column, _KEYWORDS[text])
    try:
        value = _number(text)
    except OverflowError as e:
        raise ExpressionError(expr, column, str(e)) from None
    if value is not None:
        return Token(Kind.LITERAL, text, column, value)
    if text[0].isdigit() or text[0] in "+-.":
        raise ExpressionError(expr, column, f"'{text}' is not a number")
    if not (text[0].isalpha() or text[0] == "_"):
        raise ExpressionError(expr, column, f"unexpected character '{text[0]}'")
    return Token(Kind.NAME, text, column)


def _number(text: str) -> int | float | complex | None:
    """int, float or complex if `text` spells one the way pnnx writes it, else None."""
    if _INT.fullmatch(text):
        digits = len(text.lstrip("+-"))
        value = int(text) if digits <= 19 else None  # int() of 5,000 digits: slow, then refused
        if value is None or not INT64_MIN <= value <= INT64_MAX:
            raise OverflowError(f"integer literal of {digits} digits is beyond int64 (pnnx "
                                "writes int64 constants)")
        return value
    if _FLOAT.fullmatch(text):
        return float(text)
    special = _SPECIAL.fullmatch(text)
    if special:
        value = math.inf if special.group(2) == "inf" else math.nan
        return -value if special.group(1) == "-" else value
    if text.endswith("j") and (text[0].isdigit() or text[0] in "+-."):
        try:
            return complex(text)
        except ValueError:
            return None
    return None
