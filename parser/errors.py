"""The errors of reading a model: the bottom of Kuiper's error hierarchy.

The parser is the lowest layer of the engine: it reads text and zip files and knows nothing of
graphs, layers or devices. So the errors it raises live here, beside it, and `kuiper.core.errors`
(the engine's full hierarchy) builds on them and re-exports them: a user catches
`kuiper.KuiperError` for anything Kuiper raises on purpose, and `kuiper.ModelFormatError` for a
bad file, without caring which layer raised it.
"""

from __future__ import annotations


class KuiperError(Exception):
    """Base class of every error Kuiper raises on purpose."""


class ModelFormatError(KuiperError):
    """A `.pnnx.param` / `.pnnx.bin` file does not follow the format.

    `path`, `line` (1-based, for the text file) and `entry` (zip entry name, for the weights)
    locate the problem; the message already contains them.
    """

    def __init__(self, message: str, path: object = None, line: int | None = None,
                 entry: str | None = None):
        where = []
        if path is not None:
            where.append(str(path))
        if line is not None:
            where.append(f"line {line}")
        if entry is not None:
            where.append(f"entry '{entry}'")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)
        self.path, self.line, self.entry = path, line, entry


class ExpressionError(KuiperError):
    """A `pnnx.Expression` that cannot be tokenized, parsed or evaluated.

    The message shows the expression with a caret under the offending column.
    """

    def __init__(self, expr: str, column: int, message: str):
        shown, caret_at = _window(expr, column)
        caret = " " * caret_at + "^"
        super().__init__(f"{message} at column {column}\n    {shown}\n    {caret}")
        self.expr, self.column, self.message = expr, column, message


def _window(expr: str, column: int, width: int = 60) -> tuple[str, int]:
    """The part of a long expression around `column` (a hostile one may be megabytes long),
    and where the caret goes in it."""
    if len(expr) <= 2 * width:
        return expr, column
    start = max(0, column - width)
    end = min(len(expr), column + width)
    head = "..." if start > 0 else ""
    tail = "..." if end < len(expr) else ""
    return head + expr[start:end] + tail, len(head) + column - start
