"""From a PyTorch module to a Kuiper model, with the settings that work, checked before use.

    import kuiper
    param = kuiper.export(model, (x,), "out/block")   # out/block.pnnx.param + .pnnx.bin
    graph = kuiper.load(param)

`kuiper export FILE.py:FACTORY --input-shape 1x8x32 -o out/block` does the same from the
command line (kuiper/cli/export.py). What it does, and why:

1. `model.eval()`: dropout off, BatchNorm on its running statistics (an export in training
   mode bakes batch statistics in).
2. `torch.jit.trace(model, inputs, check_trace=False)`, saved as `<path>.pt`: what
   `pnnx.export(..., check_trace=False)` does. The trace check re-traces the module and compares
   the two graphs: for a module with `nn.MultiheadAttention` (every transformer block) they
   differ from one call to the next although they compute the same thing, and the check raises
   `TracingCheckError: Graphs differed across invocations`. Step 4 checks what matters instead:
   the outputs.
3. The pnnx program on it, with the inputs' shapes and types, as `pnnx.export` runs it, but
   without what pnnx.export does next: import the `<name>_pnnx.py` it wrote (its PyTorch rebuild
   of the graph, which `kuiper bench --against torch` runs), which for some models is not even
   valid Python (`v_7 = aten::addcmul(...)`), and would fail an export whose `.pnnx.param` is
   fine. Kept: `<path>.pnnx.param`, `.pnnx.bin` and `<name>_pnnx.py`; the ncnn files and pnnx's
   own `.pnnx.onnx` are removed, and so is the traced `.pt` unless `keep_torchscript`.
4. Kuiper loads the model on the CPU and runs it on the example inputs: the outputs must be
   PyTorch's within the test suite's tolerance (kuiper/testing, RTOL), else a KuiperError says
   by how much. An export that cannot be trusted is not handed over.

Needs PyTorch and pnnx (`pip install torch==2.13.0 pnnx`: torch first, to choose its build).
"""

from __future__ import annotations

import os
import subprocess
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kuiper.core.errors import ConversionError, KuiperError
from kuiper.graph.convert import exit_description, log_tail
from kuiper.testing import RTOL, max_abs_diff, tolerance

INSTALL = "pip install torch==2.13.0 pnnx"
# what pnnx writes that Kuiper does not use (removed after the export)
NOT_KEPT = (".ncnn.param", ".ncnn.bin", "_ncnn.py", ".pnnx.onnx")


def _imports():
    try:
        import pnnx  # noqa: F401 - its program and helpers, in run_pnnx
        import torch
    except ImportError as e:
        raise KuiperError(f"exporting a PyTorch module needs {e.name or 'torch and pnnx'}: "
                          f"`{INSTALL}`") from None
    return torch


def as_tuple(example_inputs: Any) -> tuple:
    """A tensor, or a tuple/list of them: pnnx's and torch.jit.trace's example inputs."""
    return tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (
        example_inputs,)


def flat_outputs(output: Any) -> list[np.ndarray]:
    """A module's output (a tensor, or tuples/lists of them) as NumPy arrays, in order."""
    if isinstance(output, (tuple, list)):
        return [a for item in output for a in flat_outputs(item)]
    return [output.detach().cpu().numpy()] if hasattr(output, "detach") else []


def export(model: Any, example_inputs: Any, path: str | os.PathLike, *,
           moduleop: Sequence[str] = (), check: bool = True, rtol: float = RTOL,
           keep_torchscript: bool = False) -> Path:
    """Export `model` (a torch.nn.Module) at the shapes of `example_inputs` to
    `<path>.pnnx.param` + `.pnnx.bin`, check it (module docstring) and return the .param path.

    `path` is the model's path without suffix (`out/block`); its folder is made. `moduleop`:
    module types pnnx keeps whole, for a plugin (kuiper/PLUGINS.md); `check=False` skips the
    comparison (a plugin model Kuiper cannot run without its plugin)."""
    torch = _imports()
    inputs = as_tuple(example_inputs)
    if not inputs or not all(isinstance(x, torch.Tensor) for x in inputs):
        raise KuiperError("example_inputs must be a tensor or a tuple of tensors (what the "
                          "module's forward takes), at the size the model will run at")
    base = Path(path)
    if base.name.endswith(".pnnx.param"):
        base = base.with_name(base.name[:-len(".pnnx.param")])
    base.parent.mkdir(parents=True, exist_ok=True)
    model = model.eval()
    with torch.no_grad():
        expected = flat_outputs(model(*inputs))
    traced = base.with_name(base.name + ".pt")
    param = base.with_name(base.name + ".pnnx.param")
    param.unlink(missing_ok=True)  # an older export must not pass for this one
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TracerWarnings: the check below is the one that counts
        torch.jit.trace(model, inputs, check_trace=False).save(str(traced))
    result = run_pnnx(traced, inputs, moduleop)
    for suffix in NOT_KEPT + (() if keep_torchscript else (".pt",)):
        base.with_name(base.name + suffix).unlink(missing_ok=True)
    if result.returncode != 0 or not param.is_file():
        raise ConversionError(
            f"pnnx could not convert the traced module to {param} (pnnx "
            f"{exit_description(result.returncode)}); the end of its log: "
            f"{log_tail(result.stdout) or 'empty'}")
    if check:
        check_export(param, inputs, expected, rtol)
    return param


def run_pnnx(traced: Path, inputs: tuple, moduleop: Sequence[str]):
    """The pnnx program on the traced module, in its folder, as pnnx.export's convert() runs
    it (its own helpers write the shapes and types); its log is returned, not printed."""
    from pnnx import EXEC_PATH
    from pnnx.utils.utils import generate_inputs_arg, get_shape_from_inputs, get_type_from_inputs

    command = [EXEC_PATH, traced.name, "inputshape=" + generate_inputs_arg(
        get_shape_from_inputs(list(inputs)), get_type_from_inputs(list(inputs))), "device=cpu"]
    if moduleop:
        command.append("moduleop=" + ",".join(moduleop))
    return subprocess.run(command, cwd=traced.parent, stdin=subprocess.DEVNULL, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, errors="replace")


def check_export(param: Path, inputs: tuple, expected: list[np.ndarray], rtol: float) -> None:
    """Kuiper's CPU outputs on the example inputs against PyTorch's (`expected`)."""
    from kuiper.graph.load import load

    with load(param) as graph:
        actual = graph(*[x.detach().cpu().numpy() for x in inputs])
    actual = list(actual) if isinstance(actual, tuple) else [actual]
    if len(actual) != len(expected):
        raise KuiperError(f"{param}: the export has {len(actual)} output(s), the module "
                          f"returned {len(expected)}")
    for i, (a, b) in enumerate(zip(actual, expected)):
        if np.shape(a) != np.shape(b) or max_abs_diff(a, b) > tolerance(b, rtol):
            got = (f"shape {np.shape(a)} instead of {np.shape(b)}" if np.shape(a) != np.shape(b)
                   else f"a max abs difference of {max_abs_diff(a, b):.3g}")
            raise KuiperError(f"{param}: output {i} of the export differs from the module's "
                              f"({got}, tolerance {tolerance(b, rtol):.3g}): the export does "
                              "not compute what the module does (`kuiper compare "
                              f"{param} --against torch` finds the first operator that "
                              "differs)")
