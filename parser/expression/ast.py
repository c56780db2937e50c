"""Step 2: tokens -> a tree (AST), by recursive descent over prefix function-call syntax.

    add(@0,mul(@1,2))   ->   Call("add", (Input(0), Call("mul", (Input(1), Literal(2)))))

The grammar is tiny:

    whole      := '[' [item (',' item)*] ']'  |  expression
    expression := INPUT | LITERAL | NAME | function
    function   := NAME '(' expression (',' expression)* ')'

with one twist that makes this parser more than a textbook exercise: **pnnx does not always
write balanced, well-placed parentheses.** For `log1p` and `expm1` it writes, for example,

    add(log1p,add(expm1,add(log10(add(@0,1)),@0))),@0,@0

which only makes sense the way pnnx itself reads it: drop every `(`, `)` and `,`, then read the
remaining words as prefix notation where each function takes as many arguments as its name says
(`add` two, `log1p` one). The meaning above is

    add(log1p(add(expm1(add(log10(add(@0,1)),@0)),@0)),@0)

So this parser lets the arity, not the parentheses, decide the structure (arities come from
`functions.FUNCTIONS`), and it reads punctuation leniently exactly where pnnx misplaces it:

- the `(` after a function name is optional (`expm1,x` and `expm1),x` mean `expm1(x)`);
- before a `,` that separates arguments, stray `)` are skipped;
- a call whose `)` is missing is accepted when a `,`, `]` or the end follows.

Everything else is still checked, with the column of the offending character: unknown
functions, missing arguments (`add(@0)`), doubled commas, trailing tokens, `)` without `(`,
`(` never closed, `@k` beyond the operator's inputs, and calls nested deeper than `MAX_DEPTH`
(the parser, `to_rpn` and `unparse` recurse once per level; a hostile file nesting thousands
deep would otherwise end in Python's RecursionError instead of an error naming the column).
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field

from kuiper.parser.errors import ExpressionError
from kuiper.parser.expression.functions import FUNCTIONS, Function
from kuiper.parser.expression.tokenizer import Kind, Token, tokenize

# Deepest nesting of calls accepted. pnnx's expressions are a few levels deep (a chain of
# element-wise operations is rarely 20); 200 leaves room and keeps far below the recursion limit.
MAX_DEPTH = 200

# --- the nodes ----------------------------------------------------------------------------------
# `column` (where the node starts in the text) is for error messages only: two trees are equal
# when they mean the same thing, wherever their pieces were written.

@dataclass(frozen=True)
class Input:
    """`@k`: the operator's k-th input."""

    index: int
    column: int = field(default=-1, compare=False, repr=False)


@dataclass(frozen=True, eq=False)
class Literal:
    """A constant: int, float, complex, bool, None or a bare string."""

    value: object
    column: int = field(default=-1, repr=False)

    def __eq__(self, other: object) -> bool:
        # Stricter than ==: 1, 1.0 and True are different literals, and nan equals nan.
        if not isinstance(other, Literal) or type(self.value) is not type(other.value):
            return False
        if isinstance(self.value, float) and math.isnan(self.value):
            return math.isnan(other.value)  # type: ignore[arg-type]
        return self.value == other.value

    def __hash__(self) -> int:
        return hash((type(self.value), repr(self.value)))


@dataclass(frozen=True)
class Call:
    """`name(args...)`: a function from `FUNCTIONS`."""

    name: str
    args: tuple[Node, ...]
    column: int = field(default=-1, compare=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "args", tuple(self.args))  # accept a list, store a tuple


@dataclass(frozen=True)
class ListNode:
    """`[a,b,...]`: a Python list (only ever the whole expression, e.g. a reshape's shape)."""

    items: tuple[Node, ...]
    column: int = field(default=-1, compare=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "items", tuple(self.items))


Node = Input | Literal | Call | ListNode


# --- the parser ---------------------------------------------------------------------------------
def parse(expr: str, n_inputs: int | None = None) -> Node:
    """Parse a pnnx expression. `n_inputs`, when given, bounds the `@k` it may use.

    Raises ExpressionError with the column of the first problem.
    """
    return _Parser(expr, tokenize(expr), n_inputs).whole()


