"""The PyTorch reference of an exported model: the `<stem>_pnnx.py` module pnnx writes beside it.

pnnx writes, next to `model.pnnx.param`, a `model_pnnx.py` that rebuilds the graph in PyTorch and
loads the same `model.pnnx.bin`. Running it is the fairest reference there is: the same folded
weights, the same operators. It is Python code, so it is only ever run when the user asks for it
(`--against torch`); Kuiper's own loader never executes anything from a model folder.

pnnx bakes the absolute path of the .bin into the module; we point it at the .bin that actually
sits beside the .param, so a model folder can be moved or copied.
"""

from __future__ import annotations

import re
import types
from pathlib import Path

from kuiper.errors import KuiperError

_ARCHIVE_PATH = re.compile(r"zipfile\.ZipFile\('([^']*)'")


def torch_module_path(param_path: str | Path) -> Path:
    param_path = Path(param_path)
    stem = param_path.name
    for suffix in (".pnnx.param", ".param"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    return param_path.with_name(f"{stem}_pnnx.py")


def load_torch_reference(param_path: str | Path):
    """The pnnx-generated `Model()` in eval mode. Raises KuiperError when unavailable."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise KuiperError("PyTorch is not installed: `pip install torch==2.13.0` to compare "
                          "against it") from None
    source_path = torch_module_path(param_path)
    if not source_path.exists():
        raise KuiperError(f"{source_path} not found: pnnx writes it beside the .pnnx.param "
                          "(keep it to compare against PyTorch)")
    bin_path = Path(str(param_path)[: -len(".param")] + ".bin") if str(param_path).endswith(
        ".param") else Path(str(param_path) + ".bin")
    source = _ARCHIVE_PATH.sub(lambda m: f"zipfile.ZipFile({str(bin_path)!r}", source_path
                               .read_text())
    module = types.ModuleType(source_path.stem)
    module.__file__ = str(source_path)
    exec(compile(source, str(source_path), "exec"), module.__dict__)  # noqa: S102 - opt-in
    model = module.Model()
    model.float().eval()
    return model


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
