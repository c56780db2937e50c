"""Export a PyTorch module with pnnx into its own folder (static shapes, default optlevel)."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path


def export_with_pnnx(folder: Path, module, inputs, **kwargs) -> Path:
    import pnnx
    import torch

    folder = Path(folder).resolve()   # pnnx runs from inside it (below): a relative path breaks
    folder.mkdir(parents=True, exist_ok=True)
    module = module.eval()
    inputs = tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)
    pt_path = folder / "model.pt"
    cwd = os.getcwd()
    log = io.StringIO()
    try:
        os.chdir(folder)  # pnnx writes debug files into the working directory
        with torch.no_grad(), contextlib.redirect_stdout(log):
            pnnx.export(module, str(pt_path), inputs, **kwargs)
    finally:
        os.chdir(cwd)
    param = folder / "model.pnnx.param"
    if not param.exists():
        raise RuntimeError(f"pnnx did not write {param}:\n{log.getvalue()[-2000:]}")
    return param