class _Parser:
    def __init__(self, expr: str, tokens: list[Token], n_inputs: int | None):
        self.expr, self.tokens, self.n_inputs = expr, tokens, n_inputs
        self.pos = 0
        self.depth = 0  # calls being parsed, one inside the other
        self.open_parens: list[int] = []  # columns of the '(' not closed yet

    # --- token stream ---
    def peek(self) -> Token:
        return self.tokens[self.pos]

    def take(self) -> Token:
        token = self.tokens[self.pos]
        if token.kind is not Kind.END:
            self.pos += 1
        if token.kind is Kind.LPAREN:
            self.open_parens.append(token.column)
        elif token.kind is Kind.RPAREN:
            if not self.open_parens:
                raise self.error(token, "')' without a matching '('")
            self.open_parens.pop()
        return token

    def error(self, token: Token | int, message: str) -> ExpressionError:
        column = token if isinstance(token, int) else token.column
        return ExpressionError(self.expr, column, message)

    def skip_stray_closers(self) -> Token:
        """pnnx sometimes writes `)` before a `,` (`expm1),@0`): skip them.

        Returns the token to blame if no `,` follows: the first `)` skipped, else the next one.
        """
        first = self.peek()
        while self.peek().kind is Kind.RPAREN:
            self.take()
        return first

    # --- grammar ---
    def whole(self) -> Node:
        if self.peek().kind is Kind.END:
            raise self.error(self.peek(), "empty expression")
        if self.peek().kind is Kind.LBRACKET:
            node = self.list_node()
        else:
            node = self.expression("an expression", allow_string=True)
        token = self.peek()
        if token.kind is not Kind.END:
            hint = " (too many arguments?)" if token.kind is Kind.COMMA else ""
            raise self.error(token, f"unexpected {token.describe()} after the end of the "
                                    f"expression{hint}")
        if self.open_parens:
            raise self.error(self.open_parens[-1], "this '(' is never closed")
        return node

    def list_node(self) -> ListNode:
        bracket = self.take()
        items: list[Node] = []
        if self.peek().kind is Kind.RBRACKET:
            self.take()
            return ListNode((), bracket.column)
        while True:
            items.append(self.expression(f"item {len(items) + 1} of the list",
                                         allow_string=True))
            blame = self.skip_stray_closers()
            token = self.take()
            if token.kind is Kind.RBRACKET:
                return ListNode(tuple(items), bracket.column)
            if token.kind is not Kind.COMMA:
                raise self.error(blame, f"expected ',' or ']' after item {len(items)} of the "
                                        f"list, got {blame.describe()}")

    def expression(self, what: str, allow_string: bool = False) -> Node:
        token = self.peek()
        if token.kind is Kind.INPUT:
            self.take()
            if self.n_inputs is not None and token.value >= self.n_inputs:
                have = f"@0..@{self.n_inputs - 1}" if self.n_inputs else "none"
                raise self.error(token, f"{token.text} is beyond the operator's "
                                        f"{self.n_inputs} input(s) (valid: {have})")
            return Input(token.value, token.column)
        if token.kind is Kind.LITERAL:
            self.take()
            return Literal(token.value, token.column)
        if token.kind is Kind.NAME:
            self.take()
            function = FUNCTIONS.get(token.text)
            if function is not None:
                return self.call(function, token)
            close = difflib.get_close_matches(token.text, FUNCTIONS, n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            if self.peek().kind is Kind.LPAREN:
                raise self.error(token, f"unknown function '{token.text}'{hint}")
            if allow_string:  # a bare string, e.g. an expression that is just a name
                return Literal(token.text, token.column)
            raise self.error(token, f"'{token.text}' is not a number, an input @k or a known "
                                    f"function{hint}")
        if token.kind is Kind.LBRACKET:
            raise self.error(token, "a list '[...]' can only be the whole expression")
        raise self.error(token, f"expected {what}, got {token.describe()}")

    def call(self, function: Function, name: Token) -> Call:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(name, f"calls nested more than {MAX_DEPTH} deep (pnnx never "
                                   "writes such expressions; a damaged or hostile file?)")
        node = self.call_arguments(function, name)
        self.depth -= 1
        return node

    def call_arguments(self, function: Function, name: Token) -> Call:
        opened = self.peek().kind is Kind.LPAREN
        if opened:
            self.take()
        args: list[Node] = []
        for i in range(function.max_args):
            if i == 0 and not opened:
                # `expm1,x` / `expm1),x`: pnnx wrote a separator instead of '('.
                blame = self.skip_stray_closers()
                if self.peek().kind is not Kind.COMMA:
                    raise self.error(blame, f"expected '(' after {function.name}, got "
                                            f"{blame.describe()}")
                self.take()
            elif i > 0:
                # An optional argument (size's dim) is absent when the call closes here.
                if i >= function.min_args and opened and self.peek().kind is Kind.RPAREN:
                    break
                blame = self.skip_stray_closers()
                if self.peek().kind is not Kind.COMMA:
                    takes = (f"{function.max_args}" if function.min_args == function.max_args
                             else f"{function.min_args} or {function.max_args}")
                    raise self.error(blame, f"expected ',' after argument {i} of "
                                            f"{function.name} (it takes {takes} arguments), "
                                            f"got {blame.describe()}")
                self.take()
            args.append(self.expression(f"argument {i + 1} of {function.name}"))
        if opened:
            token = self.peek()
            if token.kind is Kind.RPAREN:
                self.take()
            elif token.kind not in (Kind.COMMA, Kind.RBRACKET, Kind.END):
                raise self.error(token, f"expected ')' to close {function.name}(...), got "
                                        f"{token.describe()}")
        if function.name == "size" and not isinstance(args[0], Input):
            raise self.error(args[0].column, "size() measures an input: its first argument "
                                             "must be @k")
        return Call(function.name, tuple(args), name.column)


# --- back to text -------------------------------------------------------------------------------
def unparse(node: Node) -> str:
    """The well-formed text of a tree: `unparse(parse(s))` repairs pnnx's parentheses."""
    if isinstance(node, Input):
        return f"@{node.index}"
    if isinstance(node, Literal):
        return _literal_text(node.value)
    if isinstance(node, Call):
        return f"{node.name}({','.join(unparse(a) for a in node.args)})"
    return "[" + ",".join(unparse(i) for i in node.items) + "]"


def _literal_text(value: object) -> str:
    if isinstance(value, complex):
        return repr(value).strip("()")  # repr writes (1+2j); the tokenizer wants 1+2j
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # inf, -inf, nan
    return repr(value) if isinstance(value, float) else str(value)
