"""The other way into PNNX: PyTorch -> ONNX (TorchScript exporter) -> the pnnx command line.

Models arriving this way look different from `pnnx.export`'s: the input is named `in0`,
activations come out as `F.*` rather than `nn.*`, layers are named after ONNX nodes
(`conv2d_0`), and each model output gets its own `pnnx.Output` (`out0`, `out1`, ...).
"""

from __future__ import annotations

import os
import subprocess
import warnings
from collections.abc import Sequence
from pathlib import Path


def pnnx_executable() -> str:
    import pnnx

    exe = os.path.join(os.path.dirname(pnnx.__file__), "pnnx")
    if not os.path.exists(exe):
        raise RuntimeError(f"the pnnx package has no executable at {exe}")
    return exe


def shape_arg(shapes: Sequence[Sequence[int]]) -> str:
    """pnnx's `inputshape=[1,3,224,224]f32,[1,10]f32` syntax."""
    return ",".join("[" + ",".join(str(d) for d in s) + "]f32" for s in shapes)


def export_with_onnx(folder: Path, module, inputs) -> Path:
    import torch

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    module = module.eval()
    inputs = tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)
    onnx_path = folder / "model.onnx"
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        torch.onnx.export(module, inputs, str(onnx_path), dynamo=False)
    result = subprocess.run(
        [pnnx_executable(), onnx_path.name, "inputshape=" + shape_arg([x.shape for x in inputs])],
        cwd=folder, capture_output=True, text=True, timeout=300, check=False)
    param = folder / "model.pnnx.param"
    if result.returncode != 0 or not param.exists():
        raise RuntimeError(f"pnnx failed on {onnx_path} (exit {result.returncode}):\n"
                           f"{(result.stdout + result.stderr)[-2000:]}")
    return param
