"""One checker for the arguments of Kuiper's public API: `kuiper.load`, a graph's call and
`forward`.

An argument of the wrong type used to travel deep before anything noticed: `plugins=123` was
iterated, `input_shapes=[["a"]]` multiplied, `outputs=5` listed, a ragged nested list handed
to NumPy, each ending in a bare TypeError or ValueError far from the call. Every function here
checks one argument where it enters and returns it in the form the engine uses, or raises an
`ArgumentError` that names the argument, what it got and what was expected. Inputs are the
exception: a bad input is an `InputError` (kuiper/core/errors.py), and `input_array` checks
its size against the limits *before* anything is copied, so a zero-stride broadcast view of a
huge shape is refused, not allocated.
"""

from __future__ import annotations

import inspect
import os
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from kuiper.core.errors import ArgumentError, InputError
from kuiper.core.limits import Limits

# The longest path and file name the system takes (Linux: 4096 and 255); a longer one fails
# in open() with ENAMETOOLONG.
PATH_MAX, NAME_MAX = 4096, 255


def _got(value: Any) -> str:
    """`5 (int)`: a value for a message, shortened."""
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(value).__name__})"


def path(argument: str, value: Any) -> str:
    """A file path as a str: a str or os.PathLike of str, without NUL bytes, of a length the
    system can open."""
    if not isinstance(value, (str, os.PathLike)):
        raise ArgumentError(argument, f"got {_got(value)}, expected a path (str or "
                                      "pathlib.Path)")
    text = os.fspath(value)
    if not isinstance(text, str):
        raise ArgumentError(argument, f"got {_got(value)}, expected a path as text (str or "
                                      "pathlib.Path), not bytes")
    return text_path(argument, text)


def text_path(argument: str, text: str) -> str:
    """`text` if a file system can take it as a path: no NUL byte, not too long."""
    if "\0" in text:
        raise ArgumentError(argument, f"{text[:60]!r} contains a NUL byte, which no path may "
                                      "hold")
    if len(text) > PATH_MAX:
        raise ArgumentError(argument, f"a path of {len(text)} characters, longer than the "
                                      f"{PATH_MAX} a path may have")
    longest = max((len(part) for part in text.split(os.sep)), default=0)
    if longest > NAME_MAX:
        raise ArgumentError(argument, f"a file or folder name of {longest} characters, longer "
                                      f"than the {NAME_MAX} a name may have")
    return text


def optional_path(argument: str, value: Any) -> str | None:
    return None if value is None else path(argument, value)


def plugins(value: Any) -> list[str]:
    """Plugins as a list of module names or paths: None (none), one, or a list of them."""
    if value is None:
        return []
    if isinstance(value, (str, os.PathLike)):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise ArgumentError("plugins", f"got {_got(value)}, expected a module name or a path, "
                                       "or a list of them")
    return [path(f"plugins[{i}]", spec) for i, spec in enumerate(value)]


def _dimension(argument: str, value: Any) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ArgumentError(argument, f"got {_got(value)}, expected a whole number (a size)")
    if value < 0:
        raise ArgumentError(argument, f"got {value}, expected a size of 0 or more")
    return int(value)


def input_shapes(value: Any) -> list[tuple[int, ...]] | None:
    """None (the shapes of the export), or one shape per input, each a sequence of sizes."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        raise ArgumentError("input_shapes", f"got {_got(value)}, expected one shape per "
                                            "input, e.g. [(1, 3, 224, 224)]")
    shapes = []
    for i, shape in enumerate(value):
        if isinstance(shape, (str, bytes)) or not isinstance(shape, (Sequence, np.ndarray)):
            raise ArgumentError(f"input_shapes[{i}]", f"got {_got(shape)}, expected a shape "
                                                      "such as (1, 3, 224, 224)")
        shapes.append(tuple(_dimension(f"input_shapes[{i}][{k}]", d)
                            for k, d in enumerate(shape)))
    return shapes


def limits(value: Any) -> Limits | None:
    if value is None or isinstance(value, Limits):
        return value
    raise ArgumentError("limits", f"got {_got(value)}, expected kuiper.Limits("
                                  "max_tensor_bytes=..., max_total_bytes=...) or None")


def passes(value: Any) -> list[str] | None:
    """None (every pass), one pass name, or a list of them (the names are the pipeline's to
    check)."""
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(n, str) for n in value):
        raise ArgumentError("passes", f"got {_got(value)}, expected a list of pass names "
                                      "(kuiper/graph/pipeline.py) or None")
    return list(value)


def params(value: Any) -> dict[str, dict[str, Any]]:
    """`params` as {type: {key: value}}."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
            isinstance(t, str) and isinstance(p, Mapping) and all(isinstance(k, str) for k in p)
            for t, p in value.items()):
        raise ArgumentError("params", f"got {_got(value)}, expected a PNNX type mapped to its "
                                      "parameters, e.g. {'mymods.Swish2': {'beta': 2}}")
    return {t: dict(p) for t, p in value.items()}


