"""Operators from outside Kuiper: plugins that register layers of their own.

A plugin is a Python module (or package) that registers layers with `kuiper.register`, exactly
as Kuiper's own layers do; kuiper/PLUGINS.md walks through writing one. Kuiper finds it in
three ways:

- by module name, importable from sys.path:  kuiper.load(model, plugins=["mymods_kuiper"])
- by file path:                              kuiper.load(model, plugins=["my_layers.py"])
- by entry point: an installed package declares, in its pyproject.toml,

      [project.entry-points."kuiper.layers"]
      swish = "mymods_kuiper"

  and Kuiper imports it when a graph is first built, as pytest loads its plugins.
  KUIPER_DISABLE_PLUGIN_AUTOLOAD=1 turns that off.

On the command line, `--plugin MODULE_OR_PATH` (repeatable) does what `plugins=` does.

While a plugin is imported, the registry notes which plugin each new layer comes from
(`registry.origin`): `kuiper ops` shows it, and an error inside a plugin's layer names the
plugin (`blame`), so that nobody debugs Kuiper for a bug in someone else's layer.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import importlib.util
import os
import sys
import traceback
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import ModuleType

from kuiper import registry
from kuiper.errors import KernelBuildError, KuiperError, OperatorError, PluginError

ENTRY_POINT_GROUP = "kuiper.layers"
DOCS = "kuiper/PLUGINS.md"
# The namespaces of the types pnnx writes for PyTorch's own operators; any other dotted type
# is most likely a user's module that pnnx kept whole (`moduleop`), which needs a plugin.
PNNX_NAMESPACES = ("nn.", "F.", "torch.", "Tensor.", "pnnx.", "prim::", "aten::")

_loaded: dict[str, ModuleType] = {}  # what was asked for (a name or a resolved path) -> module
_autoloaded = False


@contextlib.contextmanager
def _registering_for(label: str) -> Iterator[None]:
    """Layers registered inside this block come from the plugin `label`."""
    registry._plugin.append(label)
    try:
        yield
    finally:
        registry._plugin.pop()


def load_plugin(spec: str | os.PathLike) -> ModuleType:
    """Import one plugin (a module name, or the path of a .py file or package folder), once.

    Loading the same plugin again returns the module already loaded: its layers are registered
    once, however many graphs ask for it. Any failure is a PluginError naming the plugin.
    """
    text = os.fspath(spec)
    looks_like_path = text.endswith(".py") or os.sep in text or "/" in text
    key = str(Path(text).resolve()) if looks_like_path else text
    if key in _loaded:
        return _loaded[key]
    with _registering_for(text):
        module = _import_path(Path(key), text) if looks_like_path else _import_name(text)
    # Imported before (to export the model, say), its layers registered with no plugin to
    # name: they are this plugin's.
    for cls in registry.registered_classes():
        if (cls.__module__.partition(".")[0] == module.__name__.partition(".")[0]
                and not cls.__module__.startswith("kuiper.")):
            registry._ORIGINS.setdefault(cls, text)
    _loaded[key] = module
    return module


def _import_name(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name and name.startswith(e.name):
            raise PluginError(f"plugin '{name}': no module of that name can be imported (is the "
                              "package installed, or its folder on PYTHONPATH? a file needs its "
                              f"path, e.g. ./{name}.py). See {DOCS}.") from None
        raise _import_failed(name, e) from e
    except KuiperError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever the plugin's own code raises
        raise _import_failed(name, e) from e


def _import_path(path: Path, label: str) -> ModuleType:
    init = path / "__init__.py"
    if path.is_dir() and init.is_file():
        spec = importlib.util.spec_from_file_location(path.name, init,
                                                      submodule_search_locations=[str(path)])
    elif path.is_file() and path.suffix == ".py":
        # A module name of its own, so two plugins both called layers.py do not clash
        name = f"kuiper_plugin_{path.stem}_{zlib.crc32(str(path).encode()):08x}"
        spec = importlib.util.spec_from_file_location(name, path)
    else:
        raise PluginError(f"plugin '{label}': {path} is not a .py file or a package folder "
                          f"(one with __init__.py). See {DOCS}.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # so that the plugin's classes can be pickled, inspected
    try:
        spec.loader.exec_module(module)
    except KuiperError:
        del sys.modules[spec.name]
        raise
    except Exception as e:  # noqa: BLE001 - whatever the plugin's own code raises
        del sys.modules[spec.name]
        raise _import_failed(label, e) from e
    return module


def _import_failed(label: str, error: BaseException) -> PluginError:
    frames = traceback.extract_tb(error.__traceback__)
    where = f" ({frames[-1].filename}, line {frames[-1].lineno})" if frames else ""
    return PluginError(f"plugin '{label}' failed to import: {type(error).__name__}: "
                       f"{error}{where}")


def entry_points() -> list[importlib.metadata.EntryPoint]:
    """The installed packages' plugins: entry points of the group "kuiper.layers"."""
    return sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)


