"""The layer registry: PNNX type string + backend -> layer class.

Layers register themselves with a decorator, so adding an operator never means editing a table:

    @register("nn.ReLU", "F.relu", backend="cpu")
    class ReLU(Layer): ...

Modules under `layers/cpu` and `layers/opencl` are imported on first lookup, which runs their
decorators. The registry sits on a floor below the layers, so it never imports them itself: the
graph package, above them, hands it the function that does (`set_layer_loader`, called by
kuiper/graph/backends.py when the graph package is imported, which kuiper/__init__.py does
before anything can be looked up). Layers from outside Kuiper register the same way, from a
plugin (kuiper/core/plugins.py); `origin(cls)` says where each layer came from.
"""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Callable, Iterator
from typing import TypeVar

from kuiper.core.errors import RegistrationError, UnsupportedOperatorError

BACKENDS = ("cpu", "opencl")
_REGISTRY: dict[str, dict[str, type]] = {b: {} for b in BACKENDS}
_LOADED: set[str] = set()
# Imports Kuiper's own layers of one backend (kuiper/graph/backends.py sets it; see above)
_layer_loader: Callable[[str], None] | None = None
# Where each registered class came from, when a plugin registered it (kuiper/core/plugins.py sets
# `_plugin` while it imports one); Kuiper's own layers are simply "kuiper".
_ORIGINS: dict[type, str] = {}
_plugin: list[str] = []  # the plugin being imported now (a stack: a plugin may load another)
# What each plugin on that stack registered so far: (backend, type, the class it replaced or
# None), so that a plugin that fails takes back exactly its own registrations (registering_for)
_journal: list[list[tuple[str, str, type | None]]] = []

T = TypeVar("T", bound=type)


