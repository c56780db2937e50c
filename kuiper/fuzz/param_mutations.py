"""Structured mutations of a `.pnnx.param` text.

A random byte flip mostly produces a file that fails on its first line. These mutations know the
format (parser/PNNX_FORMAT.md) and damage one thing at a time, so that most mutants get deep into
the loader: a number made huge, negative or 5,000 digits long; a dtype swapped; a line dropped,
repeated or moved; an operand renamed; an operator's type replaced by another known type; an
expression replaced (fuzz/expressions.py); a chain of thousands of tuple constructions.
Each mutation takes the lines of the file and returns new lines; `mutate` stacks a few.
"""

from __future__ import annotations

import random
import re

from kuiper.fuzz.expressions import INTERESTING_FLOATS, INTERESTING_INTS, expression

NUMBER = re.compile(r"-?\d+(\.\d+)?(e[-+]?\d+)?")
DTYPE = re.compile(r"\)(f32|f64|f16|bf16|i8|i16|i32|i64|u8|bool|c64|c128|c32)")
DTYPES = ["f32", "f64", "f16", "bf16", "i8", "i16", "i32", "i64", "u8", "bool", "c64", "c128",
          "c32", "zz", ""]
VALUES = ["()", "(,)", "(1,)", "((1,2),3)", "None", "True", "False", "abc", "'x'", "(-1,-1)",
          "(0,0)", "(99999999999999999999)", "(1e999,2.0)", "%", "", "=", "(1,2,3,4,5,6,7,8,9)"]


def _body(lines: list[str]) -> range:
    """Indices of the operator lines (after the magic number and the counts)."""
    return range(2, len(lines)) if len(lines) > 2 else range(len(lines))


def _pick(rng: random.Random, lines: list[str]) -> int:
    return rng.choice(list(_body(lines)))


def number(rng, lines):
    """Replace one number anywhere (counts, dims, parameter values) by an interesting one."""
    i = rng.randrange(len(lines))
    spans = [m.span() for m in NUMBER.finditer(lines[i])]
    if not spans:
        return lines
    a, b = rng.choice(spans)
    new = rng.choice(INTERESTING_INTS + INTERESTING_FLOATS + ["-2", "-100000", "9" * 5000])
    lines[i] = lines[i][:a] + new + lines[i][b:]
    return lines


def dtype(rng, lines):
    i = _pick(rng, lines)
    spans = [m.span(1) for m in DTYPE.finditer(lines[i])]
    if spans:
        a, b = rng.choice(spans)
        lines[i] = lines[i][:a] + rng.choice(DTYPES) + lines[i][b:]
    return lines


def shape(rng, lines):
    """Damage one `(d0,d1,...)` shape: a dim huge, negative, zero or unknown; one more or less."""
    i = _pick(rng, lines)
    spans = [m.span(1) for m in re.finditer(r"=\(([^()]*)\)", lines[i])]
    if not spans:
        return lines
    a, b = rng.choice(spans)
    dims = lines[i][a:b].split(",")
    roll = rng.random()
    k = rng.randrange(len(dims))
    if roll < 0.5:
        dims[k] = rng.choice(["0", "-1", "-2", "?", "100000", "2147483648", "1e9", "", "x"])
    elif roll < 0.75:
        dims.insert(k, rng.choice(["1", "100000", "7"]))
    else:
        del dims[k]
    lines[i] = lines[i][:a] + ",".join(dims) + lines[i][b:]
    return lines


def value(rng, lines):
    """Replace one key=value parameter's value with something of the wrong form."""
    i = _pick(rng, lines)
    spans = [m.span(1) for m in re.finditer(r"(?:^|\s)[A-Za-z_]\w*=(\S*)", lines[i])]
    if spans:
        a, b = rng.choice(spans)
        lines[i] = lines[i][:a] + rng.choice(VALUES) + lines[i][b:]
    return lines


def drop_line(rng, lines):
    del lines[_pick(rng, lines)]
    return lines


def repeat_line(rng, lines):
    i = _pick(rng, lines)
    lines.insert(rng.randint(2, len(lines)), lines[i])
    return lines


def move_line(rng, lines):
    i = _pick(rng, lines)
    line = lines.pop(i)
    lines.insert(rng.randint(min(2, len(lines)), len(lines)), line)
    return lines


def _small_count(token: str) -> bool:
    """A count the mutators can use (int() of 5,000 digits is refused by Python itself)."""
    return token.isascii() and token.isdigit() and len(token) < 6


def _tokens(line: str) -> list[str]:
    return line.split()


