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

# The imports below need the mapping, hence after it. This file is the front door: it names
# what users and plugin authors use, and holds no code of its own (kuiper/DESIGN.md, floors).
from kuiper.core.errors import (
    ArgumentError,
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
from kuiper.core.limits import Limits
from kuiper.core.log import KuiperWarning  # and the "kuiper" logger (kuiper/core/log.py)
from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.core.version import __version__ as __version__
from kuiper.graph.load import load
from kuiper.graph.runtime_graph import GraphState, Port, RuntimeGraph
from kuiper.io.export import export

# What a plugin's author writes layers with (kuiper/PLUGINS.md): the same bases and decorator
# as Kuiper's own layers.
from kuiper.layers.base import ElementwiseLayer, Layer
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up

__all__ = [
    "load", "export", "RuntimeGraph", "GraphState", "Port", "TensorSpec", "register",
    "Layer", "ElementwiseLayer", "OpenCLLayer", "Launch", "round_up",
    "KuiperError", "ModelFormatError", "OperatorError", "UnsupportedOperatorError", "ShapeError",
    "GraphError", "ExpressionError", "OpenCLUnavailableError", "KernelBuildError", "InputError",
    "RegistrationError", "PluginError", "ResourceError", "Limits", "ConversionError",
    "KuiperWarning", "ArgumentError",
]