def register(*op_types: str, backend: str = "cpu", override: bool = False
             ) -> Callable[[T], T]:
    """Class decorator: make `cls` the layer for each PNNX type in `op_types` on `backend`.

    An OpenCL twin usually runs exactly the types of the CPU layer it subclasses, so
    `@register(backend="opencl")` with no types takes them from that layer (`cpu_base`): the
    list is written once, on the CPU side. Name types only for a twin that covers fewer.

    A type has one layer per backend: registering a second class for it is refused
    (RegistrationError, naming both and where they come from), unless `override=True` says
    that the new one replaces the old on purpose (a plugin's faster ReLU, say).
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend '{backend}', expected one of {BACKENDS}")
    if not op_types and backend == "cpu":
        raise ValueError("register() needs at least one PNNX operator type")

    def decorate(cls: T) -> T:
        types = op_types or cpu_base(cls).op_types
        if not is_kuipers(cls):
            if _plugin:
                _ORIGINS[cls] = _plugin[-1]
            load_layers(backend)  # Kuiper's own first, so that a clash is seen now, not later
        for op_type in types:
            previous = _REGISTRY[backend].get(op_type)
            if previous is not None and previous is not cls and not override:
                raise RegistrationError(
                    f"'{op_type}' on {backend} is already the layer {describe(previous)}; "
                    f"{describe(cls)} may replace it only with register(..., override=True)")
        for op_type in types:
            if _journal and not is_kuipers(cls):
                _journal[-1].append((backend, op_type, _REGISTRY[backend].get(op_type)))
            _REGISTRY[backend][op_type] = cls
        # Own types only (an OpenCL twin subclasses its CPU layer and must not inherit its list).
        cls.op_types = tuple(dict.fromkeys(cls.__dict__.get("op_types", ()) + types))
        cls.backend = backend
        return cls

    return decorate


@contextlib.contextmanager
def registering_for(label: str) -> Iterator[None]:
    """Layers registered inside this block come from the plugin `label` (`origin` names it).

    If the block fails (the plugin's import raises), what *it* registered is taken back, and
    nothing else: a half-imported plugin must not leave layers behind (nor make the next try
    clash with them), and Kuiper's own layers, which the plugin's first `register` may have
    loaded inside the block, must stay. (Restoring a snapshot of the whole table from before
    the block emptied it of Kuiper's layers: every later load failed with "no cpu layer".)
    """
    _plugin.append(label)
    _journal.append([])
    try:
        yield
    except BaseException:
        for backend, op_type, previous in reversed(_journal[-1]):
            cls = _REGISTRY[backend].get(op_type)
            if previous is None:
                _REGISTRY[backend].pop(op_type, None)
            else:
                _REGISTRY[backend][op_type] = previous
            if cls is not None and cls not in registered_classes():
                _ORIGINS.pop(cls, None)
        raise
    finally:
        _journal.pop()
        _plugin.pop()


def registered_classes() -> set[type]:
    """Every class the registry holds, on any backend."""
    return {cls for table in _REGISTRY.values() for cls in table.values()}


def is_kuipers(cls: type) -> bool:
    """Whether `cls` is one of Kuiper's own classes (not a plugin's, a script's or a test's).

    The example plugins in kuiper/examples/ ship with Kuiper but are written as a user's
    plugin is, and count as one (their origin is the plugin that loaded them)."""
    return cls.__module__.startswith("kuiper.") and not cls.__module__.startswith(
        "kuiper.examples.")


def origin(cls: type) -> str:
    """Where a layer class comes from: "kuiper", or "plugin NAME" (its module or file)."""
    if cls in _ORIGINS:
        return f"plugin {_ORIGINS[cls]}"
    if is_kuipers(cls):
        return "kuiper"
    return f"module {cls.__module__}"  # registered outside a plugin load (a script, a test)


def describe(cls: type) -> str:
    """`pkg.module.Class (origin)`, for messages."""
    return f"{cls.__module__}.{cls.__qualname__} ({origin(cls)})"


def cpu_base(cls: type) -> type:
    """The CPU layer `cls` is the twin of: the first class in its MRO registered on "cpu".

    `register` sets `backend` in the registered class's own namespace, so `vars()` tells a
    registered CPU layer from a class that merely inherits from one.
    """
    for base in cls.__mro__[1:]:
        # (Layer itself says backend = "cpu" too, but registers no types)
        if vars(base).get("backend") == "cpu" and vars(base).get("op_types"):
            return base
    raise ValueError(f"{cls.__module__}.{cls.__name__} subclasses no registered CPU layer to "
                     "take its PNNX types from: subclass one, or name the types in register()")


def set_layer_loader(loader: Callable[[str], None]) -> None:
    """`loader(backend)` imports every module of Kuiper's own layers for `backend`."""
    global _layer_loader
    _layer_loader = loader


def load_layers(backend: str) -> None:
    """Import Kuiper's own layers of `backend` once (their decorators fill the registry)."""
    if backend in _LOADED:
        return
    if _layer_loader is None:
        raise RegistrationError("no layer loader is set: import kuiper (its graph package "
                                "tells the registry where Kuiper's own layers are)")
    _LOADED.add(backend)  # first: the modules' own register() calls must not come back here
    try:
        _layer_loader(backend)
    except BaseException:
        _LOADED.discard(backend)  # half a backend must not pass for all of it
        raise


def lookup(op_type: str, backend: str = "cpu") -> type:
    """The layer class for `op_type`; a clear error with the closest known types if none."""
    load_layers(backend)
    try:
        return _REGISTRY[backend][op_type]
    except KeyError:
        known = sorted(_REGISTRY[backend])
        close = difflib.get_close_matches(op_type, known, n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise UnsupportedOperatorError(
            f"no {backend} layer for operator type '{op_type}'.{hint} (`kuiper ops` lists the "
            f"{len(known)} known {backend} types.)") from None


def find(op_type: str, backend: str) -> type | None:
    """Like lookup, but None when missing."""
    load_layers(backend)
    return _REGISTRY[backend].get(op_type)


# When a backend has no layer for a type, the layer of another backend stands in: an OpenCL graph
# runs such an operator's CPU layer on the host (its executor downloads the inputs and uploads
# the outputs around it, see layers/opencl_base.py's HostFallback).
FALLBACK = {"opencl": "cpu"}


def layer_for(op_type: str, backend: str) -> type:
    """The layer class a `backend` graph uses for `op_type`: its own, else its fallback's.

    Raises UnsupportedOperatorError (naming the type, with close matches) when none has one.
    """
    cls = find(op_type, backend)
    if cls is None and backend in FALLBACK:
        return layer_for(op_type, FALLBACK[backend])
    return cls or lookup(op_type, backend)


def supported(backend: str) -> dict[str, type]:
    load_layers(backend)
    return dict(sorted(_REGISTRY[backend].items()))


def layer_file(op_type: str, backend: str = "cpu") -> str:
    """Where the layer for `op_type` is written, relative to the repository root.

    `layer_file("nn.Conv2d")` is "layers/cpu/conv2d.py". One stem names the whole operator: its
    OpenCL twin is layers/opencl/<stem>.py, its kernels clkernels/<stem>.cl, its tests
    tests/layers/test_<stem>.py.
    """
    module = lookup(op_type, backend).__module__.split(".")
    # kuiper.layers.cpu.conv2d is layers/cpu/conv2d.py: the install maps kuiper.layers to layers/
    if module[:2] in (["kuiper", "layers"], ["kuiper", "parser"]):
        module = module[1:]
    return "/".join(module) + ".py"


@contextlib.contextmanager
def override(cls: type, *op_types: str, backend: str = "cpu") -> Iterator[type]:
    """Inside the `with` block, `cls` is the layer for `op_types` on `backend`; then restore.

    `@register` refuses a second class for a type on purpose (two files must not silently fight
    over one operator); this is the deliberate, temporary way to swap one in: to try a new
    version of a layer on a real model, or to test a course exercise through the real loading
    path. With no `op_types`, the class's own `op_types` are used.
    """
    op_types = op_types or tuple(getattr(cls, "op_types", ()))
    if not op_types:
        raise ValueError(f"override({cls.__name__}) needs the PNNX operator types to replace")
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend '{backend}', expected one of {BACKENDS}")
    load_layers(backend)
    table = _REGISTRY[backend]
    saved = {t: table.get(t) for t in op_types}
    table.update({t: cls for t in op_types})
    try:
        yield cls
    finally:
        for t, previous in saved.items():
            if previous is None:
                table.pop(t, None)
            else:
                table[t] = previous
