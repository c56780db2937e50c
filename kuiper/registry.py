"""The layer registry: PNNX type string + backend -> layer class.

Layers register themselves with a decorator, so adding an operator never means editing a table:

    @register("nn.ReLU", "F.relu", backend="cpu")
    class ReLU(Layer): ...

Modules under `layers/cpu` and `layers/opencl` are imported on first lookup, which runs their
decorators.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from typing import Callable, TypeVar

from kuiper.errors import UnsupportedOperatorError

BACKENDS = ("cpu", "opencl")
_REGISTRY: dict[str, dict[str, type]] = {b: {} for b in BACKENDS}
_LOADED: set[str] = set()

T = TypeVar("T", bound=type)


def register(*op_types: str, backend: str = "cpu") -> Callable[[T], T]:
    """Class decorator: make `cls` the layer for each PNNX type in `op_types` on `backend`."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend '{backend}', expected one of {BACKENDS}")
    if not op_types:
        raise ValueError("register() needs at least one PNNX operator type")

    def decorate(cls: T) -> T:
        for op_type in op_types:
            previous = _REGISTRY[backend].get(op_type)
            if previous is not None and previous is not cls:
                raise ValueError(f"{op_type} on {backend} is registered twice: "
                                 f"{previous.__module__}.{previous.__name__} and "
                                 f"{cls.__module__}.{cls.__name__}")
            _REGISTRY[backend][op_type] = cls
        # Own types only (an OpenCL twin subclasses its CPU layer and must not inherit its list).
        cls.op_types = tuple(dict.fromkeys(cls.__dict__.get("op_types", ()) + op_types))
        cls.backend = backend
        return cls

    return decorate


def load_layers(backend: str) -> None:
    """Import every module of `layers/<backend>` once (their decorators fill the registry)."""
    if backend in _LOADED:
        return
    _LOADED.add(backend)
    package = importlib.import_module(f"layers.{backend}")
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"layers.{backend}.{module.name}")


def lookup(op_type: str, backend: str = "cpu") -> type:
    """The layer class for `op_type`; a clear error listing the known types if there is none."""
    load_layers(backend)
    try:
        return _REGISTRY[backend][op_type]
    except KeyError:
        known = sorted(_REGISTRY[backend])
        close = difflib.get_close_matches(op_type, known, n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise UnsupportedOperatorError(
            f"no {backend} layer for operator type '{op_type}'.{hint} Known {backend} types: "
            f"{', '.join(known)}") from None


def find(op_type: str, backend: str) -> type | None:
    """Like lookup, but None when missing (used for the OpenCL -> CPU fallback)."""
    load_layers(backend)
    return _REGISTRY[backend].get(op_type)


def supported(backend: str) -> dict[str, type]:
    load_layers(backend)
    return dict(sorted(_REGISTRY[backend].items()))
