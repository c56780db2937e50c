"""Run one nn.Conv1d/2d/3d through the real OpenCL layer with a chosen convolution algorithm.

`run_forced` writes a one-operator model, loads it on OpenCL inside `conv_algorithms.forced`
(the algorithm's default parameter set) or `conv_select.pinned` (an exact parameter set), runs
it and returns the output with the layer, whose `algorithm` / `algorithm_reason` tell whether
the selector really bound the algorithm asked for. `torch_conv` is the reference. Shared by
test_conv_implicit_gemm.py and test_conv_split_k.py.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass

import numpy as np
import torch

import kuiper
from kuiper.layers.opencl_conv import algorithms as conv_algorithms
from kuiper.layers.opencl_conv import selector as conv_select
from kuiper.layers.opencl_conv.algorithms import ConvProblem
from kuiper.testing import write_operator_model


@dataclass(frozen=True)
class ConvCase:
    """One convolution: shapes and every nn.ConvNd parameter (sizes per spatial axis)."""

    x: tuple[int, ...]               # (N, C, *spatial)
    cout: int
    kernel: tuple[int, ...]
    stride: tuple[int, ...] | None = None
    padding: tuple[int, ...] | None = None
    dilation: tuple[int, ...] | None = None
    groups: int = 1
    bias: bool = True
    mode: str = "zeros"

    @property
    def ndim(self) -> int:
        return len(self.kernel)

    def axes(self, values, default):
        return tuple(values) if values is not None else (default,) * self.ndim

    def params(self) -> dict:
        """nn.ConvNd's parameters as pnnx writes them."""
        return {"in_channels": self.x[1], "out_channels": self.cout,
                "kernel_size": self.kernel, "stride": self.axes(self.stride, 1),
                "padding": self.axes(self.padding, 0), "dilation": self.axes(self.dilation, 1),
                "groups": self.groups, "bias": self.bias, "padding_mode": self.mode}

    def tensors(self, rng: np.random.Generator):
        """Seeded input, weight and bias (None without bias), float32."""
        x = rng.standard_normal(self.x).astype(np.float32)
        w = rng.standard_normal((self.cout, self.x[1] // self.groups, *self.kernel))
        w = (w / np.sqrt(w[0].size)).astype(np.float32)   # outputs of order 1
        b = rng.standard_normal(self.cout).astype(np.float32) if self.bias else None
        return x, w, b


def problem_of(case: ConvCase) -> ConvProblem:
    """The ConvProblem of a 2-D case, stride 1, zero padding (for the host-side checks)."""
    n, c, h, w = case.x
    kh, kw = case.kernel
    ph, pw = case.padding or (0, 0)
    return ConvProblem(n=n, c=c, cout=case.cout, groups=case.groups, size=(1, h, w),
                       kernel=(1, kh, kw), out=(1, h + 2 * ph - kh + 1, w + 2 * pw - kw + 1),
                       stride=(1, 1, 1), dilation=(1, 1, 1), pads=((0, 0), (ph, ph), (pw, pw)))


def torch_conv(case: ConvCase, x, w, b) -> np.ndarray:
    module_class = {1: torch.nn.Conv1d, 2: torch.nn.Conv2d, 3: torch.nn.Conv3d}[case.ndim]
    p = case.params()
    module = module_class(p["in_channels"], p["out_channels"], p["kernel_size"],
                          stride=p["stride"], padding=p["padding"], dilation=p["dilation"],
                          groups=p["groups"], bias=p["bias"], padding_mode=p["padding_mode"])
    with torch.no_grad():
        module.weight.copy_(torch.from_numpy(w))
        if b is not None:
            module.bias.copy_(torch.from_numpy(b))
        return module(torch.from_numpy(x)).numpy()


def run_forced(case: ConvCase, x, w, b, algorithm: str, params: dict | None = None,
               precision: str = "fp32"):
    """(output, the conv layer) with `algorithm` forced (params None) or pinned to `params`,
    the model loaded at `precision`; skipped, saying why, where the device cannot run it
    (skip_where_it_cannot_run)."""
    from tests.opencl.conv_harness import skip_where_it_cannot_run

    skip_where_it_cannot_run(algorithm, params)
    weights = {"weight": w} if b is None else {"weight": w, "bias": b}
    choice = (conv_algorithms.forced(algorithm) if params is None
              else conv_select.pinned(algorithm, params))
    with tempfile.TemporaryDirectory(prefix="kuiper-conv-") as folder, choice:
        path = write_operator_model(folder, f"nn.Conv{case.ndim}d", [x], case.params(),
                                    weights)
        graph = kuiper.load(path, backend="opencl", precision=precision)
        (y,) = graph.forward(x)
    layer = next(op.layer for op in graph.operators if op.name == "op0")
    return y, layer
