"""The convolution implementations the kernel selector chooses from (clDNN's idea).

Every OpenCL convolution (layers/opencl/conv2d.py's ConvBind: 1-D, 2-D and 3-D, all lifted to
3-D) describes itself once as a `ConvProblem`. Each registered `ConvAlgorithm` says whether it
can run that problem, what it would cost on the device (a small cost model), which tunable
parameter sets it has (`kuiper tune` times them), and binds its launches. The selector
(layers/opencl_conv/selector.py) picks one per layer: a tuned winner from the tuning
cache, else the cheapest by the cost model.

Each algorithm lives in its own helper module and .cl file, and registers itself here with
`@register_algorithm`. Tests force one with `forced(name)` to check it on its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from kuiper.layers.opencl_gemm.parameter_sets import computes_in

Pair = tuple[int, int]


@dataclass(frozen=True)
class ConvProblem:
    """One convolution's shapes, lifted to 3-D (a 2-D conv has depth 1, kernel depth 1)."""

    n: int
    c: int
    cout: int
    groups: int
    size: tuple[int, int, int]        # input D, H, W
    kernel: tuple[int, int, int]      # KD, KH, KW
    out: tuple[int, int, int]         # OD, OH, OW
    stride: tuple[int, int, int]
    dilation: tuple[int, int, int]
    pads: tuple[Pair, Pair, Pair]     # (before, after) per axis
    padding_mode: str = "zeros"
    # where its GEMM may compute: "fp32", "tf32" or "fp16" (the plan's decision; algorithms
    # whose `precisions` lack it compute in fp32)
    precision: str = "fp32"

    @property
    def cin_g(self) -> int:
        return self.c // self.groups

    @property
    def cout_g(self) -> int:
        return self.cout // self.groups

    @property
    def taps(self) -> int:
        return int(np.prod(self.kernel))

    @property
    def pixels(self) -> int:
        """Output positions per image: the GEMM's N for one image."""
        return int(np.prod(self.out))

    @property
    def macs(self) -> int:
        return self.n * self.cout * self.pixels * self.cin_g * self.taps

    @property
    def depthwise(self) -> bool:
        return self.cin_g == 1 and self.groups > 1

    @property
    def key(self) -> str:
        """A stable text key for the tuning cache."""
        d = lambda t: "x".join(map(str, t))  # noqa: E731
        pads = "x".join(f"{lo}-{hi}" for lo, hi in self.pads)
        return (f"n{self.n}c{self.c}o{self.cout}g{self.groups}_i{d(self.size)}_k{d(self.kernel)}"
                f"_s{d(self.stride)}_d{d(self.dilation)}_p{pads}_{self.padding_mode}"
                + (f"_{self.precision}" if self.precision != "fp32" else ""))


@dataclass
class ConvOperands:
    """What an algorithm binds to: device arrays, and the host weights for bind-time
    transforms (None when the weight is an input of the operator, F.conv2d)."""

    x: Any                              # device array, (N, C, D, H, W) in effect
    y: Any                              # device array, (N, COUT, OD, OH, OW) in effect
    weight: Any                         # device buffer, (COUT, C/G, KD, KH, KW)
    bias: Any                           # device buffer or None
    weight_host: np.ndarray | None
    bias_host: np.ndarray | None
    tables: list                        # the padding source tables (conv_geometry), device
    residual: Any = None                # device buffer added by the epilogue, or None
    epilogue: Any = None                # kuiper/passes/epilogue.py Epilogue, or None
    weight_half: bool = False           # `weight` holds halves (precision fp16, a GEMM algorithm)
    # the scratch arrays `workspace_shapes` asked for, in its order (device arrays)
    workspaces: list = field(default_factory=list)


class ConvAlgorithm:
    """One way to compute a convolution on OpenCL. Subclasses set `name` and override."""

    name: ClassVar[str] = ""
    good_for: ClassVar[str] = ""       # one line for `kuiper info` and the docs
    # the precisions its kernels may compute in (the others run it in fp32); "fp16" also
    # means they read the weight stored as half (ConvOperands.weight_half)
    precisions: ClassVar[tuple[str, ...]] = ("fp32",)

    def unsupported(self, problem: ConvProblem, device: Any) -> str | None:
        """None when this algorithm can run `problem`, else why not (shown by `kuiper tune`)."""
        return None

    def computes(self, params: dict, half_weight: bool = False) -> str:
        """What it computes in with `params`, for `kuiper info`: 'fp32', or a tensor-core
        set's precision ('tf32', 'fp16'), with ', half weight' where the weight is half."""
        return computes_in(params, half_weight)

    def cost(self, problem: ConvProblem, device: Any) -> float:
        """Estimated seconds on `device` (the cost model: only the order matters)."""
        raise NotImplementedError

    def parameter_sets(self, problem: ConvProblem, device: Any) -> list[dict]:
        """The tunable variants (`kuiper tune` times each); the first is the default."""
        return [{}]

    def workspace_shapes(self, problem: ConvProblem, params: dict, device: Any,
                         weight_is_input: bool) -> list[tuple[int, ...]]:
        """The float32 scratch arrays `bind` takes from `ops.workspaces`, in that order
        (`weight_is_input`: F.conv2d, whose weight the graph computes). Asked before anything
        binds, so every layer's scratch can share one buffer (layers/opencl_base.py)."""
        return []

    def bind(self, layer: Any, problem: ConvProblem, ops: ConvOperands,
             params: dict) -> list:
        """Create kernels, set their arguments, return the Launches (in order)."""
        raise NotImplementedError


ALGORITHMS: dict[str, ConvAlgorithm] = {}
FORCE: str | None = None  # tests: run every convolution with this algorithm (see forced)


def register_algorithm(cls: type[ConvAlgorithm]) -> type[ConvAlgorithm]:
    ALGORITHMS[cls.name] = cls()
    return cls


@contextlib.contextmanager
def forced(name: str | None) -> Iterator[None]:
    """Run the convolutions bound inside the block with algorithm `name` (tests)."""
    global FORCE
    old, FORCE = FORCE, name
    try:
        yield
    finally:
        FORCE = old
