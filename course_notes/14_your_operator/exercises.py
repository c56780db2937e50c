"""Lesson 14 exercises: your own operator, LayerNorm2d, as a plugin.

You write three pieces, then run `kuiper course check 14`:

1. `LayerNorm2d.infer` and `LayerNorm2d.forward`: the CPU layer. `from_operator` (which reads
   `@weight`, `@bias` and `@eps`) and `torch_module` come from the class this one extends,
   `layers.LayerNorm2d` of the example plugin (kuiper/examples/layernorm2d/layers.py).
2. The kernel, in `layernorm2d.cl` beside this file (it is your plugin's kernel file).
3. `LayerNorm2dOpenCL.bind`: upload the weights, set your kernel's arguments, list the launch.

The tests make this file a plugin (a file that registers your two classes for the type pnnx
writes, in place of the example's), export a model with pnnx `moduleop`, and compare your
layers with PyTorch on both backends, in Python and with `kuiper compare --against torch`.
The answers are kuiper/examples/layernorm2d/layers.py and layernorm2d.cl: try first.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np  # noqa: F401 - you will need it

import kuiper
from kuiper.examples.layernorm2d import layers


class LayerNorm2d(layers.LayerNorm2d):
    """y = (x - mean) / sqrt(var + eps) * weight[c] + bias[c], with mean and var (the biased
    variance: divide by C) over the C channels of each pixel of an (N, C, H, W) input.

    After `from_operator`: `self.weight` and `self.bias` are float32 arrays of shape (C,),
    `self.eps` a Python float (the model's own, read from the file).
    """

    def infer(self, inputs):
        """`inputs` is a list of TensorSpec; return a list with the output's TensorSpec.

        Exactly one input (`self.expect_inputs(inputs, 1)`), of shape (N, C, H, W) with C the
        number of weights, and float32 (the kernel reads floats). Refuse anything else with
        `raise self.shape_error("expected ...")`: a ShapeError naming the operator. The output
        has the input's shape and dtype: `kuiper.TensorSpec(shape, dtype)`.
        """
        raise NotImplementedError("lesson 14: write LayerNorm2d.infer")

    def forward(self, inputs):
        """`inputs` is a list with one NumPy array; return a list with one float32 array.

        Compute the variance in two passes (the mean first, then the mean of the squares of
        x - mean): the one-pass E[x^2] - E[x]^2 loses every digit in float32 when the mean is
        large against the spread (the tests try a mean of 1000 and a spread of 0.1).
        """
        raise NotImplementedError("lesson 14: write LayerNorm2d.forward")


class LayerNorm2dOpenCL(kuiper.OpenCLLayer, LayerNorm2d):
    """The OpenCL twin: OpenCLLayer first, your CPU layer second (its from_operator, infer and
    flops are shared), the kernel in layernorm2d.cl beside this file."""

    kernel_path = Path(__file__).with_name("layernorm2d.cl")  # absolute: found however imported

    def bind(self, inputs, outputs, in_specs, out_specs):
        """Prepare the launch, once per input shape; the executor then only enqueues it.

        `inputs[0]` and `outputs[0]` are pyopencl arrays (`.data` is the buffer to pass), of
        the shape `in_specs[0].shape` / `out_specs[0].shape`. Upload `self.weight` and
        `self.bias` with `self.upload(...)` and keep the results on `self` (or the device
        buffers are freed); get your kernel with `self.kernel("its name")`; `set_args` with
        NumPy scalars (`np.float32(self.eps)`, `np.int32(...)`); then set
        `self.launches = [kuiper.Launch(kernel, (global_size,))]`, rounding the global size up
        with `kuiper.round_up(count, 64)`, so the kernel must ignore the extra work-items.
        Launch nothing (`self.launches = []`) when the tensor is empty.
        """
        raise NotImplementedError("lesson 14: write LayerNorm2dOpenCL.bind")
