"""Parameter values of a `.pnnx.param` line, decoded the way pnnx itself decodes them.

`key=value` tokens carry ints, floats, booleans, strings, None and lists of those. pnnx has no
quoting, so the *shape* of the text decides the type (parser/PNNX_FORMAT.md, section 1):

    None () []          -> None
    True / False        -> bool
    (1,2) [3] (-1)      -> list (one-element tuples have no trailing comma)
    1.0  1e-5  0.35     -> float (a float always carries '.' or 'e')
    3  -1               -> int
    anything else       -> str  (torch.float, reflect, nearest-exact, inf, nan ...)
"""

from __future__ import annotations

import math

import numpy as np

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
MAX_INT_DIGITS = 19  # digits of INT64_MAX: a longer integer cannot be an int64

# pnnx dtype suffix -> NumPy dtype. bf16 has no NumPy dtype: the weight reader widens it.
DTYPES: dict[str, np.dtype | None] = {
    "f32": np.dtype(np.float32), "f64": np.dtype(np.float64), "f16": np.dtype(np.float16),
    "bf16": np.dtype(np.uint16), "i64": np.dtype(np.int64), "i32": np.dtype(np.int32),
    "i16": np.dtype(np.int16), "i8": np.dtype(np.int8), "u8": np.dtype(np.uint8),
    "bool": np.dtype(np.bool_), "c64": np.dtype(np.complex64), "c128": np.dtype(np.complex128),
    "c32": None, "null": None,
}


def _scalar(text: str) -> object:
    """One element: a number when it starts like one, otherwise a string (pnnx's rule)."""
    if text == "True":
        return True
    if text == "False":
        return False
    if text == "None":
        return None
    starts_numeric = text[:1].isdigit() or (text[:1] == "-" and text[1:2].isdigit())
    if not starts_numeric:
        return text
    try:
        if "." in text or "e" in text or "E" in text:
            return float(text)
        if len(text) > MAX_INT_DIGITS + 1:  # beyond int64 anyway; int() is quadratic in length
            return text
        return int(text)
    except ValueError:
        return text  # e.g. "1x2": pnnx keeps what it cannot read as a string too


def parse_value(text: str) -> object:
    """Decode one parameter value; never raises (unknown shapes stay strings)."""
    if text in ("None", "()", "[]"):
        return None
    if text and text[0] in "([" and text[-1] in ")]":  # ("" in "([" is True in Python)
        inner = text[1:-1]
        return [_scalar(t) for t in inner.split(",") if t != ""]
    return _scalar(text)


def as_float(value: object) -> float:
    """A number that pnnx may have written as int or as the strings inf/-inf/nan."""
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value in ("inf", "-inf", "nan", "+inf"):
        return float(value)
    raise ValueError(f"{value!r} is not a number")


def parse_dtype_suffix(text: str) -> tuple[list[int | None] | None, str]:
    """Split `(1,3,?,224)f32` into ([1, 3, None, 224], 'f32'). Raises ValueError if malformed."""
    if not text.startswith("("):
        raise ValueError("expected '(' to open the shape")
    close = text.find(")")
    if close < 0:
        raise ValueError("expected ')' to close the shape")
    dims_text, dtype = text[1:close], text[close + 1:]
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype suffix '{dtype}' (known: {', '.join(DTYPES)})")
    dims: list[int | None] = []
    for d in dims_text.split(","):
        if d == "":
            continue
        if d == "?":
            dims.append(None)
            continue
        if d.startswith("-") and d[1:].isascii() and d[1:].isdigit():
            raise ValueError(f"dimension {d} is negative (pnnx writes an unknown size as '?')")
        if not (d.isascii() and d.isdigit()):  # int() would also take " 3", "1_0" and "٣"
            raise ValueError(f"dimension '{_short(d)}' is neither an integer nor '?'")
        if len(d) > MAX_INT_DIGITS or int(d) > INT64_MAX:
            raise ValueError(f"dimension {_short(d)} is beyond int64 (pnnx writes sizes as "
                             "int64)")
        dims.append(int(d))
    return dims, dtype


def _short(text: str) -> str:
    """A number for an error message: a 5,000-digit one shows its start and its length."""
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


def out_of_range(value: object) -> str | None:
    """Why a decoded value cannot have been written by pnnx, or None if it can.

    pnnx writes C++ int64 and float values: an integer beyond int64, or a float literal whose
    digits overflow to infinity (`1e999`; pnnx writes infinity as the word `inf`), is a damaged
    or hostile file, and letting it through turns into an OverflowError deep inside a layer.
    """
    for v in value if isinstance(value, list) else [value]:
        if isinstance(v, bool):
            continue
        if isinstance(v, int) and not INT64_MIN <= v <= INT64_MAX:
            return f"integer {_short(str(v))} is beyond int64"
        digits = v.lstrip("-") if isinstance(v, str) else ""
        if len(digits) > MAX_INT_DIGITS and digits.isascii() and digits.isdigit():
            return f"integer {_short(v)} is beyond int64"  # too long to decode: kept as text
        if isinstance(v, float) and math.isinf(v):
            return "a float literal overflows to infinity (pnnx writes infinity as 'inf')"
    return None
