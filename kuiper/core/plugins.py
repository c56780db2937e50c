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

import importlib
import importlib.metadata
import importlib.util
import os
import sys
import threading
import traceback
import zlib
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from kuiper.core import registry
from kuiper.core.errors import KernelBuildError, KuiperError, OperatorError, PluginError, ShapeError
from kuiper.core.tensor_spec import TensorSpec

ENTRY_POINT_GROUP = "kuiper.layers"
# The guide to writing a plugin, shipped with the package (errors point to it).
DOCS = str(Path(__file__).with_name("PLUGINS.md"))
# The namespaces of the types pnnx writes for PyTorch's own operators; any other dotted type
# is most likely a user's module that pnnx kept whole (`moduleop`), which needs a plugin.
PNNX_NAMESPACES = ("nn.", "F.", "torch.", "Tensor.", "pnnx.", "prim::", "aten::",
                   "torchvision.")

_loaded: dict[str, ModuleType] = {}  # a plugin's name or resolved file -> its module
_lock = threading.RLock()  # graphs built in several threads load each plugin once
_entry_points_loaded = False


def load_plugin(spec: str | os.PathLike) -> ModuleType:
    """Import one plugin (a module name, or the path of a .py file or package folder), once.

    Loading the same plugin again, by the same or another spelling (a name, then the path of
    its folder), returns the module already loaded: its layers are registered once, however
    many graphs ask for it. Any failure is a PluginError naming the plugin.
    """
    text = os.fspath(spec) if isinstance(spec, (str, os.PathLike)) else spec
    if not isinstance(text, str) or "\0" in text:
        raise PluginError(f"plugin {spec!r:.80}: expected a module name or a path (a str "
                          "without NUL bytes)")
    looks_like_path = text.endswith(".py") or os.sep in text or "/" in text
    with _lock:
        if looks_like_path:
            try:
                path = Path(text).resolve()
                source = path / "__init__.py" if path.is_dir() else path
            # a symlink loop (RuntimeError before 3.13), a name too long (ENAMETOOLONG) ...
            except (OSError, RuntimeError) as e:
                raise PluginError(f"plugin '{text:.200}': the path cannot be resolved "
                                  f"({e.strerror if isinstance(e, OSError) else e})") from None
            module = _loaded.get(str(source)) or _imported_from(source)
            if module is None:
                with registry.registering_for(text):
                    module = _import_path(path, text)
        else:
            module = _loaded.get(text)
            if module is None:
                if not all(part.isidentifier() for part in text.split(".")):
                    # importlib's own errors here ('Empty module name', a relative import)
                    # would read as the plugin's code failing
                    raise PluginError(f"plugin '{text:.200}': neither a module name (Python "
                                      "names joined by dots, e.g. mylayers.swish) nor a path "
                                      f"(a .py file or a package folder). See {DOCS}.")
                with registry.registering_for(text):
                    module = _import_name(text)
        _claim(module, text)
        _loaded[text] = module
        if getattr(module, "__file__", None):
            _loaded[str(Path(module.__file__).resolve())] = module
        return module


def _imported_from(source: Path) -> ModuleType | None:
    """The module already imported from `source` (under any name), if there is one."""
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if file and Path(file).resolve() == source:
            return module
    return None


def _claim(module: ModuleType, label: str) -> None:
    """Layers of `module`'s package registered before it was loaded as a plugin (it was
    imported to export the model, say) had no plugin to name: they are this plugin's."""
    package = module.__name__.partition(".")[0]
    for cls in registry.registered_classes():
        if (cls.__module__.partition(".")[0] == package
                and not registry.is_kuipers(cls)):
            registry._ORIGINS.setdefault(cls, label)


def _import_name(name: str) -> ModuleType:
    try:
        module = importlib.import_module(name)
        if getattr(module, "__file__", None) is None and hasattr(module, "__path__"):
            # a folder without __init__.py imports as an empty namespace package: nothing of
            # it runs, so nothing would be registered, silently
            raise PluginError(f"plugin '{name}': {', '.join(module.__path__)} is a folder "
                              "without __init__.py, so importing it runs nothing: add an "
                              f"__init__.py that imports the plugin's layers. See {DOCS}.")
        return module
    except ModuleNotFoundError as e:
        if e.name == name or name.startswith(f"{e.name}."):
            raise PluginError(f"plugin '{name}': no module of that name can be imported (is the "
                              "package installed, or its folder on PYTHONPATH? a file needs its "
                              f"path, e.g. ./{name}.py). See {DOCS}.") from None
        raise _import_failed(name, e) from e  # the plugin itself imports something missing
    except KuiperError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever the plugin's own code raises
        raise _import_failed(name, e) from e


