"""Random `pnnx.Expression` texts: grammar-based trees, and mutations of real ones.

A tree is built from the parser's own function table (`FUNCTIONS`, with each function's arity),
so every function the engine knows is exercised, with leaves that hit the edges: inputs `@k`
(some out of range), integers from 0 to 5,000 digits, floats up to 1e999, `size(@k, d)`, and
lists. Now and then the tree is very deep (hundreds to thousands of levels), because nesting is
what a recursive parser or evaluator chokes on.
"""

from __future__ import annotations

import random

from kuiper.parser.expression import FUNCTIONS

INTERESTING_INTS = ["0", "1", "-1", "2", "3", "31", "32", "63", "64", "2147483647", "2147483648",
                    "4294967296", "9223372036854775807", "9223372036854775808",
                    "99999999999999999999", "100000000", "100000000000"]
INTERESTING_FLOATS = ["0.0", "-0.0", "0.5", "1e-5", "1e-45", "3.4e38", "1e39", "1e308", "1e999",
                      "-1e999", "nan", "inf", "-inf", "2.5"]


def leaf(rng: random.Random, n_inputs: int) -> str:
    roll = rng.random()
    if roll < 0.45:
        return f"@{rng.randrange(n_inputs + (1 if rng.random() < 0.05 else 0))}"
    if roll < 0.65:
        return rng.choice(INTERESTING_INTS) if rng.random() < 0.7 else "9" * rng.randint(30, 5000)
    if roll < 0.85:
        return rng.choice(INTERESTING_FLOATS)
    if roll < 0.95:
        return f"size(@{rng.randrange(n_inputs)},{rng.randint(-5, 5)})"
    return rng.choice(["True", "False", "None", "0+4j", "abc", "@", "size(@0)"])


def tree(rng: random.Random, n_inputs: int, depth: int) -> str:
    """A random well-formed expression of at most `depth` levels."""
    if depth <= 0 or rng.random() < 0.25:
        return leaf(rng, n_inputs)
    name = rng.choice(list(FUNCTIONS))
    function = FUNCTIONS[name]
    if name == "size":
        dim = f",{rng.randint(-4, 4)}" if rng.random() < 0.7 else ""
        return f"size(@{rng.randrange(n_inputs)}{dim})"
    args = [tree(rng, n_inputs, depth - 1) for _ in range(function.min_args)]
    return f"{name}({','.join(args)})"


def deep(rng: random.Random, n_inputs: int) -> str:
    """A chain of unary functions hundreds to thousands deep: neg(neg(...(@0)...))."""
    depth = rng.choice([200, 500, 1000, 3000, 20000])
    unary = [n for n, f in FUNCTIONS.items() if f.min_args == 1 and n != "size"]
    name = rng.choice(unary)
    return f"{name}(" * depth + f"@{rng.randrange(n_inputs)}" + ")" * depth


def listed(rng: random.Random, n_inputs: int) -> str:
    """A list expression, as pnnx writes for a reshape's shape: [size(@0,0),-1]."""
    items = [tree(rng, n_inputs, 2) for _ in range(rng.randint(0, 5))]
    return "[" + ",".join(items) + "]"


def mutate_text(rng: random.Random, text: str) -> str:
    """Character-level damage to an expression: drop, repeat or swap a character, or cut it."""
    if not text:
        return rng.choice(["(", ")", ",", "@", "[", "add("])
    i = rng.randrange(len(text))
    roll = rng.random()
    if roll < 0.3:
        return text[:i] + text[i + 1:]
    if roll < 0.55:
        return text[:i] + text[i] * rng.randint(2, 40) + text[i + 1:]
    if roll < 0.8:
        return text[:i] + rng.choice("(),@[]-.e0123456789 ") + text[i:]
    return text[:i]


def expression(rng: random.Random, n_inputs: int, original: str | None = None) -> str:
    """One expression text to try: generated, deep, a list, or the original mutated."""
    roll = rng.random()
    if original is not None and roll < 0.3:
        return mutate_text(rng, original)
    if roll < 0.42:
        return deep(rng, n_inputs)
    if roll < 0.55:
        return listed(rng, n_inputs)
    return tree(rng, n_inputs, rng.randint(1, 6))
