"""Lesson 1 exercises: find your way around the repository.

Fill in the function below, then run `kuiper course check 1`. The answer is the engine's own
`layer_file` in kuiper/core/registry.py: try first, read it after.
"""

from __future__ import annotations


def layer_file(op_type: str, backend: str = "cpu") -> str:
    """Where the layer for the PNNX operator type `op_type` is written, relative to the
    repository root, with "/" separators.

        layer_file("nn.Conv2d")            -> "layers/cpu/conv2d.py"
        layer_file("nn.ReLU", "opencl")    -> "layers/opencl/relu.py"

    An unknown type raises kuiper.UnsupportedOperatorError (the registry already does).
    Hint: `kuiper.core.registry.lookup(op_type, backend)` returns the layer class, and every Python
    class knows the module it was defined in.
    """
    raise NotImplementedError("lesson 1: write layer_file in course_notes/01_tour/exercises.py")