def _import_path(path: Path, label: str) -> ModuleType:
    init = path / "__init__.py"
    if path.is_dir() and init.is_file():
        # A package keeps its own name: its modules import each other by it.
        name = path.name
        if name in sys.modules:
            raise PluginError(f"plugin '{label}': a different module named '{name}' is already "
                              f"imported ({getattr(sys.modules[name], '__file__', 'built in')}):"
                              " rename the plugin's folder")
        spec = importlib.util.spec_from_file_location(name, init,
                                                      submodule_search_locations=[str(path)])
    elif path.is_file() and path.suffix == ".py":
        # A module name of its own, so two plugins both called layers.py do not clash
        name = f"kuiper_plugin_{path.stem}_{zlib.crc32(str(path).encode()):08x}"
        spec = importlib.util.spec_from_file_location(name, path)
    elif not path.exists():
        raise PluginError(f"plugin '{label}': {path} does not exist. See {DOCS}.")
    else:
        raise PluginError(f"plugin '{label}': {path} is not a .py file or a package folder "
                          f"(one with __init__.py). See {DOCS}.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # so that the plugin's classes can be pickled, inspected
    try:
        spec.loader.exec_module(module)
    except BaseException as e:
        del sys.modules[spec.name]
        if isinstance(e, KuiperError) or not isinstance(e, Exception):
            raise
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
    """Import every installed plugin once (unless KUIPER_DISABLE_PLUGIN_AUTOLOAD is set).

    A plugin that fails to import fails every load, with the way out in the message: a broken
    install must not quietly turn into "no layer for this type" later.
    """
    global _entry_points_loaded
    if _entry_points_loaded or os.environ.get("KUIPER_DISABLE_PLUGIN_AUTOLOAD"):
        return
    with _lock:
        for entry in entry_points():  # reads every installed package's metadata: once
            if entry.value in _loaded:
                continue
            label = f"{entry.name} = {entry.value} (entry point)"
            with registry.registering_for(label):
                try:
                    module = entry.load()
                except KuiperError:
                    raise
                except Exception as e:  # noqa: BLE001 - whatever the plugin's own code raises
                    error = _import_failed(label, e)
                    raise PluginError(f"{error} (uninstall it, or set "
                                      "KUIPER_DISABLE_PLUGIN_AUTOLOAD=1 to skip installed "
                                      "plugins)") from e
            _claim(module, label)
            _loaded[entry.value] = module
        _entry_points_loaded = True  # not after a failure: the next load tries (and says) again


def load_all(specs: Iterable[str | os.PathLike] = ()) -> None:
    """The installed plugins, then the ones asked for by name or path."""
    load_entry_points()
    if specs is None:
        specs = ()
    elif isinstance(specs, (str, os.PathLike)):
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


def blame(op, layer, stage: str, error: BaseException) -> KuiperError | None:
    """A PluginError naming the plugin if `layer` (a class or an instance) comes from one.

    None for Kuiper's own layers: their KuiperErrors already say what is wrong. A plugin's
    layer may raise anything, and its message should say whose code it was. (A ShapeError
    stays one, with the plugin named in it: the graph adds its advice for resized inputs.)
    """
    cls = layer if isinstance(layer, type) else type(layer)
    source = registry.origin(cls)
    if source == "kuiper" or isinstance(error, (PluginError, KernelBuildError)):
        return None  # (a build error names the plugin's own .cl file already)
    where = f"{stage} of {cls.__module__}.{cls.__qualname__}, from {source}"
    if isinstance(error, ShapeError):  # kept a ShapeError: the graph adds its resize advice
        return ShapeError(op.name, op.type, f"{error.message} ({where})")
    detail = (error.message if isinstance(error, OperatorError)
              else f"{type(error).__name__}: {error}")
    return PluginError(f"operator '{op.name}' ({op.type}), line {op.line}: {where}, failed: "
                       f"{detail}")


def results(op, layer, values, stage: str = "forward") -> list:
    """What `layer.forward` (or `layer.infer`, `stage="infer"`) returned for `op`, as a list
    with one value (one TensorSpec) per output.

    The graph and the executors read a layer's result as that list; a plugin's forward or
    infer that returns None, or a lone array, would otherwise fail as a bare TypeError there,
    naming nobody. It is a PluginError naming the plugin (an OperatorError for Kuiper's own
    layers).
    """
    specs = stage == "infer"
    if isinstance(values, (list, tuple)) and len(values) >= len(op.outputs) and (
            not specs or all(isinstance(v, TensorSpec) for v in values)):
        return list(values)
    got = (f"a {type(values).__name__} of {len(values)} value(s)"
           if isinstance(values, (list, tuple)) else repr(values) if values is None
           else f"a {type(values).__name__}")
    what = "kuiper.TensorSpec(s)" if specs else "output value(s)"
    error = OperatorError(op.name, op.type, f"{stage} returned {got}, expected a list of "
                                            f"{len(op.outputs)} {what}")
    raise blame(op, layer, stage, error) or error


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