def operand(rng, lines):
    """Rename one input or output operand of an operator (to another one, or a new one)."""
    i = _pick(rng, lines)
    tokens = _tokens(lines[i])
    if len(tokens) < 4 or not all(_small_count(t) for t in tokens[2:4]):
        return lines  # not an operator line, or counts an earlier mutation made absurd
    n = int(tokens[2]) + int(tokens[3])
    if n == 0 or len(tokens) < 4 + n:
        return lines
    k = 4 + rng.randrange(n)
    others = [t for line in lines[2:] for t in _tokens(line)[4:5]]
    tokens[k] = rng.choice(others + ["nowhere", tokens[k], "0"])
    lines[i] = " ".join(tokens)
    return lines


def counts(rng, lines):
    """Change an operator's input or output count (or the file's counts line)."""
    i = rng.choice([1] + list(_body(lines))) if len(lines) > 1 else 0
    tokens = _tokens(lines[i])
    positions = [0, 1] if i == 1 else [2, 3]
    k = rng.choice([p for p in positions if p < len(tokens)] or [0])
    if k < len(tokens):
        tokens[k] = rng.choice(["0", "1", "2", "5", "-1", "1000000", "9" * 5000])
        lines[i] = " ".join(tokens)
    return lines


def op_type(rng, lines, types=()):
    """Give an operator another known type: its parameters and inputs no longer fit."""
    i = _pick(rng, lines)
    tokens = _tokens(lines[i])
    if tokens and types:
        tokens[0] = rng.choice(list(types) + ["pnnx.Input", "pnnx.Output", "prim::TupleConstruct",
                                              "prim::TupleUnpack", "no.Such"])
        lines[i] = " ".join(tokens)
    return lines


def token(rng, lines):
    """Drop, repeat or truncate one token."""
    i = _pick(rng, lines)
    tokens = _tokens(lines[i])
    if not tokens:
        return lines
    k = rng.randrange(len(tokens))
    roll = rng.random()
    if roll < 0.4:
        del tokens[k]
    elif roll < 0.7:
        tokens.insert(k, tokens[k])
    else:
        tokens[k] = tokens[k][: rng.randrange(len(tokens[k]) + 1)]
    lines[i] = " ".join(tokens)
    return lines


def expr(rng, lines):
    """Replace an expression (or a parameter's value) with a generated or mutated one."""
    found = [i for i in _body(lines) if " expr=" in lines[i]]
    if not found:
        return value(rng, lines)
    i = rng.choice(found)
    tokens = _tokens(lines[i])
    k = next(k for k, t in enumerate(tokens) if t.startswith("expr="))
    n_inputs = int(tokens[2]) if len(tokens) > 2 and _small_count(tokens[2]) else 1
    tokens[k] = "expr=" + expression(rng, max(1, min(n_inputs, 8)), tokens[k][5:])
    lines[i] = " ".join(tokens)
    return lines


def tuple_chain(rng, lines):
    """Append thousands of chained prim::TupleConstruct ending in a new output: deep nesting."""
    outputs = [i for i in _body(lines) if lines[i].startswith("pnnx.Output")]
    producers = [t for line in lines[2:] for t in _tokens(line)[4:5] if t]
    if not outputs or not producers:
        return lines
    depth = rng.choice([10, 500, 3000])
    chain, prev = [], producers[0]
    for k in range(depth):
        chain.append(f"prim::TupleConstruct fz_tuple_{k} 1 1 {prev} fz_t{k}")
        prev = f"fz_t{k}"
    chain.append(f"pnnx.Output fz_out 1 0 {prev}")
    return lines[:outputs[0]] + chain + lines[outputs[0]:]


def text(rng, lines):
    """Byte-level damage: cut the file, insert garbage (NUL, invalid UTF-8, a huge token)."""
    whole = "\n".join(lines)
    if not whole:
        return ["\x00"]
    i = rng.randrange(len(whole))
    roll = rng.random()
    if roll < 0.3:
        whole = whole[:i]
    elif roll < 0.6:
        whole = whole[:i] + rng.choice(["\x00", "\udcff", "\t", "\r", "#", "@", "$", "=", " "])\
            + whole[i:]
    elif roll < 0.8:
        whole = whole[:i] + "x" * rng.choice([1000, 100000]) + whole[i:]
    else:
        whole = whole[:i] + "\n" + whole[i:]
    return whole.split("\n")


MUTATIONS = [number, dtype, shape, value, drop_line, repeat_line, move_line, operand, counts,
             op_type, token, expr, expr, expr, tuple_chain, text]


def mutate(rng: random.Random, param_text: str, types=()) -> str:
    """1 to 3 stacked mutations of `param_text`."""
    lines = param_text.rstrip("\n").split("\n")
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        lines = lines or [""]  # an earlier mutation may have dropped every line
        mutation = rng.choice(MUTATIONS)
        lines = mutation(rng, lines, types) if mutation is op_type else mutation(rng, lines)
    return "\n".join(lines) + "\n"