def load_entry_points() -> None:
    """Import every installed plugin once (unless KUIPER_DISABLE_PLUGIN_AUTOLOAD is set)."""
    global _autoloaded
    if _autoloaded or os.environ.get("KUIPER_DISABLE_PLUGIN_AUTOLOAD"):
        return
    _autoloaded = True
    for entry in entry_points():
        label = f"{entry.name} = {entry.value} (entry point)"
        if entry.value in _loaded:
            continue
        with _registering_for(label):
            try:
                _loaded[entry.value] = entry.load()
            except KuiperError:
                raise
            except Exception as e:  # noqa: BLE001 - whatever the plugin's own code raises
                raise _import_failed(label, e) from e


def load_all(specs: Iterable[str | os.PathLike] = ()) -> None:
    """The installed plugins, then the ones asked for by name or path."""
    load_entry_points()
    if isinstance(specs, (str, os.PathLike)):
        specs = [specs]  # plugins="mymods_kuiper": one plugin, not a list of letters
    for spec in specs:
        load_plugin(spec)


def is_module_type(op_type: str) -> bool:
    """Whether `op_type` names a user's PyTorch module that pnnx kept whole (`moduleop`)."""
    return "." in op_type and not op_type.startswith(PNNX_NAMESPACES)


def missing_type_hint(op_type: str) -> str:
    """What to say when no layer handles `op_type`: which plugin would be needed, and how."""
    if not is_module_type(op_type):
        return ""
    installed = ", ".join(f"{e.name} ({e.value})" for e in entry_points()) or "none"
    return (f" '{op_type}' looks like a PyTorch module that pnnx kept as one operator "
            f"(moduleop): Kuiper runs it through a plugin that registers a layer for that type: "
            f"kuiper.load(..., plugins=[\"my_plugin\"]) or --plugin my_plugin, or an installed "
            f"package with a \"{ENTRY_POINT_GROUP}\" entry point (installed: {installed}). How "
            f"to write one: {DOCS}.")


def blame(op, layer, stage: str, error: BaseException) -> PluginError | None:
    """A PluginError naming the plugin if `layer` (a class or an instance) comes from one.

    None for Kuiper's own layers: their KuiperErrors already say what is wrong. A plugin's
    layer may raise anything, and its message should say whose code it was.
    """
    cls = layer if isinstance(layer, type) else type(layer)
    source = registry.origin(cls)
    if source == "kuiper" or isinstance(error, (PluginError, KernelBuildError)):
        return None  # (a build error names the plugin's own .cl file already)
    detail = (error.message if isinstance(error, OperatorError)
              else f"{type(error).__name__}: {error}")
    return PluginError(f"operator '{op.name}' ({op.type}), line {op.line}: {stage} of "
                       f"{cls.__module__}.{cls.__qualname__}, from {source}, failed: {detail}")


def call(op, layer, stage: str, method, *args, **kwargs):
    """`method(*args, **kwargs)` of `op`'s layer; an error in a plugin's layer names the plugin."""
    try:
        return method(*args, **kwargs)
    except Exception as e:
        reraise(op, layer, stage, e)


def reraise(op, layer, stage: str, error: Exception):
    """Raise `error` again, as a PluginError naming the plugin if `layer` comes from one."""
    blamed = blame(op, layer, stage, error)
    if blamed is None:
        raise error
    raise blamed from error
