"""Kuiper's error types.

Every error a user can trigger with a bad file, a bad input or a missing device is one of these,
and its message names *where* (file, line, zip entry, operator) and *what was expected*, so that
nobody has to read a traceback from deep inside NumPy to find out what went wrong.
"""

from __future__ import annotations

# The parser's errors are the bottom of the hierarchy (the parser imports nothing of the engine);
# they are re-exported here so that every error has one home to import it from.
from kuiper.parser.errors import ExpressionError, KuiperError, ModelFormatError

__all__ = [
    "KuiperError", "ModelFormatError", "ExpressionError", "OperatorError",
    "UnsupportedOperatorError", "RegistrationError", "PluginError", "ShapeError", "GraphError",
    "OpenCLUnavailableError", "KernelBuildError", "InputError", "ResourceError",
    "ConversionError", "ArgumentError", "MALFORMED",
]

# What a layer raises when a damaged file or an input it does not handle gives it operands it
# cannot use (an operator with no inputs, a list where a number belongs, a complex tensor into a
# float kernel). Layers check what pnnx writes; a hostile file can break any assumption, so the
# graph and the executors turn these into an OperatorError naming the operator and its line. The
# original stays attached as __cause__: the fuzzer (kuiper/fuzz) reports such "netted"
# errors separately, as places where a layer could say something more precise.
MALFORMED = (IndexError, KeyError, TypeError, ValueError, AttributeError, ArithmeticError,
             RecursionError)


class OperatorError(KuiperError):
    """An operator's parameters, attributes or inputs are not what its layer expects."""

    def __init__(self, op_name: str, op_type: str, message: str):
        super().__init__(f"operator '{op_name}' ({op_type}): {message}")
        self.op_name, self.op_type, self.message = op_name, op_type, message


class UnsupportedOperatorError(KuiperError):
    """No layer is registered for an operator type on the requested backend."""


class RegistrationError(KuiperError, ValueError):
    """A layer registration that cannot stand: a type that already has a layer, say."""


class PluginError(KuiperError):
    """A plugin could not be found or imported, or one of its layers failed (named in it)."""


class ShapeError(OperatorError):
    """Input shapes that an operator cannot work with (or a size baked into the export)."""


class GraphError(KuiperError):
    """The graph itself is wrong: a cycle, a dangling operand, or a call in the wrong state."""


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


class ResourceError(KuiperError):
    """A model or input would need more memory than the budget allows (kuiper/core/limits.py)."""


class ConversionError(KuiperError):
    """An ONNX or TorchScript file could not be converted to PNNX (kuiper/graph/convert.py): pnnx is
    missing, failed (its log is named), or wrote a format Kuiper does not read."""


class ArgumentError(KuiperError):
    """An argument of Kuiper's API of the wrong type or value (`kuiper.load(plugins=123)`,
    `graph(x, outputs=5)`): the message names the argument, what it got and what was expected
    (kuiper/graph/arguments.py)."""

    def __init__(self, argument: str, message: str):
        super().__init__(f"{argument}: {message}")
        self.argument, self.message = argument, message
