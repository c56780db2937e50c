"""The PyTorch reference of an exported model: the `<stem>_pnnx.py` module pnnx writes beside it.

pnnx writes, next to `model.pnnx.param`, a `model_pnnx.py` that rebuilds the graph in PyTorch and
loads the same `model.pnnx.bin`. Running it is the fairest reference there is: the same folded
weights, the same operators. It is Python code, so it is only ever run when the user asks for it
(`--against torch`, or `bench --against onnxruntime --trust-model-code` to export an ONNX file
from it); Kuiper's own loader never executes anything from a model folder.

pnnx bakes the absolute path of the .bin into the module; we point it at the .bin that actually
sits beside the .param, so a model folder can be moved or copied.

A module that pnnx kept whole (`moduleop`, run by a plugin) is only *called* in that file,
`v_2 = mymods.Swish2(v_1)`, never built or imported. The plugin's layer says how to build it
in PyTorch (`torch_module(op)`, kuiper/PLUGINS.md); each such call then runs the next operator
of that type, in file order, through the module built for it.
"""

from __future__ import annotations

import itertools
import re
import types
from pathlib import Path

from kuiper.core import plugins, registry
from kuiper.core.errors import KuiperError
from kuiper.graph.runtime_graph import RuntimeGraph, bin_beside
from kuiper.io.inputs import require_file

_ARCHIVE_PATH = re.compile(r"zipfile\.ZipFile\('([^']*)'")


def torch_module_path(param_path: str | Path) -> Path:
    param_path = Path(param_path)
    stem = param_path.name
    for suffix in (".pnnx.param", ".param"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    return param_path.with_name(f"{stem}_pnnx.py")


def load_torch_reference(param_path: str | Path, params=None):
    """The pnnx-generated `Model()` in eval mode. Raises KuiperError when unavailable.

    `params` are kuiper.load's: what a kept module's plugin needs that the file lacks."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise KuiperError("PyTorch is not installed: `pip install torch==2.13.0` to compare "
                          "against it") from None
    source_path = torch_module_path(param_path)
    if not source_path.exists():
        raise KuiperError(f"{source_path} not found: pnnx writes it beside the .pnnx.param "
                          "(keep it to compare against PyTorch)")
    what = "pnnx's PyTorch module"
    try:
        text = require_file(source_path, what).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise KuiperError(f"{source_path}: cannot be read as {what} ({e})") from None
    bin_path = Path(bin_beside(str(param_path)))
    source = _ARCHIVE_PATH.sub(lambda m: f"zipfile.ZipFile({str(bin_path)!r}", text)
    module = types.ModuleType(source_path.stem)
    module.__file__ = str(source_path)
    module.__dict__.update(kept_modules(param_path, bin_path, params))
    try:
        exec(compile(source, str(source_path), "exec"), module.__dict__)  # noqa: S102 - opt-in
        model = module.Model()
    except (Exception, SystemExit) as e:  # noqa: BLE001 - not our file: say which one failed
        raise KuiperError(f"{source_path} ({what}) failed when run: {type(e).__name__}: {e}; "
                          "re-export the model with pnnx to get a fresh one") from None
    model.float().eval()
    return model


def kept_modules(param_path: str | Path, bin_path: Path, params=None) -> dict[str, object]:
    """Names for pnnx's calls of kept modules: {"mymods": namespace with a callable Swish2}."""
    graph = RuntimeGraph(param_path, bin_path, params=params)
    graph.init()
    built: dict[str, list] = {}
    for op in graph.operators:
        if not plugins.is_module_type(op.type):
            continue
        cls = registry.layer_for(op.type, "cpu")
        make = getattr(cls, "torch_module", None)
        if make is None:
            raise KuiperError(f"operator '{op.name}' ({op.type}): pnnx's PyTorch rebuild calls "
                              f"this kept module without defining it, and {registry.describe(cls)}"
                              " has no torch_module(op) that builds it (kuiper/PLUGINS.md)")
        module = plugins.call(op, cls, "torch_module", make, op)
        built.setdefault(op.type, []).append(module.float().eval())
    roots: dict[str, object] = {}
    for op_type, modules in built.items():
        *path, leaf = op_type.split(".")
        node = roots.setdefault(path[0], types.SimpleNamespace())
        for part in path[1:]:
            node = node.__dict__.setdefault(part, types.SimpleNamespace())
        # The model calls them in file order on every forward: cycle through them.
        turn = itertools.cycle(modules)
        setattr(node, leaf, lambda *args, _turn=turn: next(_turn)(*args))
    return roots


def run_torch_reference(model, inputs, threads: int | None = None) -> list:
    """Run the reference on NumPy inputs; returns a flat list of NumPy outputs."""
    import torch

    if threads is not None:
        torch.set_num_threads(threads)
    with torch.no_grad():
        out = model(*[torch.from_numpy(x) for x in inputs])
    flat: list = []

    def collect(value):
        if isinstance(value, (tuple, list)):
            for v in value:
                collect(v)
        elif isinstance(value, torch.Tensor):
            flat.append(value.numpy())
        else:
            flat.append(value)

    collect(out)
    return flat
