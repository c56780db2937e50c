"""Kuiper's error types.

Every error a user can trigger with a bad file, a bad input or a missing device is one of these,
and its message names *where* (file, line, zip entry, operator) and *what was expected*, so that
nobody has to read a traceback from deep inside NumPy to find out what went wrong.
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


class OperatorError(KuiperError):
    """An operator's parameters, attributes or inputs are not what its layer expects."""

    def __init__(self, op_name: str, op_type: str, message: str):
        super().__init__(f"operator '{op_name}' ({op_type}): {message}")
        self.op_name, self.op_type, self.message = op_name, op_type, message


class UnsupportedOperatorError(KuiperError):
    """No layer is registered for an operator type on the requested backend."""


class ShapeError(OperatorError):
    """Input shapes that an operator cannot work with (or a size baked into the export)."""


class GraphError(KuiperError):
    """The graph itself is wrong: a cycle, a dangling operand, or a call in the wrong state."""


class ExpressionError(KuiperError):
    """A `pnnx.Expression` that cannot be tokenized, parsed or evaluated.

    The message shows the expression with a caret under the offending column.
    """

    def __init__(self, expr: str, column: int, message: str):
        caret = " " * column + "^"
        super().__init__(f"{message} at column {column}\n    {expr}\n    {caret}")
        self.expr, self.column, self.message = expr, column, message


class OpenCLUnavailableError(KuiperError):
    """No usable OpenCL platform or device was found (or the one asked for does not exist)."""


class KernelBuildError(KuiperError):
    """An OpenCL kernel file failed to compile; the message carries the build log."""

    def __init__(self, kernel_file: str, options: list[str], log: str):
        super().__init__(
            f"OpenCL build of {kernel_file} failed (options: {' '.join(options) or 'none'}):\n{log}"
        )
        self.kernel_file, self.options, self.log = kernel_file, options, log


class InputError(KuiperError):
    """Inputs given to a graph do not match its declared inputs (count, rank, dtype)."""
