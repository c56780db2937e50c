"""Runtime IR: operands (edges) and operators (nodes), as in KuiperInfer.

`RuntimeOperand` is a value flowing between operators: it has exactly one producer and any number
of consumers. `RuntimeOperator` keeps its inputs and outputs *in order*, so an operator that reads
the same operand twice (`torch.cat` of x with x) simply lists it twice.

Operators also carry the typed parameter accessors layers use in `from_operator`: each one fails
with an `OperatorError` naming the operator, the parameter and what was expected.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from kuiper.core.errors import KuiperError, OperatorError
from kuiper.parser.values import as_float

if TYPE_CHECKING:
    from kuiper.parser.param import OperatorDef

_MISSING = object()


@dataclass(eq=False)
class RuntimeOperand:
    name: str
    shape: tuple[int | None, ...] | None = None  # as declared in the file (None dims = '?')
    dtype: str | None = None                     # pnnx dtype suffix as declared
    producer: RuntimeOperator | None = None
    consumers: list[RuntimeOperator] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"RuntimeOperand({self.name!r}, shape={self.shape})"


@dataclass(eq=False)
class RuntimeOperator:
    name: str
    type: str
    params: dict[str, Any] = field(default_factory=dict)
    attributes: dict[str, np.ndarray] = field(default_factory=dict)
    inputs: list[RuntimeOperand] = field(default_factory=list)
    outputs: list[RuntimeOperand] = field(default_factory=list)
    input_names: list[str | None] = field(default_factory=list)
    # The operator's layer (a kuiper.layers.base.Layer), set by RuntimeGraph.build(). Typed
    # loosely on purpose: the IR sits below the layers, which build on it, never the other way.
    layer: Any = None
    line: int = 0
    source: OperatorDef | None = None

    def __repr__(self) -> str:
        return f"RuntimeOperator({self.name!r}, {self.type!r})"

    # --- errors -------------------------------------------------------------------------------
    def error(self, message: str, cls: type[OperatorError] = OperatorError) -> OperatorError:
        where = f" (line {self.line})" if self.line else ""
        return cls(self.name, self.type, message + where)

    # --- typed parameter access ---------------------------------------------------------------
    def has(self, key: str) -> bool:
        return key in self.params

    def param(self, key: str, default: Any = _MISSING) -> Any:
        if key in self.params:
            return self.params[key]
        if default is _MISSING:
            raise self.error(f"parameter '{key}' is missing (have: "
                             f"{', '.join(sorted(self.params)) or 'none'})")
        return default

    def int_param(self, key: str, default: Any = _MISSING) -> int:
        value = self.param(key, default)
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise self.error(f"parameter '{key}' should be an integer, got {value!r}")
        return int(value)

    def ints_param(self, key: str, n: int | None = None, default: Any = _MISSING) -> list[int]:
        """A list of ints; a single int (or one-element list) is repeated to length `n`."""
        value = self.param(key, default)
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            value = [int(value)] * (n or 1)
        if not isinstance(value, (list, tuple)) or not all(
                isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value):
            raise self.error(f"parameter '{key}' should be a list of integers, got {value!r}")
        value = [int(v) for v in value]
        if n is not None and len(value) == 1 and n > 1:
            value = value * n
        if n is not None and len(value) != n:
            raise self.error(f"parameter '{key}' should have {n} values, got {value!r}")
        return value

    def float_param(self, key: str, default: Any = _MISSING) -> float:
        value = self.param(key, default)
        try:
            return as_float(value)
        except ValueError:
            raise self.error(f"parameter '{key}' should be a number, got {value!r}") from None

    def bool_param(self, key: str, default: Any = _MISSING) -> bool:
        value = self.param(key, default)
        if isinstance(value, bool):
            return value
        if value in (0, 1):  # old pnnx files write bias=1
            return bool(value)
        raise self.error(f"parameter '{key}' should be True or False, got {value!r}")

    def str_param(self, key: str, default: Any = _MISSING, choices: tuple[str, ...] | None = None
                  ) -> str:
        value = self.param(key, default)
        if not isinstance(value, str):
            raise self.error(f"parameter '{key}' should be a string, got {value!r}")
        if choices is not None and value not in choices:
            raise self.error(f"parameter '{key}' is '{value}', expected one of "
                             f"{', '.join(choices)}")
        return value

    def weight(self, key: str, shape: tuple[int, ...] | None = None,
               optional: bool = False) -> np.ndarray | None:
        """A weight from the .bin, optionally checked against the shape the layer expects."""
        if key not in self.attributes:
            if optional:
                return None
            raise self.error(f"weight '@{key}' is missing (have: "
                             f"{', '.join('@' + k for k in self.attributes) or 'none'})")
        array = self.attributes[key]
        if shape is not None and tuple(array.shape) != tuple(shape):
            raise self.error(f"weight '@{key}' has shape {tuple(array.shape)}, expected "
                             f"{tuple(shape)}")
        return array


def not_tensor_inputs(op: RuntimeOperator, specs: dict | None) -> str:
    """' (input 0 ('x') is not a tensor but 'abc')' for each input of `op` whose known value is
    not an array (`expr=abc` gives the string 'abc'), or '' when there is none: the usual reason
    an operator fails, named beside the failure."""
    odd = [f"input {i} ('{o.name}') is not a tensor but {specs[o.name].value!r}"
           for i, o in enumerate(op.inputs) if specs and o.name in specs
           and specs[o.name].value is not None
           and not isinstance(specs[o.name].value, np.ndarray)]
    return f" ({'; '.join(odd)})" if odd else ""


def operator_failure(op: RuntimeOperator, stage: str, error: Exception,
                     specs: dict | None = None, path: str | None = None,
                     hint: str = "") -> KuiperError:
    """A bare error (NumPy's, pyopencl's) of `op`'s layer as an OperatorError naming the
    operator and its line, the original kept as the cause by the caller (`raise ... from e`):
    nobody should have to read a traceback from deep inside NumPy to find the culprit. The
    usual reason is named too: an input that is not a tensor (`expr=abc` gives the string 'abc',
    `expr=1e-5` a Python number). The graph uses it around reading parameters and inferring
    shapes (with the file's `path`), both executors around every operator they run. A
    KuiperError (some are ValueErrors too) already says what is wrong and is returned as is."""
    if isinstance(error, KuiperError):
        return error
    why = not_tensor_inputs(op, specs)
    where = f"{path}: " if path else ""
    return op.error(f"{where}failed while {stage}{why}: {type(error).__name__}: "
                    f"{str(error)[:300]}{hint}")


# Called after each operator runs, by either executor: (operator, its outputs as NumPy arrays,
# seconds). `kuiper compare` and `kuiper bench` are observers.
Observer = Callable[[RuntimeOperator, list, float], None]