def backend_options(backend: str, executor: type, options: dict[str, Any]) -> dict[str, Any]:
    """The backend options, refused by name if the backend's executor does not take them, or
    by type if its signature says another (CPUExecutor: fuse, threads, memory;
    OpenCLExecutor: device, out_of_order, profiling, runtime, memory): the executor's
    signature is the one list of them."""
    try:
        hints = typing.get_type_hints(executor.__init__)
    except Exception:  # noqa: BLE001 - a plugin backend's annotations we cannot evaluate
        hints = {}
    accepted = [name for name in inspect.signature(executor).parameters if name != "graph"]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ArgumentError(", ".join(unknown), f"unknown option(s) for the {backend} backend "
                                                f"(it takes: {', '.join(accepted) or 'none'})")
    for name, value in options.items():
        hint = hints.get(name)
        if hint is not None and not _matches(value, hint):
            raise ArgumentError(name, f"got {_got(value)}, expected {_spell(hint)} (an option "
                                      f"of the {backend} backend)")
    return options


def _alternatives(hint: Any) -> tuple:
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return typing.get_args(hint)
    return (hint,)


def _matches(value: Any, hint: Any) -> bool:
    for kind in _alternatives(hint):
        if kind is type(None) and value is None:
            return True
        if kind is bool and isinstance(value, (bool, np.bool_)):
            return True
        if kind in (int, float) and isinstance(value, (int, np.integer)) and \
                not isinstance(value, (bool, np.bool_)):
            return True
        if kind is float and isinstance(value, (float, np.floating)):
            return True
        if kind is Any or (isinstance(kind, type) and kind not in (bool, int, float)
                           and isinstance(value, kind)):
            return True
        if not isinstance(kind, type) and kind is not Any:  # a generic we cannot judge
            return True
    return False


def _spell(hint: Any) -> str:
    return " or ".join("None" if k is type(None) else getattr(k, "__name__", str(k))
                       for k in _alternatives(hint))


# --- a graph's call and forward -----------------------------------------------------------
def outputs(value: Any) -> list[str] | None:
    """None (the graph outputs), one name, or a list of names."""
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, (bytes, Mapping)) or not isinstance(value, Iterable):
        raise ArgumentError("outputs", f"got {_got(value)}, expected an output or operand "
                                       "name (str), or a list of them")
    value = list(value)  # any iterable, a generator included
    for i, name in enumerate(value):
        if not isinstance(name, str):
            raise ArgumentError(f"outputs[{i}]", f"got {_got(name)}, expected an output or "
                                                 "operand name (str)")
    return value


def observer(value: Any) -> Callable | None:
    """None, or a function the executors can call as observer(operator, outputs, seconds)."""
    if value is None:
        return value
    expected = "expected a function observer(operator, outputs, seconds), or None"
    if not callable(value):
        raise ArgumentError("observer", f"got {_got(value)}, {expected}")
    try:
        inspect.signature(value).bind(None, None, None)
    except TypeError:  # called with three arguments after the first operator, it would fail
        raise ArgumentError("observer", f"{_got(value)} cannot take three arguments: "
                                        f"{expected}") from None
    except ValueError:  # a builtin without a signature: let it be
        pass
    return value


def flag(argument: str, value: Any) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ArgumentError(argument, f"got {_got(value)}, expected True or False")


def input_array(port: Any, value: Any, limits: Limits) -> np.ndarray:
    """Input `value` for graph input `port`, as a contiguous array of the port's dtype.

    Everything is checked before anything is copied: a nested list that is not a tensor
    (ragged, or holding non-numbers), the rank, the dtype, and the size of the array the copy
    would make, against the limits (kuiper/core/limits.py). A zero-stride view from
    `np.broadcast_to` is tiny in memory but not once made contiguous: its logical size is
    what counts.
    """
    what = f"input '{port.name}'"
    try:
        a = value if isinstance(value, np.ndarray) else np.asarray(value)
    except (ValueError, TypeError, OverflowError, RecursionError) as e:
        raise InputError(f"{what}: cannot be read as a tensor ({type(e).__name__}: "
                         f"{str(e).splitlines()[0][:200]}); expected an array of shape "
                         f"{_dims(port.shape)} (a nested list must be rectangular)") from None
    if a.dtype == object or a.dtype.kind in "USVM":
        raise InputError(f"{what} should be {port.dtype.name}, got an array of {a.dtype} "
                         "(not numbers)")
    if len(a.shape) != len(port.shape):
        raise InputError(f"{what} should be {len(port.shape)}-D like {port}, got shape "
                         f"{a.shape}")
    if a.dtype != port.dtype and not np.can_cast(a.dtype, port.dtype, casting="same_kind"):
        raise InputError(f"{what} should be {port.dtype.name}, got {a.dtype.name}")
    limits.check_tensor(a.shape, port.dtype.itemsize, what)  # before astype's copy
    if a.dtype != port.dtype:
        a = a.astype(port.dtype)
    return np.ascontiguousarray(a).reshape(a.shape)  # keeps 0-dim inputs 0-dim


def _dims(shape) -> str:
    return "x".join("?" if d is None else str(d) for d in shape) or "() (a scalar)"
