"""Lesson 3 exercises: decode the values of a `.pnnx.param` line.

Fill in the functions, then run `kuiper course check 3`. The answers are the engine's own
functions of the same names in parser/values.py: try first, read them after. What you need
from that file is imported here (DTYPES, the dtype suffixes), so you need not open it.
"""

from __future__ import annotations

from kuiper.parser.values import DTYPES  # noqa: F401 - the suffixes: print(DTYPES)


def parse_value(text: str) -> object:
    """Decode one parameter value the way pnnx itself does; never raises.

    pnnx has no quotes, so the shape of the text decides the type:

        None  ()  []              -> None
        True  False               -> True / False
        (1,2)  [3]  (-1)          -> a list; each element decoded like a scalar below
        1.0  1e-5  1.000000e-05   -> float   (a float always has a '.' or an 'e')
        3  -1                     -> int
        anything else             -> the string itself (torch.float, reflect, inf, nan ...)

    A scalar is a number only if it starts with a digit, or with '-' and a digit; if it starts
    like a number but does not parse as one ("1x2"), it stays a string.
    """
    raise NotImplementedError("lesson 3: write parse_value")


def parse_dtype_suffix(text: str) -> tuple[list[int | None], str]:
    """Split a shape token: "(1,3,?,224)f32" -> ([1, 3, None, 224], "f32").

    `?` is a dynamic dim (None). The suffix must be a key of DTYPES (imported above) ("f32",
    "i64", "bool", ...). Raise ValueError when the text does not start with "(", has no ")", has an
    unknown dtype suffix or a dim that is neither an integer nor "?".
    """
    raise NotImplementedError("lesson 3: write parse_dtype_suffix")
