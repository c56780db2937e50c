"""Kuiper: an educational inference engine for PNNX models, on NumPy and OpenCL.

    import kuiper
    g = kuiper.load("resnet18.pnnx.param")          # .pnnx.bin is found beside it
    y = g(x)                                        # x: NumPy array, NCHW float32
    g = kuiper.load("resnet18.pnnx.param", backend="opencl")
"""

from __future__ import annotations

import os


def _use_checkout_folders() -> None:
    """Use the folders of the checkout this package sits in, when it sits in one.

    An install maps the checkout's top folders layers/, parser/ and clkernels/ to
    kuiper.layers, kuiper.parser and kuiper.clkernels (pyproject.toml, package-dir). Run from a
    checkout that is not installed (PYTHONPATH=the checkout), nothing maps them; run from one
    checkout while another is installed editable, the install would map them to the other's.
    So whenever this package is a checkout's kuiper/ folder, its sibling folders come first:
    the package path is searched before any installed mapping. (The path then also holds the
    checkout's other folders, tests/ and course_notes/; nothing imports them as kuiper.*.)
    An installed wheel has no pyproject.toml beside it, and is left alone.
    """
    checkout = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if (os.path.isfile(os.path.join(checkout, "pyproject.toml"))
            and os.path.isfile(os.path.join(checkout, "parser", "__init__.py"))
            and os.path.isfile(os.path.join(checkout, "layers", "base.py"))):
        __path__.append(checkout)


_use_checkout_folders()

# The imports below need the mapping, hence after it.
from collections.abc import Mapping, Sequence
from typing import Any

from kuiper.errors import (
    ConversionError,
    ExpressionError,
    GraphError,
    InputError,
    KernelBuildError,
    KuiperError,
    ModelFormatError,
    OpenCLUnavailableError,
    OperatorError,
    PluginError,
    RegistrationError,
    ResourceError,
    ShapeError,
    UnsupportedOperatorError,
)
from kuiper.graph import GraphState, Port, RuntimeGraph

# What a plugin's author writes layers with (kuiper/PLUGINS.md): the same bases and decorator
# as Kuiper's own layers.
from kuiper.layers.base import ElementwiseLayer, Layer
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.limits import Limits
from kuiper.log import KuiperWarning  # and the "kuiper" logger (kuiper/log.py)
from kuiper.registry import register
from kuiper.tensor_spec import TensorSpec

__version__ = "0.1.0"

__all__ = [
    "load", "RuntimeGraph", "GraphState", "Port", "TensorSpec", "register",
    "Layer", "ElementwiseLayer", "OpenCLLayer", "Launch", "round_up",
    "KuiperError", "ModelFormatError", "OperatorError", "UnsupportedOperatorError", "ShapeError",
    "GraphError", "ExpressionError", "OpenCLUnavailableError", "KernelBuildError", "InputError",
    "RegistrationError", "PluginError", "ResourceError", "Limits", "ConversionError",
    "KuiperWarning",
]


def load(param_path: str | os.PathLike, bin_path: str | os.PathLike | None = None, *,
         backend: str = "cpu", input_shapes: Sequence[Sequence[int]] | None = None,
         plugins: Sequence[str | os.PathLike] = (),
         params: Mapping[str, Mapping[str, Any]] | None = None,
         limits: Limits | None = None, passes: Sequence[str] | None = None,
         **backend_options: Any) -> RuntimeGraph:
    """Load a PNNX model and build it for `backend` ("cpu" or "opencl").

    `input_shapes` overrides the shapes the model was exported with (needed when the export has
    dynamic dims). `plugins` are modules or files with layers of your own, `params` parameters
    per type that the file lacks (kuiper/PLUGINS.md). `limits` caps the memory a model may
    ask for (kuiper/limits.py: one tensor, and all activations). OpenCL options:
    `device="0:1"` (as PYOPENCL_CTX), `out_of_order=True`, `profiling=True`. CPU option:
    `fuse=False` runs every activation and residual add as its own step instead of fusing it
    into the convolution, linear or matmul before it (the same as leaving out the
    fuse_epilogues pass); `threads=2` limits NumPy's BLAS to 2 threads while this graph runs.

    `passes`: the graph passes to run, by name (kuiper/passes/: fold_constants,
    eliminate_dead, eliminate_noops, fuse_epilogues, plan_memory); None runs them all, and
    `graph.plan.describe()` says what each one changed.

    `with kuiper.load(...) as g:` (or `g.close()`) releases the weights' mapping and the
    device buffers. Inputs and outputs by name: kuiper/named_io.py.

    An ONNX file or a TorchScript `.pt` is converted with pnnx first, at `input_shapes`, and
    the result cached (kuiper/convert.py).
    """
    from kuiper import convert

    if convert.is_convertible(param_path):
        if bin_path is not None:
            raise KuiperError(f"{param_path}: bin_path belongs to a .pnnx.param; an ONNX or "
                              "TorchScript file is converted whole (leave bin_path out)")
        param_path = convert.to_pnnx(param_path, input_shapes)
    graph = RuntimeGraph(param_path, bin_path, backend=backend, plugins=plugins, params=params,
                         limits=limits, passes=passes, **backend_options)
    graph.init()
    graph.build(input_shapes)
    return graph
